// ChromeTraceJson: devices become threads of one process; calls become
// complete events with their metrics as args.
#include "client/results/chrome_trace.h"

#include <algorithm>
#include <map>
#include <variant>

#include "client/results/json_writer.h"

namespace tether::results {
namespace {

const std::string* StringMetric(const profiling::MetricMap& row, absl::string_view key) {
  auto it = row.find(std::string(key));
  return it == row.end() ? nullptr : std::get_if<std::string>(&it->second);
}

const double* DurationMetric(const profiling::MetricMap& row, absl::string_view key) {
  auto it = row.find(std::string(key));
  if (it == row.end()) return nullptr;
  const auto* d = std::get_if<profiling::Duration>(&it->second);
  return d == nullptr ? nullptr : &d->microseconds;
}

// A metric as a JSON value of an event's args.
void WriteMetric(JsonWriter& w, const profiling::Metric& m) {
  if (const auto* d = std::get_if<profiling::Duration>(&m)) {
    w.Double(d->microseconds);
  } else if (const auto* c = std::get_if<profiling::Count>(&m)) {
    w.Int(c->value);
  } else if (const auto* p = std::get_if<profiling::Percent>(&m)) {
    w.Double(p->percent);
  } else if (const auto* r = std::get_if<profiling::Ratio>(&m)) {
    w.Double(r->ratio);
  } else {
    w.String(std::get<std::string>(m));
  }
}

constexpr int kPid = 1;

}  // namespace

std::string ChromeTraceJson(const profiling::Report& report, absl::string_view process_name,
                            absl::string_view provenance_json) {
  // One track (tid) per device, in order of first appearance.
  std::map<std::string, int> tids;
  std::vector<std::string> devices;
  auto tid_of = [&](const std::string& device) {
    auto [it, inserted] = tids.emplace(device, static_cast<int>(tids.size()) + 1);
    if (inserted) devices.push_back(device);
    return it->second;
  };
  for (const profiling::MetricMap& row : report.calls) {
    const std::string* device = StringMetric(row, profiling::kDeviceColumn);
    tid_of(device == nullptr ? "device" : *device);
  }
  for (const auto& [device, row] : report.device_metrics) tid_of(device);

  JsonWriter w;
  w.BeginObject();
  w.Key("displayTimeUnit").String("ns");
  w.Key("traceEvents").BeginArray();
  w.BeginObject().Key("name").String("process_name").Key("ph").String("M");
  w.Key("pid").Int(kPid).Key("args").BeginObject().Key("name").String(process_name);
  w.EndObject().EndObject();
  for (const std::string& device : devices) {
    w.BeginObject().Key("name").String("thread_name").Key("ph").String("M");
    w.Key("pid").Int(kPid).Key("tid").Int(tids[device]);
    w.Key("args").BeginObject().Key("name").String(device).EndObject().EndObject();
  }
  // The whole run on each device: its total, from time 0.
  for (const auto& [device, row] : report.device_metrics) {
    const double* total = DurationMetric(row, profiling::kDurationColumn);
    if (total == nullptr) continue;
    w.BeginObject().Key("name").String("run").Key("cat").String("run");
    w.Key("ph").String("X").Key("ts").Double(0).Key("dur").Double(*total);
    w.Key("pid").Int(kPid).Key("tid").Int(tids[device]).EndObject();
  }
  std::map<int, double> next_free;  // where a row without a start goes, per track
  for (const profiling::MetricMap& row : report.calls) {
    const std::string* name = StringMetric(row, profiling::kNameColumn);
    const std::string* device = StringMetric(row, profiling::kDeviceColumn);
    const double* duration = DurationMetric(row, profiling::kDurationColumn);
    const double* start = DurationMetric(row, profiling::kStartColumn);
    const int tid = tids[device == nullptr ? "device" : *device];
    const double dur = duration == nullptr ? 0 : std::max(0.0, *duration);
    const double ts = start != nullptr ? *start : next_free[tid];
    next_free[tid] = std::max(next_free[tid], ts + dur);
    w.BeginObject();
    w.Key("name").String(name == nullptr ? "call" : *name).Key("cat").String("call");
    w.Key("ph").String("X").Key("ts").Double(ts).Key("dur").Double(dur);
    w.Key("pid").Int(kPid).Key("tid").Int(tid);
    w.Key("args").BeginObject();
    for (const auto& [key, metric] : row) {
      if (key == profiling::kNameColumn || key == profiling::kStartColumn) continue;
      w.Key(key);
      WriteMetric(w, metric);
    }
    w.EndObject().EndObject();
  }
  w.EndArray();
  w.Key("otherData").BeginObject();
  w.Key("configuration").BeginObject();
  for (const auto& [key, metric] : report.configuration) {
    w.Key(key);
    WriteMetric(w, metric);
  }
  w.EndObject();
  if (!provenance_json.empty()) w.Key("provenance").Raw(provenance_json);
  w.EndObject();
  w.EndObject();
  return w.text();
}

}  // namespace tether::results
