// The verdict statistics (client/results/comparison.h) on synthetic timings:
// log-normal noise with occasional slow outliers, as a loaded machine gives,
// drawn from fixed seeds so every run sees the same samples.
#include "client/results/comparison.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::results {
namespace {

using ::testing::HasSubstr;

// `n` samples around `median` seconds: log-normal with `sigma` (about the
// coefficient of variation), and each sample with probability
// `outlier_rate` slowed by 20-50% (an interrupt, a page fault). Box-Muller
// over mt19937_64's raw output, which is the same on every platform.
std::vector<double> Timings(uint64_t seed, size_t n, double median, double sigma,
                            double outlier_rate = 0.05) {
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) {
    const double z =
        std::sqrt(-2 * std::log(uniform())) * std::cos(2 * 3.14159265358979323846 * uniform());
    double x = median * std::exp(sigma * z);
    if (uniform() < outlier_rate) x *= 1.2 + 0.3 * uniform();
    out.push_back(x);
  }
  return out;
}

TEST(ComparisonTest, SameDistributionIsSame) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<double> a = Timings(seed, 20, 1.0e-3, 0.03);
    std::vector<double> b = Timings(seed + 1000, 20, 1.0e-3, 0.03);
    Comparison c = Compare(a, b);
    EXPECT_EQ(c.verdict, Verdict::kSame) << "seed " << seed << ": " << c.explanation;
    EXPECT_FALSE(c.regression);
    EXPECT_LT(c.ci_low, 1.01);  // within the noise margin, if not around 1
    EXPECT_GT(c.ci_high, 1 / 1.01);
  }
}

TEST(ComparisonTest, TwentyPercentSlowdownIsASlowerRegression) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<double> a = Timings(seed, 20, 1.0e-3, 0.05);
    std::vector<double> b = Timings(seed + 1000, 20, 1.2e-3, 0.05);
    Comparison c = Compare(a, b);
    EXPECT_EQ(c.verdict, Verdict::kSlower) << "seed " << seed << ": " << c.explanation;
    EXPECT_TRUE(c.regression) << c.explanation;
    EXPECT_GT(c.ci_low, 1.05);
    EXPECT_NEAR(c.ratio, 1.2, 0.08);
    EXPECT_THAT(c.explanation, HasSubstr("slower"));
    EXPECT_THAT(c.explanation, HasSubstr("beyond the regression threshold of 5%"));
  }
}

TEST(ComparisonTest, TwentyPercentSpeedupIsFaster) {
  std::vector<double> a = Timings(7, 20, 1.0e-3, 0.05);
  std::vector<double> b = Timings(8, 20, 0.8e-3, 0.05);
  Comparison c = Compare(a, b);
  EXPECT_EQ(c.verdict, Verdict::kFaster) << c.explanation;
  EXPECT_FALSE(c.regression);
  EXPECT_LT(c.ci_high, 0.95);
  EXPECT_THAT(c.explanation, HasSubstr("faster"));
}

TEST(ComparisonTest, SmallSlowdownIsSlowerButNoRegression) {
  std::vector<double> a = Timings(3, 30, 1.0e-3, 0.005, 0);
  std::vector<double> b = Timings(4, 30, 1.03e-3, 0.005, 0);
  Comparison c = Compare(a, b);
  EXPECT_EQ(c.verdict, Verdict::kSlower) << c.explanation;
  EXPECT_FALSE(c.regression);
  EXPECT_THAT(c.explanation, HasSubstr("within the regression threshold"));
  CompareOptions strict;
  strict.regression_threshold = 0.02;
  EXPECT_TRUE(Compare(a, b, strict).regression);
}

TEST(ComparisonTest, BimodalIsUnstable) {
  // Half the repeats ran 30% slower: a neighbour, a clock that dropped.
  std::vector<double> b = Timings(11, 10, 1.0e-3, 0.01, 0);
  std::vector<double> slow = Timings(12, 10, 1.3e-3, 0.01, 0);
  b.insert(b.end(), slow.begin(), slow.end());
  SampleSummary s = Summarize(b);
  EXPECT_FALSE(s.stable);
  EXPECT_THAT(s.problem, HasSubstr("two clusters: 10 near"));
  Comparison c = Compare(Timings(13, 20, 1.0e-3, 0.01, 0), b);
  EXPECT_EQ(c.verdict, Verdict::kUnstable);
  EXPECT_FALSE(c.regression);
  EXPECT_THAT(c.explanation, HasSubstr("this run cannot be judged"));
  // A baseline that was bimodal is named as such.
  EXPECT_THAT(Compare(b, Timings(13, 20, 1.0e-3, 0.01, 0)).explanation,
              HasSubstr("the baseline cannot be judged"));
}

TEST(ComparisonTest, RealisticNoiseIsNotBimodal) {
  // A cluster needs a quarter of the samples: at a 5% outlier rate, 20 and
  // 50 samples never get there, and 5 are too few to test at all.
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    for (size_t n : {5, 20, 50}) {
      SampleSummary s = Summarize(Timings(seed, n, 1.0e-3, 0.03));
      EXPECT_TRUE(s.stable) << "seed " << seed << " n " << n << ": " << s.problem;
    }
  }
}

TEST(ComparisonTest, AFewOutliersAreNotAMode) {
  std::vector<double> s = Timings(31, 18, 1.0e-3, 0.01, 0);
  s.push_back(1.5e-3);
  s.push_back(1.52e-3);
  EXPECT_TRUE(Summarize(s).stable) << Summarize(s).problem;
  s.push_back(1.51e-3);
  s.push_back(1.49e-3);
  s.push_back(1.5e-3);
  s.push_back(1.53e-3);  // 6 of 24: a quarter
  EXPECT_THAT(Summarize(s).problem, HasSubstr("two clusters: 18 near"));
}

TEST(ComparisonTest, HighDispersionIsUnstable) {
  SampleSummary s = Summarize(Timings(5, 20, 1.0e-3, 0.25, 0));
  EXPECT_FALSE(s.stable);
  EXPECT_THAT(s.problem, HasSubstr("robust CV"));
}

TEST(ComparisonTest, TooFewSamplesCannotBeJudged) {
  std::vector<double> three = {1e-3, 1e-3, 1e-3};
  Comparison c = Compare(Timings(1, 10, 1e-3, 0.01), three);
  EXPECT_EQ(c.verdict, Verdict::kUnstable);
  EXPECT_THAT(c.explanation, HasSubstr("3 samples; at least 5 are needed"));
}

TEST(ComparisonTest, ZeroMedianCannotBeJudged) {
  std::vector<double> zeros(8, 0.0);
  EXPECT_THAT(Summarize(zeros).problem, HasSubstr("median is 0"));
  std::vector<double> bad = {1e-3, 1e-3, -1, 1e-3, 1e-3};
  EXPECT_THAT(Summarize(bad).problem, HasSubstr("finite and non-negative"));
}

TEST(ComparisonTest, WideIntervalIsInconclusive) {
  // Five noisy samples a side: each passes on its own, but the interval of
  // the ratio is too wide to have seen a 10% change.
  std::vector<double> a = {1.00e-3, 1.12e-3, 0.88e-3, 1.08e-3, 0.92e-3};
  std::vector<double> b = {1.02e-3, 1.14e-3, 0.89e-3, 1.11e-3, 0.94e-3};
  Comparison c = Compare(a, b);
  EXPECT_EQ(c.verdict, Verdict::kUnstable) << c.explanation;
  EXPECT_THAT(c.explanation, HasSubstr("inconclusive"));
}

TEST(ComparisonTest, ConstantSamplesCompareExactly) {
  std::vector<double> a(10, 2e-3);
  Comparison same = Compare(a, a);
  EXPECT_EQ(same.verdict, Verdict::kSame);
  EXPECT_DOUBLE_EQ(same.ci_low, 1.0);
  EXPECT_DOUBLE_EQ(same.ci_high, 1.0);
  std::vector<double> b(10, 2.4e-3);
  Comparison slower = Compare(a, b);
  EXPECT_EQ(slower.verdict, Verdict::kSlower);
  EXPECT_TRUE(slower.regression);
  EXPECT_DOUBLE_EQ(slower.ratio, 1.2);
}

TEST(ComparisonTest, SameSeedSameInterval) {
  std::vector<double> a = Timings(21, 15, 1.0e-3, 0.04);
  std::vector<double> b = Timings(22, 15, 1.1e-3, 0.04);
  Comparison first = Compare(a, b);
  Comparison second = Compare(a, b);
  EXPECT_EQ(first.ci_low, second.ci_low);
  EXPECT_EQ(first.ci_high, second.ci_high);
  EXPECT_EQ(first.resamples, 10000);
  CompareOptions other;
  other.seed = 2;
  Comparison reseeded = Compare(a, b, other);
  EXPECT_NEAR(reseeded.ci_low, first.ci_low, 0.02);
  EXPECT_EQ(reseeded.ratio, first.ratio);
}

TEST(ComparisonTest, VerdictNames) {
  EXPECT_STREQ(VerdictName(Verdict::kFaster), "faster");
  EXPECT_STREQ(VerdictName(Verdict::kSlower), "slower");
  EXPECT_STREQ(VerdictName(Verdict::kSame), "same");
  EXPECT_STREQ(VerdictName(Verdict::kUnstable), "unstable");
}

}  // namespace
}  // namespace tether::results
