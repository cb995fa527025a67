// Statistics and printing for BenchmarkResult.
#include "runtime/profiling/benchmark_result.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace tether::profiling {
namespace {

// Centers `s` in a field of `width` characters like Python's "{:^N}": the
// extra space, if any, goes to the right.
std::string Center(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  size_t pad = width - s.size();
  size_t left = pad / 2;
  return std::string(left, ' ') + s + std::string(pad - left, ' ');
}

}  // namespace

BenchmarkResult BenchmarkResult::FromSamples(std::vector<double> samples, int64_t total_calls,
                                             int64_t number_per_repeat) {
  BenchmarkResult r;
  r.results = std::move(samples);
  r.total_calls = total_calls;
  r.number_per_repeat = number_per_repeat;
  if (r.results.empty()) return r;

  const double n = static_cast<double>(r.results.size());
  double sum = 0;
  for (double x : r.results) sum += x;
  r.mean = sum / n;
  double sq = 0;
  for (double x : r.results) sq += (x - r.mean) * (x - r.mean);
  r.std = std::sqrt(sq / n);  // ddof=0, as numpy.std and the reference
  auto [lo, hi] = std::minmax_element(r.results.begin(), r.results.end());
  r.min = *lo;
  r.max = *hi;
  r.median = r.Percentile(50);
  return r;
}

double BenchmarkResult::Percentile(double p) const {
  if (results.empty()) return 0;
  std::vector<double> sorted = results;
  std::sort(sorted.begin(), sorted.end());
  if (std::isnan(p)) p = 50;
  p = std::clamp(p, 0.0, 100.0);
  // numpy "linear": rank = p/100 * (n-1), interpolate between its neighbours.
  double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t below = static_cast<size_t>(std::floor(rank));
  size_t above = std::min(below + 1, sorted.size() - 1);
  double frac = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * frac;
}

std::string BenchmarkResult::ToString() const {
  std::string out = "Execution time summary:\n";
  const char* headers[] = {"mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"};
  const double values[] = {mean, median, max, min, std};
  for (int i = 0; i < 5; ++i) {
    if (i > 0) out += ' ';
    out += Center(headers[i], 12);
  }
  out += '\n';
  for (int i = 0; i < 5; ++i) {
    if (i > 0) out += ' ';
    out += Center(absl::StrFormat("%.4f", values[i] * 1000.0), 12);
  }
  out += '\n';
  return out;
}

}  // namespace tether::profiling
