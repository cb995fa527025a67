// The statistics of comparison.h: medians, MADs, a gap test for two
// clusters, and the percentile bootstrap of the ratio of medians.
#include "client/results/comparison.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::results {
namespace {

// MAD × this estimates the standard deviation of normal data.
constexpr double kMadToSigma = 1.4826;

// The median of `v` (reordered); the mean of the two middle values for an
// even count, as numpy's.
double MedianInPlace(std::vector<double>& v) {
  const size_t n = v.size();
  if (n == 0) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v.begin(), mid, v.end());
  double upper = *mid;
  if (n % 2 == 1) return upper;
  double lower = *std::max_element(v.begin(), mid);
  return (lower + upper) / 2;
}

double Median(std::span<const double> samples) {
  std::vector<double> v(samples.begin(), samples.end());
  return MedianInPlace(v);
}

// The median absolute deviation from the median.
double Mad(std::span<const double> samples, double median) {
  std::vector<double> dev;
  dev.reserve(samples.size());
  for (double x : samples) dev.push_back(std::abs(x - median));
  return MedianInPlace(dev);
}

double RobustSigma(std::span<const double> samples) {
  return kMadToSigma * Mad(samples, Median(samples));
}

// SplitMix64 (Steele, Lea, Flood 2014): a small generator whose output is
// the same on every platform, unlike std's distributions.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), without modulo bias (Lemire's multiply-and-reject).
  size_t Below(size_t n) {
    const uint64_t bound = n;
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = -bound % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<size_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

// The median of a resample (with replacement) of `samples`, into `scratch`.
double ResampledMedian(std::span<const double> samples, SplitMix64& rng,
                       std::vector<double>& scratch) {
  scratch.resize(samples.size());
  for (double& x : scratch) x = samples[rng.Below(samples.size())];
  return MedianInPlace(scratch);
}

// The linear-interpolation quantile q of sorted values.
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(pos));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * frac;
}

std::string Seconds(double s) {
  if (s >= 1) return absl::StrFormat("%.4g s", s);
  if (s >= 1e-3) return absl::StrFormat("%.4g ms", s * 1e3);
  if (s >= 1e-6) return absl::StrFormat("%.4g us", s * 1e6);
  return absl::StrFormat("%.4g ns", s * 1e9);
}

// A change as a percentage of the baseline: "20.3% slower", "8.1% faster".
std::string Change(double ratio) {
  if (ratio >= 1) return absl::StrFormat("%.1f%% slower", (ratio - 1) * 100);
  return absl::StrFormat("%.1f%% faster", (1 - ratio) * 100);
}

// Two clusters separated by a gap, or "" when there are none.
std::string FindTwoClusters(const std::vector<double>& sorted, double median,
                            const CompareOptions& options) {
  const size_t n = sorted.size();
  if (n < options.bimodal_min_samples) return "";
  const size_t min_cluster = std::max<size_t>(
      3, static_cast<size_t>(std::ceil(options.bimodal_min_share * static_cast<double>(n))));
  double widest = 0;
  size_t split = 0;
  for (size_t k = min_cluster; k + min_cluster <= n; ++k) {
    const double gap = sorted[k] - sorted[k - 1];
    if (gap <= widest || gap <= options.bimodal_min_gap * median) continue;
    std::span<const double> all(sorted);
    const double spread =
        std::max({RobustSigma(all.subspan(0, k)), RobustSigma(all.subspan(k)), 1e-3 * median});
    if (gap > options.bimodal_gap_spreads * spread) {
      widest = gap;
      split = k;
    }
  }
  if (split == 0) return "";
  std::span<const double> all(sorted);
  return absl::StrFormat(
      "the samples form two clusters: %d near %s and %d near %s (bimodal; something else "
      "ran, or clocks changed, during the measurement)",
      split, Seconds(Median(all.subspan(0, split))), n - split,
      Seconds(Median(all.subspan(split))));
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFaster:
      return "faster";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kSame:
      return "same";
    case Verdict::kUnstable:
      break;
  }
  return "unstable";
}

SampleSummary Summarize(std::span<const double> samples, const CompareOptions& options) {
  SampleSummary s;
  s.count = samples.size();
  for (double x : samples) {
    if (!std::isfinite(x) || x < 0) {
      s.problem = absl::StrFormat("a sample is %g; samples must be finite and non-negative", x);
      return s;
    }
  }
  s.median = Median(samples);
  if (s.count < options.min_samples) {
    s.problem = absl::StrFormat("%d samples; at least %d are needed (tether bench --repeat)",
                                s.count, options.min_samples);
    return s;
  }
  if (!(s.median > 0)) {
    s.problem =
        "the median is 0: the timer cannot resolve one batch (raise --number or "
        "--min-repeat-ms)";
    return s;
  }
  s.robust_cv = kMadToSigma * Mad(samples, s.median) / s.median;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  s.problem = FindTwoClusters(sorted, s.median, options);
  if (!s.problem.empty()) return s;
  if (s.robust_cv > options.max_robust_cv) {
    s.problem = absl::StrFormat("the dispersion is %.1f%% (robust CV), over the %.1f%% limit",
                                s.robust_cv * 100, options.max_robust_cv * 100);
    return s;
  }
  s.stable = true;
  return s;
}

Comparison Compare(std::span<const double> baseline, std::span<const double> candidate,
                   const CompareOptions& options) {
  Comparison c;
  c.confidence = options.confidence;
  c.baseline = Summarize(baseline, options);
  c.candidate = Summarize(candidate, options);
  if (c.baseline.median > 0) c.ratio = c.candidate.median / c.baseline.median;
  if (!c.baseline.stable || !c.candidate.stable) {
    c.verdict = Verdict::kUnstable;
    c.explanation = !c.candidate.stable
                        ? absl::StrCat("this run cannot be judged: ", c.candidate.problem)
                        : absl::StrCat("the baseline cannot be judged: ", c.baseline.problem);
    return c;
  }

  c.resamples = std::max(options.resamples, 100);
  SplitMix64 rng(options.seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(c.resamples));
  std::vector<double> scratch;
  for (int i = 0; i < c.resamples; ++i) {
    const double a = ResampledMedian(baseline, rng, scratch);
    const double b = ResampledMedian(candidate, rng, scratch);
    if (a > 0) ratios.push_back(b / a);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - options.confidence) / 2;
  c.ci_low = Quantile(ratios, tail);
  c.ci_high = Quantile(ratios, 1 - tail);

  const double margin = 1 + options.noise_margin;
  const double threshold = 1 + options.regression_threshold;
  const std::string interval = absl::StrFormat("%.0f%% CI of the ratio %.3f .. %.3f",
                                               options.confidence * 100, c.ci_low, c.ci_high);
  if (c.ci_low > margin) {
    c.verdict = Verdict::kSlower;
    c.regression = c.ratio > threshold;
    c.explanation =
        absl::StrFormat("%s (%s), %s the regression threshold of %.4g%%", Change(c.ratio), interval,
                        c.regression ? "beyond" : "within", options.regression_threshold * 100);
  } else if (c.ci_high < 1 / margin) {
    c.verdict = Verdict::kFaster;
    c.explanation = absl::StrFormat("%s (%s)", Change(c.ratio), interval);
  } else if (const double wide = 1 + 2 * options.regression_threshold;
             c.ci_low >= 1 / wide && c.ci_high <= wide) {
    c.verdict = Verdict::kSame;
    c.explanation = absl::StrFormat("the same within noise (%s)", interval);
  } else {
    c.verdict = Verdict::kUnstable;
    c.explanation = absl::StrFormat(
        "inconclusive: the %s is too wide to tell a change of %.4g%% from noise; rerun with "
        "more repeats",
        interval, 2 * options.regression_threshold * 100);
  }
  return c;
}

}  // namespace tether::results
