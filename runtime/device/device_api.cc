// DeviceAPI dispatch: maps a device type to its process-lifetime API, lists the
// attribute names, and answers DeviceExists. When the runtime is built without
// CUDA (TETHER_ENABLE_CUDA=OFF) a stand-in CUDA API still answers, reporting
// exist=false and UNAVAILABLE, so callers need no build-mode checks.
#include "runtime/device/device_api.h"

#include <array>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"
#include "runtime/device/device_api_internal.h"

namespace tether {
namespace {

constexpr std::array<DeviceAttrName, 20> kDeviceAttrNames = {{
    {DeviceAttr::kExist, "exist"},
    {DeviceAttr::kMaxThreadsPerBlock, "max_threads_per_block"},
    {DeviceAttr::kWarpSize, "warp_size"},
    {DeviceAttr::kMaxSharedMemoryPerBlock, "max_shared_memory_per_block"},
    {DeviceAttr::kComputeVersion, "compute_version"},
    {DeviceAttr::kDeviceName, "device_name"},
    {DeviceAttr::kMaxClockRate, "max_clock_rate"},
    {DeviceAttr::kMultiProcessorCount, "multi_processor_count"},
    {DeviceAttr::kMaxThreadDimensions, "max_thread_dimensions"},
    {DeviceAttr::kApiVersion, "api_version"},
    {DeviceAttr::kDriverVersion, "driver_version"},
    {DeviceAttr::kTotalGlobalMemory, "total_global_memory"},
    {DeviceAttr::kAvailableGlobalMemory, "available_global_memory"},
    {DeviceAttr::kL2CacheSize, "l2_cache_size_bytes"},
    {DeviceAttr::kMemoryClockRate, "memory_clock_rate"},
    {DeviceAttr::kMemoryBusWidth, "memory_bus_width"},
    {DeviceAttr::kMaxThreadsPerMultiProcessor, "max_threads_per_multi_processor"},
    {DeviceAttr::kMaxRegistersPerBlock, "max_registers_per_block"},
    {DeviceAttr::kMaxGridDimensions, "max_grid_dimensions"},
    {DeviceAttr::kPciBusId, "pci_bus_id"},
}};

}  // namespace

std::span<const DeviceAttrName> AllDeviceAttrs() { return kDeviceAttrNames; }

absl::StatusOr<DeviceAPI*> DeviceAPI::Get(DLDeviceType type) {
  switch (type) {
    case kDLCPU:
      return device_internal::CpuDeviceAPI();
    case kDLCUDA:
      return device_internal::CudaDeviceAPI();
    default:
      return absl::UnimplementedError(absl::StrCat("no device api for device type ",
                                                   DeviceTypeName(type),
                                                   "; tether supports cpu and cuda"));
  }
}

bool DeviceExists(Device device) {
  if (device.id < 0) return false;
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(device.type);
  if (!api.ok()) return false;
  absl::StatusOr<Value> exist = (*api)->GetAttr(device.id, DeviceAttr::kExist);
  return exist.ok() && exist->is_bool() && exist->bool_value();
}

namespace {

struct StickyFaults {
  absl::Mutex mu;
  absl::Status first ABSL_GUARDED_BY(mu);
};

StickyFaults& Faults() {
  static auto* const faults = new StickyFaults;  // never destroyed
  return *faults;
}

}  // namespace

void RecordStickyFault(const absl::Status& fault) {
  if (fault.ok()) return;
  StickyFaults& f = Faults();
  absl::MutexLock lock(&f.mu);
  if (f.first.ok()) f.first = fault;
}

absl::Status FirstStickyFault() {
  StickyFaults& f = Faults();
  absl::MutexLock lock(&f.mu);
  return f.first;
}

absl::Status AwaitStickyFault() {
  StickyFaults& f = Faults();
  absl::MutexLock lock(&f.mu);
  f.mu.Await(absl::Condition(
      +[](absl::Status* first) { return !first->ok(); }, &f.first));
  return f.first;
}

}  // namespace tether
