// Report rendering (table, CSV, JSON), JSON reading, and ReportBuilder.
#include "runtime/profiling/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "runtime/profiling/json.h"

namespace tether::profiling {
namespace {

// "1234567.891" -> "1,234,567.891": commas in the integer digits only.
std::string WithThousands(std::string s) {
  size_t begin = (!s.empty() && s[0] == '-') ? 1 : 0;
  size_t end = begin;
  while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
  if (end - begin <= 3) return s;
  std::string out = s.substr(0, begin);
  size_t digits = end - begin;
  for (size_t i = 0; i < digits; ++i) {
    if (i > 0 && (digits - i) % 3 == 0) out.push_back(',');
    out.push_back(s[begin + i]);
  }
  out.append(s, end, std::string::npos);
  return out;
}

// Number of code points in UTF-8 text (continuation bytes do not count).
size_t DisplayWidth(absl::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// The first `chars` code points of `s`.
absl::string_view PrefixCodePoints(absl::string_view s, size_t chars) {
  size_t seen = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (seen == chars) return s.substr(0, i);
      ++seen;
    }
  }
  return s;
}

std::string MetricString(const Metric& m) {
  if (const auto* s = std::get_if<std::string>(&m)) return *s;
  return FormatMetric(m);
}

const std::string* FindString(const MetricMap& row, absl::string_view key) {
  auto it = row.find(std::string(key));
  if (it == row.end()) return nullptr;
  return std::get_if<std::string>(&it->second);
}

// Joins metrics of one column across aggregated rows (the reference's
// AggregateMetric): sums, an average for ratios, agreement for strings. Rows
// that mix kinds in one column give "".
Metric AggregateMetric(absl::string_view name, const std::vector<const Metric*>& metrics) {
  const Metric& first = *metrics.front();
  for (const Metric* m : metrics) {
    if (m->index() != first.index()) return std::string();
  }
  if (std::holds_alternative<Duration>(first) && name == kStartColumn) {
    double earliest = std::get<Duration>(first).microseconds;
    for (const Metric* m : metrics)
      earliest = std::min(earliest, std::get<Duration>(*m).microseconds);
    return Duration{earliest};
  }
  if (std::holds_alternative<Duration>(first)) {
    double sum = 0;
    for (const Metric* m : metrics) sum += std::get<Duration>(*m).microseconds;
    return Duration{sum};
  }
  if (std::holds_alternative<Count>(first)) {
    int64_t sum = 0;
    for (const Metric* m : metrics) sum += std::get<Count>(*m).value;
    return Count{sum};
  }
  if (std::holds_alternative<Percent>(first)) {
    double sum = 0;
    for (const Metric* m : metrics) sum += std::get<Percent>(*m).percent;
    return Percent{sum};
  }
  if (std::holds_alternative<Ratio>(first)) {
    double sum = 0;
    for (const Metric* m : metrics) sum += std::get<Ratio>(*m).ratio;
    return Ratio{sum / static_cast<double>(metrics.size())};
  }
  for (const Metric* m : metrics) {
    if (std::get<std::string>(*m) != std::get<std::string>(first)) return std::string();
  }
  return first;
}

std::vector<MetricMap> AggregateRows(const std::vector<MetricMap>& calls) {
  // Groups in order of first appearance (the reference used an unordered map).
  std::vector<std::vector<size_t>> groups;
  absl::flat_hash_map<std::string, size_t> group_of;
  for (size_t i = 0; i < calls.size(); ++i) {
    const MetricMap& row = calls[i];
    std::string key;
    auto part = [&](absl::string_view column) {
      auto it = row.find(std::string(column));
      if (it == row.end()) {
        key += "-|";
      } else {
        std::string v = MetricString(it->second);
        absl::StrAppend(&key, v.size(), ":", v, "|");
      }
    };
    part(row.count(std::string(kHashColumn)) ? kHashColumn : kNameColumn);
    part(kArgumentShapesColumn);
    part(kDeviceColumn);
    auto [it, inserted] = group_of.try_emplace(key, groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<MetricMap> out;
  out.reserve(groups.size());
  for (const auto& group : groups) {
    std::map<std::string, std::vector<const Metric*>> columns;
    for (size_t i : group) {
      for (const auto& [name, metric] : calls[i]) columns[name].push_back(&metric);
    }
    MetricMap row;
    for (const auto& [name, metrics] : columns) row.emplace(name, AggregateMetric(name, metrics));
    out.push_back(std::move(row));
  }
  return out;
}

double DurationOf(const MetricMap& row) {
  auto it = row.find(std::string(kDurationColumn));
  if (it == row.end()) return -std::numeric_limits<double>::infinity();
  if (const auto* d = std::get_if<Duration>(&it->second)) return d->microseconds;
  return -std::numeric_limits<double>::infinity();
}

// --- JSON -------------------------------------------------------------------

void AppendMetricJson(std::string* out, const Metric& m) {
  if (const auto* d = std::get_if<Duration>(&m)) {
    out->append("{\"microseconds\":");
    AppendJsonDouble(out, d->microseconds);
  } else if (const auto* c = std::get_if<Count>(&m)) {
    absl::StrAppend(out, "{\"count\":", c->value);
  } else if (const auto* p = std::get_if<Percent>(&m)) {
    out->append("{\"percent\":");
    AppendJsonDouble(out, p->percent);
  } else if (const auto* r = std::get_if<Ratio>(&m)) {
    out->append("{\"ratio\":");
    AppendJsonDouble(out, r->ratio);
  } else {
    out->append("{\"string\":");
    AppendJsonString(out, std::get<std::string>(m));
  }
  out->push_back('}');
}

void AppendMetricMapJson(std::string* out, const MetricMap& map) {
  out->push_back('{');
  bool first = true;
  for (const auto& [name, metric] : map) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, name);
    out->push_back(':');
    AppendMetricJson(out, metric);
  }
  out->push_back('}');
}

class JsonReportReader {
 public:
  explicit JsonReportReader(absl::string_view text) : text_(text) {}

  absl::Status Error(const JsonValue& at, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("invalid report json at offset ", at.offset,
                                                   " (", JsonPosition(text_, at.offset),
                                                   "): ", std::string(what)));
  }

  absl::StatusOr<double> ReadDouble(const JsonValue& v, absl::string_view type) const {
    if (v.kind == JsonValue::Kind::kNull) return std::numeric_limits<double>::quiet_NaN();
    if (v.kind != JsonValue::Kind::kNumber) {
      return Error(v, absl::StrCat("metric ", std::string(type), " must be a number"));
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), d);
    if (ec != std::errc() || ptr != v.text.data() + v.text.size()) {
      return Error(v, absl::StrCat("number ", v.text, " is out of range for a double"));
    }
    return d;
  }

  absl::StatusOr<Metric> ReadMetric(const JsonValue& v) const {
    if (v.kind != JsonValue::Kind::kObject || v.members.size() != 1) {
      return Error(v, "a metric must be an object with exactly one member");
    }
    const auto& [type, value] = v.members.front();
    if (type == "microseconds") {
      absl::StatusOr<double> d = ReadDouble(value, type);
      if (!d.ok()) return d.status();
      return Duration{*d};
    }
    if (type == "percent") {
      absl::StatusOr<double> d = ReadDouble(value, type);
      if (!d.ok()) return d.status();
      return Percent{*d};
    }
    if (type == "ratio") {
      absl::StatusOr<double> d = ReadDouble(value, type);
      if (!d.ok()) return d.status();
      return Ratio{*d};
    }
    if (type == "count") {
      if (!value.IsIntegerLiteral()) return Error(value, "metric count must be an integer");
      int64_t n = 0;
      auto [ptr, ec] = std::from_chars(value.text.data(), value.text.data() + value.text.size(), n);
      if (ec != std::errc() || ptr != value.text.data() + value.text.size()) {
        return Error(value, absl::StrCat("count ", value.text, " is out of range for int64"));
      }
      return Count{n};
    }
    if (type == "string") {
      if (value.kind != JsonValue::Kind::kString) {
        return Error(value, "metric string must be a string");
      }
      return value.text;
    }
    return Error(v, absl::StrCat("cannot parse metric of type ", type,
                                 ", expected microseconds, count, percent, ratio or string"));
  }

  absl::StatusOr<MetricMap> ReadMetricMap(const JsonValue& v, absl::string_view what) const {
    if (v.kind != JsonValue::Kind::kObject)
      return Error(v, absl::StrCat(std::string(what), " must be an object"));
    MetricMap map;
    for (const auto& [name, value] : v.members) {
      absl::StatusOr<Metric> m = ReadMetric(value);
      if (!m.ok()) return m.status();
      map.emplace(name, *std::move(m));
    }
    return map;
  }

  absl::StatusOr<Report> Read(const JsonValue& root) const {
    if (root.kind != JsonValue::Kind::kObject) return Error(root, "a report must be an object");
    Report report;
    if (const JsonValue* calls = root.Find("calls")) {
      if (calls->kind != JsonValue::Kind::kArray) return Error(*calls, "calls must be an array");
      for (const JsonValue& call : calls->items) {
        absl::StatusOr<MetricMap> row = ReadMetricMap(call, "a call");
        if (!row.ok()) return row.status();
        report.calls.push_back(*std::move(row));
      }
    }
    if (const JsonValue* devices = root.Find("device_metrics")) {
      if (devices->kind != JsonValue::Kind::kObject) {
        return Error(*devices, "device_metrics must be an object");
      }
      for (const auto& [device, metrics] : devices->members) {
        absl::StatusOr<MetricMap> row = ReadMetricMap(metrics, "device metrics");
        if (!row.ok()) return row.status();
        report.device_metrics.emplace(device, *std::move(row));
      }
    }
    if (const JsonValue* config = root.Find("configuration")) {
      absl::StatusOr<MetricMap> row = ReadMetricMap(*config, "configuration");
      if (!row.ok()) return row.status();
      report.configuration = *std::move(row);
    }
    return report;
  }

 private:
  absl::string_view text_;
};

// --- CSV --------------------------------------------------------------------

std::string CsvQuoted(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string CsvHeaderField(absl::string_view s) {
  if (s.find_first_of(",\"\r\n") == absl::string_view::npos) return std::string(s);
  return CsvQuoted(s);
}

}  // namespace

std::string FormatMetric(const Metric& m) {
  if (const auto* d = std::get_if<Duration>(&m)) {
    return WithThousands(absl::StrFormat("%.2f", d->microseconds));
  }
  if (const auto* c = std::get_if<Count>(&m)) return WithThousands(absl::StrCat(c->value));
  if (const auto* p = std::get_if<Percent>(&m)) return absl::StrFormat("%.2f", p->percent);
  if (const auto* r = std::get_if<Ratio>(&m)) return absl::StrFormat("%.2g", r->ratio);
  return std::get<std::string>(m);
}

std::string ReportDeviceName(Device device) {
  return absl::StrCat(DeviceTypeName(device.type), device.id);
}

std::string Report::Table(bool sort, bool aggregate, bool col_sums) const {
  std::vector<MetricMap> rows = aggregate ? AggregateRows(calls) : calls;
  if (sort) {
    std::stable_sort(rows.begin(), rows.end(), [](const MetricMap& a, const MetricMap& b) {
      return DurationOf(a) > DurationOf(b);
    });
  }
  if (col_sums) {
    MetricMap sums;
    for (const MetricMap& row : rows) {
      for (const auto& [name, metric] : row) {
        auto it = sums.find(name);
        if (const auto* c = std::get_if<Count>(&metric)) {
          if (it == sums.end()) {
            sums.emplace(name, *c);
          } else if (auto* s = std::get_if<Count>(&it->second)) {
            s->value += c->value;
          }
        } else if (const auto* d = std::get_if<Duration>(&metric); d && name != kStartColumn) {
          if (it == sums.end()) {
            sums.emplace(name, *d);
          } else if (auto* s = std::get_if<Duration>(&it->second)) {
            s->microseconds += d->microseconds;
          }
        } else if (const auto* p = std::get_if<Percent>(&metric)) {
          if (it == sums.end()) {
            sums.emplace(name, *p);
          } else if (auto* s = std::get_if<Percent>(&it->second)) {
            s->percent += p->percent;
          }
        }
        // Ratios are not summed; strings have no sum.
      }
    }
    sums[std::string(kNameColumn)] = std::string("Sum");
    rows.push_back(MetricMap{{std::string(kNameColumn), std::string("----------")}});
    rows.push_back(std::move(sums));
  }
  for (const auto& [device, metrics] : device_metrics) {
    MetricMap row = metrics;
    row[std::string(kNameColumn)] = std::string("Total");
    rows.push_back(std::move(row));
  }

  std::vector<std::string> headers = {
      std::string(kNameColumn),   std::string(kDurationColumn), std::string(kPercentColumn),
      std::string(kDeviceColumn), std::string(kCountColumn),    std::string(kArgumentShapesColumn)};
  {
    std::map<std::string, bool> extra;
    for (const MetricMap& row : rows) {
      for (const auto& [name, metric] : row) {
        if (std::find(headers.begin(), headers.end(), name) == headers.end()) extra[name] = true;
      }
    }
    for (const auto& [name, unused] : extra) headers.push_back(name);
  }

  // Column-major cells, so widths are easy to compute.
  std::vector<std::vector<std::string>> cols(headers.size());
  for (size_t c = 0; c < headers.size(); ++c) cols[c].push_back(headers[c]);
  for (const MetricMap& row : rows) {
    for (size_t c = 0; c < headers.size(); ++c) {
      auto it = row.find(headers[c]);
      if (it == row.end()) {
        cols[c].emplace_back();
        continue;
      }
      std::string cell = FormatMetric(it->second);
      if (std::holds_alternative<std::string>(it->second) && DisplayWidth(cell) > 50) {
        cell = absl::StrCat(std::string(PrefixCodePoints(cell, 47)), "...");
      }
      cols[c].push_back(std::move(cell));
    }
  }
  std::vector<size_t> widths(headers.size(), 0);
  for (size_t c = 0; c < headers.size(); ++c) {
    for (const std::string& cell : cols[c]) widths[c] = std::max(widths[c], DisplayWidth(cell));
  }

  std::string out;
  for (size_t r = 0; r < rows.size() + 1; ++r) {
    for (size_t c = 0; c < headers.size(); ++c) {
      const std::string& cell = cols[c][r];
      std::string pad(widths[c] - DisplayWidth(cell), ' ');
      if (c == 0) {
        absl::StrAppend(&out, cell, pad, "  ");
      } else {
        absl::StrAppend(&out, pad, cell, "  ");
      }
    }
    out.push_back('\n');
  }
  out.append("\nConfiguration\n-------------\n");
  for (const auto& [key, metric] : configuration) {
    absl::StrAppend(&out, key, ": ", FormatMetric(metric), "\n");
  }
  return out;
}

std::string Report::Csv() const {
  std::map<std::string, bool> unique;
  for (const MetricMap& row : calls) {
    for (const auto& [name, metric] : row) unique[name] = true;
  }
  std::vector<std::string> headers;
  for (const auto& [name, unused] : unique) headers.push_back(name);

  std::string out;
  for (size_t i = 0; i < headers.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(CsvHeaderField(headers[i]));
  }
  out.push_back('\n');
  for (const MetricMap& row : calls) {
    for (size_t i = 0; i < headers.size(); ++i) {
      if (i > 0) out.push_back(',');
      auto it = row.find(headers[i]);
      if (it == row.end()) continue;
      const Metric& m = it->second;
      if (const auto* d = std::get_if<Duration>(&m)) {
        out.append(ShortestDouble(d->microseconds));
      } else if (const auto* c = std::get_if<Count>(&m)) {
        absl::StrAppend(&out, c->value);
      } else if (const auto* p = std::get_if<Percent>(&m)) {
        out.append(ShortestDouble(p->percent));
      } else if (const auto* r = std::get_if<Ratio>(&m)) {
        out.append(ShortestDouble(r->ratio));
      } else {
        out.append(CsvQuoted(std::get<std::string>(m)));
      }
    }
    out.push_back('\n');
  }
  return out;
}

std::string Report::Json() const {
  std::string out = "{\"calls\":[";
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendMetricMapJson(&out, calls[i]);
  }
  out.append("],\"device_metrics\":{");
  bool first = true;
  for (const auto& [device, metrics] : device_metrics) {
    if (!first) out.push_back(',');
    first = false;
    AppendJsonString(&out, device);
    out.push_back(':');
    AppendMetricMapJson(&out, metrics);
  }
  out.append("},\"configuration\":");
  AppendMetricMapJson(&out, configuration);
  out.push_back('}');
  return out;
}

absl::StatusOr<Report> Report::FromJson(absl::string_view json) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) return root.status();
  return JsonReportReader(json).Read(*root);
}

void ReportBuilder::AddCall(std::string name, double duration_us, Device device,
                            std::string argument_shapes, int64_t count, MetricMap extra) {
  MetricMap row = std::move(extra);
  row[std::string(kNameColumn)] = std::move(name);
  row[std::string(kDurationColumn)] = Duration{duration_us};
  row[std::string(kDeviceColumn)] = ReportDeviceName(device);
  row[std::string(kCountColumn)] = Count{count};
  if (!argument_shapes.empty()) {
    row[std::string(kArgumentShapesColumn)] = std::move(argument_shapes);
  }
  calls_.push_back(std::move(row));
}

void ReportBuilder::SetDeviceTotal(Device device, double duration_us) {
  device_totals_[ReportDeviceName(device)] = duration_us;
}

void ReportBuilder::SetConfiguration(std::string key, Metric value) {
  configuration_[std::move(key)] = std::move(value);
}

Report ReportBuilder::Build() const {
  Report report;
  report.calls = calls_;
  report.configuration = configuration_;

  // Per-device call sums and counts; explicit totals win.
  std::map<std::string, std::pair<double, int64_t>> per_device;
  for (const MetricMap& row : calls_) {
    const std::string* device = FindString(row, kDeviceColumn);
    if (device == nullptr) continue;
    auto& [sum, n] = per_device[*device];
    sum += std::max(0.0, DurationOf(row));
    auto it = row.find(std::string(kCountColumn));
    n += (it != row.end() && std::holds_alternative<Count>(it->second))
             ? std::get<Count>(it->second).value
             : 1;
  }
  for (const auto& [device, total] : device_totals_) per_device[device].first = total;

  double overall = 0;
  for (const auto& [device, sum_count] : per_device) overall = std::max(overall, sum_count.first);
  auto percent_of = [overall](double us) { return overall > 0 ? us / overall * 100.0 : 0.0; };

  for (MetricMap& row : report.calls) {
    row[std::string(kPercentColumn)] = Percent{percent_of(std::max(0.0, DurationOf(row)))};
  }
  for (const auto& [device, sum_count] : per_device) {
    report.device_metrics[device] = MetricMap{
        {std::string(kNameColumn), std::string("Total")},
        {std::string(kDeviceColumn), device},
        {std::string(kDurationColumn), Duration{sum_count.first}},
        {std::string(kPercentColumn), Percent{percent_of(sum_count.first)}},
        {std::string(kCountColumn), Count{sum_count.second}},
    };
  }
  return report;
}

}  // namespace tether::profiling
