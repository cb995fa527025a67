// RemoteRuntime: the daemon's own functions and devices, outside any VM
// (protocol 1.6; docs/design/rpc-protocol.md, "Module functions") — TVM
// RPC's `remote.get_function("runtime.X")`, `remote.list_global_func_names()`
// and `Device.sync`, `create_raw_stream`, `set_raw_stream`.
//
// Only the daemon's remote-callable global functions can be listed or
// called (docs/design/security.md, "Remote functions"): others are
// PERMISSION_DENIED, unknown names NOT_FOUND.
#ifndef TETHER_CLIENT_REMOTE_RUNTIME_H_
#define TETHER_CLIENT_REMOTE_RUNTIME_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/call_values.h"
#include "client/remote_session.h"
#include "runtime/core/device.h"
#include "runtime/core/value.h"

namespace tether::client {

// Thread contract: thread-hostile (one caller at a time). The session must
// outlive it.
class RemoteRuntime {
 public:
  // `fetch_outputs`: results' tensors come back as local tensors (true) or
  // stay on the daemon as RemoteHandle values.
  explicit RemoteRuntime(RemoteSession* session, bool fetch_outputs = true)
      : session_(session), values_(session, fetch_outputs, TransportKind::kDirect) {}

  // The names of the daemon's remote-callable global functions, sorted.
  absl::StatusOr<std::vector<std::string>> ListGlobalFunctions();
  // Calls global function `name` with `args` on the daemon.
  absl::StatusOr<Value> CallGlobal(absl::string_view name, ArgSpan args);

  // Waits for the work on `device` (its stream set by SetStream, else all
  // of it); succeeds at once on the CPU. UNAVAILABLE for an absent device.
  absl::Status Sync(Device device);
  // A new stream on a CUDA device, owned by the session (a RemoteHandle
  // value; free it with FreeObjects). FAILED_PRECONDITION on the CPU,
  // UNAVAILABLE for an absent device.
  absl::StatusOr<Value> CreateStream(Device device);
  // Makes `stream` (of CreateStream; None: the legacy default stream) the
  // stream this session's kernels on `device` launch on and Sync waits for.
  absl::Status SetStream(Device device, const Value& stream);

 private:
  absl::StatusOr<v1::CallResponse> Exec(v1::CallRequest& request);

  RemoteSession* session_;
  CallValues values_;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_REMOTE_RUNTIME_H_
