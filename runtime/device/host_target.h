// HostTarget: what kernels must be compiled for to run on this machine's
// CPU, read on the machine itself and never assumed: the LLVM triple of the
// build, an LLVM CPU name, the instruction-set features the kernels may use
// (AT_HWCAP on Arm, /proc/cpuinfo flags on x86), the core count and the
// page size. A daemon reports it in its handshake, so a client compiles for
// the board it talks to; the kernel loader refuses a library built for
// another target before any kernel runs (docs/design/boards.md).
//
// Thread contract: free functions; thread-safe.
#ifndef TETHER_RUNTIME_DEVICE_HOST_TARGET_H_
#define TETHER_RUNTIME_DEVICE_HOST_TARGET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tether {

struct HostTarget {
  // "x86_64-linux-gnu", "aarch64-linux-gnu", "armv7-linux-gnueabihf".
  std::string triple;
  // An LLVM CPU name: "cortex-a72", "neoverse-n1" (Arm, from the CPU's
  // implementer and part numbers); "x86-64-v2/v3/v4" (x86, the psABI level
  // its features reach); "generic" when nothing better is known (an
  // unlisted part, or /proc/cpuinfo of another architecture under
  // user-mode emulation).
  std::string cpu;
  // LLVM feature names, sorted: "neon", "dotprod", "fullfp16", "sve",
  // "i8mm", "bf16" (aarch64); "neon", "vfp4", "d32" (arm); "avx2", "fma",
  // "avx512f", ... (x86).
  std::vector<std::string> features;
  // What /proc/cpuinfo calls the CPU ("model name", or "implementer 0x41
  // part 0xd08"), for people; empty when it says nothing.
  std::string description;
  int cores = 0;
  int64_t page_size = 0;

  // The compile target for kernels that use all of it, as `tether compile
  // --target` takes it: "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72
  // -mattr=+neon,+fullfp16".
  std::string CompileTarget() const;
};

// This machine, detected once per process.
const HostTarget& ThisHostTarget();

// The parts of detection, for tests: the CPU name of an Arm /proc/cpuinfo
// ("generic" when it names no known part); the LLVM names of an x86
// /proc/cpuinfo's flags; the psABI level of x86 features; the aarch64 and
// arm features of AT_HWCAP/AT_HWCAP2 bits.
std::string ArmCpuName(absl::string_view cpuinfo);
std::vector<std::string> X86Features(absl::string_view cpuinfo);
std::string X86CpuLevel(const std::vector<std::string>& features);
std::vector<std::string> Aarch64Features(uint64_t hwcap, uint64_t hwcap2);
std::vector<std::string> ArmFeatures(uint64_t hwcap);

// Whether kernels compiled for `target` (a compile target string, e.g. a
// kernel library's "llvm -mtriple=... -mcpu=... -mattr=+a,-b") run on
// `host`: its triple's architecture must be the host's, and every feature
// it turns on that the host can report must be the host's. An empty triple
// is the compiling machine's own and cannot be checked here. OK, or
// FAILED_PRECONDITION naming both targets and what is missing.
absl::Status CheckRunsOn(absl::string_view target, const HostTarget& host);

}  // namespace tether

#endif  // TETHER_RUNTIME_DEVICE_HOST_TARGET_H_
