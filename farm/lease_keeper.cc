// LeaseKeeper: one renewal every TTL/3, sooner after a failed attempt.
#include "farm/lease_keeper.h"

#include <algorithm>

namespace tether::farm {

LeaseKeeper::LeaseKeeper(EtcdClient* etcd, int64_t id, absl::Duration ttl,
                         std::function<void(const absl::Status&)> on_lost)
    : etcd_(etcd), id_(id), ttl_(ttl), on_lost_(std::move(on_lost)) {
  thread_ = std::thread([this] { Run(); });
}

LeaseKeeper::~LeaseKeeper() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::Status LeaseKeeper::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

absl::Status LeaseKeeper::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void LeaseKeeper::Run() {
  const absl::Duration period = std::max(ttl_ / 3, absl::Milliseconds(200));
  absl::Duration wait = period;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), wait);
      if (stop_) return;
    }
    absl::StatusOr<int64_t> renewed = etcd_->KeepAliveOnce(id_);
    if (renewed.ok()) {
      absl::MutexLock lock(&mu_);
      last_error_ = absl::OkStatus();
      wait = period;
      continue;
    }
    if (renewed.status().code() == absl::StatusCode::kNotFound) {
      {
        absl::MutexLock lock(&mu_);
        status_ = renewed.status();
      }
      if (on_lost_) on_lost_(renewed.status());
      return;
    }
    absl::MutexLock lock(&mu_);
    last_error_ = renewed.status();
    wait = std::min(period, absl::Milliseconds(500));  // etcd unreachable: try again soon
  }
}

}  // namespace tether::farm
