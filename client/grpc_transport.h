// The gRPC side of a session: GrpcLink, what every gRPC call of the client
// carries (the stub, the bearer token, the retry policy, the one conversion
// of gRPC errors), and the two gRPC transports (client/transport.h):
// UnaryTransport (one unary Call per operation, tensors in UploadTensor and
// DownloadTensor streams) and StreamTransport (operations on one long-lived
// CallStream, tensors as UnaryTransport).
#ifndef TETHER_CLIENT_GRPC_TRANSPORT_H_
#define TETHER_CLIENT_GRPC_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/transport.h"
#include "grpcpp/grpcpp.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::client {

// Thread contract: immutable after construction; thread-safe.
class GrpcLink {
 public:
  GrpcLink(std::shared_ptr<grpc::Channel> channel, std::string auth_token, int max_attempts);

  v1::Tether::Stub* stub() const { return stub_.get(); }
  // Adds what every call carries (the bearer token). Every ClientContext
  // used with stub() goes through it.
  void Prepare(grpc::ClientContext* context) const;
  // The one conversion of gRPC errors of this client (kind from the trailer).
  static absl::Status Convert(const grpc::Status& status, const grpc::ClientContext& context);
  // For idempotent calls: runs `attempt` on a fresh prepared context until it
  // succeeds or fails with other than UNAVAILABLE, at most max_attempts
  // times with exponential backoff. Returns the last converted status.
  absl::Status Retry(absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tether::Stub> stub_;
  std::string auth_token_;
  int max_attempts_;
};

// The contexts of a transport's calls in flight, which Interrupt() cancels;
// a context added after Interrupt() is cancelled at once.
// Thread contract: thread-safe.
class LiveCalls {
 public:
  void Add(grpc::ClientContext* context);
  void Remove(grpc::ClientContext* context);
  void CancelAll();

 private:
  absl::Mutex mu_;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<grpc::ClientContext*> live_ ABSL_GUARDED_BY(mu_);
};

// Every failure is the answer (fate kAnswered): there is no transport after
// this one. Thread contract: as Transport.
class UnaryTransport : public Transport {
 public:
  // `link` must outlive the transport. Tensors travel in chunks of
  // `chunk_bytes` (the daemon's preferred size).
  UnaryTransport(const GrpcLink* link, uint64_t chunk_bytes);

  TransportKind kind() const override { return TransportKind::kUnary; }
  absl::StatusOr<v1::CallResponse> Call(const v1::CallRequest& request, Fate* fate) override;
  // An UploadTensor stream of the announced bytes.
  absl::StatusOr<v1::CallResponse> PutTensor(const v1::CallRequest& request, const char* data,
                                             Fate* fate) override;
  // A DownloadTensor stream, retried on UNAVAILABLE (it has no effect).
  absl::StatusOr<Tensor> GetTensor(const v1::CallRequest& request, Fate* fate) override;
  void Interrupt() override { live_.CancelAll(); }

 protected:
  const GrpcLink* link_;
  LiveCalls live_;

 private:
  uint64_t chunk_bytes_;
};

// Calls on one CallStream, opened at first use; replies are matched by
// request_id. Fate kUnsent when the stream cannot take the request (or the
// daemon has no CallStream), kLost when it ends before the reply.
// Thread contract: as Transport.
class StreamTransport final : public UnaryTransport {
 public:
  using UnaryTransport::UnaryTransport;
  // Ends the stream (the daemon keeps the sessions it carried).
  ~StreamTransport() override;

  TransportKind kind() const override { return TransportKind::kStream; }
  absl::StatusOr<v1::CallResponse> Call(const v1::CallRequest& request, Fate* fate) override;

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::CallRequest, v1::CallResponse>> stream_;
  bool broken_ = false;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_GRPC_TRANSPORT_H_
