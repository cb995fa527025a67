// The driver side of CUDA kernel libraries (cuda_kernel_library.cc): a
// library's PTX loaded on one device, and a checked call launched there.
// cuda_kernel_launch.cc does it through the dlopen'ed driver; a runtime built
// without CUDA (TETHER_ENABLE_CUDA=OFF) links cuda_absent.cc instead, which
// answers UNAVAILABLE. Internal to runtime/cuda.
//
// Thread contract: a loaded DeviceModule is immutable, so thread-safe.
#ifndef TETHER_RUNTIME_CUDA_CUDA_KERNEL_LAUNCH_H_
#define TETHER_RUNTIME_CUDA_CUDA_KERNEL_LAUNCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/cuda/cuda_kernel_library.h"

namespace tether::cuda_launch {

// The library loaded on one device (its module, entries and scratch pool).
struct DeviceModule;
void DestroyDeviceModule(DeviceModule* module);
struct DeviceModuleDeleter {
  void operator()(DeviceModule* module) const { DestroyDeviceModule(module); }
};
using DeviceModulePtr = std::unique_ptr<DeviceModule, DeviceModuleDeleter>;

// Loads the best image of `images` (sorted by sm) for `device`, resolves
// every launch entry of `kernels` and opts each entry whose launch asks for
// more than 48 KiB of dynamic shared memory in to that much.
// FAILED_PRECONDITION when no image fits the device; RESOURCE_EXHAUSTED when
// a launch asks for more dynamic shared memory than the device gives a block;
// the driver's errors (with the JIT log) otherwise.
absl::StatusOr<DeviceModulePtr> LoadDeviceModule(Device device, const std::string& target,
                                                 const std::vector<CudaImage>& images,
                                                 const std::vector<CudaKernelInfo>& kernels);

// The checked arguments of one call, ready to launch.
struct BoundCall {
  std::optional<Device> device;  // of the tensors
  CudaCountArgs counts;
  std::vector<int64_t> words;  // the .param values of the parameters
  std::vector<int64_t> dims;   // then those of the tensor parameters' dims
};

// Launches kernel `kernel_index` (`k`) of `module`: its scratch from the
// module's pool, then each launch with a grid for its count (a full grid
// when the count is unknown, none when it is zero or negative).
absl::Status LaunchKernel(const CudaKernelInfo& k, size_t kernel_index, const DeviceModule& module,
                          const std::vector<std::optional<int64_t>>& counts,
                          const std::vector<int64_t>& scratch_sizes, BoundCall* call);

}  // namespace tether::cuda_launch

#endif  // TETHER_RUNTIME_CUDA_CUDA_KERNEL_LAUNCH_H_
