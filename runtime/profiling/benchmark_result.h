// BenchmarkResult: the outcome of one time-evaluator run — the raw per-repeat
// samples (seconds per call) with their statistics and the exact number of
// calls made. It is what the reference's Python `BenchmarkResult` holds, plus
// the call accounting the reference cannot report.
#ifndef TETHER_RUNTIME_PROFILING_BENCHMARK_RESULT_H_
#define TETHER_RUNTIME_PROFILING_BENCHMARK_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tether::profiling {

// Thread contract: a value type; thread-compatible.
struct BenchmarkResult {
  // Seconds per call, one sample per repeat, in measurement order.
  std::vector<double> results;
  // Statistics of `results` (numpy semantics: median averages the two middle
  // samples, std has ddof=0). All zero when there are no samples.
  double mean = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double std = 0;
  // Every call of the timed function, the warm-up call included.
  int64_t total_calls = 0;
  // The batch size of the last measured repeat (it grows when min_repeat_ms asks).
  int64_t number_per_repeat = 0;
  // A remote run under exclusive timing (docs/design/rpc-protocol.md): no
  // other session's call ran during the measurement, which waited
  // `wait_seconds` for them to end first. False and 0 for local runs.
  bool exclusive = false;
  double wait_seconds = 0;

  // Builds a result with the statistics of `samples`.
  static BenchmarkResult FromSamples(std::vector<double> samples, int64_t total_calls,
                                     int64_t number_per_repeat = 0);

  // The p-th percentile (p in [0, 100], clamped) with linear interpolation
  // between closest ranks, as numpy.percentile's default; 0 with no samples.
  double Percentile(double p) const;
  double p50() const { return Percentile(50); }
  double p90() const { return Percentile(90); }
  double p99() const { return Percentile(99); }

  // The reference's summary table, in milliseconds; for samples [1, 2, 2, 5] s:
  //   Execution time summary:
  //    mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)
  //    2500.0000    2000.0000    5000.0000    1000.0000    1500.0000
  // (each field centered in 12 columns, as Python's "{:^12}").
  std::string ToString() const;
};

}  // namespace tether::profiling

#endif  // TETHER_RUNTIME_PROFILING_BENCHMARK_RESULT_H_
