// ReadFarm: one transaction of four ranges; FarmView: the same state read
// incrementally; AssignDevice and PlaceInQueue: the queue's rule.
#include "farm/snapshot.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tether::farm {
namespace {

enum Part { kDevices, kHolders, kQuarantine, kWaiters };

std::string PrefixOf(absl::string_view key, Part part) {
  switch (part) {
    case kDevices:
      return DevicesPrefix(key);
    case kHolders:
      return HoldersPrefix(key);
    case kQuarantine:
      return QuarantinePrefix(key);
    case kWaiters:
      return WaitersPrefix(key);
  }
  return "";
}

// A range over one part of the farm key, added to `txn`.
etcdserverpb::RangeRequest* AddRange(etcdserverpb::TxnRequest& txn, absl::string_view key,
                                     Part part) {
  const std::string prefix = PrefixOf(key, part);
  etcdserverpb::RangeRequest* range = txn.add_success()->mutable_request_range();
  range->set_key(prefix);
  range->set_range_end(PrefixEnd(prefix));
  return range;
}

std::string IdOf(const mvccpb::KeyValue& kv, absl::string_view key, Part part) {
  return kv.key().substr(PrefixOf(key, part).size());
}

absl::StatusOr<Waiter> ParseWaiter(const mvccpb::KeyValue& kv) {
  Waiter waiter;
  waiter.key = kv.key();
  waiter.create_revision = kv.create_revision();
  waiter.lease = kv.lease();
  if (absl::Status s = FromJson(kv.value(), kv.key(), &waiter.record); !s.ok()) return s;
  std::vector<std::string> where(waiter.record.where().begin(), waiter.record.where().end());
  absl::StatusOr<std::vector<Requirement>> parsed = ParseWhere(where);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd key ", kv.key(), ": ", parsed.status().message()));
  }
  waiter.where = std::move(*parsed);
  return waiter;
}

// The queue's order: priority (higher first), then arrival.
void SortQueue(std::vector<Waiter>& waiters) {
  std::stable_sort(waiters.begin(), waiters.end(), [](const Waiter& a, const Waiter& b) {
    if (a.record.priority() != b.record.priority()) {
      return a.record.priority() > b.record.priority();
    }
    return a.create_revision < b.create_revision;
  });
}

// Whether `subset`'s requirements are all among `of`'s: then any device a
// waiter with `of` could use would do for one with `subset`.
bool RequirementsWithin(const std::vector<Requirement>& subset,
                        const std::vector<Requirement>& of) {
  return std::all_of(subset.begin(), subset.end(), [&](const Requirement& r) {
    return std::any_of(of.begin(), of.end(), [&](const Requirement& o) {
      return o.attr == r.attr && o.value == r.value;
    });
  });
}

}  // namespace

absl::StatusOr<FarmSnapshot> ReadFarm(EtcdClient& etcd, absl::string_view key) {
  etcdserverpb::TxnRequest txn;
  for (Part part : {kDevices, kHolders, kQuarantine, kWaiters}) AddRange(txn, key, part);
  absl::StatusOr<etcdserverpb::TxnResponse> response = etcd.Txn(txn);
  if (!response.ok()) return response.status();
  if (response->responses_size() != 4) {
    return absl::InternalError("etcd answered a read of the farm with the wrong responses");
  }
  FarmSnapshot snapshot;
  snapshot.revision = response->header().revision();
  for (const mvccpb::KeyValue& kv : response->responses(kDevices).response_range().kvs()) {
    DeviceState& state = snapshot.devices[IdOf(kv, key, kDevices)];
    state.id = IdOf(kv, key, kDevices);
    state.record_revision = kv.mod_revision();
    state.record.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.record); !s.ok()) return s;
  }
  for (const mvccpb::KeyValue& kv : response->responses(kHolders).response_range().kvs()) {
    DeviceState& state = snapshot.devices[IdOf(kv, key, kHolders)];
    state.id = IdOf(kv, key, kHolders);
    state.holder.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.holder); !s.ok()) return s;
    state.fencing_token = kv.create_revision();
    state.holder_lease = kv.lease();
  }
  for (const mvccpb::KeyValue& kv : response->responses(kQuarantine).response_range().kvs()) {
    DeviceState& state = snapshot.devices[IdOf(kv, key, kQuarantine)];
    state.id = IdOf(kv, key, kQuarantine);
    state.quarantine.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.quarantine); !s.ok()) return s;
  }
  for (const mvccpb::KeyValue& kv : response->responses(kWaiters).response_range().kvs()) {
    absl::StatusOr<Waiter> waiter = ParseWaiter(kv);
    if (!waiter.ok()) return waiter.status();
    snapshot.waiters.push_back(std::move(*waiter));
  }
  SortQueue(snapshot.waiters);
  return snapshot;
}

absl::StatusOr<const FarmSnapshot*> FarmView::Refresh(EtcdClient& etcd) {
  absl::Status status = RefreshOnce(etcd);
  if (status.code() == absl::StatusCode::kFailedPrecondition) {
    // Something was deleted unseen: read everything again (this read
    // cannot come short: it keeps nothing).
    since_ = 0;
    records_since_ = 0;
    waiters_.clear();
    snapshot_ = FarmSnapshot();
    status = RefreshOnce(etcd);
  }
  if (!status.ok()) return status;
  return &snapshot_;
}

absl::Status FarmView::RefreshOnce(EtcdClient& etcd) {
  etcdserverpb::TxnRequest txn;
  // The device keys written since (with the count of all of them).
  etcdserverpb::RangeRequest* devices = AddRange(txn, key_, kDevices);
  devices->set_keys_only(true);
  if (since_ > 0) devices->set_min_mod_revision(since_ + 1);
  AddRange(txn, key_, kHolders)->set_keys_only(true);
  AddRange(txn, key_, kQuarantine);
  // The waiters there are (keys), and the records of those that came.
  AddRange(txn, key_, kWaiters)->set_keys_only(true);
  etcdserverpb::RangeRequest* new_waiters = AddRange(txn, key_, kWaiters);
  if (since_ > 0) new_waiters->set_min_mod_revision(since_ + 1);
  absl::StatusOr<etcdserverpb::TxnResponse> response = etcd.Txn(txn);
  if (!response.ok()) return response.status();
  if (response->responses_size() != 5) {
    return absl::InternalError("etcd answered a read of the farm with the wrong responses");
  }
  const int64_t revision = response->header().revision();

  for (auto& [id, state] : snapshot_.devices) {
    state.holder.reset();
    state.fencing_token = 0;
    state.holder_lease = 0;
    state.quarantine.reset();
  }
  // Devices: the keys written since (a record read before is stale if its
  // key was written again), then whether the count adds up.
  const etcdserverpb::RangeResponse& device_keys = response->responses(0).response_range();
  for (const mvccpb::KeyValue& kv : device_keys.kvs()) {
    DeviceState& state = snapshot_.devices[IdOf(kv, key_, kDevices)];
    state.id = IdOf(kv, key_, kDevices);
    if (state.record_revision != kv.mod_revision()) state.record.reset();
    state.record_revision = kv.mod_revision();
  }
  size_t registered = 0;
  for (const auto& [id, state] : snapshot_.devices) registered += state.registered() ? 1 : 0;
  if (registered != static_cast<size_t>(device_keys.count())) {
    return absl::FailedPreconditionError("a device record was deleted since the last read");
  }
  for (const mvccpb::KeyValue& kv : response->responses(1).response_range().kvs()) {
    DeviceState& state = snapshot_.devices[IdOf(kv, key_, kHolders)];
    state.id = IdOf(kv, key_, kHolders);
    state.fencing_token = kv.create_revision();
    state.holder_lease = kv.lease();
  }
  for (const mvccpb::KeyValue& kv : response->responses(2).response_range().kvs()) {
    DeviceState& state = snapshot_.devices[IdOf(kv, key_, kQuarantine)];
    state.id = IdOf(kv, key_, kQuarantine);
    state.quarantine.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.quarantine); !s.ok()) return s;
  }
  // A holder or quarantine of a device that is gone from all three: gone.
  std::erase_if(snapshot_.devices, [](const auto& entry) {
    const DeviceState& s = entry.second;
    return !s.registered() && !s.held() && !s.quarantine;
  });

  // Waiters: every key there is, from the records kept or read now.
  std::map<std::string, Waiter> arrived;
  for (const mvccpb::KeyValue& kv : response->responses(4).response_range().kvs()) {
    absl::StatusOr<Waiter> waiter = ParseWaiter(kv);
    if (!waiter.ok()) return waiter.status();
    arrived.emplace(kv.key(), std::move(*waiter));
  }
  std::map<std::string, Waiter> waiters;
  for (const mvccpb::KeyValue& kv : response->responses(3).response_range().kvs()) {
    if (auto a = arrived.find(kv.key()); a != arrived.end()) {
      waiters.emplace(kv.key(), std::move(a->second));
    } else if (auto k = waiters_.find(kv.key());
               k != waiters_.end() && k->second.create_revision == kv.create_revision()) {
      waiters.emplace(kv.key(), std::move(k->second));
    } else {
      return absl::FailedPreconditionError("a waiter record was replaced since the last read");
    }
  }
  waiters_ = std::move(waiters);
  snapshot_.waiters.clear();
  for (const auto& [key, waiter] : waiters_) snapshot_.waiters.push_back(waiter);
  SortQueue(snapshot_.waiters);
  snapshot_.revision = revision;
  since_ = revision;

  // The records, only when the queue's rule needs them.
  const bool requirements =
      !where_.empty() || std::any_of(snapshot_.waiters.begin(), snapshot_.waiters.end(),
                                     [](const Waiter& w) { return !w.where.empty(); });
  const bool missing =
      std::any_of(snapshot_.devices.begin(), snapshot_.devices.end(),
                  [](const auto& e) { return e.second.registered() && !e.second.record; });
  if (requirements && missing) return ReadRecords(etcd);
  return absl::OkStatus();
}

absl::Status FarmView::ReadRecords(EtcdClient& etcd) {
  const std::string prefix = DevicesPrefix(key_);
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixEnd(prefix));
  range.set_revision(snapshot_.revision);
  if (records_since_ > 0) range.set_min_mod_revision(records_since_ + 1);
  absl::StatusOr<etcdserverpb::RangeResponse> response = etcd.Range(range);
  if (response.status().code() == absl::StatusCode::kOutOfRange) {
    // That revision was compacted away meanwhile: read everything again.
    return absl::FailedPreconditionError(response.status().message());
  }
  if (!response.ok()) return response.status();
  for (const mvccpb::KeyValue& kv : response->kvs()) {
    auto it = snapshot_.devices.find(IdOf(kv, key_, kDevices));
    if (it == snapshot_.devices.end() || it->second.record_revision != kv.mod_revision()) {
      return absl::FailedPreconditionError("the device records moved under the read");
    }
    it->second.record.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*it->second.record); !s.ok()) return s;
  }
  records_since_ = snapshot_.revision;
  return absl::OkStatus();
}

namespace {

bool Usable(const DeviceState& state, const std::vector<Requirement>& where) {
  return state.free() && (where.empty() || (state.record && Matches(*state.record, where)));
}

// The queue's rule for the whole queue: the device each waiter gets, in
// queue order (nullopt: none). Waiters with the same requirements take
// devices in id order: each requirement set's search goes on where its last
// one stopped (what lies before is taken, not free or not a match), so the
// queue costs one pass over the devices per distinct requirement set, not
// one per waiter.
std::vector<std::optional<std::string>> AssignAll(const FarmSnapshot& snapshot) {
  std::vector<std::optional<std::string>> picks;
  picks.reserve(snapshot.waiters.size());
  std::set<std::string> taken;
  std::map<std::string, std::map<std::string, DeviceState>::const_iterator> cursors;
  for (const Waiter& waiter : snapshot.waiters) {
    std::optional<std::string> pick;
    auto cursor = cursors
                      .try_emplace(absl::StrJoin(waiter.where, "\n",
                                                 [](std::string* out, const Requirement& r) {
                                                   out->append(r.ToString());
                                                 }),
                                   snapshot.devices.begin())
                      .first;
    for (auto& it = cursor->second; it != snapshot.devices.end(); ++it) {
      if (Usable(it->second, waiter.where) && !taken.contains(it->first)) {
        pick = it->first;
        taken.insert(it->first);
        ++it;
        break;
      }
    }
    picks.push_back(std::move(pick));
  }
  return picks;
}

}  // namespace

QueuePlace PlaceInQueue(const FarmSnapshot& snapshot, absl::string_view waiter_key) {
  QueuePlace place;
  auto me = std::find_if(snapshot.waiters.begin(), snapshot.waiters.end(),
                         [&](const Waiter& w) { return w.key == waiter_key; });
  if (me == snapshot.waiters.end()) return place;
  const size_t position = me - snapshot.waiters.begin();
  const std::vector<std::optional<std::string>> picks = AssignAll(snapshot);
  place.device = picks[position];
  if (!place.device) {
    for (size_t i = 0; i < position; ++i) {
      if (!picks[i] && RequirementsWithin(snapshot.waiters[i].where, me->where)) {
        ++place.blocked_by;
      }
    }
  }
  return place;
}

std::optional<std::string> AssignDevice(const FarmSnapshot& snapshot,
                                        absl::string_view waiter_key) {
  return PlaceInQueue(snapshot, waiter_key).device;
}

NewcomerDevices DevicesForNewcomer(const FarmSnapshot& snapshot, int32_t priority,
                                   const std::vector<Requirement>& where) {
  const std::vector<std::optional<std::string>> picks = AssignAll(snapshot);
  std::set<std::string> ahead;   // what waiters a newcomer queues behind get
  std::set<std::string> behind;  // what the others get
  for (size_t i = 0; i < picks.size(); ++i) {
    if (!picks[i]) continue;
    (snapshot.waiters[i].record.priority() >= priority ? ahead : behind).insert(*picks[i]);
  }
  NewcomerDevices out;
  for (const auto& [id, state] : snapshot.devices) {
    if (!Usable(state, where) || ahead.contains(id)) continue;
    (behind.contains(id) ? out.promised_behind : out.unpromised).push_back(id);
  }
  return out;
}

}  // namespace tether::farm
