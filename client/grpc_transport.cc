// GrpcLink and the gRPC transports: unary calls, the CallStream, and the
// UploadTensor/DownloadTensor streams both use for tensors.
#include "client/grpc_transport.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"

namespace tether::client {
namespace {

// Keeps `context` in `live` (so Interrupt() cancels it) while it exists.
class Registered {
 public:
  Registered(LiveCalls* live, grpc::ClientContext* context) : live_(live), context_(context) {
    live_->Add(context_);
  }
  ~Registered() { live_->Remove(context_); }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;

 private:
  LiveCalls* live_;
  grpc::ClientContext* context_;
};

}  // namespace

GrpcLink::GrpcLink(std::shared_ptr<grpc::Channel> channel, std::string auth_token, int max_attempts)
    : channel_(std::move(channel)),
      stub_(v1::Tether::NewStub(channel_)),
      auth_token_(std::move(auth_token)),
      max_attempts_(std::max(1, max_attempts)) {}

void GrpcLink::Prepare(grpc::ClientContext* context) const {
  if (!auth_token_.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", auth_token_));
  }
}

absl::Status GrpcLink::Convert(const grpc::Status& status, const grpc::ClientContext& context) {
  return rpc::FromGrpcCall(status, context);
}

absl::Status GrpcLink::Retry(absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt) const {
  absl::Duration backoff = absl::Milliseconds(20);
  absl::Status status;
  for (int i = 0; i < max_attempts_; ++i) {
    if (i > 0) {
      absl::SleepFor(backoff);
      backoff *= 2;
    }
    grpc::ClientContext ctx;
    Prepare(&ctx);
    grpc::Status s = attempt(&ctx);
    status = Convert(s, ctx);
    if (status.code() != absl::StatusCode::kUnavailable) return status;
  }
  return status;
}

void LiveCalls::Add(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  live_.insert(context);
  if (interrupted_) context->TryCancel();
}

void LiveCalls::Remove(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  live_.erase(context);
}

void LiveCalls::CancelAll() {
  absl::MutexLock lock(&mu_);
  interrupted_ = true;
  for (grpc::ClientContext* context : live_) context->TryCancel();
}

UnaryTransport::UnaryTransport(const GrpcLink* link, uint64_t chunk_bytes)
    : link_(link), chunk_bytes_(std::max<uint64_t>(chunk_bytes, 4096)) {}

absl::StatusOr<v1::CallResponse> UnaryTransport::Call(const v1::CallRequest& request, Fate* fate) {
  *fate = Fate::kAnswered;
  grpc::ClientContext ctx;
  link_->Prepare(&ctx);
  Registered registered(&live_, &ctx);
  v1::CallResponse response;
  TETHER_RETURN_IF_ERROR(GrpcLink::Convert(link_->stub()->Call(&ctx, request, &response), ctx));
  return response;
}

absl::StatusOr<v1::CallResponse> UnaryTransport::PutTensor(const v1::CallRequest& request,
                                                           const char* data, Fate* fate) {
  *fate = Fate::kAnswered;
  grpc::ClientContext ctx;
  link_->Prepare(&ctx);
  Registered registered(&live_, &ctx);
  v1::UploadTensorResponse uploaded;
  auto writer = link_->stub()->UploadTensor(&ctx, &uploaded);
  v1::UploadTensorRequest part;
  part.mutable_header()->set_session_id(request.session_id());
  *part.mutable_header()->mutable_tensor() = request.put_tensor().tensor();
  bool ok = writer->Write(part);
  const size_t num_bytes = static_cast<size_t>(request.put_tensor().size_bytes());
  for (size_t off = 0; ok && off < num_bytes; off += chunk_bytes_) {
    part.set_data(data + off, std::min<size_t>(chunk_bytes_, num_bytes - off));
    ok = writer->Write(part);
  }
  if (ok) writer->WritesDone();
  TETHER_RETURN_IF_ERROR(GrpcLink::Convert(writer->Finish(), ctx));
  v1::CallResponse response;
  response.set_request_id(request.request_id());
  *response.mutable_tensor() = std::move(*uploaded.mutable_tensor());
  return response;
}

absl::StatusOr<Tensor> UnaryTransport::GetTensor(const v1::CallRequest& request, Fate* fate) {
  *fate = Fate::kAnswered;
  const uint64_t tensor_id = request.get_tensor().tensor_id();
  v1::DownloadTensorRequest download;
  download.set_session_id(request.session_id());
  download.set_tensor_id(tensor_id);
  Tensor out;
  absl::Status local_error;
  TETHER_RETURN_IF_ERROR(link_->Retry([&](grpc::ClientContext* ctx) {
    Registered registered(&live_, ctx);
    out = Tensor();
    local_error = absl::OkStatus();
    auto reader = link_->stub()->DownloadTensor(ctx, download);
    v1::DownloadTensorResponse part;
    size_t filled = 0;
    int64_t expected = -1;
    while (reader->Read(&part)) {
      if (!out) {
        auto spec = rpc::DecodeTensorHeader(part.header());
        if (!spec.ok()) {
          local_error = spec.status();
          ctx->TryCancel();
          break;
        }
        auto empty = Tensor::Empty(spec->shape, spec->dtype, Device::Cpu());
        if (!empty.ok()) {
          local_error = empty.status();
          ctx->TryCancel();
          break;
        }
        out = *std::move(empty);
        expected = spec->num_bytes;
      }
      const std::string& data = part.data();
      if (filled + data.size() > static_cast<size_t>(expected)) {
        local_error = absl::DataLossError(
            absl::StrCat("tensor ", tensor_id, " sent more than ", expected, " bytes"));
        ctx->TryCancel();
        break;
      }
      std::memcpy(static_cast<char*>(out->element_data()) + filled, data.data(), data.size());
      filled += data.size();
    }
    grpc::Status s = reader->Finish();
    if (s.ok() && local_error.ok() && (!out || filled != static_cast<size_t>(expected))) {
      local_error = absl::DataLossError(absl::StrCat("tensor ", tensor_id, " download ended after ",
                                                     filled, " of ", expected, " bytes"));
    }
    return s;
  }));
  TETHER_RETURN_IF_ERROR(local_error);
  return out;
}

StreamTransport::~StreamTransport() {
  if (!stream_) return;
  // A broken stream may never finish by itself: cancel it.
  if (broken_) {
    context_->TryCancel();
  } else {
    stream_->WritesDone();
  }
  (void)stream_->Finish();
  live_.Remove(context_.get());
}

absl::StatusOr<v1::CallResponse> StreamTransport::Call(const v1::CallRequest& request, Fate* fate) {
  *fate = Fate::kUnsent;
  if (broken_) return absl::UnavailableError("call stream: the stream is closed");
  if (!stream_) {
    context_ = std::make_unique<grpc::ClientContext>();
    link_->Prepare(context_.get());
    live_.Add(context_.get());
    stream_ = link_->stub()->CallStream(context_.get());
  }
  if (!stream_->Write(request)) {
    broken_ = true;
    return absl::UnavailableError("call stream closed");
  }
  v1::CallResponse response;
  if (!stream_->Read(&response)) {
    broken_ = true;
    // The read side is closed: Finish has the daemon's status at once.
    absl::Status status = GrpcLink::Convert(stream_->Finish(), *context_);
    live_.Remove(context_.get());
    stream_.reset();
    // A daemon without the stream refuses it before running anything.
    if (status.code() != absl::StatusCode::kUnimplemented) *fate = Fate::kLost;
    if (status.ok() || status.code() == absl::StatusCode::kCancelled) {
      status = absl::UnavailableError(
          absl::StrCat("call stream ended before the reply to request ", request.request_id()));
    }
    return status;
  }
  if (response.request_id() != request.request_id()) {
    broken_ = true;
    *fate = Fate::kLost;
    return absl::InternalError(absl::StrCat("reply to request ", response.request_id(),
                                            " on the stream, expected ", request.request_id()));
  }
  *fate = Fate::kAnswered;
  return response;
}

}  // namespace tether::client
