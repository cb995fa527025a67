// DeadlineTimer: one background thread that runs callbacks at deadlines. The
// daemon uses it to set a VM's interrupt flag when a call's deadline passes,
// so the VM stops at the next instruction boundary with DEADLINE_EXCEEDED.
#ifndef TETHER_SERVER_DEADLINE_TIMER_H_
#define TETHER_SERVER_DEADLINE_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tether::server {

// Thread contract: thread-safe. Callbacks run on the timer thread and must
// not call back into the timer.
class DeadlineTimer {
 public:
  DeadlineTimer();
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Schedules `fn` at `deadline`; returns a token for Cancel.
  uint64_t Schedule(absl::Time deadline, std::function<void()> fn);
  // Cancels a pending callback. When this returns, the callback has either
  // not run and never will, or has finished running.
  void Cancel(uint64_t token);

 private:
  void Loop();

  absl::Mutex mu_;
  std::map<std::pair<absl::Time, uint64_t>, std::function<void()>> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t running_token_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_DEADLINE_TIMER_H_
