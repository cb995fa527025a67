// DeviceLease::Acquire: a direct take while the client would be served at
// once, else enqueue, then snapshot / decide / transact until a device is
// taken; when it must wait, sleeping on a watch of the farm key until
// enough has changed that it could be served.
#include "farm/acquisition.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "farm/snapshot.h"

namespace tether::farm {
namespace {

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// Attempts at taking a device without queueing (DeviceLease::Acquire).
constexpr int kDirectAttempts = 3;

// Adds a compare of `key` (a range with set_range_end on the result).
etcdserverpb::Compare* AddCompare(etcdserverpb::TxnRequest& txn, const std::string& key,
                                  etcdserverpb::Compare::CompareTarget target,
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
}

// What a waiting client hears from its watch of the farm key: the
// revisions of the changes that could serve one more waiter (a holder or
// quarantine deleted, a device record written, a waiter gone without a
// device), and the last revision at which the watch lost track (a resync).
// Other changes (a device taken, a waiter arriving, a quarantine) cannot
// make anyone's turn come sooner.
// Thread contract: thread-safe.
class Wakeups {
 public:
  explicit Wakeups(absl::string_view key)
      : devices_(DevicesPrefix(key)),
        holders_(HoldersPrefix(key)),
        quarantine_(QuarantinePrefix(key)),
        waiters_(WaitersPrefix(key)) {}

  void OnUpdate(const WatchUpdate& update) {
    absl::MutexLock lock(&mu_);
    if (update.resync) {
      resync_ = std::max(
          resync_, update.revision == 0 ? std::numeric_limits<int64_t>::max() : update.revision);
      return;
    }
    // A device taken is one transaction: its holder put and its waiter
    // deleted at one revision.
    std::set<int64_t> takings;
    for (const mvccpb::Event& e : update.events) {
      if (e.type() == mvccpb::Event::PUT && absl::StartsWith(e.kv().key(), holders_)) {
        takings.insert(e.kv().mod_revision());
      }
    }
    for (const mvccpb::Event& e : update.events) {
      const std::string& key = e.kv().key();
      const bool put = e.type() == mvccpb::Event::PUT;
      const bool helps =
          put ? absl::StartsWith(key, devices_)
              : absl::StartsWith(key, holders_) || absl::StartsWith(key, quarantine_) ||
                    (absl::StartsWith(key, waiters_) && !takings.contains(e.kv().mod_revision()));
      if (helps) helpful_.push_back(e.kv().mod_revision());
    }
  }

  // Waits until `needed` helpful changes after revision `seen` (or a
  // resync after it) were heard, or `until`. Returns whether they were.
  bool Await(int64_t seen, int needed, absl::Time until) {
    absl::MutexLock lock(&mu_);
    // What the snapshot at `seen` already reflects is spent.
    std::erase_if(helpful_, [&](int64_t revision) { return revision <= seen; });
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return resync_ > seen || helpful_.size() >= static_cast<size_t>(needed);
    };
    return mu_.AwaitWithDeadline(absl::Condition(&enough), until);
  }

 private:
  const std::string devices_, holders_, quarantine_, waiters_;
  absl::Mutex mu_;
  std::vector<int64_t> helpful_ ABSL_GUARDED_BY(mu_);
  int64_t resync_ ABSL_GUARDED_BY(mu_) = 0;
};

// Why nothing could be taken, for the message at the deadline.
std::string DescribeWait(const FarmSnapshot& snapshot, const AcquireOptions& options,
                         absl::string_view waiter_key) {
  std::vector<std::string> busy;
  int matching = 0;
  for (const auto& [id, state] : snapshot.devices) {
    if (!state.registered() ||
        (!options.where.empty() && (!state.record || !Matches(*state.record, options.where)))) {
      continue;
    }
    ++matching;
    if (state.held()) {
      busy.push_back(absl::StrCat(id, " held by ",
                                  state.holder
                                      ? state.holder->client()
                                      : absl::StrCat("fencing token ", state.fencing_token)));
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

  // The farm as this client sees it, read again (what changed) per attempt.
  FarmView view(options.key, options.where);

  // The take: if the device is still unheld, registered and not
  // quarantined (and whatever `txn` already compares), put the holder
  // under our lease (its revision is the fencing token) and read the
  // device's record as it is at the taking. False when a compare failed.
  auto take = [&](const std::string& id, etcdserverpb::TxnRequest& txn) -> absl::StatusOr<bool> {
    AddCompare(txn, HolderKey(options.key, id), etcdserverpb::Compare::CREATE,
               etcdserverpb::Compare::EQUAL, 0);
    AddCompare(txn, DeviceKey(options.key, id), etcdserverpb::Compare::CREATE,
               etcdserverpb::Compare::GREATER, 0);
    AddCompare(txn, QuarantineKey(options.key, id), etcdserverpb::Compare::CREATE,
               etcdserverpb::Compare::EQUAL, 0);
    v1::HolderRecord holder;
    holder.set_client(options.client);
    holder.set_priority(options.priority);
    holder.set_acquired_unix_ms(NowUnixMs());
    holder.set_ttl_seconds(absl::ToInt64Seconds(absl::Ceil(options.ttl, absl::Seconds(1))));
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(HolderKey(options.key, id));
    put->set_value(ToJson(holder));
    put->set_lease(*lease_id);
    txn.add_success()->mutable_request_range()->set_key(DeviceKey(options.key, id));
    absl::StatusOr<etcdserverpb::TxnResponse> taken = etcd->Txn(txn);
    if (!taken.ok()) return taken.status();
    if (!taken->succeeded()) return false;
    const auto& ops = taken->responses();
    if (ops.empty() || ops.rbegin()->response_range().kvs_size() != 1) {
      return absl::InternalError("etcd answered the acquisition with the wrong responses");
    }
    const mvccpb::KeyValue& device = ops.rbegin()->response_range().kvs(0);
    if (absl::Status s = FromJson(device.value(), device.key(), &lease->device_); !s.ok()) {
      return s;
    }
    lease->token_ = taken->header().revision();
    return true;
  };

  // First, without queueing: a client that would be served at once takes a
  // device directly, as a waiter arriving now would be given one: none that
  // the queue's rule gives a waiter of its priority or higher (it would queue
  // behind those), preferably one it gives nobody, at random among those (so
  // concurrent takers rarely pick the same). The transaction also checks
  // that no waiter of its priority or higher queued since, so nobody it
  // would queue behind is overtaken. Only when none will do, or the farm
  // moved under a few attempts, does it queue: at a farm with free devices,
  // the queue stays short and few transactions fail.
  std::mt19937_64 random(static_cast<uint64_t>(*lease_id) ^ static_cast<uint64_t>(NowUnixMs()));
  for (int attempt = 0; attempt < kDirectAttempts; ++attempt) {
    absl::StatusOr<const FarmSnapshot*> snapshot = view.Refresh(*etcd);
    if (!snapshot.ok()) return snapshot.status();
    const NewcomerDevices usable = DevicesForNewcomer(**snapshot, options.priority, options.where);
    const std::vector<std::string>& from =
        usable.unpromised.empty() ? usable.promised_behind : usable.unpromised;
    if (from.empty()) break;
    etcdserverpb::TxnRequest txn;
    AddCompare(txn, WaitersPrefix(options.key), etcdserverpb::Compare::CREATE,
               etcdserverpb::Compare::LESS, (*snapshot)->revision + 1)
        ->set_range_end(WaitersNotBehindEnd(options.key, options.priority));
    absl::StatusOr<bool> taken = take(from[random() % from.size()], txn);
    if (!taken.ok()) return taken.status();
    if (*taken) return lease;
  }

  const std::string waiter_key = WaiterKey(options.key, options.priority, *lease_id);
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

  // The watch starts only once the client has to wait (most acquisitions
  // never do), from the revision it decided at.
  Wakeups wakeups(options.key);
  std::unique_ptr<EtcdWatch> watch;
  for (;;) {
    if (absl::Status held = lease->keeper_->status(); !held.ok()) return held;
    absl::StatusOr<const FarmSnapshot*> snapshot = view.Refresh(*etcd);
    if (!snapshot.ok()) return snapshot.status();
    const QueuePlace place = PlaceInQueue(**snapshot, waiter_key);
    if (const std::optional<std::string>& pick = place.device) {
      etcdserverpb::TxnRequest txn;
      AddCompare(txn, waiter_key, etcdserverpb::Compare::CREATE, etcdserverpb::Compare::GREATER, 0);
      // Nobody of higher priority joined the queue since the decision (they
      // could be owed this device). Waiter keys sort by priority, so those
      // are one range; a newcomer of our priority or lower queues behind us
      // and changes nothing of what we are owed.
      AddCompare(txn, WaitersPrefix(options.key), etcdserverpb::Compare::MOD,
                 etcdserverpb::Compare::LESS, (*snapshot)->revision + 1)
          ->set_range_end(WaitersAheadEnd(options.key, options.priority));
      txn.add_success()->mutable_request_delete_range()->set_key(waiter_key);
      absl::StatusOr<bool> taken = take(*pick, txn);
      if (!taken.ok()) return taken.status();
      if (*taken) return lease;
      continue;  // the farm moved under us: decide again
    }
    const int64_t seen = (*snapshot)->revision;
    if (!watch) {
      const std::string prefix = PoolPrefix(options.key);
      watch = etcd->Watch(prefix, PrefixEnd(prefix), seen + 1,
                          [&wakeups](const WatchUpdate& update) { wakeups.OnUpdate(update); });
    }
    // Not before this client could be served: one change for each waiter
    // ahead that would take any device it could, and one for itself. A
    // wake-up at least every TTL checks the lease too.
    const absl::Time until = std::min(deadline, absl::Now() + options.ttl);
    if (!wakeups.Await(seen, place.blocked_by + 1, until) && absl::Now() >= deadline) {
      // The message names holders: read the whole farm once for it.
      absl::StatusOr<FarmSnapshot> full = ReadFarm(*etcd, options.key);
      return absl::DeadlineExceededError(
          absl::StrCat("no device was free within ", absl::FormatDuration(options.wait), ": ",
                       DescribeWait(full.ok() ? *full : **snapshot, options, waiter_key)));
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
