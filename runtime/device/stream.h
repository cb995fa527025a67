// Streams a caller owns (TVM's Device.create_raw_stream / set_raw_stream):
// StreamObj, a device stream with its lifetime, and the current streams of
// the calling thread, which kernel launches and a device's sync use instead
// of the legacy default stream while a ScopedCurrentStreams is alive (a
// daemon installs a session's streams around each of its calls).
#ifndef TETHER_RUNTIME_DEVICE_STREAM_H_
#define TETHER_RUNTIME_DEVICE_STREAM_H_

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/core/object.h"
#include "runtime/device/device_api.h"

namespace tether {

// A stream created on one device, destroyed with the last reference.
// Thread contract: thread-safe (immutable).
class StreamObj final : public Object {
 public:
  // A new stream on `device` (CUDA: cuStreamCreate, ordered with the legacy
  // default stream). FAILED_PRECONDITION for a device type without streams
  // (the CPU runs every call synchronously); UNAVAILABLE for an absent device.
  static absl::StatusOr<Ref<StreamObj>> Create(Device device);
  ~StreamObj() override;
  absl::string_view type_key() const override { return "runtime.Stream"; }

  Device device() const { return device_; }
  StreamHandle handle() const { return handle_; }

 private:
  StreamObj(Device device, DeviceAPI* api, StreamHandle handle)
      : device_(device), api_(api), handle_(handle) {}
  Device device_;
  DeviceAPI* api_;
  StreamHandle handle_;
};

using StreamMap = absl::flat_hash_map<Device, Ref<StreamObj>>;

// Makes `streams` (not owned; must outlive the scope) the calling thread's
// current streams until the scope ends; scopes nest.
// Thread contract: thread-hostile (a scope belongs to its thread).
class ScopedCurrentStreams {
 public:
  explicit ScopedCurrentStreams(const StreamMap* streams);
  ~ScopedCurrentStreams();
  ScopedCurrentStreams(const ScopedCurrentStreams&) = delete;
  ScopedCurrentStreams& operator=(const ScopedCurrentStreams&) = delete;

 private:
  const StreamMap* previous_;
};

// The calling thread's current stream on `device`; null (the legacy
// default stream) when none is set.
StreamHandle CurrentStream(Device device);

// Waits for the work on `device`'s current stream (all its work when none
// is set); the CPU has nothing to wait for. UNAVAILABLE for an absent device.
absl::Status SyncDevice(Device device);

}  // namespace tether

#endif  // TETHER_RUNTIME_DEVICE_STREAM_H_
