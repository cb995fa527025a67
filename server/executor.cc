// Executor and SerialQueue: a plain worker pool and a strand on top of it.
#include "server/executor.h"

#include <utility>

#include "absl/synchronization/notification.h"

namespace tether::server {

Executor::Executor(int num_threads) {
  for (int i = 0; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

Executor::~Executor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

void Executor::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void Executor::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Executor* e)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->stopping_ || !e->tasks_.empty(); },
          this));
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void SerialQueue::Post(std::function<void()> task, std::shared_ptr<const void> owner) {
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(Task{std::move(task), std::move(owner)});
    if (!running_) running_ = start = true;
  }
  if (start) executor_->Post([this] { Drain(); });
}

void SerialQueue::EndTurn() {
  absl::MutexLock lock(&mu_);
  if (tasks_.empty()) {
    running_ = false;
  } else {
    executor_->Post([this] { Drain(); });
  }
}

void SerialQueue::RunHere(const std::function<void()>& task, std::shared_ptr<const void> owner) {
  bool idle = false;
  {
    absl::MutexLock lock(&mu_);
    if (!running_) running_ = idle = true;
  }
  if (!idle) {
    absl::Notification done;
    Post(
        [&task, &done] {
          task();
          done.Notify();
        },
        std::move(owner));
    done.WaitForNotification();
    return;
  }
  task();
  EndTurn();
}

void SerialQueue::Drain() {
  // Runs one task per worker turn, so a busy session cannot starve others.
  // `task.owner` keeps this queue alive through EndTurn.
  Task task;
  {
    absl::MutexLock lock(&mu_);
    task = std::move(tasks_.front());
    tasks_.pop_front();
  }
  task.run();
  EndTurn();
}

}  // namespace tether::server
