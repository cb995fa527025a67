// Report: what a profiling run gathered — one row of metrics per call, totals
// per device and the run's configuration — with the reference's table, CSV and
// JSON renderings (§6.4 of tvm-semantics.md) and a JSON reader.
//
// Unlike the reference, the JSON escapes strings, prints doubles so they parse
// back exactly, and FromJson is a real parser that rejects malformed input; CSV
// fields are quoted per RFC 4180.
#ifndef TETHER_RUNTIME_PROFILING_REPORT_H_
#define TETHER_RUNTIME_PROFILING_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"

namespace tether::profiling {

// Metric values, as the reference's runtime.profiling.{Duration,Count,Percent,Ratio}
// and String.
struct Duration {
  double microseconds = 0;
  friend bool operator==(const Duration&, const Duration&) = default;
};
struct Count {
  int64_t value = 0;
  friend bool operator==(const Count&, const Count&) = default;
};
struct Percent {
  double percent = 0;
  friend bool operator==(const Percent&, const Percent&) = default;
};
struct Ratio {
  double ratio = 0;
  friend bool operator==(const Ratio&, const Ratio&) = default;
};
using Metric = std::variant<Duration, Count, Percent, Ratio, std::string>;

// Metrics by column name, ordered by name.
using MetricMap = std::map<std::string, Metric>;

// Column names the reference uses and the table puts first.
inline constexpr absl::string_view kNameColumn = "Name";
inline constexpr absl::string_view kDurationColumn = "Duration (us)";
inline constexpr absl::string_view kPercentColumn = "Percent";
inline constexpr absl::string_view kDeviceColumn = "Device";
inline constexpr absl::string_view kCountColumn = "Count";
inline constexpr absl::string_view kArgumentShapesColumn = "Argument Shapes";
inline constexpr absl::string_view kHashColumn = "Hash";
// When a call began, in microseconds after the start of the profiled run (or
// trace): a point in time, not an amount, so aggregated rows keep the
// earliest and the Sum row leaves it out.
inline constexpr absl::string_view kStartColumn = "Start (us)";

// Thread contract: a value type; thread-compatible.
struct Report {
  std::vector<MetricMap> calls;                     // one row per call, in call order
  std::map<std::string, MetricMap> device_metrics;  // "cpu0" -> totals of that device
  MetricMap configuration;                          // "Executor" -> "VM", ...

  // A human-readable table. With `aggregate`, rows with the same Hash (or Name),
  // Argument Shapes and Device are joined: durations, counts and percents are
  // summed, ratios averaged, strings kept only if all rows agree. With `sort`,
  // rows are ordered by descending duration (stable; rows without a duration
  // last). With `col_sums`, a "----------" row and a "Sum" row follow. Then one
  // "Total" row per device, and a "Configuration" block. Columns: Name,
  // Duration (us), Percent, Device, Count, Argument Shapes, then the rest sorted.
  // Durations and counts have ',' thousands separators (fixed, not the
  // locale's); strings longer than 50 characters are cut to 47 plus "...".
  std::string Table(bool sort = true, bool aggregate = true, bool col_sums = true) const;

  // The calls as CSV: a header row of the sorted union of keys, then one line
  // per call; counts as integers, other numbers as shortest round-trip
  // decimals, strings always double-quoted with '"' doubled (RFC 4180), missing
  // cells empty. Header fields are quoted when they need it. Lines end in "\n".
  std::string Csv() const;

  // {"calls":[{...}],"device_metrics":{"cpu0":{...}},"configuration":{...}}
  // where each metric is a one-key object: {"microseconds":x}, {"count":n},
  // {"percent":p}, {"ratio":r} or {"string":"s"}. Strings are escaped; doubles
  // round-trip exactly and always carry a '.' or an exponent; non-finite
  // doubles are written as null.
  std::string Json() const;

  // Parses Json() output (member order and whitespace are free; unknown
  // top-level keys are ignored; a missing one is empty). INVALID_ARGUMENT with
  // the offset, line and column for malformed JSON, a metric that is not a
  // one-key object of a known type ("cannot parse metric of type X"), a count
  // that is not an integer, or a wrong-typed section. A null double reads as NaN.
  static absl::StatusOr<Report> FromJson(absl::string_view json);

  friend bool operator==(const Report&, const Report&) = default;
};

// The device label the reference's reports use: "cpu0", "cuda1".
std::string ReportDeviceName(Device device);

// Formats one metric as the table does (no truncation): durations "1,234.50",
// counts "1,234", percents "12.34", ratios "%.2g", strings verbatim.
std::string FormatMetric(const Metric& metric);

// Builds a Report the way the reference's profiler does: add one row per call,
// then Build() computes each row's Percent (duration / the largest device
// total x 100) and the per-device total rows.
// Thread contract: thread-compatible.
class ReportBuilder {
 public:
  // Adds a call row with Name, Duration (us), Device, Count and, when not
  // empty, Argument Shapes; `extra` adds further columns (it may not override
  // the ones above).
  void AddCall(std::string name, double duration_us, Device device,
               std::string argument_shapes = "", int64_t count = 1, MetricMap extra = {});
  // Sets a device's total duration, e.g. the wall time of the whole run; a
  // device without one totals its calls' durations.
  void SetDeviceTotal(Device device, double duration_us);
  void SetConfiguration(std::string key, Metric value);

  // The report. device_metrics[dev] has Name "Total", Device, Duration (us),
  // Percent and Count (the calls on that device).
  Report Build() const;

 private:
  std::vector<MetricMap> calls_;
  std::map<std::string, double> device_totals_;
  MetricMap configuration_;
};

}  // namespace tether::profiling

#endif  // TETHER_RUNTIME_PROFILING_REPORT_H_
