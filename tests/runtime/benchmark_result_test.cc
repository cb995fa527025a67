// Tests of BenchmarkResult statistics (reference test_benchmark_result) and
// its summary table.
#include "runtime/profiling/benchmark_result.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::profiling {
namespace {

using ::testing::HasSubstr;

TEST(BenchmarkResultTest, StatisticsMatchTheReference) {
  BenchmarkResult r = BenchmarkResult::FromSamples({1, 2, 2, 5}, 9, 2);
  EXPECT_THAT(r.results, ::testing::ElementsAre(1, 2, 2, 5));
  EXPECT_DOUBLE_EQ(r.mean, 2.5);
  EXPECT_DOUBLE_EQ(r.median, 2);
  EXPECT_DOUBLE_EQ(r.min, 1);
  EXPECT_DOUBLE_EQ(r.max, 5);
  EXPECT_DOUBLE_EQ(r.std, 1.5);  // ddof=0
  EXPECT_EQ(r.total_calls, 9);
  EXPECT_EQ(r.number_per_repeat, 2);
}

TEST(BenchmarkResultTest, MedianOfOddCountIsTheMiddleSample) {
  BenchmarkResult r = BenchmarkResult::FromSamples({9, 1, 4}, 4);
  EXPECT_DOUBLE_EQ(r.median, 4);
  EXPECT_THAT(r.results, ::testing::ElementsAre(9, 1, 4));  // order kept
}

TEST(BenchmarkResultTest, PercentilesInterpolateLinearly) {
  // numpy.percentile([1, 2, 2, 5], q): 50 -> 2, 90 -> 4.1, 99 -> 4.91, 0 -> 1, 100 -> 5.
  BenchmarkResult r = BenchmarkResult::FromSamples({5, 2, 1, 2}, 5);
  EXPECT_DOUBLE_EQ(r.p50(), 2);
  EXPECT_DOUBLE_EQ(r.p90(), 4.1);
  EXPECT_DOUBLE_EQ(r.p99(), 4.91);
  EXPECT_DOUBLE_EQ(r.Percentile(0), 1);
  EXPECT_DOUBLE_EQ(r.Percentile(100), 5);
  EXPECT_DOUBLE_EQ(r.Percentile(250), 5);  // clamped
  EXPECT_DOUBLE_EQ(r.Percentile(-3), 1);

  BenchmarkResult ten = BenchmarkResult::FromSamples({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 11);
  EXPECT_DOUBLE_EQ(ten.p90(), 8.1);
  EXPECT_DOUBLE_EQ(ten.p50(), 4.5);
}

TEST(BenchmarkResultTest, EmptyAndSingleSample) {
  BenchmarkResult empty = BenchmarkResult::FromSamples({}, 1);
  EXPECT_EQ(empty.mean, 0);
  EXPECT_EQ(empty.std, 0);
  EXPECT_EQ(empty.p99(), 0);
  BenchmarkResult one = BenchmarkResult::FromSamples({0.25}, 11);
  EXPECT_EQ(one.mean, 0.25);
  EXPECT_EQ(one.median, 0.25);
  EXPECT_EQ(one.std, 0);
  EXPECT_EQ(one.p90(), 0.25);
}

TEST(BenchmarkResultTest, ToStringPrintsTheSummaryInMilliseconds) {
  BenchmarkResult r = BenchmarkResult::FromSamples({1, 2, 2, 5}, 9);
  std::string s = r.ToString();
  EXPECT_EQ(s,
            "Execution time summary:\n"
            " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n"
            " 2500.0000    2000.0000    5000.0000    1000.0000    1500.0000  \n");
}

}  // namespace
}  // namespace tether::profiling
