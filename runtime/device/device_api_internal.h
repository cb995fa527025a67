// The per-type DeviceAPI singletons behind DeviceAPI::Get. Internal to
// runtime/device: everything else goes through DeviceAPI::Get.
#ifndef TETHER_RUNTIME_DEVICE_DEVICE_API_INTERNAL_H_
#define TETHER_RUNTIME_DEVICE_DEVICE_API_INTERNAL_H_

#include "runtime/device/device_api.h"

namespace tether::device_internal {

// The host CPU (cpu_device_api.cc). Never destroyed.
DeviceAPI* CpuDeviceAPI();

#if TETHER_CUDA_DEVICE
// CUDA through the dlopen'ed driver (cuda_device_api.cc). Never destroyed;
// present even without a driver.
DeviceAPI* CudaDeviceAPI();
#endif

}  // namespace tether::device_internal

#endif  // TETHER_RUNTIME_DEVICE_DEVICE_API_INTERNAL_H_
