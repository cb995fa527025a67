// LeaseKeeper: keeps one etcd lease alive from its own thread, renewing it
// every third of its TTL, and says when it was lost. Used for a daemon's
// registration and for a client's hold on a device.
#ifndef TETHER_FARM_LEASE_KEEPER_H_
#define TETHER_FARM_LEASE_KEEPER_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "farm/etcd_client.h"

namespace tether::farm {

// Thread contract: thread-safe. Borrows `etcd`, which must outlive it.
class LeaseKeeper {
 public:
  // Starts renewing lease `id` (of `ttl`). `on_lost`, when given, is called
  // once from the keeper's thread when etcd says the lease is gone.
  LeaseKeeper(EtcdClient* etcd, int64_t id, absl::Duration ttl,
              std::function<void(const absl::Status&)> on_lost = nullptr);
  // Stops renewing (the lease then expires after its TTL unless revoked).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  int64_t id() const { return id_; }
  // OK while the lease is held; NOT_FOUND once etcd said it expired or was
  // revoked. While etcd cannot be reached the lease is presumed held (etcd
  // does not expire leases while it has no leader, and renews them all by
  // their TTL when it comes back).
  absl::Status status() const;
  // The last renewal error that was not a loss (etcd unreachable), or OK.
  absl::Status last_error() const;

 private:
  void Run();

  EtcdClient* const etcd_;
  const int64_t id_;
  const absl::Duration ttl_;
  const std::function<void(const absl::Status&)> on_lost_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tether::farm

#endif  // TETHER_FARM_LEASE_KEEPER_H_
