// FarmSnapshot: everything under one farm key, read in one etcd transaction
// (so at one revision): registered devices, holders, quarantines and the
// waiting queue. `tether farm list` prints it, and acquisition decides from
// it which device a waiter may take.
#ifndef TETHER_FARM_SNAPSHOT_H_
#define TETHER_FARM_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "farm/etcd_client.h"
#include "farm/records.h"

namespace tether::farm {

struct DeviceState {
  std::string id;
  // The daemon's record; absent when it is not registered (it died, or is
  // cut off from etcd) while a holder or a quarantine still names it.
  std::optional<v1::DeviceRecord> record;
  std::optional<v1::HolderRecord> holder;
  int64_t fencing_token = 0;  // the holder key's create revision
  int64_t holder_lease = 0;
  std::optional<v1::QuarantineRecord> quarantine;

  bool registered() const { return record.has_value(); }
  // Registered, not held and not quarantined.
  bool free() const { return record && !holder && !quarantine; }
};

struct Waiter {
  std::string key;
  v1::WaiterRecord record;
  std::vector<Requirement> where;
  int64_t create_revision = 0;
  int64_t lease = 0;
};

struct FarmSnapshot {
  int64_t revision = 0;                        // the store revision it was read at
  std::map<std::string, DeviceState> devices;  // by id
  std::vector<Waiter> waiters;                 // in the order they are served
};

// Reads farm key `key`. Records that do not parse are reported in the
// status (INVALID_ARGUMENT naming the etcd key); UNAVAILABLE when etcd is
// unreachable.
absl::StatusOr<FarmSnapshot> ReadFarm(EtcdClient& etcd, absl::string_view key);

// Which device each waiter gets from `snapshot`, served in queue order
// (priority first, then arrival): each takes the first free device (by id)
// that meets its requirements. Returns the device for the waiter whose key
// is `waiter_key`, or nullopt when it must wait.
std::optional<std::string> AssignDevice(const FarmSnapshot& snapshot, absl::string_view waiter_key);

}  // namespace tether::farm

#endif  // TETHER_FARM_SNAPSHOT_H_
