// TetherService: the unary handlers, the Call and CallStream reactors and
// call execution. The module and tensor stream reactors are
// transfer_reactors.cc.
#include "server/tether_service.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "openssl/crypto.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "runtime/device/device_api.h"
#include "runtime/device/host_target.h"
#include "server/device_state.h"
#include "server/direct_channel.h"
#include "server/event_log.h"
#include "server/staging_buffer.h"
#include "server/transfer_reactors.h"

#ifndef TETHER_VERSION_STRING
#define TETHER_VERSION_STRING "0.0.0"
#endif

namespace tether::server {
namespace {

using rpc::ToGrpcStatus;

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status, context));
  return reactor;
}

// A streaming reactor of any kind that only finishes with `status` (a call
// refused before any message is read).
template <typename Base>
class RefusedReactor final : public Base {
 public:
  RefusedReactor(grpc::CallbackServerContext* context, const absl::Status& status) {
    this->Finish(ToGrpcStatus(status, context));
  }
  void OnDone() override { delete this; }
};

absl::Time DeadlineOf(grpc::CallbackServerContext* context) {
  auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

void AddDevice(Device device, v1::HandshakeResponse* response) {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(device.type);
  if (!api.ok()) return;
  v1::DeviceInfo* info = response->add_devices();
  rpc::EncodeDevice(device, info->mutable_device());
  info->set_name(device.ToString());
  for (const DeviceAttrName& attr : AllDeviceAttrs()) {
    absl::StatusOr<Value> value = (*api)->GetAttr(device.id, attr.attr);
    if (!value.ok()) continue;
    v1::Value encoded;
    if (rpc::EncodeValue(*value, rpc::EncodeOptions(), &encoded).ok()) {
      (*info->mutable_attributes())[std::string(attr.name)] = std::move(encoded);
    }
  }
}

// Call: a unary call whose cancellation by the client interrupts the VM at
// the next instruction (or keeps a queued call from running). Deleted by
// gRPC after Finish (OnDone), so it outlives the worker's use of it.
class CallReactor : public grpc::ServerUnaryReactor {
 public:
  explicit CallReactor(std::shared_ptr<Session> session) : session_(std::move(session)) {}
  Session& session() { return *session_; }
  const std::shared_ptr<Session>& shared_session() const { return session_; }
  CallCancellation* cancellation() { return &cancel_; }
  void OnCancel() override { cancel_.Cancel(*session_); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<Session> session_;  // co-owned with the table until the call finishes
  CallCancellation cancel_;
};

// CallStream: requests are read and posted to their session's queue;
// replies are written in completion order, one write at a time. The stream
// finishes once the client is done and every call has replied. Backpressure:
// with kMaxInFlight requests running or replies unwritten (a client that
// sends without reading), the next read waits until one is written, so a
// stream costs bounded memory.
class CallStreamReactor : public grpc::ServerBidiReactor<v1::CallRequest, v1::CallResponse> {
 public:
  static constexpr int kMaxInFlight = 64;

  explicit CallStreamReactor(TetherService* service) : service_(service) { StartRead(&request_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    auto request = std::make_shared<v1::CallRequest>(std::move(request_));
    request_.Clear();
    absl::StatusOr<std::shared_ptr<Session>> session =
        service_->sessions()->Get(request->session_id());
    if (!session.ok()) {
      v1::CallResponse reply;
      reply.set_request_id(request->request_id());
      rpc::EncodeError(session.status(), reply.mutable_error());
      Enqueue(std::move(reply), /*finished_call=*/false);
    } else {
      {
        absl::MutexLock lock(&mu_);
        ++pending_;
      }
      std::shared_ptr<Session> s = std::move(*session);
      {
        absl::MutexLock lock(&mu_);
        carried_.insert(s->id());
      }
      s->BeginCall();
      s->queue().Post(
          [this, s, request] {
            absl::Time deadline = request->deadline_ms() == 0
                                      ? absl::InfiniteFuture()
                                      : absl::Now() + absl::Milliseconds(request->deadline_ms());
            v1::CallResponse reply;
            absl::Status status = service_->RunCall(*s, *request, &reply, deadline);
            s->EndCall();
            if (!status.ok()) {
              reply.Clear();
              rpc::EncodeError(status, reply.mutable_error());
            }
            reply.set_request_id(request->request_id());
            Enqueue(std::move(reply), /*finished_call=*/true);
          },
          s);
    }
    bool read_now = false;
    {
      absl::MutexLock lock(&mu_);
      read_now = pending_ + static_cast<int>(replies_.size()) < kMaxInFlight;
      read_paused_ = !read_now;
    }
    if (read_now) StartRead(&request_);
  }
  void OnWriteDone(bool ok) override {
    v1::CallResponse* next = nullptr;
    bool resume = false;
    {
      absl::MutexLock lock(&mu_);
      replies_.pop_front();
      if (!ok) {
        broken_ = true;
        replies_.clear();
      }
      if (!replies_.empty()) {
        next = &replies_.front();
      } else {
        writing_ = false;
        MaybeFinishLocked();
      }
      resume = ResumeReadLocked();
    }
    if (next != nullptr) StartWrite(next);
    if (resume) StartRead(&request_);
  }
  // The client vanished (its process exited, its connection dropped) or
  // cancelled the whole stream: every session the stream carried is closed,
  // interrupting its running call and releasing what it owns.
  void OnCancel() override {
    absl::flat_hash_set<std::string> carried;
    {
      absl::MutexLock lock(&mu_);
      carried.swap(carried_);
    }
    for (const std::string& id : carried) (void)service_->sessions()->Close(id, "client-gone");
  }
  void OnDone() override { delete this; }

 private:
  // Whether a paused read may go on now (and marks it resumed): only below
  // kMaxInFlight. A broken stream resumes too, to see its end.
  bool ResumeReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!read_paused_ || finished_) return false;
    if (!broken_ && pending_ + static_cast<int>(replies_.size()) >= kMaxInFlight) return false;
    read_paused_ = false;
    return true;
  }

  void Enqueue(v1::CallResponse reply, bool finished_call) {
    v1::CallResponse* start = nullptr;
    bool resume = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_call) --pending_;
      if (!broken_) {
        replies_.push_back(std::move(reply));
        if (!writing_) {
          writing_ = true;
          start = &replies_.front();
        }
      }
      if (start == nullptr) MaybeFinishLocked();
      resume = ResumeReadLocked();
    }
    if (start != nullptr) StartWrite(start);
    if (resume) StartRead(&request_);
  }
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reads_done_ && pending_ == 0 && !writing_ && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  TetherService* service_;
  v1::CallRequest request_;  // owned by the read in flight
  absl::Mutex mu_;
  std::deque<v1::CallResponse> replies_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;  // no read in flight: too much in flight
  absl::flat_hash_set<std::string> carried_ ABSL_GUARDED_BY(mu_);  // session ids seen
};

}  // namespace

absl::Status BearerTokenCheck::Check(const grpc::CallbackServerContext& context) const {
  if (token_.empty()) return absl::OkStatus();
  static constexpr absl::string_view kPrefix = "Bearer ";
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  bool ok = false;
  if (it != metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    // The comparison covers the configured token's length whatever the
    // offered value is, so timing reveals neither content nor a prefix match.
    std::string offered(token_.size(), '\0');
    const bool shape_ok =
        value.size() == kPrefix.size() + token_.size() && absl::StartsWith(value, kPrefix);
    if (shape_ok) offered.assign(value.data() + kPrefix.size(), token_.size());
    const bool same = CRYPTO_memcmp(offered.data(), token_.data(), token_.size()) == 0;
    ok = shape_ok && same;
  }
  if (!ok) return absl::UnauthenticatedError("missing or invalid bearer token");
  return absl::OkStatus();
}

TetherService::TetherService(ServiceLimits limits, ModuleStore* store, SessionTable* sessions,
                             Executor* executor, DeadlineTimer* timer, std::string auth_token)
    : limits_(limits),
      store_(store),
      sessions_(sessions),
      executor_(executor),
      timer_(timer),
      handler_(store, limits.max_inline_tensor_bytes),
      auth_(std::move(auth_token)) {}

namespace {

// The operation's name, as the proto spells it: "invoke_stateful".
absl::string_view OperationName(const v1::CallRequest& request) {
  const google::protobuf::FieldDescriptor* field =
      v1::CallRequest::descriptor()->FindFieldByNumber(static_cast<int>(request.op_case()));
  return field == nullptr ? absl::string_view("none") : absl::string_view(field->name());
}

}  // namespace

absl::Status TetherService::RunCall(Session& session, const v1::CallRequest& request,
                                    v1::CallResponse* response, absl::Time deadline,
                                    CallCancellation* cancel) {
  const absl::Time start = absl::Now();
  absl::Status status = RunCallUncounted(session, request, response, deadline, cancel);
  metrics_->CallFinished(OperationName(request), status.code(), absl::Now() - start);
  return status;
}

absl::Status TetherService::RunCallUncounted(Session& session, const v1::CallRequest& request,
                                             v1::CallResponse* response, absl::Time deadline,
                                             CallCancellation* cancel) {
  if (session.closed()) {
    return absl::CancelledError(
        absl::StrCat("session ", session.short_id(), " was closed before the call ran"));
  }
  if (refuse_after_device_fault_) {
    if (absl::Status fault = FirstStickyFault(); !fault.ok()) {
      return WithErrorKind(
          absl::CancelledError(absl::StrCat("this session's worker is ending after a kernel "
                                            "faulted on its GPU: ",
                                            fault.message())),
          ErrorKind::kCancelled);
    }
  }
  if (fence_ != nullptr) {
    // The device may have been acquired by another client since this
    // session opened: its token is then stale.
    if (absl::Status admitted = fence_->Admit(session.fencing_token(), false); !admitted.ok()) {
      return admitted;
    }
  }
  uint64_t run = session.StartRun();
  if (cancel != nullptr) {
    cancel->run.store(run);
    if (cancel->cancelled.load()) {
      session.FinishRun();
      return absl::CancelledError("the client cancelled the call");
    }
  }
  if (SessionWorker* worker = session.worker()) {
    // The worker enforces the deadline; interrupts cancel its call. This
    // thread only waits, so it is lent out (M3).
    Executor::BlockingScope waiting;
    absl::Status status = worker->Call(request, response, deadline, &session.interrupt());
    session.FinishRun();
    if (cancel != nullptr) cancel->run.store(0);
    return status;
  }
  uint64_t token = 0;
  if (deadline != absl::InfiniteFuture()) {
    token = timer_->Schedule(
        deadline, [&session, run] { session.Interrupt(run, absl::StatusCode::kDeadlineExceeded); });
  }
  absl::Status status = ExecuteGated(session, run, request, response, deadline);
  if (token != 0) timer_->Cancel(token);
  session.FinishRun();
  if (cancel != nullptr) cancel->run.store(0);
  return status;
}

absl::Status TetherService::ExecuteGated(Session& session, uint64_t run,
                                         const v1::CallRequest& request, v1::CallResponse* response,
                                         absl::Time deadline) {
  bool measure = false;
  bool concurrent = gate_ == nullptr;
  if (request.has_time_evaluator()) {
    measure = true;
    concurrent = concurrent || request.time_evaluator().concurrent();
  } else if (request.has_profile()) {
    measure = true;
    concurrent = concurrent || request.profile().concurrent();
  }
  const bool exclusive = measure && !concurrent;
  TimingGate::Hold hold;
  if (gate_ != nullptr) {
    const TimingGate::Mode mode =
        exclusive ? TimingGate::Mode::kExclusive : TimingGate::Mode::kShared;
    absl::StatusOr<TimingGate::Hold> held = gate_->TryAcquire(mode);
    if (held.ok() && !held->held()) {
      // A wait: the executor thread is lent out for it (M3).
      Executor::BlockingScope waiting;
      const absl::Time wait_start = absl::Now();
      held = gate_->Acquire(
          mode, deadline,
          [&session, mode]() -> absl::Status {
            int code = session.interrupt().load();
            if (code == 0) return absl::OkStatus();
            return WithErrorKind(
                absl::Status(static_cast<absl::StatusCode>(code),
                             absl::StrCat("call stopped ", TimingGate::WaitingFor(mode))),
                ErrorKind::kCancelled);
          },
          limits_.max_exclusive_hold);
      metrics_->TimingGateWaited(exclusive, absl::Now() - wait_start);
    }
    if (!held.ok()) return held.status();
    hold = std::move(*held);
  }
  // An exclusive hold is bounded: past the limit the measurement is
  // interrupted like a deadline, and the caller is told which limit it hit.
  std::atomic<bool> over_limit{false};
  uint64_t limit_token = 0;
  if (exclusive && gate_ != nullptr && limits_.max_exclusive_hold != absl::InfiniteDuration()) {
    limit_token =
        timer_->Schedule(absl::Now() + limits_.max_exclusive_hold, [&session, &over_limit, run] {
          over_limit.store(true);
          session.Interrupt(run, absl::StatusCode::kResourceExhausted);
        });
  }
  absl::Status status = handler_.Execute(session, request, response);
  if (limit_token != 0) timer_->Cancel(limit_token);
  if (over_limit.load() && !status.ok()) {
    return WithErrorKind(
        absl::ResourceExhaustedError(absl::StrCat(
            "measurement stopped after holding exclusive timing for the daemon's limit of ",
            absl::FormatDuration(limits_.max_exclusive_hold),
            " (tetherd --max-exclusive-seconds); ask for fewer repeats or a shorter "
            "min_repeat_ms/cooldown, or time concurrently")),
        ErrorKind::kCancelled);
  }
  if (!status.ok() || !measure) return status;
  // What the result needs to say which machine, in which state, measured it.
  ReadDeviceState(response->mutable_device_state());
  if (response->has_benchmark()) {
    response->mutable_benchmark()->set_exclusive(exclusive);
    response->mutable_benchmark()->set_wait_seconds(hold.waited_seconds());
  } else if (response->has_report()) {
    auto* metrics = response->mutable_report()->mutable_configuration()->mutable_metrics();
    (*metrics)["Timing"].set_text(exclusive ? "exclusive" : "concurrent");
    (*metrics)["Timing Wait (us)"].set_microseconds(hold.waited_seconds() * 1e6);
  }
  return status;
}

grpc::ServerUnaryReactor* TetherService::Handshake(grpc::CallbackServerContext* context,
                                                   const v1::HandshakeRequest* request,
                                                   v1::HandshakeResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  const v1::ProtocolVersion& client = request->client_protocol();
  if (client.major() != rpc::kProtocolMajor) {
    return FinishNow(context, absl::FailedPreconditionError(absl::StrCat(
                                  "client protocol ", client.major(), ".", client.minor(),
                                  " is incompatible with daemon protocol ", rpc::kProtocolMajor,
                                  ".", rpc::kProtocolMinor, " (the major versions differ)")));
  }
  response->mutable_protocol()->set_major(rpc::kProtocolMajor);
  response->mutable_protocol()->set_minor(rpc::kProtocolMinor);
  response->set_runtime_version(TETHER_VERSION_STRING);
  AddDevice(Device::Cpu(), response);
  for (int id = 0; id < 64 && DeviceExists(Device::Cuda(id)); ++id) {
    AddDevice(Device::Cuda(id), response);
  }
  for (const char* dtype : {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                            "uint64", "float16", "bfloat16", "float32", "float64"}) {
    response->add_dtypes(dtype);
  }
  const HostTarget& host = ThisHostTarget();
  v1::TargetInfo* target = response->mutable_target();
  target->set_triple(host.triple);
  target->set_cpu(host.cpu);
  for (const std::string& f : host.features) target->add_features(f);
  target->set_description(host.description);
  target->set_cores(static_cast<uint32_t>(host.cores));
  target->set_page_size(static_cast<uint64_t>(host.page_size));
  target->set_compile_target(host.CompileTarget());
  v1::Limits* limits = response->mutable_limits();
  limits->set_max_inline_tensor_bytes(limits_.max_inline_tensor_bytes);
  limits->set_chunk_bytes(limits_.chunk_bytes);
  limits->set_max_message_bytes(limits_.max_message_bytes);
  limits->set_max_sessions(sessions_->limits().max_sessions);
  limits->set_store_quota_bytes(store_->quota_bytes());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TetherService::OpenSession(grpc::CallbackServerContext* context,
                                                     const v1::OpenSessionRequest* request,
                                                     v1::OpenSessionResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  if (fence_ != nullptr) {
    // Asks etcd when the token is newer than the daemon's view (a client
    // opening its session right after acquiring the device).
    if (absl::Status admitted = fence_->Admit(request->fencing_token(), true); !admitted.ok()) {
      return FinishNow(context, admitted);
    }
  }
  const bool isolate = isolate_all_ || request->isolate();
  if (isolate && worker_options_.program.empty()) {
    return FinishNow(context, absl::FailedPreconditionError(
                                  "this daemon cannot run sessions in worker processes"));
  }
  absl::StatusOr<std::shared_ptr<Session>> session = sessions_->Open(
      request->client_name(), absl::Milliseconds(static_cast<int64_t>(
                                  std::min<uint64_t>(request->idle_timeout_ms(), 1ull << 40))));
  if (!session.ok()) return FinishNow(context, session.status());
  if (isolate) {
    absl::StatusOr<std::unique_ptr<SessionWorker>> worker =
        SessionWorker::Start(worker_options_, (*session)->id());
    if (!worker.ok()) {
      metrics_->WorkerFailedToStart();
      (void)sessions_->Close((*session)->id(), "worker-failed");
      return FinishNow(context, worker.status());
    }
    metrics_->WorkerStarted();
    if (sessions_->limits().log_events) {
      EventLine()
          .Add("session", (*session)->short_id())
          .Add("event", "worker")
          .Add("pid", static_cast<int64_t>((*worker)->pid()))
          .Write();
    }
    (*session)->set_worker(std::move(*worker));
  }
  (*session)->set_fencing_token(request->fencing_token());
  response->set_isolated(isolate);
  response->set_session_id((*session)->id());
  response->set_idle_timeout_ms(
      static_cast<uint64_t>(absl::ToInt64Milliseconds((*session)->idle_timeout())));
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TetherService::KeepAlive(grpc::CallbackServerContext* context,
                                                   const v1::KeepAliveRequest* request,
                                                   v1::KeepAliveResponse*) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  absl::StatusOr<std::shared_ptr<Session>> session = sessions_->Get(request->session_id());
  if (!session.ok()) return FinishNow(context, session.status());
  (*session)->BeginCall();
  (*session)->EndCall();
  // An isolated session is alive while its worker is. Asked without
  // blocking this gRPC thread: a worker that stopped answering must not
  // hold the daemon's reactor threads.
  if (SessionWorker* worker = (*session)->worker()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    // The session (and its worker, and the worker's channel whose callback
    // this is) is let go on the executor, never inside that callback; posted
    // before Finish, while the server (and so the executor) must still live.
    worker->Ping([this, reactor, context, keep = *session](absl::Status status) mutable {
      executor_->Post([session = std::move(keep)] {});
      reactor->Finish(ToGrpcStatus(status, context));
    });
    return reactor;
  }
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TetherService::CloseSession(grpc::CallbackServerContext* context,
                                                      const v1::CloseSessionRequest* request,
                                                      v1::CloseSessionResponse*) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  return FinishNow(context, sessions_->Close(request->session_id()));
}

grpc::ServerUnaryReactor* TetherService::OpenDirectChannel(
    grpc::CallbackServerContext* context, const v1::OpenDirectChannelRequest* request,
    v1::OpenDirectChannelResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  if (direct_ == nullptr) {
    return FinishNow(context, absl::FailedPreconditionError(
                                  "this daemon does not offer the direct channel; use CallStream"));
  }
  if (!IsSameHostPeer(context->peer())) {
    return FinishNow(context, absl::FailedPreconditionError(absl::StrCat(
                                  "the direct channel is for clients on the daemon's host; peer ",
                                  context->peer(), " must use CallStream")));
  }
  absl::StatusOr<std::shared_ptr<Session>> session = sessions_->Get(request->session_id());
  if (!session.ok()) return FinishNow(context, session.status());
  if ((*session)->worker() != nullptr && fence_ != nullptr) {
    // A worker's direct channel would bypass the daemon's fencing check:
    // a farm daemon keeps isolated sessions on gRPC (the client falls back).
    return FinishNow(context, absl::FailedPreconditionError(
                                  "a farm daemon keeps isolated sessions on CallStream"));
  }
  if (SessionWorker* worker = (*session)->worker()) {
    // The worker's own direct channel: the client talks to it directly.
    // Asked without blocking this gRPC thread, as KeepAlive.
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    worker->OpenDirectChannel([this, reactor, context, response, keep = *session](
                                  absl::StatusOr<v1::OpenDirectChannelResponse> offer) mutable {
      if (offer.ok()) *response = std::move(*offer);
      executor_->Post([session = std::move(keep)] {});  // as in KeepAlive
      reactor->Finish(ToGrpcStatus(offer.status(), context));
    });
    return reactor;
  }
  absl::StatusOr<std::string> ticket = direct_->IssueTicket((*session)->id());
  if (!ticket.ok()) return FinishNow(context, ticket.status());
  response->set_address(direct_->address());
  response->set_ticket(std::move(*ticket));
  response->set_max_frame_bytes(direct_->max_frame_bytes());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TetherService::HasModule(grpc::CallbackServerContext* context,
                                                   const v1::HasModuleRequest* request,
                                                   v1::HasModuleResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  absl::StatusOr<std::optional<uint64_t>> found = store_->Find(request->sha256());
  if (!found.ok()) return FinishNow(context, found.status());
  response->set_present(found->has_value());
  response->set_size_bytes(found->value_or(0));
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerReadReactor<v1::UploadModuleRequest>* TetherService::UploadModule(
    grpc::CallbackServerContext* context, v1::UploadModuleResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) {
    return new RefusedReactor<grpc::ServerReadReactor<v1::UploadModuleRequest>>(context, auth);
  }
  return NewUploadModuleReactor(context, store_, timer_, limits_.stream_idle_timeout, response);
}

grpc::ServerReadReactor<v1::UploadTensorRequest>* TetherService::UploadTensor(
    grpc::CallbackServerContext* context, v1::UploadTensorResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) {
    return new RefusedReactor<grpc::ServerReadReactor<v1::UploadTensorRequest>>(context, auth);
  }
  return NewUploadTensorReactor(context, sessions_, fence_, executor_, timer_,
                                limits_.stream_idle_timeout, response);
}

grpc::ServerWriteReactor<v1::DownloadTensorResponse>* TetherService::DownloadTensor(
    grpc::CallbackServerContext* context, const v1::DownloadTensorRequest* request) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) {
    return new RefusedReactor<grpc::ServerWriteReactor<v1::DownloadTensorResponse>>(context, auth);
  }
  return NewDownloadTensorReactor(context, sessions_, fence_, executor_, timer_, limits_, *request);
}

grpc::ServerUnaryReactor* TetherService::Call(grpc::CallbackServerContext* context,
                                              const v1::CallRequest* request,
                                              v1::CallResponse* response) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) return FinishNow(context, auth);
  absl::StatusOr<std::shared_ptr<Session>> session = sessions_->Get(request->session_id());
  if (!session.ok()) return FinishNow(context, session.status());
  auto* reactor = new CallReactor(std::move(*session));
  Session& s = reactor->session();
  s.BeginCall();
  absl::Time deadline = DeadlineOf(context);
  // The reactor may be deleted, dropping its session, as soon as Finish
  // returns; the queue holds the session until the turn has ended.
  s.queue().Post(
      [this, context, request, response, reactor, deadline] {
        Session& s = reactor->session();
        absl::Status status = RunCall(s, *request, response, deadline, reactor->cancellation());
        s.EndCall();
        response->set_request_id(request->request_id());
        reactor->Finish(ToGrpcStatus(status, context));
      },
      reactor->shared_session());
  return reactor;
}

grpc::ServerBidiReactor<v1::CallRequest, v1::CallResponse>* TetherService::CallStream(
    grpc::CallbackServerContext* context) {
  if (absl::Status auth = auth_.Check(*context); !auth.ok()) {
    return new RefusedReactor<grpc::ServerBidiReactor<v1::CallRequest, v1::CallResponse>>(context,
                                                                                          auth);
  }
  return new CallStreamReactor(this);
}

}  // namespace tether::server
