// ReadDeviceState: small files of /proc and /sys, the GPUs' attributes from
// the device API, and their temperatures, clocks and power from NVML.
#include "server/device_state.h"

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/core/file.h"
#include "runtime/device/device_api.h"
#include "runtime/device/host_target.h"
#include "server/nvml.h"

namespace tether::server {
namespace {

// Readings past these counts are dropped (a machine with hundreds of
// sensors or policies still answers in one small message).
constexpr int kMaxPolicies = 256;
constexpr int kMaxTemperatures = 64;

// A small file's first line, trimmed; "" when unreadable.
std::string ReadLine(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 16);
  if (!text.ok()) return "";
  std::string line(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
  return line;
}

uint64_t ReadUint(const std::string& path) {
  uint64_t v = 0;
  return absl::SimpleAtoi(ReadLine(path), &v) ? v : 0;
}

// The entries of `dir` whose names start with `prefix`, sorted naturally
// ("policy2" before "policy10").
std::vector<std::string> Entries(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return names;
}

// The number of CPUs in a sysfs range list, "0-3,5" -> 5.
uint32_t CountCpus(const std::string& list) {
  uint32_t n = 0;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(part, '-');
    uint32_t lo = 0, hi = 0;
    if (!absl::SimpleAtoi(range.first, &lo)) continue;
    hi = lo;
    if (!range.second.empty() && !absl::SimpleAtoi(range.second, &hi)) continue;
    if (hi >= lo) n += hi - lo + 1;
  }
  return n;
}

void ReadCpuFrequency(const std::string& root, v1::DeviceState* out) {
  const std::string base = root + "/sys/devices/system/cpu/cpufreq";
  for (const std::string& policy : Entries(base, "policy")) {
    if (out->cpu_frequency_size() >= kMaxPolicies) break;
    const std::string dir = absl::StrCat(base, "/", policy, "/");
    v1::CpuFrequencyPolicy* p = out->add_cpu_frequency();
    std::string cpus = ReadLine(dir + "related_cpus");
    if (cpus.empty()) cpus = ReadLine(dir + "affected_cpus");
    p->set_cpus(CompressCpuList(cpus));
    p->set_governor(ReadLine(dir + "scaling_governor"));
    p->set_driver(ReadLine(dir + "scaling_driver"));
    p->set_current_khz(ReadUint(dir + "scaling_cur_freq"));
    p->set_min_khz(ReadUint(dir + "scaling_min_freq"));
    p->set_max_khz(ReadUint(dir + "scaling_max_freq"));
  }
  // Turbo: intel_pstate says "no_turbo", the others "boost".
  const std::string no_turbo = ReadLine(root + "/sys/devices/system/cpu/intel_pstate/no_turbo");
  const std::string boost = ReadLine(base + "/boost");
  if (!no_turbo.empty()) {
    out->set_cpu_boost(no_turbo == "0" ? "on" : "off");
  } else if (!boost.empty()) {
    out->set_cpu_boost(boost == "1" ? "on" : "off");
  }
}

void AddTemperature(const std::string& sensor, const std::string& millidegrees,
                    v1::DeviceState* out) {
  int64_t m = 0;
  if (out->temperatures_size() >= kMaxTemperatures || !absl::SimpleAtoi(millidegrees, &m)) return;
  v1::TemperatureReading* t = out->add_temperatures();
  t->set_sensor(sensor);
  t->set_celsius(static_cast<double>(m) / 1000.0);
}

void ReadTemperatures(const std::string& root, v1::DeviceState* out) {
  const std::string thermal = root + "/sys/class/thermal";
  for (const std::string& zone : Entries(thermal, "thermal_zone")) {
    const std::string dir = absl::StrCat(thermal, "/", zone, "/");
    std::string type = ReadLine(dir + "type");
    AddTemperature(type.empty() ? zone : type, ReadLine(dir + "temp"), out);
  }
  const std::string hwmon = root + "/sys/class/hwmon";
  for (const std::string& mon : Entries(hwmon, "hwmon")) {
    const std::string dir = absl::StrCat(hwmon, "/", mon, "/");
    std::string name = ReadLine(dir + "name");
    if (name.empty()) name = mon;
    for (const std::string& input : Entries(dir, "temp")) {
      if (!absl::EndsWith(input, "_input")) continue;
      const std::string stem = input.substr(0, input.size() - 6);
      std::string label = ReadLine(absl::StrCat(dir, stem, "_label"));
      AddTemperature(absl::StrCat(name, "/", label.empty() ? stem : label), ReadLine(dir + input),
                     out);
    }
  }
}

std::string AttrText(DeviceAPI* api, int id, DeviceAttr attr) {
  absl::StatusOr<Value> v = api->GetAttr(id, attr);
  if (!v.ok() || v->is_none()) return "";
  if (v->is_string()) return v->string_value();
  if (v->is_int()) return absl::StrCat(v->int_value());
  return v->ToString();
}

int64_t AttrInt(DeviceAPI* api, int id, DeviceAttr attr) {
  absl::StatusOr<Value> v = api->GetAttr(id, attr);
  return v.ok() && v->is_int() ? v->int_value() : 0;
}

void ReadGpus(v1::DeviceState* out) {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLCUDA);
  if (!api.ok()) return;
  for (int id = 0; id < 64 && DeviceExists(Device::Cuda(id)); ++id) {
    v1::GpuState* g = out->add_gpus();
    g->set_device(Device::Cuda(id).ToString());
    g->set_name(AttrText(*api, id, DeviceAttr::kDeviceName));
    g->set_compute_version(AttrText(*api, id, DeviceAttr::kComputeVersion));
    g->set_driver_version(AttrText(*api, id, DeviceAttr::kDriverVersion));
    g->set_max_clock_khz(AttrInt(*api, id, DeviceAttr::kMaxClockRate));
    g->set_memory_clock_khz(AttrInt(*api, id, DeviceAttr::kMemoryClockRate));
    g->set_total_memory_bytes(static_cast<uint64_t>(
        std::max<int64_t>(0, AttrInt(*api, id, DeviceAttr::kTotalGlobalMemory))));
    g->set_pci_bus_id(AttrText(*api, id, DeviceAttr::kPciBusId));
    if (const Nvml* nvml = Nvml::System(); nvml != nullptr) nvml->Read(g->pci_bus_id(), g);
  }
}

}  // namespace

std::string CompressCpuList(const std::string& cpus) {
  std::vector<int> ids;
  for (absl::string_view s : absl::StrSplit(cpus, absl::ByAnyChar(" ,"), absl::SkipWhitespace())) {
    int id = 0;
    if (absl::SimpleAtoi(s, &id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", ids[i]);
    if (j > i) absl::StrAppend(&out, "-", ids[j]);
    i = j + 1;
  }
  return out;
}

void ReadDeviceState(v1::DeviceState* out, const std::string& root) {
  out->set_read_unix_ms(absl::ToUnixMillis(absl::Now()));
  out->set_hostname(ReadLine(root + "/proc/sys/kernel/hostname"));
  out->set_kernel(ReadLine(root + "/proc/sys/kernel/osrelease"));
  out->set_cpu_model(ThisHostTarget().description);
  out->set_online_cpus(CountCpus(ReadLine(root + "/sys/devices/system/cpu/online")));
  double load = 0;
  const std::string loadavg = ReadLine(root + "/proc/loadavg");
  if (absl::SimpleAtod(loadavg.substr(0, loadavg.find(' ')), &load)) out->set_load_average_1m(load);
  ReadCpuFrequency(root, out);
  ReadTemperatures(root, out);
  ReadGpus(out);
}

}  // namespace tether::server
