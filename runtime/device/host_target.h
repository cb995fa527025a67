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
#include <optional>
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
  // One core's level-1 data cache and level-2 cache, in bytes (Linux's
  // /sys/devices/system/cpu/cpu0/cache); 0 where the machine does not say.
  // The CPU GEMM's cache budget is the L2 (compiler/op/cpu_gemm.h).
  int64_t l1d_cache_bytes = 0;
  int64_t l2_cache_bytes = 0;

  // The compile target for kernels that use all of it, as `tether compile
  // --target` takes it: "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72
  // -mattr=+neon,+fullfp16 -l1d-cache=32K -l2-cache=1M" (the caches where
  // known).
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

// The L1 data and L2 cache sizes of a sysfs cache folder
// ("/sys/devices/system/cpu/cpu0/cache": index*/level, type, size): each 0
// where no entry gives it.
struct CacheSizes {
  int64_t l1d = 0;
  int64_t l2 = 0;
};
CacheSizes ReadCacheSizes(const std::string& cache_dir);
// A cache size as sysfs and target strings write it: bytes, or a count of
// KiB ("48K") or MiB ("2M"); nullopt for anything else, zero included.
std::optional<int64_t> ParseCacheSize(absl::string_view text);
// "48K", "2M", or the bytes where neither divides them.
std::string FormatCacheSize(int64_t bytes);

// Whether kernels compiled for `target` (a compile target string, e.g. a
// kernel library's "llvm -mtriple=... -mcpu=... -mattr=+a,-b") run on
// `host`: its triple's architecture must be the host's, and every feature
// it turns on that the host can report must be the host's. An empty triple
// is the compiling machine's own and cannot be checked here. OK, or
// FAILED_PRECONDITION naming both targets and what is missing.
absl::Status CheckRunsOn(absl::string_view target, const HostTarget& host);

}  // namespace tether

#endif  // TETHER_RUNTIME_DEVICE_HOST_TARGET_H_
