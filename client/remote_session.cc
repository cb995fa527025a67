// RemoteSession: connection, handshake, session lease, module transfer, and
// the choice of transport for every operation (OnTransport). All gRPC
// statuses pass through GrpcLink::Convert (client/grpc_transport.h).
#include "client/remote_session.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/codec/sha256.h"
#include "proto/codec/status_codec.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/device/host_target.h"

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

RemoteSession::RemoteSession(std::shared_ptr<grpc::Channel> channel, ConnectOptions options)
    : link_(std::move(channel), options.auth_token, options.max_attempts),
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
  session->target_ = std::string(target);
  const GrpcLink& link = session->link_;

  v1::HandshakeRequest hello;
  hello.mutable_client_protocol()->set_major(rpc::kProtocolMajor);
  hello.mutable_client_protocol()->set_minor(rpc::kProtocolMinor);
  hello.set_client_name(options.client_name);
  TETHER_RETURN_IF_ERROR(link.Retry([&](grpc::ClientContext* ctx) {
    ctx->set_deadline(ToGpr(deadline));
    return link.stub()->Handshake(ctx, hello, &session->handshake_);
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
  open.set_fencing_token(options.fencing_token);
  v1::OpenSessionResponse opened;
  grpc::ClientContext ctx;
  link.Prepare(&ctx);
  ctx.set_deadline(ToGpr(deadline));
  TETHER_RETURN_IF_ERROR(GrpcLink::Convert(link.stub()->OpenSession(&ctx, open, &opened), ctx));
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
    link_.Prepare(&ctx);
    ctx.set_deadline(ToGpr(absl::Now() + absl::Seconds(5)));
    closed = GrpcLink::Convert(link_.stub()->CloseSession(&ctx, request, &response), ctx);
  }
  // An operation still waiting for its reply (inside a kernel the VM cannot
  // stop, or on a daemon that did not answer) ends now, and with it the
  // hold it has on transport_mu_.
  {
    absl::MutexLock lock(&in_flight_mu_);
    if (in_flight_ != nullptr) in_flight_->Interrupt();
  }
  absl::MutexLock lock(&transport_mu_);
  direct_.reset();  // says goodbye, where the connection still works
  direct_tried_ = true;
  stream_.reset();
  stream_broken_ = true;
  unary_.reset();
  return closed;
}

std::string RemoteSession::CpuCompileTarget() const {
  const v1::TargetInfo& daemon = handshake_.target();
  const HostTarget& here = ThisHostTarget();
  const bool same_kind =
      daemon.triple() == here.triple &&
      std::vector<std::string>(daemon.features().begin(), daemon.features().end()) == here.features;
  if (daemon.compile_target().empty() || same_kind) return "llvm";
  return daemon.compile_target();
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

Transport* RemoteSession::TransportLocked(TransportKind most_preferred) {
  const TransportKind start = std::max(most_preferred, options_.transport);
  if (start == TransportKind::kDirect) {
    if (!direct_tried_) {
      direct_tried_ = true;
      absl::StatusOr<v1::OpenDirectChannelResponse> offer = OpenDirectChannel();
      if (offer.ok()) {
        absl::StatusOr<std::unique_ptr<DirectConnection>> connection =
            DirectConnection::Connect(offer->address(), offer->ticket(), offer->max_frame_bytes(),
                                      options_.deadline, options_.direct_spin);
        if (connection.ok()) direct_ = std::move(*connection);
      }
    }
    if (direct_ != nullptr) return direct_.get();
  }
  if (start <= TransportKind::kStream && !stream_broken_) {
    if (stream_ == nullptr) {
      stream_ = std::make_unique<StreamTransport>(&link_, limits().chunk_bytes());
    }
    return stream_.get();
  }
  if (unary_ == nullptr) unary_ = std::make_unique<UnaryTransport>(&link_, limits().chunk_bytes());
  return unary_.get();
}

TransportKind RemoteSession::transport(TransportKind most_preferred) const {
  const TransportKind start = std::max(most_preferred, options_.transport);
  absl::MutexLock lock(&transport_mu_);
  if (start == TransportKind::kDirect && direct_ != nullptr) return TransportKind::kDirect;
  if (start <= TransportKind::kStream && !stream_broken_) return TransportKind::kStream;
  return TransportKind::kUnary;
}

template <typename T, typename Op>
absl::StatusOr<T> RemoteSession::OnTransport(TransportKind most_preferred, Op op) {
  absl::MutexLock lock(&transport_mu_);
  TETHER_RETURN_IF_ERROR(CheckOpen());
  while (true) {
    Transport* transport = TransportLocked(most_preferred);
    {
      absl::MutexLock in_flight(&in_flight_mu_);
      in_flight_ = transport;
    }
    Fate fate = Fate::kAnswered;
    absl::StatusOr<T> result = op(*transport, &fate);
    {
      absl::MutexLock in_flight(&in_flight_mu_);
      in_flight_ = nullptr;
    }
    if (fate == Fate::kAnswered) {
      if (!result.ok()) return FailedInFlight(result.status());
      return result;
    }
    // The transport broke: the next one carries this request if it never
    // left, and every later one. One that left may have run: never twice.
    switch (transport->kind()) {
      case TransportKind::kDirect:
        direct_.reset();
        break;
      case TransportKind::kStream:
        stream_.reset();
        stream_broken_ = true;
        break;
      case TransportKind::kUnary:  // answers everything: there is no next
        return FailedInFlight(result.status());
    }
    if (fate == Fate::kLost) return WhyBroke(result.status());
  }
}

absl::Status RemoteSession::WhyBroke(absl::Status broke) {
  if (!CheckOpen().ok()) return FailedInFlight(std::move(broke));
  // The daemon can say why the transport broke: an isolated session whose
  // worker process ended answers its keep-alive with that.
  v1::KeepAliveRequest ping;
  ping.set_session_id(session_id_);
  v1::KeepAliveResponse pong;
  grpc::ClientContext ctx;
  link_.Prepare(&ctx);
  ctx.set_deadline(ToGpr(absl::Now() + options_.deadline));
  absl::Status why = GrpcLink::Convert(link_.stub()->KeepAlive(&ctx, ping, &pong), ctx);
  if (why.ok()) return broke;
  if (absl::IsUnavailable(why)) {
    // gRPC's words alone ("Socket closed") do not say what went away.
    return absl::UnavailableError(absl::StrCat("tetherd at ", target_,
                                               " cannot be reached (it stopped, or the network "
                                               "to it is down): ",
                                               why.message()));
  }
  return why;
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
    (void)link_.Retry([&](grpc::ClientContext* ctx) {
      ctx->set_deadline(ToGpr(absl::Now() + period));
      return link_.stub()->KeepAlive(ctx, request, &response);
    });
  }
}

absl::StatusOr<bool> RemoteSession::HasModule(absl::string_view sha256) {
  TETHER_RETURN_IF_ERROR(CheckOpen());
  v1::HasModuleRequest request;
  request.set_sha256(std::string(sha256));
  v1::HasModuleResponse response;
  TETHER_RETURN_IF_ERROR(link_.Retry(
      [&](grpc::ClientContext* ctx) { return link_.stub()->HasModule(ctx, request, &response); }));
  return response.present();
}

absl::StatusOr<std::string> RemoteSession::UploadModule(absl::string_view bytes) {
  return UploadToStore(bytes, &module_streams_);
}

absl::StatusOr<std::string> RemoteSession::UploadParams(absl::string_view bytes) {
  return UploadToStore(bytes, &param_streams_);
}

absl::StatusOr<std::string> RemoteSession::UploadToStore(absl::string_view bytes,
                                                         std::atomic<uint64_t>* streams) {
  std::string sha = rpc::Sha256Hex(bytes);
  TETHER_ASSIGN_OR_RETURN(bool present, HasModule(sha));
  if (present) return sha;
  grpc::ClientContext ctx;
  link_.Prepare(&ctx);
  v1::UploadModuleResponse response;
  auto writer = link_.stub()->UploadModule(&ctx, &response);
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
  TETHER_RETURN_IF_ERROR(GrpcLink::Convert(writer->Finish(), ctx));
  if (!response.already_present()) {
    ++*streams;
    store_bytes_sent_ += bytes.size();
  }
  return sha;
}

absl::StatusOr<Value> RemoteSession::UploadTensor(const Tensor& tensor, Device target) {
  if (!tensor) return absl::InvalidArgumentError("upload of a null tensor");
  // A compact host view: the tensor itself, or a compacted/host copy.
  v1::InlineTensor staged;
  const char* bytes = nullptr;
  if (tensor->device().type == kDLCPU && tensor->IsContiguous()) {
    bytes = static_cast<const char*>(tensor->element_data());
  } else {
    TETHER_RETURN_IF_ERROR(rpc::EncodeInlineTensor(tensor, &staged));
    bytes = staged.data().data();
  }
  v1::CallRequest request;
  request.set_session_id(session_id_);
  request.set_request_id(next_request_id_++);
  rpc::EncodeTensorHeader(tensor->dtype(), tensor->shape(), target,
                          request.mutable_put_tensor()->mutable_tensor());
  request.mutable_put_tensor()->set_size_bytes(static_cast<uint64_t>(tensor->NumBytes()));
  TETHER_ASSIGN_OR_RETURN(
      v1::CallResponse response,
      OnTransport<v1::CallResponse>(TransportKind::kDirect, [&](Transport& t, Fate* fate) {
        return t.PutTensor(request, bytes, fate);
      }));
  if (response.has_error() && response.error().code() != 0) {
    return rpc::DecodeError(response.error());
  }
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
  v1::CallRequest request;
  request.set_session_id(session_id_);
  request.set_request_id(next_request_id_++);
  request.mutable_get_tensor()->set_tensor_id(tensor_id);
  return OnTransport<Tensor>(TransportKind::kDirect,
                             [&](Transport& t, Fate* fate) { return t.GetTensor(request, fate); });
}

absl::StatusOr<v1::CallResponse> RemoteSession::Call(v1::CallRequest request,
                                                     TransportKind most_preferred) {
  request.set_session_id(session_id_);
  if (request.request_id() == 0) request.set_request_id(next_request_id_++);
  TETHER_ASSIGN_OR_RETURN(
      v1::CallResponse response,
      OnTransport<v1::CallResponse>(
          most_preferred, [&](Transport& t, Fate* fate) { return t.Call(request, fate); }));
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
  link_.Prepare(&ctx);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.deadline));
  v1::OpenDirectChannelResponse response;
  TETHER_RETURN_IF_ERROR(
      GrpcLink::Convert(link_.stub()->OpenDirectChannel(&ctx, request, &response), ctx));
  return response;
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

absl::Status RemoteSession::CopyTensor(const Value& src, const Value& dst) {
  RemoteHandleObj* from = AsRemoteHandle(src);
  RemoteHandleObj* to = AsRemoteHandle(dst);
  if (from == nullptr || to == nullptr) {
    return absl::InvalidArgumentError("copy_tensor copies a remote tensor into another");
  }
  v1::CallRequest request;
  request.mutable_copy_tensor()->set_src_id(from->id());
  request.mutable_copy_tensor()->set_dst_id(to->id());
  return Call(std::move(request)).status();
}

absl::Status RemoteSession::FreeObjects(std::vector<uint64_t> ids) {
  if (ids.empty()) return absl::OkStatus();
  v1::CallRequest request;
  request.mutable_free_objects()->mutable_ids()->Assign(ids.begin(), ids.end());
  return Call(std::move(request)).status();
}

absl::Status RemoteSession::RequireProtocol(uint32_t minor, absl::string_view what) const {
  const v1::ProtocolVersion& daemon = handshake_.protocol();
  if (daemon.major() != 1 || daemon.minor() >= minor) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("the daemon speaks protocol ", daemon.major(),
                                                    ".", daemon.minor(), ", and ", what,
                                                    " needs 1.", minor, ": upgrade tetherd"));
}

}  // namespace tether::client
