// SessionWorker: spawning the worker (posix_spawn of tetherd with a lifeline),
// forwarding over its private unix socket, and telling a worker that ended from one
// that answered with an error.
#include "server/session_worker.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"

extern char** environ;

namespace tether::server {
namespace {

// The fd a worker finds its lifeline on.
constexpr int kWorkerLifelineFd = 3;

std::string Errno(int error) { return strerror(error); }

// "exited with status 3", "killed by signal 11 (Segmentation fault)".
std::string DescribeExit(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitStickyFault) {
    return "ended after a kernel faulted on its GPU: the device's context was unusable, so the "
           "worker exited and the GPU memory the session held is freed";
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return absl::StrCat("killed by signal ", sig, " (", name != nullptr ? name : "unknown", ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

// Reaps killed workers off the threads that let them go: a process killed
// in uninterruptible sleep (a GPU driver fault) may take long to end, and
// waiting for it must not stall a session's release or the lease reaper
// (security review L5). One thread, started on first use, never destroyed.
class Reaper {
 public:
  static Reaper& Get() {
    static Reaper* const reaper = new Reaper();
    return *reaper;
  }
  void Add(pid_t pid, ScratchDir dir) {
    absl::MutexLock lock(&mu_);
    pending_.push_back({pid, std::move(dir)});
  }
  bool AwaitIdle(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(
        absl::Condition(
            +[](Reaper* r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return r->pending_.empty(); }, this),
        deadline);
  }

 private:
  struct Pending {
    pid_t pid;
    ScratchDir dir;  // removed once the process is reaped
  };
  Reaper() {
    std::thread([this] { Loop(); }).detach();
  }
  void Loop() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      mu_.Await(absl::Condition(
          +[](Reaper* r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return !r->pending_.empty(); }, this));
      std::erase_if(pending_, [](const Pending& p) {
        pid_t r = ::waitpid(p.pid, nullptr, WNOHANG);
        return r == p.pid || (r < 0 && errno == ECHILD);
      });
      if (!pending_.empty()) {  // still dying: look again shortly
        mu_.Unlock();
        absl::SleepFor(absl::Milliseconds(5));
        mu_.Lock();
      }
    }
  }
  absl::Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
};

void ReapInBackground(pid_t pid, ScratchDir dir) { Reaper::Get().Add(pid, std::move(dir)); }

}  // namespace

bool AwaitKilledWorkersReaped(absl::Time deadline) { return Reaper::Get().AwaitIdle(deadline); }

namespace {

// Moves `fd` to a number >= 10 (close-on-exec), so it is never the dup2's
// own target in the child. Closes the original.
int MoveHigh(int fd) {
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return high;
}

// The spawned process and the parent's end of its lifeline; whatever is
// still set when it is destroyed is closed or killed.
struct Spawned {
  pid_t pid = -1;
  int lifeline = -1;
  ~Spawned() {
    if (lifeline >= 0) ::close(lifeline);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ReapInBackground(pid, ScratchDir());
    }
  }
};

absl::Status SpawnWorker(const WorkerOptions& options, const std::string& session_id,
                         const std::string& dir, const std::string& address, Spawned* out) {
  int life[2];
  if (::pipe2(life, O_CLOEXEC) != 0) {
    return UnavailableError("cannot create a session worker lifeline: ", Errno(errno));
  }
  out->lifeline = life[1];
  int child_lifeline = MoveHigh(life[0]);
  if (child_lifeline < 0) {
    return UnavailableError("cannot pass a lifeline to a session worker: ", Errno(errno));
  }

  std::vector<std::string> args = {options.program,
                                   "--worker-lifeline-fd",
                                   std::to_string(kWorkerLifelineFd),
                                   "--listen",
                                   address,
                                   "--store-dir",
                                   dir + "/store",
                                   "--worker-import-dir",
                                   options.store_dir,
                                   "--max-inline-bytes",
                                   std::to_string(options.max_inline_tensor_bytes),
                                   "--chunk-bytes",
                                   std::to_string(options.chunk_bytes),
                                   "--direct-spin-us",
                                   std::to_string(absl::ToInt64Microseconds(options.direct_spin)),
                                   "--max-exclusive-seconds",
                                   absl::StrCat(absl::ToDoubleSeconds(options.max_exclusive_hold)),
                                   "--max-session-objects",
                                   std::to_string(options.max_session_objects)};
  if (options.max_session_bytes != 0) {
    args.push_back("--max-session-bytes");
    args.push_back(std::to_string(options.max_session_bytes));
  }
  if (!options.direct_channel) args.push_back("--no-direct-channel");
  if (options.timing_lock.empty()) {
    args.push_back("--concurrent-timing");
  } else {
    args.push_back("--timing-lock");
    args.push_back(options.timing_lock);
  }
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // The session id travels in the environment (readable only by the same
  // user), never on the command line where any local user could read it.
  std::vector<std::string> env_storage = {absl::StrCat("TETHER_WORKER_SESSION=", session_id)};
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "TETHER_WORKER_SESSION=", 22) != 0) env_storage.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_lifeline, kWorkerLifelineFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (a terminal's ^C reaches the daemon, which ends its
  // workers), default signal dispositions and an empty mask.
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int error = posix_spawn(&pid, options.program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_lifeline);
  if (error != 0) {
    return UnavailableError("cannot start session worker ", options.program, ": ", Errno(error));
  }
  out->pid = pid;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionWorker>> SessionWorker::Start(const WorkerOptions& options,
                                                                    const std::string& session_id) {
  // A directory only this user can enter (mkdtemp: mode 0700) holds the
  // worker's socket and its module store.
  absl::StatusOr<ScratchDir> dir = ScratchDir::Create(options.scratch_dir, kWorkerDirPrefix);
  if (!dir.ok()) return dir.status();
  const std::string address = absl::StrCat("unix:", dir->path(), "/socket");
  if (address.size() - 5 >= sizeof(sockaddr_un::sun_path)) {
    return UnavailableError("session worker socket path ", address.substr(5), " is too long (",
                            sizeof(sockaddr_un::sun_path) - 1,
                            " characters at most); set TMPDIR to a shorter directory");
  }
  Spawned spawned;
  if (absl::Status status = SpawnWorker(options, session_id, dir->path(), address, &spawned);
      !status.ok()) {
    return status;
  }
  std::unique_ptr<SessionWorker> worker(
      new SessionWorker(spawned.pid, spawned.lifeline, std::move(*dir), session_id));
  spawned.pid = -1;  // owned by the worker now (its destructor kills and reaps)
  spawned.lifeline = -1;
  worker->chunk_bytes_ = std::max<uint64_t>(options.chunk_bytes, 1);
  worker->metrics_ = options.metrics;
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  channel_args.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  // Retry quickly while the worker starts up and binds its socket.
  channel_args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10);
  channel_args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10);
  channel_args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  worker->channel_ =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), channel_args);
  worker->stub_ = v1::Tether::NewStub(worker->channel_);

  // Serving once it answers for its session; checked in short rounds so a
  // worker that dies at startup is reported at once.
  const absl::Time give_up = absl::Now() + options.start_timeout;
  v1::KeepAliveRequest request;
  request.set_session_id(session_id);
  for (;;) {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(
        absl::ToChronoTime(std::min(give_up, absl::Now() + absl::Milliseconds(200))));
    v1::KeepAliveResponse response;
    grpc::Status status = worker->stub_->KeepAlive(&context, request, &response);
    if (status.ok()) return worker;
    absl::Status alive = worker->Alive(absl::ZeroDuration());
    if (!alive.ok() || absl::Now() >= give_up ||
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return UnavailableError("session worker ", options.program, " did not start: ",
                              alive.ok() ? status.error_message() : alive.message());
    }
  }
}

SessionWorker::~SessionWorker() {
  ::close(lifeline_);
  stub_.reset();
  channel_.reset();
  {
    absl::MutexLock lock(&reap_mu_);
    if (!ended_) {
      ::kill(pid_, SIGKILL);
      ReapInBackground(pid_, std::move(dir_));  // dir_ goes once it is reaped
    }
  }
}

absl::Status SessionWorker::Alive(absl::Duration grace) {
  absl::MutexLock lock(&reap_mu_);
  const absl::Time deadline = absl::Now() + grace;
  while (!ended_) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      ended_ = DescribeExit(status);
      if (metrics_ != nullptr) {
        metrics_->WorkerLost(WIFSIGNALED(status) ? "signal"
                             : WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitStickyFault
                                 ? "gpu-fault"
                                 : "exit");
      }
    } else if (r < 0 && errno != EINTR) {
      ended_ = absl::StrCat("vanished (", Errno(errno), ")");
      if (metrics_ != nullptr) metrics_->WorkerLost("vanished");
    } else if (absl::Now() >= deadline) {
      return absl::OkStatus();
    } else {
      absl::SleepFor(absl::Milliseconds(2));
    }
  }
  return RuntimeError("session ", absl::string_view(session_id_).substr(0, 8),
                      " lost its worker process (pid ", pid_, " ", *ended_,
                      "); what the session held is gone: close it and open a new one");
}

absl::Status SessionWorker::Finish(const grpc::Status& status, const grpc::ClientContext& context,
                                   bool cancelled_here) {
  if (status.ok()) return absl::OkStatus();
  // The worker answers with its error kind in the trailers; a transport
  // failure has none. An UNAVAILABLE without a kind is the socket closing:
  // give the exit a moment to become visible. So is a CANCELLED this daemon
  // did not ask for: the worker is stopping (after a sticky GPU fault it
  // drains and exits, cancelling what arrives meanwhile).
  const bool answered = context.GetServerTrailingMetadata().count(rpc::kErrorKindTrailer) > 0;
  const bool transport = !answered && status.error_code() == grpc::StatusCode::UNAVAILABLE;
  const bool stopping = status.error_code() == grpc::StatusCode::CANCELLED && !cancelled_here;
  TETHER_RETURN_IF_ERROR(Alive(transport || stopping ? absl::Seconds(2) : absl::ZeroDuration()));
  return rpc::FromGrpcCall(status, context);
}

void SessionWorker::Ping(std::function<void(absl::Status)> done) {
  struct Pending {
    grpc::ClientContext context;
    v1::KeepAliveRequest request;
    v1::KeepAliveResponse response;
  };
  auto call = std::make_shared<Pending>();
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  call->request.set_session_id(session_id_);
  stub_->async()->KeepAlive(&call->context, &call->request, &call->response,
                            [this, call, done = std::move(done)](grpc::Status status) {
                              done(Finish(status, call->context));
                            });
}

void SessionWorker::Register(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  calls_[context] = false;
}

bool SessionWorker::Unregister(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(context);
  const bool cancelled = it != calls_.end() && it->second;
  if (it != calls_.end()) calls_.erase(it);
  return cancelled;
}

void SessionWorker::CancelCalls() {
  absl::MutexLock lock(&mu_);
  for (auto& [context, cancelled] : calls_) {
    context->TryCancel();
    cancelled = true;
  }
}

absl::Status SessionWorker::Call(const v1::CallRequest& request, v1::CallResponse* response,
                                 absl::Time deadline, const std::atomic<int>* interrupt) {
  grpc::ClientContext context;
  if (deadline != absl::InfiniteFuture()) context.set_deadline(absl::ToChronoTime(deadline));
  Register(&context);
  // An interrupt that came before the registration still stops the call.
  if (interrupt != nullptr && interrupt->load() != 0) context.TryCancel();
  grpc::Status status = stub_->Call(&context, request, response);
  bool cancelled_here = Unregister(&context);
  if (status.error_code() == grpc::StatusCode::CANCELLED && interrupt != nullptr) {
    if (int code = interrupt->load(); code != 0) {
      TETHER_RETURN_IF_ERROR(Alive(absl::ZeroDuration()));
      return absl::Status(
          static_cast<absl::StatusCode>(code),
          absl::StrCat("the call was interrupted (",
                       absl::StatusCodeToString(static_cast<absl::StatusCode>(code)), ")"));
    }
  }
  // An interrupt before the registration cancelled it here too.
  if (interrupt != nullptr && interrupt->load() != 0) cancelled_here = true;
  return Finish(status, context, cancelled_here);
}

absl::Status SessionWorker::TensorUpload::Start(const v1::UploadTensorRequest::Header& header) {
  writer_ = worker_->stub_->UploadTensor(&context_, &response_);
  *message_.mutable_header() = header;
  message_.mutable_header()->set_session_id(worker_->session_id_);
  const bool sent = writer_->Write(message_);
  message_.Clear();
  if (!sent) return Finish().status();
  return absl::OkStatus();
}

bool SessionWorker::TensorUpload::Write(std::string chunk) {
  *message_.mutable_data() = std::move(chunk);
  return writer_ && !finished_ && writer_->Write(message_);
}

absl::StatusOr<v1::TensorHandle> SessionWorker::TensorUpload::Finish() {
  if (finished_ || !writer_) {
    return absl::InternalError("tensor upload to the session worker not running");
  }
  finished_ = true;
  writer_->WritesDone();
  TETHER_RETURN_IF_ERROR(worker_->Finish(writer_->Finish(), context_));
  return response_.tensor();
}

SessionWorker::TensorUpload::~TensorUpload() {
  if (finished_ || !writer_) return;
  context_.TryCancel();
  (void)writer_->Finish();
}

void SessionWorker::TensorDownload::Start(uint64_t id, uint64_t chunk_bytes) {
  v1::DownloadTensorRequest request;
  request.set_session_id(worker_->session_id_);
  request.set_tensor_id(id);
  request.set_chunk_bytes(chunk_bytes);
  reader_ = worker_->stub_->DownloadTensor(&context_, request);
}

bool SessionWorker::TensorDownload::Read(v1::DownloadTensorResponse* message) {
  return reader_ && !finished_ && reader_->Read(message);
}

absl::Status SessionWorker::TensorDownload::Finish() {
  if (finished_ || !reader_) {
    return absl::InternalError("tensor download from the session worker not running");
  }
  finished_ = true;
  return worker_->Finish(reader_->Finish(), context_);
}

SessionWorker::TensorDownload::~TensorDownload() {
  if (finished_ || !reader_) return;
  context_.TryCancel();
  (void)reader_->Finish();
}

void SessionWorker::OpenDirectChannel(
    std::function<void(absl::StatusOr<v1::OpenDirectChannelResponse>)> done) {
  struct Pending {
    grpc::ClientContext context;
    v1::OpenDirectChannelRequest request;
    v1::OpenDirectChannelResponse response;
  };
  auto call = std::make_shared<Pending>();
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  call->request.set_session_id(session_id_);
  stub_->async()->OpenDirectChannel(&call->context, &call->request, &call->response,
                                    [this, call, done = std::move(done)](grpc::Status status) {
                                      absl::Status finished = Finish(status, call->context);
                                      if (!finished.ok()) return done(finished);
                                      done(std::move(call->response));
                                    });
}

}  // namespace tether::server
