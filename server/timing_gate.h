// TimingGate: exclusive timing (docs/design/rpc-protocol.md, "Exclusive
// timing"). Every call a daemon runs holds the gate shared; a measurement
// (time_evaluator, profile) holds it exclusively, so it starts only once the
// calls running in other sessions have ended and holds new ones off until it
// is done: the samples are the session's own, not its neighbours'.
//
// The gate is a lock file with open-file-description locks (fcntl
// F_OFD_SETLK). A daemon and its session workers, separate processes, share
// it through the path; one process's threads contend like processes do (each
// hold has its own open file); and a process that dies, a crashed worker
// included, releases what it held.
//
// Byte 0 of the file is the turnstile, byte 1 the room. Shared: see that no
// one holds the turnstile, read-lock the room. Exclusive: write-lock
// the turnstile, which stops new shared holders, then write-lock the room,
// which waits for the present ones to leave. A stream of calls thus never
// starves a waiting measurement. Waits poll (non-blocking locks, sleeps of
// 0.1 to 5 ms) so they end on the caller's deadline or interrupt.
#ifndef TETHER_SERVER_TIMING_GATE_H_
#define TETHER_SERVER_TIMING_GATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tether::server {

// Thread contract: thread-safe. Holds must not outlive the gate.
class TimingGate {
 public:
  enum class Mode { kShared, kExclusive };

  // One hold of the gate; released when destroyed. Movable.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    ~Hold();
    // Seconds spent waiting for the gate.
    double waited_seconds() const { return waited_seconds_; }
    bool held() const { return fd_ >= 0; }

   private:
    friend class TimingGate;
    TimingGate* gate_ = nullptr;
    int fd_ = -1;
    double waited_seconds_ = 0;
  };

  // Opens (creating, mode 0600) the lock file at `path`. INTERNAL naming the
  // path and the OS error when it cannot.
  static absl::StatusOr<std::unique_ptr<TimingGate>> Open(std::string path);
  ~TimingGate();

  // Waits for the gate in `mode`. Between polls it calls `stop`, and gives
  // up with its status when that is not OK (an interrupt), or with
  // DEADLINE_EXCEEDED at `deadline`; both messages say what was waited for.
  // An exclusive wait holds the turnstile, which stops every new call of
  // every session, while the calls in the room finish: it gives up with
  // RESOURCE_EXHAUSTED once it has held the turnstile for `max_turnstile`,
  // so one call that never ends cannot freeze the daemon behind it.
  absl::StatusOr<Hold> Acquire(Mode mode, absl::Time deadline,
                               absl::FunctionRef<absl::Status()> stop,
                               absl::Duration max_turnstile = absl::InfiniteDuration());
  // Takes the gate only if it is free for `mode` now; an empty hold if not.
  absl::StatusOr<Hold> TryAcquire(Mode mode);

  const std::string& path() const { return path_; }
  // What a wait in `mode` is for, for messages: "waiting for another
  // session's measurement to end", ...
  static const char* WaitingFor(Mode mode);

 private:
  explicit TimingGate(std::string path) : path_(std::move(path)) {}
  // An open file description of the lock file, from the pool or fresh.
  absl::StatusOr<int> TakeFd();
  void ReturnFd(int fd);
  // One attempt; true when the gate is now held on `fd`. `turnstile_held`
  // carries an exclusive holder's turnstile between attempts.
  absl::StatusOr<bool> Attempt(int fd, Mode mode, bool* turnstile_held);
  void Release(int fd);

  const std::string path_;
  absl::Mutex mu_;
  std::vector<int> free_fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tether::server

#endif  // TETHER_SERVER_TIMING_GATE_H_
