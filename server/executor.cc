// Executor and SerialQueue: a plain worker pool and a strand on top of it.
#include "server/executor.h"

#include <algorithm>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace tether::server {

namespace {
// The pool whose worker the calling thread is, for BlockingScope.
thread_local Executor* current_executor = nullptr;

constexpr absl::Duration kLinger = absl::Seconds(2);

void JoinAll(std::vector<std::thread>& threads) {
  for (std::thread& t : threads) t.join();
}
}  // namespace

Executor::Executor(int num_threads) : target_(num_threads) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < num_threads; ++i) StartThreadLocked();
}

Executor::~Executor() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  JoinAll(threads);
}

void Executor::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

int Executor::num_threads_alive() const {
  absl::MutexLock lock(&mu_);
  return alive_;
}

void Executor::StartThreadLocked() {
  ++alive_;
  threads_.emplace_back([this] { WorkerLoop(); });
}

std::vector<std::thread> Executor::TakeRetiredLocked() {
  std::vector<std::thread> done;
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (std::find(retired_.begin(), retired_.end(), it->get_id()) != retired_.end()) {
      done.push_back(std::move(*it));
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  retired_.clear();
  return done;
}

Executor::BlockingScope::BlockingScope() : executor_(current_executor) {
  if (executor_ == nullptr) return;
  std::vector<std::thread> retired;
  {
    absl::MutexLock lock(&executor_->mu_);
    ++executor_->blocked_;
    if (!executor_->stopping_ && executor_->alive_ - executor_->blocked_ < executor_->target_) {
      retired = executor_->TakeRetiredLocked();
      executor_->StartThreadLocked();
    }
  }
  // Retired threads have left their loop; joining them here, off the lock,
  // frees their stacks.
  JoinAll(retired);
}

Executor::BlockingScope::~BlockingScope() {
  if (executor_ == nullptr) return;
  absl::MutexLock lock(&executor_->mu_);
  --executor_->blocked_;  // a free thread too many retires when idle (WorkerLoop)
}

void Executor::WorkerLoop() {
  current_executor = this;
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      // An extra thread (the pool has more free than `target_` since a wait
      // ended) lingers a moment for the next wait before it retires, so a
      // stream of isolated calls does not start a thread per call.
      while (!mu_.AwaitWithTimeout(absl::Condition(
                                       +[](Executor* e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                         return e->stopping_ || !e->tasks_.empty();
                                       },
                                       this),
                                   kLinger)) {
        if (alive_ - blocked_ > target_) {
          --alive_;
          retired_.push_back(std::this_thread::get_id());
          return;
        }
      }
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

size_t SerialQueue::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
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
