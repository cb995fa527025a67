// Executor: the worker threads that run VM work off the gRPC reactor threads,
// and SerialQueue, which runs one session's tasks one at a time, in the order
// they were posted, on those workers (a strand) — so calls of one session are
// serialized without parking a worker on a lock, and sessions run in parallel.
//
// A task that waits without using the CPU — an isolated session's call,
// which waits for its worker process; a wait for the timing gate — says so
// with a BlockingScope, and the pool starts another thread for the time of
// the wait, so N such waits never stall the other sessions (the pool keeps
// `num_threads` threads free to run). Each session runs one task at a time,
// so the extra threads are bounded by the sessions (and uploads) waiting.
#ifndef TETHER_SERVER_EXECUTOR_H_
#define TETHER_SERVER_EXECUTOR_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tether::server {

// Thread contract: thread-safe.
class Executor {
 public:
  explicit Executor(int num_threads);
  ~Executor();  // runs the queued tasks, then joins
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Post(std::function<void()> task);

  // Marks, for its lifetime, the calling thread as waiting without using
  // the CPU. On one of this pool's threads it lends the thread out: the pool
  // starts (or wakes) another one so that `num_threads` stay free to run
  // tasks, and retires the extra thread once the wait is over. Elsewhere (a
  // direct-channel thread, a gRPC thread) it does nothing.
  class BlockingScope {
   public:
    BlockingScope();
    ~BlockingScope();
    BlockingScope(const BlockingScope&) = delete;
    BlockingScope& operator=(const BlockingScope&) = delete;

   private:
    Executor* executor_;  // the pool of the calling thread, or null
  };

  // Threads now alive (free, busy and lent out); for tests and stats.
  int num_threads_alive() const;

 private:
  void StartThreadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the threads that retired out of threads_, to be joined off the lock.
  std::vector<std::thread> TakeRetiredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();

  const int target_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int alive_ ABSL_GUARDED_BY(mu_) = 0;    // threads started and not retired
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;  // of those, lent out to a wait
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> retired_ ABSL_GUARDED_BY(mu_);  // returned, not joined
};

// Thread contract: thread-safe. A queue lives in an owner (a session); every
// task comes with a reference to that owner, which the queue holds until the
// task's turn has fully ended, so the last reference may go anywhere — inside
// the task or on another thread as the task finishes a reply.
class SerialQueue {
 public:
  explicit SerialQueue(Executor* executor) : executor_(executor) {}
  // Runs `task` after every task posted before it has finished.
  void Post(std::function<void()> task, std::shared_ptr<const void> owner);
  // Runs `task` in order with the posted tasks and returns when it has run.
  // When the queue is idle it runs on the calling thread (no thread hop: the
  // direct channel's latency path); otherwise it runs in its turn on the
  // executor while the caller waits. Tasks posted meanwhile run after it.
  void RunHere(const std::function<void()>& task, std::shared_ptr<const void> owner);
  // Tasks posted and not yet started (RunHere callers waiting included).
  size_t queued() const;

 private:
  void Drain();
  // After a task ran: hands the queue to the executor if tasks are waiting,
  // else marks it idle.
  void EndTurn();

  struct Task {
    std::function<void()> run;
    std::shared_ptr<const void> owner;
  };

  Executor* executor_;
  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_EXECUTOR_H_
