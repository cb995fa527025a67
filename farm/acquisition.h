// DeviceLease: a client's hold on one device of the farm (docs/design/farm.md,
// "Acquisition"). Acquire takes a free device at once when no waiter it
// would queue behind is owed it; otherwise it joins the key's queue (a
// waiter record under the client's etcd lease), waits until the queue's rule
// gives it a free device, and takes it in one transaction that checks the
// device is still registered, unheld, unquarantined and that nobody of
// higher priority joined the queue since the decision. The holder key's create revision is the
// fencing token, which the daemon checks on every session and call. The lease is renewed while the
// DeviceLease lives; destroying it (or Release) revokes it, and a client that dies loses the device
// when the lease's TTL runs out.
#ifndef TETHER_FARM_ACQUISITION_H_
#define TETHER_FARM_ACQUISITION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "farm/etcd_client.h"
#include "farm/lease_keeper.h"
#include "farm/records.h"

namespace tether::farm {

struct AcquireOptions {
  std::string key;                                 // the farm key (pool of devices)
  std::vector<Requirement> where;                  // what the device must be
  int32_t priority = 0;                            // higher is served first
  absl::Duration wait = absl::InfiniteDuration();  // the longest wait in the queue
  absl::Duration ttl = absl::Seconds(10);          // the hold's etcd lease
  std::string client;  // who holds it, for `farm list`; empty: user@host pid
};

// Thread contract: thread-compatible (status() may be called from any thread).
// Borrows the EtcdClient, which must outlive it.
class DeviceLease {
 public:
  // Waits for and takes a device. DEADLINE_EXCEEDED when `wait` passes first
  // (the message says how many devices match and what keeps each from being
  // free); UNAVAILABLE when etcd cannot be reached; INVALID_ARGUMENT for a
  // bad key.
  static absl::StatusOr<std::unique_ptr<DeviceLease>> Acquire(EtcdClient* etcd,
                                                              AcquireOptions options);
  // Releases the device (revokes the lease), as Release.
  ~DeviceLease();
  DeviceLease(const DeviceLease&) = delete;
  DeviceLease& operator=(const DeviceLease&) = delete;

  const v1::DeviceRecord& device() const { return device_; }
  const std::string& device_id() const { return device_.id(); }
  int64_t fencing_token() const { return token_; }
  int64_t lease_id() const { return keeper_->id(); }
  // OK while the hold's lease is renewed; NOT_FOUND once it expired (the
  // device may then be someone else's, and the daemon refuses this token).
  absl::Status status() const { return keeper_->status(); }
  // Revokes the lease: the device is free at once. Idempotent.
  absl::Status Release();

 private:
  DeviceLease(EtcdClient* etcd, std::unique_ptr<LeaseKeeper> keeper)
      : etcd_(etcd), keeper_(std::move(keeper)) {}

  EtcdClient* const etcd_;
  std::unique_ptr<LeaseKeeper> keeper_;
  v1::DeviceRecord device_;
  int64_t token_ = 0;
  bool released_ = false;
};

// "user@host pid N", naming this process in records.
std::string ThisClientName();

}  // namespace tether::farm

#endif  // TETHER_FARM_ACQUISITION_H_
