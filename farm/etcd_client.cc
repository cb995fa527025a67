// EtcdClient: etcd's KV, Lease, Watch and Auth services through the
// generated stubs, with failover between endpoints and the conversion of
// gRPC statuses (the one place this library meets gRPC errors).
#include "farm/etcd_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "runtime/core/file.h"

namespace tether::farm {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Failures that say "this endpoint, not this request": try the next one.
bool EndpointDown(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

bool AuthTokenExpired(const grpc::Status& status) {
  return absl::StrContains(status.error_message(), "invalid auth token") ||
         absl::StrContains(status.error_message(), "auth token is expired");
}

absl::StatusOr<std::string> ReadCredentialFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the farm's ", what, " ", path, ": ", text.status().message()));
  }
  return text;
}

}  // namespace

absl::Status ParseFarmUrl(absl::string_view url, EtcdOptions* options) {
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "etcd://")) {
    options->tls = false;
  } else if (absl::ConsumePrefix(&rest, "etcds://")) {
    options->tls = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "farm URL \"", url, "\" should be etcd://HOST:PORT[,HOST:PORT...] (or etcds:// for TLS)"));
  }
  absl::ConsumeSuffix(&rest, "/");
  options->endpoints.clear();
  for (absl::string_view endpoint : absl::StrSplit(rest, ',')) {
    endpoint = absl::StripAsciiWhitespace(endpoint);
    const size_t colon = endpoint.rfind(':');
    int port = 0;
    if (endpoint.empty() || colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port <= 0 || port > 65535 ||
        absl::StrContains(endpoint, '/')) {
      return absl::InvalidArgumentError(
          absl::StrCat("farm URL \"", url, "\": endpoint \"", endpoint, "\" is not HOST:PORT"));
    }
    options->endpoints.emplace_back(endpoint);
  }
  return absl::OkStatus();
}

etcdserverpb::TxnRequest PutIfAbsent(std::string key, std::string value, int64_t lease) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* absent = txn.add_compare();
  absent->set_key(key);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_create_revision(0);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(std::move(key));
  put->set_value(std::move(value));
  if (lease != 0) put->set_lease(lease);
  return txn;
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdOptions options) {
  std::unique_ptr<EtcdClient> client(new EtcdClient(std::move(options)));
  if (absl::Status status = client->Init(); !status.ok()) return status;
  return client;
}

EtcdClient::~EtcdClient() = default;

absl::Status EtcdClient::Init() {
  if (options_.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoint given");
  if (options_.cert_file.empty() != options_.key_file.empty()) {
    return absl::InvalidArgumentError(
        "the farm's client certificate and key must be given together");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  const bool tls = options_.tls || !options_.ca_file.empty() || !options_.cert_file.empty();
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options_.ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadCredentialFile(options_.ca_file, "CA file");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = std::move(*ca);
    }
    if (!options_.cert_file.empty()) {
      absl::StatusOr<std::string> cert =
          ReadCredentialFile(options_.cert_file, "client certificate");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadCredentialFile(options_.key_file, "client key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = std::move(*cert);
      ssl.pem_private_key = std::move(*key);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  if (!options_.user.empty()) {
    if (options_.password_file.empty()) {
      return absl::InvalidArgumentError("the farm's user needs a password file");
    }
    absl::StatusOr<std::string> password =
        ReadCredentialFile(options_.password_file, "password file");
    if (!password.ok()) return password.status();
    password_ = std::string(absl::StripTrailingAsciiWhitespace(*password));
  }
  for (const std::string& address : options_.endpoints) {
    grpc::ChannelArguments args;
    // An etcd that restarts is found again within a second, not after
    // gRPC's default backoff of up to two minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    // Also the longest a connection attempt may take (gRPC's default is 20 s,
    // a long time for an etcd that was not listening yet).
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    Endpoint endpoint;
    endpoint.address = address;
    endpoint.channel = grpc::CreateCustomChannel(address, credentials, args);
    endpoint.kv = etcdserverpb::KV::NewStub(endpoint.channel);
    endpoint.lease = etcdserverpb::Lease::NewStub(endpoint.channel);
    endpoint.watch = etcdserverpb::Watch::NewStub(endpoint.channel);
    endpoint.auth = etcdserverpb::Auth::NewStub(endpoint.channel);
    endpoints_.push_back(std::move(endpoint));
  }
  return absl::OkStatus();
}

std::string EtcdClient::endpoints() const { return absl::StrJoin(options_.endpoints, ","); }

absl::Status EtcdClient::Authenticate(Endpoint& endpoint) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(password_);
  etcdserverpb::AuthenticateResponse response;
  grpc::Status status = endpoint.auth->Authenticate(&context, request, &response);
  if (!status.ok()) {
    absl::Status converted = FromGrpc(status);
    return absl::Status(converted.code(),
                        absl::StrCat("etcd at ", endpoint.address, ": authenticating as ",
                                     options_.user, ": ", status.error_message()));
  }
  auth_token_ = response.token();
  return absl::OkStatus();
}

absl::Status EtcdClient::PrepareContext(Endpoint& endpoint, grpc::ClientContext& context,
                                        bool streaming) {
  if (!streaming) context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  // Wait (within the deadline) for a channel that is reconnecting, rather
  // than failing at once: gRPC's pick_first stays in TRANSIENT_FAILURE after
  // a refused connection until a call asks for the channel again, so an etcd
  // that just started (or restarted) would otherwise be seen only late.
  context.set_wait_for_ready(true);
  if (options_.user.empty()) return absl::OkStatus();
  absl::MutexLock lock(&auth_mu_);
  if (auth_token_.empty()) {
    if (absl::Status status = Authenticate(endpoint); !status.ok()) return status;
  }
  context.AddMetadata("token", auth_token_);
  return absl::OkStatus();
}

absl::Status EtcdClient::Invoke(
    absl::string_view what,
    const std::function<grpc::Status(Endpoint&, grpc::ClientContext&)>& call) {
  std::vector<std::string> failures;
  const size_t first = preferred();
  for (size_t n = 0; n < endpoints_.size(); ++n) {
    const size_t index = (first + n) % endpoints_.size();
    Endpoint& endpoint = endpoints_[index];
    grpc::Status status;
    for (int attempt = 0; attempt < 2; ++attempt) {
      grpc::ClientContext context;
      if (absl::Status prepared = PrepareContext(endpoint, context, false); !prepared.ok()) {
        if (prepared.code() != absl::StatusCode::kUnavailable &&
            prepared.code() != absl::StatusCode::kDeadlineExceeded) {
          return prepared;
        }
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(prepared.message()));
        break;
      }
      status = call(endpoint, context);
      if (status.ok() || options_.user.empty() || !AuthTokenExpired(status)) break;
      absl::MutexLock lock(&auth_mu_);
      auth_token_.clear();  // authenticate again, once
    }
    if (status.ok()) {
      preferred_.store(index);
      return absl::OkStatus();
    }
    if (!EndpointDown(status)) {
      absl::Status converted = FromGrpc(status);
      return absl::Status(converted.code(), absl::StrCat("etcd at ", endpoint.address, ": ", what,
                                                         ": ", status.error_message()));
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        endpoint.channel->GetState(false) != GRPC_CHANNEL_READY) {
      failures.push_back(absl::StrCat(endpoint.address, ": no connection within ",
                                      absl::FormatDuration(options_.call_timeout),
                                      " (is etcd listening there?)"));
    } else {
      failures.push_back(absl::StrCat(endpoint.address, ": ", status.error_message()));
    }
  }
  return absl::UnavailableError(
      absl::StrCat("etcd unreachable (", what, "): ", absl::StrJoin(failures, "; ")));
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  etcdserverpb::RangeResponse response;
  absl::Status status = Invoke("range", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.kv->Range(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  absl::Status status = Invoke("txn", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.kv->Txn(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<etcdserverpb::PutResponse> EtcdClient::Put(const etcdserverpb::PutRequest& request) {
  etcdserverpb::PutResponse response;
  absl::Status status = Invoke("put", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.kv->Put(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<etcdserverpb::DeleteRangeResponse> EtcdClient::Delete(
    const etcdserverpb::DeleteRangeRequest& request) {
  etcdserverpb::DeleteRangeResponse response;
  absl::Status status = Invoke("delete", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.kv->DeleteRange(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status = Invoke("lease grant", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.lease->LeaseGrant(&c, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::InternalError(absl::StrCat("etcd lease grant: ", response.error()));
  }
  return response.id();
}

absl::StatusOr<int64_t> EtcdClient::KeepAliveOnce(int64_t id) {
  etcdserverpb::LeaseKeepAliveResponse response;
  absl::Status status = Invoke("lease keep-alive", [&](Endpoint& e, grpc::ClientContext& c) {
    auto stream = e.lease->LeaseKeepAlive(&c);
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(id);
    if (!stream->Write(request) || !stream->WritesDone() || !stream->Read(&response)) {
      grpc::Status finished = stream->Finish();
      return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended")
                           : finished;
    }
    c.TryCancel();  // the stream has said all we need
    stream->Finish().ok();
    return grpc::Status::OK;
  });
  if (!status.ok()) return status;
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", id, " has expired or was revoked"));
  }
  return response.ttl();
}

absl::Status EtcdClient::RevokeLease(int64_t id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  absl::Status status = Invoke("lease revoke", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.lease->LeaseRevoke(&c, request, &response);
  });
  if (status.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return status;
}

absl::StatusOr<int64_t> EtcdClient::LeaseTimeToLive(int64_t id) {
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(id);
  etcdserverpb::LeaseTimeToLiveResponse response;
  absl::Status status = Invoke("lease time-to-live", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.lease->LeaseTimeToLive(&c, request, &response);
  });
  if (!status.ok()) return status;
  if (response.ttl() < 0) return absl::NotFoundError(absl::StrCat("etcd lease ", id, " is gone"));
  return response.ttl();
}

std::unique_ptr<EtcdWatch> EtcdClient::Watch(std::string key, std::string range_end,
                                             int64_t start_revision,
                                             std::function<void(const WatchUpdate&)> on_update) {
  return std::make_unique<EtcdWatch>(this, std::move(key), std::move(range_end), start_revision,
                                     std::move(on_update));
}

EtcdWatch::EtcdWatch(EtcdClient* client, std::string key, std::string range_end,
                     int64_t start_revision, std::function<void(const WatchUpdate&)> on_update)
    : client_(client),
      key_(std::move(key)),
      range_end_(std::move(range_end)),
      on_update_(std::move(on_update)),
      next_revision_(start_revision) {
  thread_ = std::thread([this] { Run(); });
}

EtcdWatch::~EtcdWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

void EtcdWatch::Run() {
  size_t endpoint = client_->preferred();
  absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    const absl::Time started = absl::Now();
    RunStream(endpoint);
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    // A stream that lived a while was healthy: retry soon; one that failed
    // at once backs off up to a second and tries the next endpoint.
    if (absl::Now() - started > absl::Seconds(2)) backoff = absl::Milliseconds(50);
    endpoint = (endpoint + 1) % client_->endpoints_.size();
    mu_.AwaitWithTimeout(absl::Condition(&stop_), backoff);
    if (stop_) return;
    backoff = std::min(backoff * 2, absl::Seconds(1));
    // Where the watch started "now" and saw nothing yet, what happened
    // while it was down is unknown: its reader must read the state again.
    if (next_revision_ == 0) resync_next_ = true;
  }
}

void EtcdWatch::RunStream(size_t endpoint_index) {
  EtcdClient::Endpoint& endpoint = client_->endpoints_[endpoint_index];
  grpc::ClientContext context;
  if (!client_->PrepareContext(endpoint, context, /*streaming=*/true).ok()) return;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    context_ = &context;
  }
  auto stream = endpoint.watch->Watch(&context);
  etcdserverpb::WatchRequest request;
  etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(key_);
  create->set_range_end(range_end_);
  create->set_start_revision(next_revision_);
  etcdserverpb::WatchResponse response;
  if (stream->Write(request)) {
    while (stream->Read(&response)) {
      if (response.compact_revision() > 0) {
        // The history from next_revision_ is compacted away: start again
        // from now, and have the reader resynchronize.
        next_revision_ = 0;
        resync_next_ = true;
        break;
      }
      if (response.canceled()) break;
      WatchUpdate update;
      update.revision = response.header().revision();
      if (response.created()) {
        // A watch from "now" covers everything after the revision it was
        // created at.
        if (next_revision_ == 0) next_revision_ = update.revision + 1;
        if (!resync_next_) continue;
        resync_next_ = false;
        update.resync = true;
        on_update_(update);
        continue;
      }
      for (const mvccpb::Event& event : response.events()) {
        next_revision_ = std::max(next_revision_, event.kv().mod_revision() + 1);
        update.events.push_back(event);
      }
      if (next_revision_ == 0) next_revision_ = update.revision + 1;
      if (!update.events.empty()) on_update_(update);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }
  context.TryCancel();
  stream->Finish().ok();
}

}  // namespace tether::farm
