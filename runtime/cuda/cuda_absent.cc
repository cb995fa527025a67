// A runtime built without CUDA (TETHER_ENABLE_CUDA=OFF): CMake builds this
// file instead of the driver, the CUDA DeviceAPI and the kernel launcher.
// cuda:N exists as a device type that has no devices, and CUDA kernel
// libraries still load and check their calls, then answer UNAVAILABLE.
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/cuda/cuda_kernel_launch.h"
#include "runtime/device/device_api_internal.h"

namespace tether {
namespace {

// The CUDA API of a runtime built without CUDA support. Thread contract:
// stateless, thread-safe.
class AbsentCudaDeviceAPI final : public DeviceAPI {
 public:
  absl::StatusOr<Value> GetAttr(int device_id, DeviceAttr attr) override {
    if (attr == DeviceAttr::kExist) return Value(false);
    return Unavailable();
  }
  absl::StatusOr<void*> Alloc(Device, size_t, size_t) override { return Unavailable(); }
  void Free(Device, void*) override {}
  absl::Status Copy(const void*, Device, void*, Device, size_t, StreamHandle) override {
    return Unavailable();
  }
  absl::StatusOr<StreamHandle> CreateStream(Device) override { return Unavailable(); }
  void FreeStream(Device, StreamHandle) override {}
  absl::Status Sync(Device, StreamHandle) override { return Unavailable(); }
  absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(Device) override {
    return Unavailable();
  }
  absl::Status Memset(Device, void*, int, size_t) override { return Unavailable(); }

 private:
  static absl::Status Unavailable() {
    return UnavailableError(
        "no CUDA driver: this runtime was built without CUDA support (TETHER_ENABLE_CUDA=OFF)");
  }
};

}  // namespace

namespace device_internal {

DeviceAPI* CudaDeviceAPI() {
  static AbsentCudaDeviceAPI* const api = new AbsentCudaDeviceAPI();
  return api;
}

}  // namespace device_internal

namespace cuda_launch {

struct DeviceModule {};

void DestroyDeviceModule(DeviceModule* module) { delete module; }

absl::StatusOr<DeviceModulePtr> LoadDeviceModule(Device device, const std::string& target,
                                                 const std::vector<CudaImage>& images,
                                                 const std::vector<CudaKernelInfo>& kernels) {
  return UnavailableError("cannot run cuda kernels on ", device.ToString(),
                          ": this runtime was built without cuda");
}

absl::Status LaunchKernel(const CudaKernelInfo& k, size_t kernel_index, const DeviceModule& module,
                          const std::vector<std::optional<int64_t>>& counts,
                          const std::vector<int64_t>& scratch_sizes, BoundCall* call) {
  return UnavailableError("kernel ", k.name, ": this runtime was built without cuda");
}

}  // namespace cuda_launch
}  // namespace tether
