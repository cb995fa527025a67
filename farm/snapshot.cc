// ReadFarm: one transaction of four ranges; AssignDevice: the queue's rule.
#include "farm/snapshot.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tether::farm {

absl::StatusOr<FarmSnapshot> ReadFarm(EtcdClient& etcd, absl::string_view key) {
  const std::string prefixes[] = {DevicesPrefix(key), HoldersPrefix(key), QuarantinePrefix(key),
                                  WaitersPrefix(key)};
  etcdserverpb::TxnRequest txn;
  for (const std::string& prefix : prefixes) {
    etcdserverpb::RangeRequest* range = txn.add_success()->mutable_request_range();
    range->set_key(prefix);
    range->set_range_end(PrefixEnd(prefix));
  }
  absl::StatusOr<etcdserverpb::TxnResponse> response = etcd.Txn(txn);
  if (!response.ok()) return response.status();
  if (response->responses_size() != 4) {
    return absl::InternalError("etcd answered a read of the farm with the wrong responses");
  }
  FarmSnapshot snapshot;
  snapshot.revision = response->header().revision();
  auto id_of = [](const mvccpb::KeyValue& kv, const std::string& prefix) {
    return kv.key().substr(prefix.size());
  };
  for (const mvccpb::KeyValue& kv : response->responses(0).response_range().kvs()) {
    DeviceState& state = snapshot.devices[id_of(kv, prefixes[0])];
    state.id = id_of(kv, prefixes[0]);
    state.record.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.record); !s.ok()) return s;
  }
  for (const mvccpb::KeyValue& kv : response->responses(1).response_range().kvs()) {
    DeviceState& state = snapshot.devices[id_of(kv, prefixes[1])];
    state.id = id_of(kv, prefixes[1]);
    state.holder.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.holder); !s.ok()) return s;
    state.fencing_token = kv.create_revision();
    state.holder_lease = kv.lease();
  }
  for (const mvccpb::KeyValue& kv : response->responses(2).response_range().kvs()) {
    DeviceState& state = snapshot.devices[id_of(kv, prefixes[2])];
    state.id = id_of(kv, prefixes[2]);
    state.quarantine.emplace();
    if (absl::Status s = FromJson(kv.value(), kv.key(), &*state.quarantine); !s.ok()) return s;
  }
  for (const mvccpb::KeyValue& kv : response->responses(3).response_range().kvs()) {
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
    snapshot.waiters.push_back(std::move(waiter));
  }
  std::stable_sort(snapshot.waiters.begin(), snapshot.waiters.end(),
                   [](const Waiter& a, const Waiter& b) {
                     if (a.record.priority() != b.record.priority()) {
                       return a.record.priority() > b.record.priority();
                     }
                     return a.create_revision < b.create_revision;
                   });
  return snapshot;
}

std::optional<std::string> AssignDevice(const FarmSnapshot& snapshot,
                                        absl::string_view waiter_key) {
  std::set<std::string> taken;
  for (const Waiter& waiter : snapshot.waiters) {
    std::optional<std::string> pick;
    for (const auto& [id, state] : snapshot.devices) {
      if (state.free() && !taken.contains(id) && Matches(*state.record, waiter.where)) {
        pick = id;
        break;
      }
    }
    if (waiter.key == waiter_key) return pick;
    if (pick) taken.insert(*pick);
  }
  return std::nullopt;
}

}  // namespace tether::farm
