// DirectConnection: the client end of the daemon's direct channel
// (docs/design/rpc-protocol.md, "Direct channel"): a loopback TCP connection
// opened with a ticket from RemoteSession::OpenDirectChannel, carrying one
// CallRequest frame and its CallResponse frame per call. RemoteVM prefers it
// for same-host daemons and falls back to the CallStream when it is refused
// or breaks.
#ifndef TETHER_CLIENT_DIRECT_CONNECTION_H_
#define TETHER_CLIENT_DIRECT_CONNECTION_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/codec/frame_io.h"
#include "runtime/core/tensor.h"
#include "tether/v1/tether.pb.h"

namespace tether::client {

// Thread contract: thread-hostile (one call at a time), except Interrupt(),
// which any thread may call while the connection lives.
class DirectConnection {
 public:
  // Connects to `address` ("127.0.0.1:PORT" or "[::1]:PORT"), sends the
  // hello with `ticket` and waits for the daemon's acceptance, all within
  // `timeout`. UNAVAILABLE when it cannot connect, the daemon's refusal
  // (PERMISSION_DENIED for a bad ticket, ...) otherwise.
  // `spin`: how long a call polls for its reply before it sleeps (see
  // DirectChannelOptions::spin on the daemon).
  static absl::StatusOr<std::unique_ptr<DirectConnection>> Connect(
      absl::string_view address, absl::string_view ticket, uint64_t max_frame_bytes,
      absl::Duration timeout, absl::Duration spin = absl::Microseconds(30));
  // Says goodbye (the session stays open) and closes the connection.
  ~DirectConnection();
  DirectConnection(const DirectConnection&) = delete;
  DirectConnection& operator=(const DirectConnection&) = delete;

  // Sends `request` and returns its reply (errors of the call travel inside
  // it). UNAVAILABLE when the connection broke; `*delivered` then says
  // whether the request may have reached the daemon (false: safe to resend
  // elsewhere). After a failure the connection is unusable.
  absl::StatusOr<v1::CallResponse> Call(const v1::CallRequest& request, bool* delivered);
  // put_tensor: sends `request` (whose put_tensor announces size_bytes) and
  // then those bytes from `data`, raw; returns the reply (handle or error).
  absl::StatusOr<v1::CallResponse> PutTensor(const v1::CallRequest& request, const char* data,
                                             bool* delivered);
  // get_tensor: the daemon's tensor as a new CPU tensor, its bytes read
  // straight into it. The daemon's refusal as the status (the connection
  // stays usable); UNAVAILABLE as Call.
  absl::StatusOr<Tensor> GetTensor(const v1::CallRequest& request, bool* delivered);

  // Shuts the socket down in both directions: a call in flight on another
  // thread fails at once with UNAVAILABLE (delivered), whatever the daemon is
  // doing, and the connection is unusable from then on. Thread-safe.
  void Interrupt();

 private:
  // Marks the connection unusable and returns `status` as UNAVAILABLE.
  absl::Status Break(absl::Status status);

  DirectConnection(int fd, uint64_t max_frame_bytes, absl::Duration spin)
      : fd_(fd), max_frame_bytes_(max_frame_bytes), reader_(fd, spin) {}
  // Open for the object's whole life (closed by the destructor), so that
  // Interrupt() never touches a descriptor number the process reused.
  const int fd_;
  bool broken_ = false;
  uint64_t max_frame_bytes_;
  rpc::FrameReader reader_;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_DIRECT_CONNECTION_H_
