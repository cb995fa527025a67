// Target: what kernels are generated for, parsed from the reference's target
// strings ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon",
// "cuda -arch=sm_90"). An empty triple means the host (its triple, CPU name
// and features). A cuda target runs every kernel on an NVIDIA GPU (PTX for
// each listed architecture); the host part is the VM's bytecode.
//
// Thread contract: a value type; thread-compatible.
#ifndef TETHER_COMPILER_BACKEND_LLVM_TARGET_H_
#define TETHER_COMPILER_BACKEND_LLVM_TARGET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"

namespace tether::compiler {

struct Target {
  std::string kind = "llvm";
  std::string triple;      // empty = host
  std::string cpu;         // empty = host cpu (for the host) or generic
  std::string attrs;       // "+neon,-sve"; empty = host features (for the host)
  std::vector<int> archs;  // cuda: sorted, distinct sm numbers (75, 90, ...)
  // One core's L1 data and L2 cache in bytes; 0 = unknown. The schedules
  // block for the L2 (KernelTarget: the host's own for the host, else the
  // default where unknown); the L1 is carried for people and tools.
  int64_t l1d_cache = 0;
  int64_t l2_cache = 0;

  // Parses "llvm [-mtriple=T] [-mcpu=C] [-mattr=A] [-l1d-cache=S]
  // [-l2-cache=S]" (S in bytes, or "48K", "2M"; also "cpu" as an alias of
  // "llvm") and "cuda [-arch=sm_XY[,sm_AB...]]" (default sm_75, the oldest the
  // CUDA 13 toolchain supports; PTX runs on every newer GPU too).
  // INVALID_ARGUMENT on another kind, an unknown flag, an empty value, a
  // cache size that is not a positive size or an
  // architecture LLVM 19's NVPTX backend does not know (sm_50 ... sm_90).
  static absl::StatusOr<Target> Parse(absl::string_view text);
  // The host: its triple, cpu name, features and caches filled in.
  static Target Host();
  // "llvm -mtriple=... -mcpu=... -mattr=... -l1d-cache=... -l2-cache=..."
  // (empty and zero parts left out), or
  // "cuda -arch=sm_75,sm_90".
  std::string ToString() const;
  // No triple, or the host's triple.
  bool is_host() const;
  bool is_cuda() const { return kind == "cuda"; }
};

// "cuda -arch=sm_XY" for a GPU of compute capability `compute_version` ("9.0",
// as a CUDA device reports DeviceAttr::kComputeVersion): the code that GPU
// runs best (tensor cores, cp.async as it has them). INVALID_ARGUMENT when
// the text is not "major.minor". A GPU newer than the compiler's newest
// architecture (sm_90) gets that one: its driver compiles the PTX for it.
// FAILED_PRECONDITION below sm_50.
absl::StatusOr<std::string> CudaTargetFor(absl::string_view compute_version);

// CudaTargetFor the compute capability of `device`, a CUDA device of this
// process (the runtime's device API). UNAVAILABLE when it does not exist.
absl::StatusOr<std::string> CudaTargetForDevice(Device device);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_LLVM_TARGET_H_
