// DeviceLease::Acquire: enqueue, then snapshot / decide / transact until a
// device is taken, sleeping on a watch of the farm key between tries.
#include "farm/acquisition.h"

#include <pwd.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "farm/snapshot.h"

namespace tether::farm {
namespace {

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// Why nothing could be taken, for the message at the deadline.
std::string DescribeWait(const FarmSnapshot& snapshot, const AcquireOptions& options,
                         absl::string_view waiter_key) {
  std::vector<std::string> busy;
  int matching = 0;
  for (const auto& [id, state] : snapshot.devices) {
    if (!state.record || !Matches(*state.record, options.where)) continue;
    ++matching;
    if (state.holder) {
      busy.push_back(absl::StrCat(id, " held by ", state.holder->client()));
    } else if (state.quarantine) {
      busy.push_back(absl::StrCat(id, " quarantined (", state.quarantine->reason(), ")"));
    } else {
      busy.push_back(absl::StrCat(id, " free but promised to a waiter ahead"));
    }
  }
  int ahead = 0;
  for (const Waiter& w : snapshot.waiters) {
    if (w.key == waiter_key) break;
    ++ahead;
  }
  std::string where = options.where.empty() ? "" : " matching ";
  for (size_t i = 0; i < options.where.size(); ++i) {
    absl::StrAppend(&where, i ? "," : "", options.where[i].ToString());
  }
  if (matching == 0) {
    return absl::StrCat("no registered device of farm key ", options.key, where, " (",
                        snapshot.devices.size(), " known under the key)");
  }
  return absl::StrCat(matching, " device(s) of farm key ", options.key, where, ": ",
                      absl::StrJoin(busy, "; "), "; ", ahead, " waiter(s) ahead");
}

}  // namespace

std::string ThisClientName() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const struct passwd* pw = ::getpwuid(::geteuid());
  return absl::StrCat(pw != nullptr ? pw->pw_name : "uid" + std::to_string(::geteuid()), "@", host,
                      " pid ", ::getpid());
}

absl::StatusOr<std::unique_ptr<DeviceLease>> DeviceLease::Acquire(EtcdClient* etcd,
                                                                  AcquireOptions options) {
  if (absl::Status s = ValidateName("farm key", options.key); !s.ok()) return s;
  if (options.client.empty()) options.client = ThisClientName();
  const absl::Time deadline = options.wait == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                       : absl::Now() + options.wait;
  absl::StatusOr<int64_t> lease_id = etcd->GrantLease(options.ttl);
  if (!lease_id.ok()) return lease_id.status();
  std::unique_ptr<DeviceLease> lease(
      new DeviceLease(etcd, std::make_unique<LeaseKeeper>(etcd, *lease_id, options.ttl)));
  // From here on, failing releases the lease (and so the waiter record).

  const std::string waiter_key = WaiterKey(options.key, *lease_id);
  v1::WaiterRecord waiter;
  waiter.set_client(options.client);
  waiter.set_priority(options.priority);
  for (const Requirement& r : options.where) waiter.add_where(r.ToString());
  waiter.set_enqueued_unix_ms(NowUnixMs());
  etcdserverpb::PutRequest put;
  put.set_key(waiter_key);
  put.set_value(ToJson(waiter));
  put.set_lease(*lease_id);
  absl::StatusOr<etcdserverpb::PutResponse> queued = etcd->Put(put);
  if (!queued.ok()) return queued.status();

  // Every change under the key after our arrival wakes the loop.
  absl::Mutex mu;
  int64_t changed_at = 0;
  const std::string prefix = PoolPrefix(options.key);
  std::unique_ptr<EtcdWatch> watch = etcd->Watch(
      prefix, PrefixEnd(prefix), queued->header().revision() + 1, [&](const WatchUpdate& update) {
        absl::MutexLock lock(&mu);
        changed_at = std::max(changed_at, update.resync ? INT64_MAX : update.revision);
      });

  for (;;) {
    if (absl::Status held = lease->keeper_->status(); !held.ok()) return held;
    absl::StatusOr<FarmSnapshot> snapshot = ReadFarm(*etcd, options.key);
    if (!snapshot.ok()) return snapshot.status();
    std::optional<std::string> pick = AssignDevice(*snapshot, waiter_key);
    if (pick) {
      const std::string waiters = WaitersPrefix(options.key);
      etcdserverpb::TxnRequest txn;
      auto compare = [&](const std::string& key, etcdserverpb::Compare::CompareTarget target,
                         etcdserverpb::Compare::CompareResult result, int64_t revision) {
        etcdserverpb::Compare* c = txn.add_compare();
        c->set_key(key);
        c->set_target(target);
        c->set_result(result);
        if (target == etcdserverpb::Compare::CREATE) {
          c->set_create_revision(revision);
        } else {
          c->set_mod_revision(revision);
        }
        return c;
      };
      compare(HolderKey(options.key, *pick), etcdserverpb::Compare::CREATE,
              etcdserverpb::Compare::EQUAL, 0);
      compare(DeviceKey(options.key, *pick), etcdserverpb::Compare::CREATE,
              etcdserverpb::Compare::GREATER, 0);
      compare(QuarantineKey(options.key, *pick), etcdserverpb::Compare::CREATE,
              etcdserverpb::Compare::EQUAL, 0);
      compare(waiter_key, etcdserverpb::Compare::CREATE, etcdserverpb::Compare::GREATER, 0);
      // Nobody joined the queue since the decision (a newcomer of higher
      // priority could be owed this device).
      compare(waiters, etcdserverpb::Compare::MOD, etcdserverpb::Compare::LESS,
              snapshot->revision + 1)
          ->set_range_end(PrefixEnd(waiters));
      v1::HolderRecord holder;
      holder.set_client(options.client);
      holder.set_priority(options.priority);
      holder.set_acquired_unix_ms(NowUnixMs());
      holder.set_ttl_seconds(absl::ToInt64Seconds(absl::Ceil(options.ttl, absl::Seconds(1))));
      etcdserverpb::PutRequest* take = txn.add_success()->mutable_request_put();
      take->set_key(HolderKey(options.key, *pick));
      take->set_value(ToJson(holder));
      take->set_lease(*lease_id);
      etcdserverpb::DeleteRangeRequest* leave = txn.add_success()->mutable_request_delete_range();
      leave->set_key(waiter_key);
      absl::StatusOr<etcdserverpb::TxnResponse> taken = etcd->Txn(txn);
      if (!taken.ok()) return taken.status();
      if (taken->succeeded()) {
        lease->device_ = *snapshot->devices[*pick].record;
        lease->token_ = taken->header().revision();
        return lease;
      }
      continue;  // the farm moved under us: decide again
    }
    absl::MutexLock lock(&mu);
    const int64_t seen = snapshot->revision;
    auto changed = [&] { return changed_at > seen; };
    // A wake-up at least every TTL checks the lease too.
    const absl::Time until = std::min(deadline, absl::Now() + options.ttl);
    mu.AwaitWithDeadline(absl::Condition(&changed), until);
    if (!changed() && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no device was free within ", absl::FormatDuration(options.wait), ": ",
                       DescribeWait(*snapshot, options, waiter_key)));
    }
  }
}

DeviceLease::~DeviceLease() { (void)Release(); }

absl::Status DeviceLease::Release() {
  if (released_) return absl::OkStatus();
  released_ = true;
  const int64_t id = keeper_->id();
  return etcd_->RevokeLease(id);
}

}  // namespace tether::farm
