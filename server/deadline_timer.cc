// DeadlineTimer: an ordered map of pending deadlines and a thread that waits
// for the earliest.
#include "server/deadline_timer.h"

namespace tether::server {

DeadlineTimer::DeadlineTimer() : thread_([this] { Loop(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

uint64_t DeadlineTimer::Schedule(absl::Time deadline, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  uint64_t token = next_token_++;
  pending_.emplace(std::make_pair(deadline, token), std::move(fn));
  return token;
}

void DeadlineTimer::Cancel(uint64_t token) {
  absl::MutexLock lock(&mu_);
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->first.second == token) {
      pending_.erase(it);
      return;
    }
  }
  // Not pending: wait out a callback that is running right now.
  std::pair<uint64_t*, uint64_t> args(&running_token_, token);
  mu_.Await(absl::Condition(
      +[](std::pair<uint64_t*, uint64_t>* a) { return *a->first != a->second; }, &args));
}

void DeadlineTimer::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (pending_.empty()) {
      mu_.Await(absl::Condition(
          +[](DeadlineTimer* t)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return t->stopping_ || !t->pending_.empty(); },
          this));
      continue;
    }
    auto first = pending_.begin();
    absl::Time deadline = first->first.first;
    if (absl::Now() < deadline) {
      // Wakes early when something earlier is scheduled or we stop.
      size_t size = pending_.size();
      auto earliest = first->first;
      struct Args {
        DeadlineTimer* t;
        size_t size;
        std::pair<absl::Time, uint64_t> earliest;
      } args{this, size, earliest};
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  return a->t->stopping_ || a->t->pending_.size() != a->size ||
                                         a->t->pending_.begin()->first != a->earliest;
                                },
                                &args),
                            deadline);
      continue;
    }
    std::function<void()> fn = std::move(first->second);
    running_token_ = first->first.second;
    pending_.erase(first);
    mu_.Unlock();
    fn();
    mu_.Lock();
    running_token_ = 0;
  }
}

}  // namespace tether::server
