// Device lowering: a KernelFunc becomes the launches a GPU runs, in order
// (docs/design/kernel-abi.md, "Device lowering"). Each launch is itself an
// ordinary KernelFunc with two extra scalar parameters, `tether_tid` and
// `tether_nthreads`: thread `tid` of `nthreads` runs iterations tid,
// tid + nthreads, ... of the launch's fused parallel loop (grid-stride). The
// NVPTX emitter computes them from the thread and block indices; on the CPU
// the launch kernels can be compiled as they are and run thread by thread,
// which is how this lowering is tested on machines without a GPU
// (simulate_on_cpu.h). What a launch may contain is checked by
// device_verify.h.
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_BACKEND_CUDA_DEVICE_SPLIT_H_
#define TETHER_COMPILER_BACKEND_CUDA_DEVICE_SPLIT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "compiler/tir/kernel_ir.h"
#include "runtime/cuda/cuda_kernel_library.h"

namespace tether::compiler {

struct DeviceLaunch {
  // Named "<kernel>_k<i>"; the source kernel's parameters, its scratch
  // buffers, then the scalars tether_tid and tether_nthreads.
  KernelFunc kernel;
  // Iterations of the fused loop, over the source kernel's shape vars (1 for
  // a serial launch).
  PrimExpr count;
  bool serial = false;
  // A block launch (a kBlock loop): `count` is the loop's extent times
  // `block`, so the runtime's ceil(count / block) is one block per
  // iteration; the body walks iterations tid / block, + nthreads / block, ...
  bool blocks = false;
  int block = kDeviceBlockThreads;  // 1 for a serial launch
};

struct DeviceKernel {
  KernelFunc source;
  // The kernel's top-level kGlobal allocations (partial results one launch
  // writes and a later one reads): 1-D, sized by the arguments, allocated
  // by the launcher for each call (CudaScratchInfo).
  std::vector<Buffer> scratch;
  std::vector<DeviceLaunch> launches;  // at least one
};

// Splits `kernel` into launches. INVALID_ARGUMENT naming the kernel for IR a
// device cannot run: kGlobal allocations below the top level (or not 1-D, or
// sized by anything but the arguments), assertions, and block schedules that
// break the rules of kernel_ir.h.
absl::StatusOr<DeviceKernel> SplitForDevice(const KernelFunc& kernel);

// The kernel's manifest entry: parameters with host-side dim checks, and per
// launch its entry, block size, dynamic shared memory (DynamicSharedBytes)
// and count program (empty when the count is not expressible over the
// arguments).
CudaKernelInfo DescribeDeviceKernel(const DeviceKernel& kernel);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_CUDA_DEVICE_SPLIT_H_
