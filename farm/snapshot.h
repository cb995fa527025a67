// FarmSnapshot: everything under one farm key, read in one etcd transaction
// (so at one revision): registered devices, holders, quarantines and the
// waiting queue. `tether farm list` prints it (ReadFarm), and acquisition
// decides from it which device a waiter may take, reading it again at each
// attempt through a FarmView, which reads only what changed.
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
  // The device key's mod revision; 0 when it is not registered (it died,
  // or is cut off from etcd) while a holder or a quarantine still names it.
  int64_t record_revision = 0;
  // The daemon's record (ReadFarm: whenever registered; a FarmView reads it
  // only when a waiter's requirements need it).
  std::optional<v1::DeviceRecord> record;
  // The holder's record (ReadFarm; a FarmView reads holders as keys only
  // and leaves it empty: fencing_token says whether the device is held).
  std::optional<v1::HolderRecord> holder;
  int64_t fencing_token = 0;  // the holder key's create revision; 0: not held
  int64_t holder_lease = 0;
  std::optional<v1::QuarantineRecord> quarantine;

  bool registered() const { return record_revision != 0; }
  bool held() const { return fencing_token != 0; }
  // Registered, not held and not quarantined.
  bool free() const { return registered() && !held() && !quarantine; }
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
// that meets its requirements (a device whose record was not read meets
// none). Returns the device for the waiter whose key is `waiter_key`, or
// nullopt when it must wait.
std::optional<std::string> AssignDevice(const FarmSnapshot& snapshot, absl::string_view waiter_key);

// A waiter's place in the queue of `snapshot`: the device it gets
// (AssignDevice), and, when none, how many waiters ahead of it get none
// either although any device it could use would do for them (their
// requirements are a subset of its own). Each of those must be served, or
// leave, before it can be: a device freed, a device registered or a waiter
// leaving without a device serves at most one more waiter, so it need not
// look again before `blocked_by + 1` such changes (docs/design/farm.md,
// "Acquisition").
struct QueuePlace {
  std::optional<std::string> device;
  int blocked_by = 0;
};
QueuePlace PlaceInQueue(const FarmSnapshot& snapshot, absl::string_view waiter_key);

// The free devices meeting `where` that a client of `priority` that has not
// queued may take from `snapshot` without overtaking anyone: it would queue
// behind every waiter of its priority or higher, so none of what the
// queue's rule gives those. `unpromised`: given to no waiter at all;
// `promised_behind`: given to a waiter of lower priority (who queues behind
// it, and must then decide again). In id order.
struct NewcomerDevices {
  std::vector<std::string> unpromised;
  std::vector<std::string> promised_behind;
};
NewcomerDevices DevicesForNewcomer(const FarmSnapshot& snapshot, int32_t priority,
                                   const std::vector<Requirement>& where);

// FarmView: one client's view of a farm key, for the attempts of one
// acquisition. Each Refresh is one transaction, so its snapshot is at one
// revision like ReadFarm's, but it reads little, and only what changed
// since the last: devices as keys (their records, about 400 bytes of JSON
// each, are read — once, at the same revision — only while a waiter in the
// queue has requirements: the queue's rule needs nothing else of them),
// holders as keys (the create revision is the fencing token, so
// snapshot().devices[ID].holder stays empty), waiters' records once each.
// After the first, the device and waiter ranges are filtered by mod
// revision (what changed since); etcd still counts the whole range, so a
// deregistered device is noticed and everything read again. Statuses as
// ReadFarm. Thread contract: thread-compatible.
class FarmView {
 public:
  // `where`: the requirements of the client's own acquisition (its records
  // are read when it has some, as when a queued waiter has).
  FarmView(std::string key, std::vector<Requirement> where)
      : key_(std::move(key)), where_(std::move(where)) {}

  // Brings the view to etcd's current revision.
  absl::StatusOr<const FarmSnapshot*> Refresh(EtcdClient& etcd);

 private:
  // One transaction; FAILED_PRECONDITION (internal, handled by Refresh)
  // when what is kept no longer adds up (a device or waiter was deleted
  // unseen) and must be read again in full.
  absl::Status RefreshOnce(EtcdClient& etcd);
  // Reads, at the snapshot's revision, the records of the devices written
  // since the last such read.
  absl::Status ReadRecords(EtcdClient& etcd);

  const std::string key_;
  const std::vector<Requirement> where_;
  FarmSnapshot snapshot_;
  int64_t since_ = 0;                      // the revision of the last Refresh (0: none yet)
  int64_t records_since_ = 0;              // device records are current as of this revision
  std::map<std::string, Waiter> waiters_;  // by key, as last read
};

}  // namespace tether::farm

#endif  // TETHER_FARM_SNAPSHOT_H_
