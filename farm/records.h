// The farm's etcd key layout (docs/design/farm.md, "Keys") and its records'
// encoding: every record is a tether.farm.v1 message stored as JSON. Also
// the `--where attr=value` requirements a client puts on a device.
#ifndef TETHER_FARM_RECORDS_H_
#define TETHER_FARM_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "tether/farm/v1/farm.pb.h"

namespace tether::farm {

// Every key of the farm starts with this.
inline constexpr char kKeyRoot[] = "/tether/farm/v1/";

// A farm key (a pool of devices, `--farm-key`) or a device id: 1 to 128 of
// [A-Za-z0-9._:@-]. INVALID_ARGUMENT naming `what` otherwise.
absl::Status ValidateName(absl::string_view what, absl::string_view name);

// The keys of farm key `key` (all under kKeyRoot + key + "/").
std::string PoolPrefix(absl::string_view key);
std::string DevicesPrefix(absl::string_view key);     // .../devices/
std::string HoldersPrefix(absl::string_view key);     // .../holders/
std::string WaitersPrefix(absl::string_view key);     // .../waiters/
std::string QuarantinePrefix(absl::string_view key);  // .../quarantine/
std::string DeviceKey(absl::string_view key, absl::string_view id);
std::string HolderKey(absl::string_view key, absl::string_view id);
// A waiter's key: waiters/<RANK>/<LEASE>, RANK being 2^31-1-priority as ten
// digits, so the keys sort by priority, highest first.
std::string WaiterKey(absl::string_view key, int32_t priority, int64_t lease_id);
// The end of the range [WaitersPrefix(key), end) of the waiters whose
// priority is higher than `priority`: those a waiter of `priority` queues
// behind, whatever their arrival.
std::string WaitersAheadEnd(absl::string_view key, int32_t priority);
// The end of the range of the waiters of `priority` or higher: those a
// client of `priority` that has not queued yet would queue behind.
std::string WaitersNotBehindEnd(absl::string_view key, int32_t priority);
std::string QuarantineKey(absl::string_view key, absl::string_view id);
std::string RunsKey(absl::string_view key, absl::string_view id);  // .../runs/<id>

// A record as JSON (protobuf's mapping, field names in lowerCamelCase).
std::string ToJson(const google::protobuf::Message& record);
// Parses `json` into `record`, ignoring fields this version does not know.
// INVALID_ARGUMENT naming `key` when it is not such a record.
absl::Status FromJson(absl::string_view json, absl::string_view key,
                      google::protobuf::Message* record);

// One `--where attr=value` requirement.
struct Requirement {
  std::string attr;
  std::string value;
  std::string ToString() const { return attr + "=" + value; }
};
// Parses "attr=value" texts. INVALID_ARGUMENT naming the malformed one.
absl::StatusOr<std::vector<Requirement>> ParseWhere(const std::vector<std::string>& texts);

// Whether `device` meets every requirement. An attribute is, in order: a
// label (`--label board=rpi4` → `board=rpi4`); one of id, address, triple,
// cpu, version (the daemon's); `feature` (one of the target's features);
// `device` (a device's name, "cuda:0", or its kind, "cuda"); or an
// attribute of any of its devices (`compute_version=8.0`).
bool Matches(const tether::farm::v1::DeviceRecord& device,
             const std::vector<Requirement>& requirements);

}  // namespace tether::farm

#endif  // TETHER_FARM_RECORDS_H_
