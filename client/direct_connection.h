// DirectConnection: the client end of the daemon's direct channel
// (docs/design/rpc-protocol.md, "Direct channel"), the first of a session's
// transports (client/transport.h): a loopback TCP connection opened with a
// ticket from RemoteSession::OpenDirectChannel, carrying one CallRequest
// frame and its CallResponse frame per call, and tensors' bytes raw.
#ifndef TETHER_CLIENT_DIRECT_CONNECTION_H_
#define TETHER_CLIENT_DIRECT_CONNECTION_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/transport.h"
#include "proto/codec/frame_io.h"
#include "runtime/core/tensor.h"
#include "tether/v1/tether.pb.h"

namespace tether::client {

// Thread contract: as Transport.
class DirectConnection final : public Transport {
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
  ~DirectConnection() override;
  DirectConnection(const DirectConnection&) = delete;
  DirectConnection& operator=(const DirectConnection&) = delete;

  TransportKind kind() const override { return TransportKind::kDirect; }
  // Transport. A broken connection fails with UNAVAILABLE.
  absl::StatusOr<v1::CallResponse> Call(const v1::CallRequest& request, Fate* fate) override;
  absl::StatusOr<v1::CallResponse> PutTensor(const v1::CallRequest& request, const char* data,
                                             Fate* fate) override;
  // The tensor's bytes are read straight into the new tensor.
  absl::StatusOr<Tensor> GetTensor(const v1::CallRequest& request, Fate* fate) override;
  // Shuts the socket down in both directions: an operation in flight fails
  // at once with UNAVAILABLE (kLost).
  void Interrupt() override;

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
