// Executor: the worker threads that run VM work off the gRPC reactor threads,
// and SerialQueue, which runs one session's tasks one at a time, in the order
// they were posted, on those workers (a strand) — so calls of one session are
// serialized without parking a worker on a lock, and sessions run in parallel.
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

 private:
  void WorkerLoop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
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
  absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_EXECUTOR_H_
