// RemoteSession: connection, handshake, session lease, module and tensor
// transfer. All gRPC statuses pass through ConvertStatus (FromGrpcStatus with
// the kind trailer) — the one conversion point of the client.
#include "client/remote_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/codec/sha256.h"
#include "proto/codec/status_codec.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"

namespace tether::client {
namespace {

std::chrono::system_clock::time_point ToGpr(absl::Time t) { return absl::ToChronoTime(t); }

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " file ", path, ": ", text.status().message()));
  }
  return text;
}

// Channel credentials: TLS when a CA is given, plaintext otherwise.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ConnectOptions& options) {
  if (options.tls_ca_file.empty()) {
    if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("a client certificate needs tls_ca_file (TLS)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert_file and tls_key_file must be given together");
  }
  grpc::SslCredentialsOptions ssl;
  TETHER_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.tls_ca_file, "tls ca"));
  if (!options.tls_cert_file.empty()) {
    TETHER_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(options.tls_cert_file, "tls certificate"));
    TETHER_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(options.tls_key_file, "tls key"));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

RemoteHandleObj* AsRemoteHandle(const Value& value) {
  Object* obj = value.object();
  if (obj == nullptr || obj->type_key() != "tether.RemoteHandle") return nullptr;
  return static_cast<RemoteHandleObj*>(obj);
}

Value MakeRemoteTensorValue(uint64_t id, rpc::TensorSpec spec) {
  return Value(Ref<RemoteHandleObj>(
      new RemoteHandleObj(RemoteHandleObj::Kind::kTensor, id, "Tensor", std::move(spec))));
}

absl::Status RemoteSession::ConvertStatus(const grpc::Status& status,
                                          const grpc::ClientContext& context) {
  return rpc::FromGrpcCall(status, context);
}

RemoteSession::RemoteSession(std::shared_ptr<grpc::Channel> channel, ConnectOptions options)
    : channel_(std::move(channel)),
      stub_(v1::Tether::NewStub(channel_)),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<RemoteSession>> RemoteSession::Connect(absl::string_view target,
                                                                      ConnectOptions options) {
  const absl::Time deadline = absl::Now() + options.deadline;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  TETHER_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                          ChannelCredentials(options));
  auto channel = grpc::CreateCustomChannel(std::string(target), credentials, args);
  if (!channel->WaitForConnected(ToGpr(deadline))) {
    return absl::UnavailableError(absl::StrCat("cannot reach tetherd at ", target, " within ",
                                               absl::FormatDuration(options.deadline)));
  }
  std::unique_ptr<RemoteSession> session(new RemoteSession(std::move(channel), options));

  v1::HandshakeRequest hello;
  hello.mutable_client_protocol()->set_major(rpc::kProtocolMajor);
  hello.mutable_client_protocol()->set_minor(rpc::kProtocolMinor);
  hello.set_client_name(options.client_name);
  TETHER_RETURN_IF_ERROR(session->Retry([&](grpc::ClientContext* ctx) {
    ctx->set_deadline(ToGpr(deadline));
    return session->stub_->Handshake(ctx, hello, &session->handshake_);
  }));
  const v1::ProtocolVersion& theirs = session->handshake_.protocol();
  if (theirs.major() != rpc::kProtocolMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tetherd at ", target, " speaks protocol ", theirs.major(), ".", theirs.minor(),
        ", this client ", rpc::kProtocolMajor, ".", rpc::kProtocolMinor, " (majors differ)"));
  }

  v1::OpenSessionRequest open;
  open.set_idle_timeout_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(options.idle_timeout)));
  open.set_client_name(options.client_name);
  open.set_isolate(options.isolate);
  v1::OpenSessionResponse opened;
  grpc::ClientContext ctx;
  session->PrepareContext(&ctx);
  ctx.set_deadline(ToGpr(deadline));
  TETHER_RETURN_IF_ERROR(ConvertStatus(session->stub_->OpenSession(&ctx, open, &opened), ctx));
  session->session_id_ = opened.session_id();
  session->granted_idle_ = absl::Milliseconds(opened.idle_timeout_ms());
  session->isolated_ = opened.isolated();
  if (session->granted_idle_ > absl::ZeroDuration()) {
    session->keep_alive_ = std::thread([s = session.get()] { s->KeepAliveLoop(); });
  }
  return session;
}

RemoteSession::~RemoteSession() { (void)Close(); }

absl::Status RemoteSession::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
  }
  if (keep_alive_.joinable()) keep_alive_.join();
  // First the daemon: closing the session stops the call it runs, if any,
  // at the VM's next instruction.
  absl::Status closed = absl::OkStatus();
  if (!session_id_.empty()) {
    v1::CloseSessionRequest request;
    request.set_session_id(session_id_);
    v1::CloseSessionResponse response;
    grpc::ClientContext ctx;
    PrepareContext(&ctx);
    ctx.set_deadline(ToGpr(absl::Now() + absl::Seconds(5)));
    closed = ConvertStatus(stub_->CloseSession(&ctx, request, &response), ctx);
  }
  // An operation still waiting for its reply (inside a kernel the VM cannot
  // stop, or on a daemon that did not answer) ends now: a direct-channel one,
  // which holds direct_mu_, by its socket being shut, a gRPC one by being
  // cancelled.
  {
    absl::MutexLock lock(&in_flight_mu_);
    if (in_flight_ != nullptr) in_flight_->Interrupt();
    for (grpc::ClientContext* call : calls_) call->TryCancel();
  }
  absl::MutexLock lock(&direct_mu_);
  direct_.reset();  // says goodbye, where the connection still works
  direct_tried_ = true;
  return closed;
}

void RemoteSession::PrepareContext(grpc::ClientContext* context) const {
  if (!options_.auth_token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", options_.auth_token));
  }
}

RemoteSession::CallContext::CallContext(RemoteSession* session) : session_(session) {
  session_->PrepareContext(&context_);
  absl::MutexLock lock(&session_->in_flight_mu_);
  session_->calls_.insert(&context_);
}

RemoteSession::CallContext::~CallContext() {
  absl::MutexLock lock(&session_->in_flight_mu_);
  session_->calls_.erase(&context_);
}

absl::Status RemoteSession::FailedInFlight(absl::Status failed) const {
  if (CheckOpen().ok()) return failed;
  return WithErrorKind(absl::CancelledError(absl::StrCat(
                           "remote session ", absl::string_view(session_id_).substr(0, 8),
                           " was closed while the call ran")),
                       ErrorKind::kCancelled);
}

absl::Status RemoteSession::CheckOpen() const {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("remote session is closed");
  return absl::OkStatus();
}

template <typename Fn>
auto RemoteSession::Interruptible(DirectConnection* direct, Fn call) {
  {
    absl::MutexLock lock(&in_flight_mu_);
    in_flight_ = direct;
  }
  auto result = call();
  absl::MutexLock lock(&in_flight_mu_);
  in_flight_ = nullptr;
  return result;
}

template <typename T, typename Op>
std::optional<absl::StatusOr<T>> RemoteSession::OnDirect(Op op, bool only_unavailable_breaks) {
  absl::MutexLock lock(&direct_mu_);
  DirectConnection* direct = DirectLocked();
  if (direct == nullptr) return std::nullopt;
  bool delivered = false;
  absl::StatusOr<T> result = Interruptible(direct, [&] { return op(direct, &delivered); });
  const bool broke = !result.ok() && (!only_unavailable_breaks ||
                                      result.status().code() == absl::StatusCode::kUnavailable);
  if (!broke) return result;
  direct_.reset();
  if (delivered) return absl::StatusOr<T>(WhyDirectBroke(result.status()));
  return std::nullopt;
}

template <typename Fn>
absl::Status RemoteSession::Retry(Fn attempt) {
  absl::Duration backoff = absl::Milliseconds(20);
  absl::Status status;
  for (int i = 0; i < std::max(1, options_.max_attempts); ++i) {
    if (i > 0) {
      absl::SleepFor(backoff);
      backoff *= 2;
    }
    grpc::ClientContext ctx;
    PrepareContext(&ctx);
    grpc::Status s = attempt(&ctx);
    status = ConvertStatus(s, ctx);
    if (status.code() != absl::StatusCode::kUnavailable) return status;
  }
  return status;
}

void RemoteSession::KeepAliveLoop() {
  const absl::Duration period = granted_idle_ / 3;
  v1::KeepAliveRequest request;
  request.set_session_id(session_id_);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&closed_), period)) return;
    }
    v1::KeepAliveResponse response;
    (void)Retry([&](grpc::ClientContext* ctx) {
      ctx->set_deadline(ToGpr(absl::Now() + period));
      return stub_->KeepAlive(ctx, request, &response);
    });
  }
}

absl::StatusOr<bool> RemoteSession::HasModule(absl::string_view sha256) {
  TETHER_RETURN_IF_ERROR(CheckOpen());
  v1::HasModuleRequest request;
  request.set_sha256(std::string(sha256));
  v1::HasModuleResponse response;
  TETHER_RETURN_IF_ERROR(
      Retry([&](grpc::ClientContext* ctx) { return stub_->HasModule(ctx, request, &response); }));
  return response.present();
}

absl::StatusOr<std::string> RemoteSession::UploadModule(absl::string_view bytes) {
  std::string sha = rpc::Sha256Hex(bytes);
  TETHER_ASSIGN_OR_RETURN(bool present, HasModule(sha));
  if (present) return sha;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  v1::UploadModuleResponse response;
  auto writer = stub_->UploadModule(&ctx, &response);
  v1::UploadModuleRequest request;
  request.mutable_header()->set_sha256(sha);
  request.mutable_header()->set_size_bytes(bytes.size());
  bool ok = writer->Write(request);
  const size_t chunk = std::max<uint64_t>(limits().chunk_bytes(), 4096);
  for (size_t off = 0; ok && off < bytes.size(); off += chunk) {
    request.set_data(bytes.data() + off, std::min(chunk, bytes.size() - off));
    ok = writer->Write(request);
  }
  if (ok) writer->WritesDone();
  TETHER_RETURN_IF_ERROR(ConvertStatus(writer->Finish(), ctx));
  if (!response.already_present()) ++module_streams_;
  return sha;
}

absl::StatusOr<Value> RemoteSession::UploadTensor(const Tensor& tensor, Device target) {
  TETHER_RETURN_IF_ERROR(CheckOpen());
  if (!tensor) return absl::InvalidArgumentError("upload of a null tensor");
  // A compact host view: the tensor itself, or a compacted/host copy.
  v1::InlineTensor staged;
  const char* bytes = nullptr;
  const size_t num_bytes = static_cast<size_t>(tensor->NumBytes());
  if (tensor->device().type == kDLCPU && tensor->IsContiguous()) {
    bytes = static_cast<const char*>(tensor->element_data());
  } else {
    TETHER_RETURN_IF_ERROR(rpc::EncodeInlineTensor(tensor, &staged));
    bytes = staged.data().data();
  }
  std::optional<absl::StatusOr<v1::CallResponse>> direct_reply =
      OnDirect<v1::CallResponse>([&](DirectConnection* direct, bool* delivered) {
        v1::CallRequest request;
        request.set_session_id(session_id_);
        request.set_request_id(next_request_id_++);
        rpc::EncodeTensorHeader(tensor->dtype(), tensor->shape(), target,
                                request.mutable_put_tensor()->mutable_tensor());
        request.mutable_put_tensor()->set_size_bytes(num_bytes);
        return direct->PutTensor(request, bytes, delivered);
      });
  if (direct_reply.has_value()) {
    TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, *std::move(direct_reply));
    if (response.has_error() && response.error().code() != 0) {
      return rpc::DecodeError(response.error());
    }
    TETHER_ASSIGN_OR_RETURN(rpc::TensorSpec spec,
                            rpc::DecodeTensorHeader(response.tensor().header()));
    return MakeRemoteTensorValue(response.tensor().id(), std::move(spec));
  }
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  v1::UploadTensorResponse response;
  auto writer = stub_->UploadTensor(&ctx, &response);
  v1::UploadTensorRequest request;
  request.mutable_header()->set_session_id(session_id_);
  rpc::EncodeTensorHeader(tensor->dtype(), tensor->shape(), target,
                          request.mutable_header()->mutable_tensor());
  bool ok = writer->Write(request);
  const size_t chunk = std::max<uint64_t>(limits().chunk_bytes(), 4096);
  for (size_t off = 0; ok && off < num_bytes; off += chunk) {
    request.set_data(bytes + off, std::min(chunk, num_bytes - off));
    ok = writer->Write(request);
  }
  if (ok) writer->WritesDone();
  TETHER_RETURN_IF_ERROR(ConvertStatus(writer->Finish(), ctx));
  TETHER_ASSIGN_OR_RETURN(rpc::TensorSpec spec,
                          rpc::DecodeTensorHeader(response.tensor().header()));
  return MakeRemoteTensorValue(response.tensor().id(), std::move(spec));
}

absl::StatusOr<Tensor> RemoteSession::DownloadTensor(const Value& remote) {
  RemoteHandleObj* handle = AsRemoteHandle(remote);
  if (handle == nullptr || handle->kind() != RemoteHandleObj::Kind::kTensor) {
    return absl::InvalidArgumentError(
        absl::StrCat("download needs a remote tensor handle, got ", remote.TypeName()));
  }
  return DownloadTensor(handle->id());
}

absl::StatusOr<Tensor> RemoteSession::DownloadTensor(uint64_t tensor_id) {
  TETHER_RETURN_IF_ERROR(CheckOpen());
  // A refusal from the daemon (not a broken connection) is the answer.
  std::optional<absl::StatusOr<Tensor>> direct_reply = OnDirect<Tensor>(
      [&](DirectConnection* direct, bool* delivered) {
        v1::CallRequest request;
        request.set_session_id(session_id_);
        request.set_request_id(next_request_id_++);
        request.mutable_get_tensor()->set_tensor_id(tensor_id);
        return direct->GetTensor(request, delivered);
      },
      /*only_unavailable_breaks=*/true);
  if (direct_reply.has_value()) return *std::move(direct_reply);
  v1::DownloadTensorRequest request;
  request.set_session_id(session_id_);
  request.set_tensor_id(tensor_id);
  Tensor out;
  absl::Status local_error;
  TETHER_RETURN_IF_ERROR(Retry([&](grpc::ClientContext* ctx) {
    out = Tensor();
    local_error = absl::OkStatus();
    auto reader = stub_->DownloadTensor(ctx, request);
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

absl::StatusOr<v1::CallResponse> RemoteSession::Call(v1::CallRequest request) {
  TETHER_RETURN_IF_ERROR(CheckOpen());
  request.set_session_id(session_id_);
  if (request.request_id() == 0) request.set_request_id(next_request_id_++);
  CallContext ctx(this);
  v1::CallResponse response;
  absl::Status sent = ConvertStatus(stub_->Call(ctx.get(), request, &response), *ctx.get());
  if (!sent.ok()) return FailedInFlight(std::move(sent));
  if (response.has_error() && response.error().code() != 0) {
    return rpc::DecodeError(response.error());
  }
  return response;
}

absl::StatusOr<v1::OpenDirectChannelResponse> RemoteSession::OpenDirectChannel() {
  TETHER_RETURN_IF_ERROR(CheckOpen());
  v1::OpenDirectChannelRequest request;
  request.set_session_id(session_id_);
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.deadline));
  v1::OpenDirectChannelResponse response;
  TETHER_RETURN_IF_ERROR(ConvertStatus(stub_->OpenDirectChannel(&ctx, request, &response), ctx));
  return response;
}

DirectConnection* RemoteSession::DirectLocked() {
  if (!direct_tried_ && options_.direct_channel) {
    direct_tried_ = true;
    absl::StatusOr<v1::OpenDirectChannelResponse> offer = OpenDirectChannel();
    if (offer.ok()) {
      absl::StatusOr<std::unique_ptr<DirectConnection>> connection = DirectConnection::Connect(
          offer->address(), offer->ticket(), offer->max_frame_bytes(), options_.deadline);
      if (connection.ok()) direct_ = std::move(*connection);
    }
  }
  return direct_.get();
}

bool RemoteSession::on_direct_channel() const {
  absl::MutexLock lock(&direct_mu_);
  return direct_ != nullptr;
}

absl::StatusOr<v1::CallResponse> RemoteSession::CallDirect(v1::CallRequest request,
                                                           bool* use_grpc) {
  *use_grpc = false;
  TETHER_RETURN_IF_ERROR(CheckOpen());
  *use_grpc = true;
  request.set_session_id(session_id_);
  std::optional<absl::StatusOr<v1::CallResponse>> reply = OnDirect<v1::CallResponse>(
      [&](DirectConnection* direct, bool* delivered) { return direct->Call(request, delivered); });
  // No connection, or it broke before the request left: gRPC carries it. A
  // request that left may have run: never run a call twice.
  if (!reply.has_value()) return absl::UnavailableError("no direct channel");
  *use_grpc = false;
  return *std::move(reply);
}

absl::Status RemoteSession::WhyDirectBroke(absl::Status broke) {
  if (!CheckOpen().ok()) return FailedInFlight(std::move(broke));
  // The daemon can say why the connection broke: an isolated session whose
  // worker process ended answers its keep-alive with that.
  v1::KeepAliveRequest ping;
  ping.set_session_id(session_id_);
  v1::KeepAliveResponse pong;
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  ctx.set_deadline(ToGpr(absl::Now() + options_.deadline));
  absl::Status why = ConvertStatus(stub_->KeepAlive(&ctx, ping, &pong), ctx);
  return why.ok() ? broke : why;
}

absl::StatusOr<Value> RemoteSession::AllocTensor(std::span<const int64_t> shape, DataType dtype,
                                                 Device device) {
  v1::CallRequest request;
  rpc::EncodeTensorHeader(dtype, shape, device, request.mutable_alloc_tensor()->mutable_tensor());
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, Call(std::move(request)));
  TETHER_ASSIGN_OR_RETURN(rpc::TensorSpec spec,
                          rpc::DecodeTensorHeader(response.tensor().header()));
  return MakeRemoteTensorValue(response.tensor().id(), std::move(spec));
}

absl::Status RemoteSession::FillRandom(const Value& remote, uint64_t seed, double low,
                                       double high) {
  RemoteHandleObj* handle = AsRemoteHandle(remote);
  if (handle == nullptr) return absl::InvalidArgumentError("fill_random needs a remote tensor");
  v1::CallRequest request;
  v1::FillRandom* fill = request.mutable_fill_random();
  fill->set_tensor_id(handle->id());
  fill->set_seed(seed);
  fill->set_low(low);
  fill->set_high(high);
  return Call(std::move(request)).status();
}

absl::Status RemoteSession::FreeObjects(std::vector<uint64_t> ids) {
  if (ids.empty()) return absl::OkStatus();
  v1::CallRequest request;
  request.mutable_free_objects()->mutable_ids()->Assign(ids.begin(), ids.end());
  return Call(std::move(request)).status();
}

}  // namespace tether::client
