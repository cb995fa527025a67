// The per-type DeviceAPI singletons behind DeviceAPI::Get. Internal to
// runtime/device: everything else goes through DeviceAPI::Get.
#ifndef TETHER_RUNTIME_DEVICE_DEVICE_API_INTERNAL_H_
#define TETHER_RUNTIME_DEVICE_DEVICE_API_INTERNAL_H_

#include "runtime/device/device_api.h"

namespace tether::device_internal {

// The host CPU (cpu_device_api.cc). Never destroyed.
DeviceAPI* CpuDeviceAPI();

// CUDA (runtime/cuda/): through the dlopen'ed driver (cuda_device_api.cc),
// present even without a driver; or, in a runtime built without CUDA
// (TETHER_ENABLE_CUDA=OFF), one that says so (cuda_absent.cc). Never
// destroyed. This folder declares it and runtime/cuda/ defines it, so
// device/ names no CUDA code.
DeviceAPI* CudaDeviceAPI();

}  // namespace tether::device_internal

#endif  // TETHER_RUNTIME_DEVICE_DEVICE_API_INTERNAL_H_
