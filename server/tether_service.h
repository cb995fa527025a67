// TetherService: the tether.v1.Tether gRPC service on the callback API.
// Reactors only parse, look up and copy bytes; VM work runs on the Executor
// through each session's SerialQueue, and the reactor is finished from there.
// Deadlines (the gRPC deadline of Call, deadline_ms of CallStream requests)
// set the session's VM interrupt flag from the DeadlineTimer, so a running
// call stops at its next instruction with DEADLINE_EXCEEDED.
#ifndef TETHER_SERVER_TETHER_SERVICE_H_
#define TETHER_SERVER_TETHER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/call_handler.h"
#include "server/deadline_timer.h"
#include "server/executor.h"
#include "server/metrics.h"
#include "server/module_store.h"
#include "server/session_fence.h"
#include "server/session_table.h"
#include "server/session_worker.h"
#include "server/timing_gate.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {

class DirectChannel;

struct ServiceLimits {
  uint64_t max_inline_tensor_bytes = uint64_t{1} << 20;
  uint64_t chunk_bytes = uint64_t{1} << 20;
  uint64_t max_message_bytes = uint64_t{64} << 20;
  // The longest a measurement may hold exclusive timing: past it the
  // measurement is stopped with RESOURCE_EXHAUSTED, so one request cannot
  // freeze every other session.
  absl::Duration max_exclusive_hold = absl::Minutes(10);
  // A module or tensor stream that makes no progress (no message read or
  // written) for this long is cancelled, so a stalled client cannot keep an
  // upload slot, its quota reservation or a tensor's buffers.
  absl::Duration stream_idle_timeout = absl::Seconds(60);
};

// Bearer-token authentication of every TetherService method. Thread contract:
// thread-safe (immutable after construction).
class BearerTokenCheck {
 public:
  // An empty token accepts every call.
  explicit BearerTokenCheck(std::string token) : token_(std::move(token)) {}
  // OK when no token is configured or `context` carries metadata
  // "authorization: Bearer <token>" (compared in constant time); otherwise
  // UNAUTHENTICATED "missing or invalid bearer token".
  absl::Status Check(const grpc::CallbackServerContext& context) const;

 private:
  const std::string token_;
};

// One call's cancellation, shared by the reactor that learns of it
// (OnCancel, on a gRPC thread) and the worker that runs the call: whichever
// comes second interrupts the run. Thread contract: thread-safe (atomics).
struct CallCancellation {
  std::atomic<bool> cancelled{false};
  std::atomic<uint64_t> run{0};  // the session's run number while it runs
  void Cancel(Session& session) {
    cancelled.store(true);
    if (uint64_t r = run.load(); r != 0) session.Interrupt(r, absl::StatusCode::kCancelled);
  }
};

// The tether.v1.Tether service on gRPC's callback API: authentication, the
// handshake, sessions, the module store, tensor transfers and VM calls
// (unary Call and the CallStream), each handler posting its work to the
// session's serial queue so no gRPC thread waits on a VM.
// Thread contract: thread-safe. Borrows everything; all must outlive it.
class TetherService final : public v1::Tether::CallbackService {
 public:
  TetherService(ServiceLimits limits, ModuleStore* store, SessionTable* sessions,
                Executor* executor, DeadlineTimer* timer, std::string auth_token = "");

  // Runs `request` on `session` (on the calling worker) with an interrupt at
  // `deadline` and, when `cancel` is given, when the client cancels. Used by
  // Call, CallStream and the direct channel. CANCELLED when the session was
  // closed meanwhile. With a timing gate, a call this process runs holds it
  // shared, a measurement exclusively (an isolated session's calls are gated
  // by its worker, which runs them).
  absl::Status RunCall(Session& session, const v1::CallRequest& request, v1::CallResponse* response,
                       absl::Time deadline, CallCancellation* cancel = nullptr);

  const ServiceLimits& limits() const { return limits_; }
  // Session isolation (docs/design/rpc-protocol.md, "Isolated sessions"):
  // sessions that ask for it, or every session when `all`, run in a worker
  // process started from `options.program`. Without a program, a session
  // that asks is refused with FAILED_PRECONDITION. Set before serving.
  void set_isolation(WorkerOptions options, bool all) {
    worker_options_ = std::move(options);
    isolate_all_ = all;
  }
  // In a session worker: once a kernel has left a GPU context unusable
  // (FirstStickyFault), every call is CANCELLED naming the fault, while the
  // worker drains and exits (its daemon then answers that the session lost
  // its worker). Set before serving.
  void set_refuse_after_device_fault(bool refuse) { refuse_after_device_fault_ = refuse; }
  // Exclusive timing (docs/design/rpc-protocol.md); null (the default): off.
  // Set before serving.
  void set_timing_gate(TimingGate* gate) { gate_ = gate; }
  // The direct channel whose tickets OpenDirectChannel hands out; null (the
  // default) refuses it with FAILED_PRECONDITION. Set before serving.
  void set_direct_channel(DirectChannel* direct) { direct_ = direct; }
  // Where calls, waits and workers are counted; never null (the default
  // counts nothing). Set before serving.
  void set_metrics(DaemonMetrics* metrics) { metrics_ = metrics; }
  DaemonMetrics* metrics() { return metrics_; }
  // The farm's fence (server/session_fence.h): OpenSession admits a session
  // and RunCall runs a call only while the session's fencing token is
  // current; refused with FAILED_PRECONDITION. Null (the default): no
  // fencing. Set before serving.
  void set_fence(SessionFence* fence) { fence_ = fence; }
  ModuleStore* store() { return store_; }
  SessionTable* sessions() { return sessions_; }

  grpc::ServerUnaryReactor* Handshake(grpc::CallbackServerContext* context,
                                      const v1::HandshakeRequest* request,
                                      v1::HandshakeResponse* response) override;
  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* context,
                                        const v1::OpenSessionRequest* request,
                                        v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext* context,
                                      const v1::KeepAliveRequest* request,
                                      v1::KeepAliveResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* OpenDirectChannel(grpc::CallbackServerContext* context,
                                              const v1::OpenDirectChannelRequest* request,
                                              v1::OpenDirectChannelResponse* response) override;
  grpc::ServerUnaryReactor* HasModule(grpc::CallbackServerContext* context,
                                      const v1::HasModuleRequest* request,
                                      v1::HasModuleResponse* response) override;
  grpc::ServerReadReactor<v1::UploadModuleRequest>* UploadModule(
      grpc::CallbackServerContext* context, v1::UploadModuleResponse* response) override;
  grpc::ServerReadReactor<v1::UploadTensorRequest>* UploadTensor(
      grpc::CallbackServerContext* context, v1::UploadTensorResponse* response) override;
  grpc::ServerWriteReactor<v1::DownloadTensorResponse>* DownloadTensor(
      grpc::CallbackServerContext* context, const v1::DownloadTensorRequest* request) override;
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* context,
                                 const v1::CallRequest* request,
                                 v1::CallResponse* response) override;
  grpc::ServerBidiReactor<v1::CallRequest, v1::CallResponse>* CallStream(
      grpc::CallbackServerContext* context) override;

 private:
  // The handler's Execute inside the timing gate, when there is one; a
  // measurement's result says whether it ran exclusively and how long it
  // waited (without a gate: concurrent, no wait). An exclusive hold longer
  // than limits_.max_exclusive_hold interrupts call `run` of the session.
  absl::Status ExecuteGated(Session& session, uint64_t run, const v1::CallRequest& request,
                            v1::CallResponse* response, absl::Time deadline);
  // RunCall without counting it in the metrics.
  absl::Status RunCallUncounted(Session& session, const v1::CallRequest& request,
                                v1::CallResponse* response, absl::Time deadline,
                                CallCancellation* cancel);

  const ServiceLimits limits_;
  ModuleStore* store_;
  SessionTable* sessions_;
  Executor* executor_;
  DeadlineTimer* timer_;
  CallHandler handler_;
  DirectChannel* direct_ = nullptr;
  SessionFence* fence_ = nullptr;
  TimingGate* gate_ = nullptr;
  DaemonMetrics no_metrics_;
  DaemonMetrics* metrics_ = &no_metrics_;
  WorkerOptions worker_options_;
  bool isolate_all_ = false;
  bool refuse_after_device_fault_ = false;
  // Checked first by every method (the health service is a separate one).
  const BearerTokenCheck auth_;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_TETHER_SERVICE_H_
