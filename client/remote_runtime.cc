// RemoteRuntime: global functions, device sync and streams as CallRequests.
#include "client/remote_runtime.h"

#include <utility>

#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"

namespace tether::client {

absl::StatusOr<v1::CallResponse> RemoteRuntime::Exec(v1::CallRequest& request) {
  TETHER_RETURN_IF_ERROR(session_->RequireProtocol(6, "calling the daemon's runtime functions"));
  return session_->Call(request);
}

absl::StatusOr<std::vector<std::string>> RemoteRuntime::ListGlobalFunctions() {
  v1::CallRequest request;
  request.mutable_list_global_functions();
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, Exec(request));
  std::vector<std::string> names;
  for (const v1::ModuleFunction& f : response.functions().functions()) names.push_back(f.name());
  return names;
}

absl::StatusOr<Value> RemoteRuntime::CallGlobal(absl::string_view name, ArgSpan args) {
  v1::CallRequest request;
  v1::CallGlobal* op = request.mutable_call_global();
  op->set_name(std::string(name));
  op->set_return_mode(values_.return_mode());
  absl::Status encoded = values_.EncodeArgs(args, op->mutable_args());
  absl::StatusOr<v1::CallResponse> response =
      encoded.ok() ? Exec(request) : absl::StatusOr<v1::CallResponse>(encoded);
  absl::StatusOr<Value> out = response.ok() ? values_.DecodeResult(response->value(), 0)
                                            : absl::StatusOr<Value>(response.status());
  values_.FreeTemps();
  return out;
}

absl::Status RemoteRuntime::Sync(Device device) {
  v1::CallRequest request;
  rpc::EncodeDevice(device, request.mutable_sync_device()->mutable_device());
  return Exec(request).status();
}

absl::StatusOr<Value> RemoteRuntime::CreateStream(Device device) {
  v1::CallRequest request;
  rpc::EncodeDevice(device, request.mutable_create_stream()->mutable_device());
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, Exec(request));
  return values_.DecodeResult(response.value(), 0, /*keep=*/true);
}

absl::Status RemoteRuntime::SetStream(Device device, const Value& stream) {
  v1::CallRequest request;
  v1::SetStream* op = request.mutable_set_stream();
  rpc::EncodeDevice(device, op->mutable_device());
  if (!stream.is_none()) {
    RemoteHandleObj* handle = AsRemoteHandle(stream);
    if (handle == nullptr || handle->kind() != RemoteHandleObj::Kind::kObject) {
      return TypeError("set_stream needs a stream of create_stream or None, got ",
                       stream.TypeName());
    }
    op->set_stream_id(handle->id());
  }
  return Exec(request).status();
}

}  // namespace tether::client
