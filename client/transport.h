// Transport: how a session's operations reach the daemon. A RemoteSession
// keeps up to three, in order of preference:
//   - the direct channel, a loopback socket to a daemon on this host
//     (client/direct_connection.h, docs/design/rpc-protocol.md);
//   - one long-lived CallStream (client/grpc_transport.h);
//   - unary Calls, with tensors in UploadTensor/DownloadTensor streams
//     (client/grpc_transport.h).
// Every operation of the client is written once, against this interface; the
// session chooses the transport and hands a request to the next one when a
// transport breaks before the request left (RemoteSession::OnTransport).
#ifndef TETHER_CLIENT_TRANSPORT_H_
#define TETHER_CLIENT_TRANSPORT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/tensor.h"
#include "tether/v1/tether.pb.h"

namespace tether::client {

// In order of preference: a session falls from one to the next.
enum class TransportKind { kDirect, kStream, kUnary };
absl::string_view TransportKindName(TransportKind kind);

// What became of a request when its operation returned.
enum class Fate {
  // The result, success or failure, is the answer to the request.
  kAnswered,
  // The transport broke before the request left: no part of it reached the
  // daemon, so the next transport may carry it.
  kUnsent,
  // The transport broke after the request left: it may have run, and must
  // not be sent again.
  kLost,
};

// Thread contract: thread-hostile (one operation at a time; RemoteSession
// serializes them), except Interrupt(), which any thread may call while the
// transport lives. After an operation whose fate is kUnsent or kLost the
// transport is unusable.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportKind kind() const = 0;

  // Sends `request` (session_id and request_id filled in) and returns its
  // reply. The call's own error travels inside the reply on the direct
  // channel and the stream, and as the status on unary calls.
  virtual absl::StatusOr<v1::CallResponse> Call(const v1::CallRequest& request, Fate* fate) = 0;
  // put_tensor: `request` announces the tensor and its size_bytes, `data`
  // holds those bytes. The reply carries the new tensor's handle, or the
  // daemon's error inside.
  virtual absl::StatusOr<v1::CallResponse> PutTensor(const v1::CallRequest& request,
                                                     const char* data, Fate* fate) = 0;
  // get_tensor: the daemon's tensor as a new CPU tensor. The daemon's refusal
  // (NOT_FOUND, ...) is the status, with fate kAnswered.
  virtual absl::StatusOr<Tensor> GetTensor(const v1::CallRequest& request, Fate* fate) = 0;

  // Ends the operation in flight on another thread at once, whatever the
  // daemon is doing (RemoteSession::Close); later operations fail. Thread-safe.
  virtual void Interrupt() = 0;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_TRANSPORT_H_
