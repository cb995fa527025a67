// Comparison of two benchmark results from their raw samples: is the
// candidate faster, slower or the same as the baseline within noise, or are
// the samples too unstable to say? The method (docs/design/results.md):
//
//   1. Each side is checked for stability: enough samples, a robust
//      coefficient of variation (1.4826 × MAD / median) under a limit, and no
//      two clusters of samples separated by a gap (bimodality).
//   2. The ratio of medians (candidate / baseline) gets a percentile
//      bootstrap confidence interval: both sides resampled with replacement,
//      independently, `resamples` times, from a seeded generator, so the same
//      samples always give the same interval.
//   3. The interval decides: above 1 + noise margin, slower; below
//      1 / (1 + noise margin), faster; otherwise, when it lies inside
//      [1 / (1 + 2 × threshold), 1 + 2 × threshold], the same within noise,
//      and when it is wider still, inconclusive (unstable, rerun with more
//      repeats). A slower result whose ratio exceeds 1 + threshold is a
//      regression.
//
// Pure functions of their inputs; thread-safe.
#ifndef TETHER_CLIENT_RESULTS_COMPARISON_H_
#define TETHER_CLIENT_RESULTS_COMPARISON_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tether::results {

struct CompareOptions {
  // Two-sided confidence of the ratio's interval, in (0, 1).
  double confidence = 0.95;
  // Bootstrap resamples; more give a steadier interval (10,000: a few ms
  // for 100 samples a side).
  int resamples = 10000;
  // The bootstrap generator's seed: the same samples and seed give the same
  // interval on every machine.
  uint64_t seed = 1;
  // A ratio whose whole interval lies within [1 / (1 + margin), 1 + margin]
  // of 1 is no difference worth naming; beyond it, faster or slower.
  double noise_margin = 0.01;
  // The slowdown (0.05 = 5%) past which a slower result is a regression.
  // "Same" also needs an interval narrow enough to have seen a change of
  // twice this: inside [1 / (1 + 2t), 1 + 2t].
  double regression_threshold = 0.05;
  // Fewer samples than this on a side cannot be judged.
  size_t min_samples = 5;
  // A side whose robust coefficient of variation exceeds this is unstable.
  double max_robust_cv = 0.15;
  // Bimodality: two clusters, each with at least this share of the samples
  // (and 3: fewer cannot tell a mode from outliers), separated by a gap
  // wider than `bimodal_gap_spreads` times the larger cluster's robust
  // standard deviation and `bimodal_min_gap` of the median.
  double bimodal_min_share = 0.25;
  // With fewer samples the gap test is not run: three against three cannot
  // tell two modes from noise.
  size_t bimodal_min_samples = 10;
  double bimodal_gap_spreads = 4.0;
  double bimodal_min_gap = 0.02;
};

enum class Verdict { kFaster, kSlower, kSame, kUnstable };

// "faster", "slower", "same", "unstable".
const char* VerdictName(Verdict verdict);

// One side's samples.
struct SampleSummary {
  size_t count = 0;
  double median = 0;
  double robust_cv = 0;  // 1.4826 × MAD / median
  bool stable = false;
  // Why the samples cannot be judged, when !stable: "12 samples form two
  // clusters ...", "dispersion 14.0% (robust CV) exceeds 10.0%", ...
  std::string problem;
};

struct Comparison {
  Verdict verdict = Verdict::kUnstable;
  // median(candidate) / median(baseline); 0 when a side has no samples.
  double ratio = 0;
  // The bootstrap interval of the ratio at `confidence`; 0 when unstable
  // before the bootstrap ran.
  double ci_low = 0;
  double ci_high = 0;
  double confidence = 0;
  int resamples = 0;
  // Slower by more than the regression threshold.
  bool regression = false;
  SampleSummary baseline;
  SampleSummary candidate;
  // One sentence: "20.3% slower (95% CI 18.1% .. 22.6%), beyond the
  // regression threshold of 5%".
  std::string explanation;
};

// The summary and stability check of one side.
SampleSummary Summarize(std::span<const double> samples, const CompareOptions& options = {});

// Compares `candidate` with `baseline` (seconds per call, or any positive
// measure where less is better).
Comparison Compare(std::span<const double> baseline, std::span<const double> candidate,
                   const CompareOptions& options = {});

}  // namespace tether::results

#endif  // TETHER_CLIENT_RESULTS_COMPARISON_H_
