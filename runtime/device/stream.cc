// Streams and the calling thread's current streams.
#include "runtime/device/stream.h"

#include "runtime/core/error.h"

namespace tether {
namespace {

thread_local const StreamMap* current_streams = nullptr;

}  // namespace

absl::StatusOr<Ref<StreamObj>> StreamObj::Create(Device device) {
  if (device.type == kDLCPU) {
    return PreconditionError(device.ToString(),
                             " has no streams: the cpu runs every call to its end, so there is "
                             "nothing to order (streams are for cuda devices)");
  }
  if (!DeviceExists(device)) {
    return UnavailableError("device ", device.ToString(), " does not exist on this machine");
  }
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(device.type));
  TETHER_ASSIGN_OR_RETURN(StreamHandle handle, api->CreateStream(device));
  return Ref<StreamObj>(new StreamObj(device, api, handle));
}

StreamObj::~StreamObj() { api_->FreeStream(device_, handle_); }

ScopedCurrentStreams::ScopedCurrentStreams(const StreamMap* streams) : previous_(current_streams) {
  current_streams = streams;
}

ScopedCurrentStreams::~ScopedCurrentStreams() { current_streams = previous_; }

StreamHandle CurrentStream(Device device) {
  if (current_streams == nullptr) return nullptr;
  auto it = current_streams->find(device);
  return it == current_streams->end() ? nullptr : it->second->handle();
}

absl::Status SyncDevice(Device device) {
  if (!DeviceExists(device)) {
    return UnavailableError("device ", device.ToString(), " does not exist on this machine");
  }
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(device.type));
  return api->Sync(device, CurrentStream(device));
}

}  // namespace tether
