// DeviceAPI: what the runtime needs from a kind of device — memory, copies,
// streams, synchronization, timers and attributes. One process-lifetime
// instance per device type: CPU always; CUDA through dlopen("libcuda.so.1"),
// present even without a driver (then `exist` is false and every other call
// fails with UNAVAILABLE).
#ifndef TETHER_RUNTIME_DEVICE_DEVICE_API_H_
#define TETHER_RUNTIME_DEVICE_DEVICE_API_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"
#include "runtime/core/value.h"

namespace tether {

// Attributes of the reference's Device, plus memory totals.
enum class DeviceAttr : int {
  kExist = 0,
  kMaxThreadsPerBlock = 1,
  kWarpSize = 2,
  kMaxSharedMemoryPerBlock = 3,
  kComputeVersion = 4,  // string "9.0"
  kDeviceName = 5,      // string
  kMaxClockRate = 6,    // kHz
  kMultiProcessorCount = 7,
  kMaxThreadDimensions = 8,     // Shape [x, y, z]
  kApiVersion = 9,              // e.g. CUDA_VERSION the driver supports
  kDriverVersion = 10,          // string
  kTotalGlobalMemory = 11,      // bytes
  kAvailableGlobalMemory = 12,  // bytes
  // GPUs only (None elsewhere):
  kL2CacheSize = 13,      // bytes
  kMemoryClockRate = 14,  // kHz
  kMemoryBusWidth = 15,   // bits
  kMaxThreadsPerMultiProcessor = 16,
  kMaxRegistersPerBlock = 17,
  kMaxGridDimensions = 18,  // Shape [x, y, z]
  kPciBusId = 19,           // string "0000:3b:00.0" (not in the reference: which card)
};

struct DeviceAttrName {
  DeviceAttr attr;
  absl::string_view name;  // "exist", "max_threads_per_block", ...
};
// Every attribute with its reference name, in enum order.
std::span<const DeviceAttrName> AllDeviceAttrs();

using StreamHandle = void*;

// Measures elapsed device time between Start and Stop (CUDA events on GPUs,
// a steady clock on the CPU). Thread contract: thread-hostile.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual absl::Status Start() = 0;
  virtual absl::Status Stop() = 0;
  // Waits for the stop point and returns the nanoseconds between the two.
  virtual absl::StatusOr<int64_t> ElapsedNanos() = 0;
};

// Thread contract: thread-safe.
class DeviceAPI {
 public:
  virtual ~DeviceAPI() = default;

  // The API of a device type: UNIMPLEMENTED for types Tether has no support for.
  static absl::StatusOr<DeviceAPI*> Get(DLDeviceType type);

  // The attribute's value, or None where it means nothing for this device
  // (e.g. warp_size on a CPU). kExist is always answered, never an error.
  virtual absl::StatusOr<Value> GetAttr(int device_id, DeviceAttr attr) = 0;

  // Device memory. RESOURCE_EXHAUSTED (naming the size and device) when the
  // device has too little; UNAVAILABLE when the device is absent.
  virtual absl::StatusOr<void*> Alloc(Device device, size_t nbytes, size_t alignment) = 0;
  virtual void Free(Device device, void* ptr) = 0;

  // Copies `nbytes` between two plain buffers; either side may be host memory
  // (a cpu device). Both pointers already include any byte offset.
  virtual absl::Status Copy(const void* from, Device from_device, void* to, Device to_device,
                            size_t nbytes, StreamHandle stream) = 0;

  virtual absl::StatusOr<StreamHandle> CreateStream(Device device) = 0;
  virtual void FreeStream(Device device, StreamHandle stream) = 0;
  // Waits for all work on `stream` (null: the default stream) to finish.
  virtual absl::Status Sync(Device device, StreamHandle stream) = 0;

  virtual absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(Device device) = 0;

  // Fills `nbytes` at `ptr` on `device` with `value` bytes (used for cache flushing).
  virtual absl::Status Memset(Device device, void* ptr, int value, size_t nbytes) = 0;
};

// Convenience: whether `device` exists (driver loaded, index in range).
bool DeviceExists(Device device);

// Sticky device faults: a kernel that faults on a GPU leaves that device's
// context unusable for the rest of the process (the driver repeats the error
// on every later call). The device layer records the first such fault here;
// an isolated session's worker waits for it and ends its process, so the
// session ends and the GPU memory it held is freed (docs/design/
// rpc-protocol.md, "Isolated sessions"). Thread-safe.
void RecordStickyFault(const absl::Status& fault);
// The first sticky fault recorded in this process, or OK.
absl::Status FirstStickyFault();
// Blocks until a sticky fault is recorded; returns it.
absl::Status AwaitStickyFault();

}  // namespace tether

#endif  // TETHER_RUNTIME_DEVICE_DEVICE_API_H_
