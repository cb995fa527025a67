// The farm's keys, its records as JSON and device requirements.
#include "farm/records.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace tether::farm {

absl::Status ValidateName(absl::string_view what, absl::string_view name) {
  const bool ok =
      !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '@' || c == '-';
      });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " \"", name, "\" should be 1 to 128 letters, digits or any of . _ : @ -"));
}

std::string PoolPrefix(absl::string_view key) { return absl::StrCat(kKeyRoot, key, "/"); }
std::string DevicesPrefix(absl::string_view key) {
  return absl::StrCat(PoolPrefix(key), "devices/");
}
std::string HoldersPrefix(absl::string_view key) {
  return absl::StrCat(PoolPrefix(key), "holders/");
}
std::string WaitersPrefix(absl::string_view key) {
  return absl::StrCat(PoolPrefix(key), "waiters/");
}
std::string QuarantinePrefix(absl::string_view key) {
  return absl::StrCat(PoolPrefix(key), "quarantine/");
}
std::string DeviceKey(absl::string_view key, absl::string_view id) {
  return absl::StrCat(DevicesPrefix(key), id);
}
std::string HolderKey(absl::string_view key, absl::string_view id) {
  return absl::StrCat(HoldersPrefix(key), id);
}
namespace {

// Ten digits: 0 for the highest priority (2^31-1), 4294967295 for the lowest.
std::string PriorityRank(int32_t priority) {
  const int64_t rank = int64_t{std::numeric_limits<int32_t>::max()} - priority;
  return absl::StrFormat("%010d", rank);
}

}  // namespace

std::string WaiterKey(absl::string_view key, int32_t priority, int64_t lease_id) {
  return absl::StrCat(WaitersPrefix(key), PriorityRank(priority), "/",
                      absl::Hex(lease_id, absl::kZeroPad16));
}
std::string WaitersAheadEnd(absl::string_view key, int32_t priority) {
  return absl::StrCat(WaitersPrefix(key), PriorityRank(priority));
}
std::string WaitersNotBehindEnd(absl::string_view key, int32_t priority) {
  // Past waiters/<RANK>/...: '0' sorts after '/'.
  return absl::StrCat(WaitersPrefix(key), PriorityRank(priority), "0");
}
std::string QuarantineKey(absl::string_view key, absl::string_view id) {
  return absl::StrCat(QuarantinePrefix(key), id);
}
std::string RunsKey(absl::string_view key, absl::string_view id) {
  return absl::StrCat(PoolPrefix(key), "runs/", id);
}

std::string ToJson(const google::protobuf::Message& record) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = false;
  (void)google::protobuf::util::MessageToJsonString(record, &json, options);
  return json;
}

absl::Status FromJson(absl::string_view json, absl::string_view key,
                      google::protobuf::Message* record) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), record, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("etcd key ", key, " does not hold a ",
                                                   record->GetTypeName(), ": ",
                                                   std::string(status.message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Requirement>> ParseWhere(const std::vector<std::string>& texts) {
  std::vector<Requirement> out;
  for (const std::string& text : texts) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--where wants attr=value (a label, id, triple, cpu, feature, device or a "
                       "device attribute), got \"",
                       text, "\""));
    }
    out.push_back({text.substr(0, eq), text.substr(eq + 1)});
  }
  return out;
}

namespace {

bool MatchesOne(const v1::DeviceRecord& device, const Requirement& r) {
  if (auto it = device.labels().find(r.attr); it != device.labels().end()) {
    return it->second == r.value;
  }
  if (r.attr == "id") return device.id() == r.value;
  if (r.attr == "address") return device.address() == r.value;
  if (r.attr == "triple") return device.target().triple() == r.value;
  if (r.attr == "cpu") return device.target().cpu() == r.value;
  if (r.attr == "version") return device.daemon_version() == r.value;
  if (r.attr == "feature") {
    return std::find(device.target().features().begin(), device.target().features().end(),
                     r.value) != device.target().features().end();
  }
  if (r.attr == "device") {
    for (const v1::FarmDevice& d : device.devices()) {
      if (d.name() == r.value || absl::StartsWith(d.name(), absl::StrCat(r.value, ":"))) {
        return true;
      }
    }
    return false;
  }
  for (const v1::FarmDevice& d : device.devices()) {
    auto it = d.attributes().find(r.attr);
    if (it != d.attributes().end() && it->second == r.value) return true;
  }
  return false;
}

}  // namespace

bool Matches(const v1::DeviceRecord& device, const std::vector<Requirement>& requirements) {
  return std::all_of(requirements.begin(), requirements.end(),
                     [&](const Requirement& r) { return MatchesOne(device, r); });
}

}  // namespace tether::farm
