// SessionWorker: the process of one isolated session. With isolation
// (DaemonOptions::isolate_sessions, or OpenSessionRequest.isolate) the daemon
// spawns a worker for the session — tetherd itself, run with
// --worker-lifeline-fd — and forwards the session's calls, tensor streams and
// direct-channel tickets to it over a unix socket in a directory only the
// daemon's user can enter. Whatever ends the worker (a kernel that
// segfaults, an abort, a sticky CUDA fault that poisons its context, the OOM
// killer) ends that one session with a clear error; the daemon and every other
// session keep serving. Specified in docs/design/rpc-protocol.md, "Isolated
// sessions".
#ifndef TETHER_SERVER_SESSION_WORKER_H_
#define TETHER_SERVER_SESSION_WORKER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/metrics.h"
#include "server/scratch_dir.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {

// Waits until every worker killed so far is reaped and its directory
// removed (they are reaped in the background), or until `deadline`; false
// if some remain. The daemon calls it as it shuts down.
bool AwaitKilledWorkersReaped(absl::Time deadline);

// A worker's exit status after a sticky device fault: a kernel faulted on its
// GPU, the device's context is unusable for the rest of the process, so the
// worker answers the call in flight and ends, freeing the GPU memory the
// session held (runtime/device/device_api.h, RecordStickyFault).
inline constexpr int kWorkerExitStickyFault = 86;

// The name of a worker's private directory, before mkdtemp's six characters.
inline constexpr char kWorkerDirPrefix[] = "tetherd-worker-";

struct WorkerOptions {
  // The tetherd executable to run (it must understand --worker-lifeline-fd).
  std::string program;
  // Where the worker's private directory (its socket and module store),
  // "<scratch_dir>/tetherd-worker-XXXXXX", is created.
  std::string scratch_dir;
  // The daemon's module store, which the worker imports modules from.
  std::string store_dir;
  uint64_t max_message_bytes = uint64_t{64} << 20;
  uint64_t max_inline_tensor_bytes = uint64_t{1} << 20;
  uint64_t chunk_bytes = uint64_t{1} << 20;
  bool direct_channel = true;
  absl::Duration direct_spin = absl::Microseconds(30);
  // The daemon's timing gate file; empty: the daemon's timing is concurrent.
  std::string timing_lock;
  // How long the worker may take to start serving.
  absl::Duration start_timeout = absl::Seconds(30);
  // The longest a measurement may hold exclusive timing (the daemon's limit).
  absl::Duration max_exclusive_hold = absl::Minutes(10);
  // The most VMs, tensors and handles the session may hold.
  size_t max_session_objects = 65536;
  // The most bytes of tensors it may hold (0: no limit).
  uint64_t max_session_bytes = 0;
  // Where a worker that ends unasked is counted (borrowed; null: nowhere).
  DaemonMetrics* metrics = nullptr;
};

// Thread contract: thread-safe; operations may run concurrently (a tensor
// stream beside a call), as on an in-process session.
class SessionWorker {
 public:
  // Spawns the worker for session `session_id` (its id inside the worker too)
  // and waits until it serves. UNAVAILABLE, naming the program, when it
  // cannot be started or does not answer within start_timeout.
  static absl::StatusOr<std::unique_ptr<SessionWorker>> Start(const WorkerOptions& options,
                                                              const std::string& session_id);
  // Kills the worker, reaps it and removes its directory.
  ~SessionWorker();
  SessionWorker(const SessionWorker&) = delete;
  SessionWorker& operator=(const SessionWorker&) = delete;

  pid_t pid() const { return pid_; }

  // Runs `request` in the worker, bounded by `deadline`. The worker's status
  // comes back unchanged (code, kind, message); once the worker has ended,
  // every operation fails with INTERNAL naming how it ended. A call stopped
  // by CancelCalls while `*interrupt` holds a status code fails with that
  // code (the session's interrupt flag: cancelled, deadline, shutdown).
  absl::Status Call(const v1::CallRequest& request, v1::CallResponse* response, absl::Time deadline,
                    const std::atomic<int>* interrupt = nullptr);
  // OK when the worker answers for its session; otherwise the error naming
  // how it ended (the session's keep-alive asks, so a client whose direct
  // connection broke learns why). Asynchronous: `done` runs on a gRPC
  // thread when the worker answers (10 s at most), so a worker that stopped
  // answering holds no daemon thread; the caller keeps this worker alive
  // until then.
  void Ping(std::function<void(absl::Status)> done);
  // The worker's own direct-channel offer, asynchronous like Ping (30 s).
  void OpenDirectChannel(std::function<void(absl::StatusOr<v1::OpenDirectChannelResponse>)> done);
  // Cancels the calls in flight (the client cancelled, the session closed,
  // the daemon stops).
  void CancelCalls();
  // Tensor streams relayed chunk by chunk between a client and the worker:
  // the daemon holds one message at a time, whatever the tensor's size
  // (security review H3). Each blocks on the worker; one caller at a time.
  // Destroying one unfinished cancels it; Cancel(), from any thread, ends
  // a wait on a worker that stopped answering (the client went away).
  class TensorUpload {
   public:
    ~TensorUpload();
    // Opens the stream with the tensor's header (`header.tensor()`); the
    // worker allocates it and refuses it like any daemon would.
    absl::Status Start(const v1::UploadTensorRequest::Header& header);
    // Sends the next chunk; false once the worker stopped reading (Finish
    // says why).
    bool Write(std::string chunk);
    // Ends the stream: the worker's handle for the tensor, or its error.
    absl::StatusOr<v1::TensorHandle> Finish();
    void Cancel() { context_.TryCancel(); }

   private:
    friend class SessionWorker;
    explicit TensorUpload(SessionWorker* worker) : worker_(worker) {}
    SessionWorker* worker_;
    grpc::ClientContext context_;
    v1::UploadTensorResponse response_;
    std::unique_ptr<grpc::ClientWriter<v1::UploadTensorRequest>> writer_;
    v1::UploadTensorRequest message_;
    bool finished_ = false;
  };
  class TensorDownload {
   public:
    ~TensorDownload();
    // Asks for the session's tensor `id` in `chunk_bytes` pieces (0: the
    // worker's default).
    void Start(uint64_t id, uint64_t chunk_bytes);
    // The worker's next message (the first has the header): true, or false
    // at the end of the stream (then Finish).
    bool Read(v1::DownloadTensorResponse* message);
    absl::Status Finish();
    void Cancel() { context_.TryCancel(); }

   private:
    friend class SessionWorker;
    explicit TensorDownload(SessionWorker* worker) : worker_(worker) {}
    SessionWorker* worker_;
    grpc::ClientContext context_;
    std::unique_ptr<grpc::ClientReader<v1::DownloadTensorResponse>> reader_;
    bool finished_ = false;
  };
  // New streams, not started (no I/O: made on any thread, so a reactor can
  // cancel them before their Start runs on the executor).
  std::unique_ptr<TensorUpload> NewUpload() {
    return std::unique_ptr<TensorUpload>(new TensorUpload(this));
  }
  std::unique_ptr<TensorDownload> NewDownload() {
    return std::unique_ptr<TensorDownload>(new TensorDownload(this));
  }

 private:
  SessionWorker(pid_t pid, int lifeline, ScratchDir dir, std::string session_id)
      : pid_(pid), lifeline_(lifeline), dir_(std::move(dir)), session_id_(std::move(session_id)) {}
  // OK while the worker runs; otherwise the error naming its end. Waits up to
  // `grace` for an exit in progress to complete.
  absl::Status Alive(absl::Duration grace);
  // Calls in flight, for CancelCalls.
  void Register(grpc::ClientContext* context);
  // Whether CancelCalls cancelled `context` meanwhile.
  bool Unregister(grpc::ClientContext* context);
  // The status of a finished worker call: the worker's own status, or — when
  // the call failed because the worker has ended — the error naming its end.
  // `cancelled_here`: this daemon cancelled the call (so a CANCELLED is not
  // the worker stopping).
  absl::Status Finish(const grpc::Status& status, const grpc::ClientContext& context,
                      bool cancelled_here = false);

  const pid_t pid_;
  const int lifeline_;  // the write end; its closing tells the worker to exit
  ScratchDir dir_;      // the worker's socket and module store; removed once it is reaped
  const std::string session_id_;
  uint64_t chunk_bytes_ = uint64_t{1} << 20;
  DaemonMetrics* metrics_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tether::Stub> stub_;

  absl::Mutex mu_;
  // Each with whether CancelCalls cancelled it.
  absl::flat_hash_map<grpc::ClientContext*, bool> calls_ ABSL_GUARDED_BY(mu_);
  absl::Mutex reap_mu_;
  std::optional<std::string> ended_ ABSL_GUARDED_BY(reap_mu_);  // how it ended, once reaped
};

}  // namespace tether::server

#endif  // TETHER_SERVER_SESSION_WORKER_H_
