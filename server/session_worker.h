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
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/staging_buffer.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {

struct WorkerOptions {
  // The tetherd executable to run (it must understand --worker-lifeline-fd).
  std::string program;
  // Where the worker's private directory (its socket and module store) is
  // created.
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
  // connection broke learns why).
  absl::Status Ping();
  // Cancels the calls in flight (the client cancelled, the session closed,
  // the daemon stops).
  void CancelCalls();
  // A remote tensor of the session made from `bytes` (dtype x shape of
  // `header.tensor()`, compact).
  absl::StatusOr<v1::TensorHandle> UploadTensor(const v1::UploadTensorRequest::Header& header,
                                                absl::string_view bytes);
  // The header and compact bytes of the session's tensor `id`.
  absl::Status DownloadTensor(uint64_t id, v1::TensorHeader* header, StagingBuffer* bytes);
  // A direct-channel ticket of the worker: the client talks to it directly.
  absl::StatusOr<v1::OpenDirectChannelResponse> OpenDirectChannel();

 private:
  SessionWorker(pid_t pid, int lifeline, std::string dir, std::string session_id)
      : pid_(pid), lifeline_(lifeline), dir_(std::move(dir)), session_id_(std::move(session_id)) {}
  // The status of a finished worker call: the worker's own status, or — when
  // the call failed because the worker has ended — the error naming its end.
  absl::Status Finish(const grpc::Status& status, const grpc::ClientContext& context);
  // OK while the worker runs; otherwise the error naming its end. Waits up to
  // `grace` for an exit in progress to complete.
  absl::Status Alive(absl::Duration grace);
  // Calls in flight, for CancelCalls.
  void Register(grpc::ClientContext* context);
  void Unregister(grpc::ClientContext* context);

  const pid_t pid_;
  const int lifeline_;     // the write end; its closing tells the worker to exit
  const std::string dir_;  // the worker's socket and module store
  const std::string session_id_;
  uint64_t chunk_bytes_ = uint64_t{1} << 20;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tether::Stub> stub_;

  absl::Mutex mu_;
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  absl::Mutex reap_mu_;
  std::optional<std::string> ended_ ABSL_GUARDED_BY(reap_mu_);  // how it ended, once reaped
};

}  // namespace tether::server

#endif  // TETHER_SERVER_SESSION_WORKER_H_
