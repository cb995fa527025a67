// Tests of the time evaluator's call accounting and control flow. A fake
// timer that charges a fixed time per call makes batch growth deterministic;
// nothing here asserts on wall-clock time.
#include "runtime/profiling/time_evaluator.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/registry.h"
#include "runtime/core/tensor.h"

namespace tether::profiling {
namespace {

using ::testing::HasSubstr;

// A function that counts its calls and can fail on the n-th one.
struct Counter {
  std::atomic<int64_t> calls{0};
  int64_t fail_on = -1;  // 1-based call number that fails, -1 for never

  Function MakeFunction() {
    return Function::FromPacked("test.profiling.count", [this](ArgSpan) -> absl::StatusOr<Value> {
      int64_t n = ++calls;
      if (n == fail_on) return absl::InternalError("kernel failed on call " + std::to_string(n));
      return Value(n);
    });
  }
};

// Charges `ns_per_call` nanoseconds for every call of `counter` between Start and Stop.
class FakeTimer final : public DeviceTimer {
 public:
  FakeTimer(const Counter* counter, int64_t ns_per_call)
      : counter_(counter), ns_per_call_(ns_per_call) {}
  absl::Status Start() override {
    start_ = counter_->calls;
    return absl::OkStatus();
  }
  absl::Status Stop() override {
    stop_ = counter_->calls;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> ElapsedNanos() override { return (stop_ - start_) * ns_per_call_; }

 private:
  const Counter* counter_;
  int64_t ns_per_call_;
  int64_t start_ = 0;
  int64_t stop_ = 0;
};

TimerFactory FakeTimers(const Counter* counter, int64_t ns_per_call) {
  return [counter, ns_per_call]() -> absl::StatusOr<std::unique_ptr<DeviceTimer>> {
    return std::make_unique<FakeTimer>(counter, ns_per_call);
  };
}

TEST(TimeEvaluatorTest, DefaultsMakeElevenCalls) {
  Counter c;
  absl::StatusOr<BenchmarkResult> r =
      RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), TimeEvaluatorOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(c.calls, 11);
  EXPECT_EQ(r->total_calls, 11);
  EXPECT_EQ(r->number_per_repeat, 10);
  ASSERT_EQ(r->results.size(), 1u);
  EXPECT_GE(r->results[0], 0);
}

TEST(TimeEvaluatorTest, RepeatsGiveOneSampleEach) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.number = 4;
  opts.repeat = 3;
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 1 + 4 * 3);
  EXPECT_EQ(c.calls, r->total_calls);
  EXPECT_EQ(r->results.size(), 3u);
}

TEST(TimeEvaluatorTest, MinRepeatMsGrowsNumberWithinOneCallOnly) {
  Counter c;
  Function f = c.MakeFunction();
  TimeEvaluatorOptions opts;
  opts.number = 1;
  opts.min_repeat_ms = 10;
  // 1 ms per call: batch of 1 (1 ms, too short), then
  // max(10 / (1 / 1) + 1, 1 * 1.618) = 11 calls (11 ms).
  absl::StatusOr<BenchmarkResult> r =
      RunTimeEvaluator(f, {}, Device::Cpu(), opts, FakeTimers(&c, 1'000'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 1 + 1 + 11);
  EXPECT_EQ(r->number_per_repeat, 11);
  ASSERT_EQ(r->results.size(), 1u);
  EXPECT_THAT(r->results[0], ::testing::DoubleEq(1e-3));  // the short batch is discarded

  // A second call starts from the original number again (the reference leaked 11).
  c.calls = 0;
  r = RunTimeEvaluator(f, {}, Device::Cpu(), opts, FakeTimers(&c, 1'000'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 13);
  EXPECT_EQ(c.calls, 13);
}

TEST(TimeEvaluatorTest, GrownNumberCarriesAcrossRepeatsOfOneCall) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.number = 1;
  opts.repeat = 2;
  opts.min_repeat_ms = 10;
  absl::StatusOr<BenchmarkResult> r =
      RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts, FakeTimers(&c, 1'000'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 1 + (1 + 11) + 11);
  EXPECT_THAT(r->results,
              ::testing::ElementsAre(::testing::DoubleEq(1e-3), ::testing::DoubleEq(1e-3)));
}

TEST(TimeEvaluatorTest, GrowthUsesTheGoldenRatioWhenItIsLarger) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.number = 100;
  opts.min_repeat_ms = 1;
  // 9 us per call: 100 calls = 0.9 ms; max(1 / 0.009 + 1, 161.8) = 161.8 -> 161.
  absl::StatusOr<BenchmarkResult> r =
      RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts, FakeTimers(&c, 9'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->number_per_repeat, 161);
  EXPECT_EQ(r->total_calls, 1 + 100 + 161);
}

TEST(TimeEvaluatorTest, LimitZeroTimeIterationsBoundsAZeroDurationFunction) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.number = 3;
  opts.repeat = 2;
  opts.min_repeat_ms = 1;
  opts.limit_zero_time_iterations = 5;
  absl::StatusOr<BenchmarkResult> r =
      RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts, FakeTimers(&c, 0));
  ASSERT_TRUE(r.ok()) << r.status();
  // Zero-length batches never grow the number: 5 batches of 3 per repeat.
  EXPECT_EQ(r->total_calls, 1 + 2 * 5 * 3);
  EXPECT_THAT(r->results, ::testing::ElementsAre(0, 0));
}

TEST(TimeEvaluatorTest, ZeroLimitMeansOneBatch) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.number = 2;
  opts.min_repeat_ms = 5;
  opts.limit_zero_time_iterations = 0;
  absl::StatusOr<BenchmarkResult> r =
      RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts, FakeTimers(&c, 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 3);
}

TEST(TimeEvaluatorTest, PreprocRunsOncePerRepeatWithTheSameArgs) {
  Counter c;
  static std::vector<int64_t>* seen = new std::vector<int64_t>();
  seen->clear();
  ASSERT_TRUE(Registry::RegisterPacked(
                  "test.profiling.preproc",
                  [](ArgSpan args) -> absl::StatusOr<Value> {
                    seen->push_back(args.size() == 2 && args[0].is_int() ? args[0].int_value()
                                                                         : -1);
                    return Value();
                  },
                  /*override=*/true)
                  .ok());
  TimeEvaluatorOptions opts;
  opts.number = 2;
  opts.repeat = 4;
  opts.f_preproc = "test.profiling.preproc";
  Value args[] = {Value(int64_t{42}), Value(std::string("x"))};
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), args, Device::Cpu(), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*seen, ::testing::ElementsAre(42, 42, 42, 42));
  EXPECT_EQ(r->total_calls, 1 + 2 * 4);  // preproc calls are not counted
  Registry::Remove("test.profiling.preproc");
}

TEST(TimeEvaluatorTest, UnknownPreprocIsNotFoundBeforeAnyCall) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.f_preproc = "test.profiling.no_such_preproc";
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      r.status().message(),
      HasSubstr("cannot find f_preproc test.profiling.no_such_preproc in the global registry"));
  EXPECT_EQ(c.calls, 0);
}

TEST(TimeEvaluatorTest, CooldownRule) {
  TimeEvaluatorOptions opts;
  opts.repeat = 7;
  opts.cooldown_interval_ms = 1;
  opts.repeats_to_cooldown = 3;
  std::vector<int> after;
  for (int i = 0; i < opts.repeat; ++i) {
    if (ShouldCooldownAfterRepeat(i, opts)) after.push_back(i);
  }
  // After the 3rd and 6th repeats; not after repeat 0, nor the last.
  EXPECT_THAT(after, ::testing::ElementsAre(2, 5));

  opts.repeats_to_cooldown = 1;
  opts.repeat = 3;
  after.clear();
  for (int i = 0; i < opts.repeat; ++i) {
    if (ShouldCooldownAfterRepeat(i, opts)) after.push_back(i);
  }
  EXPECT_THAT(after, ::testing::ElementsAre(0, 1));

  opts.cooldown_interval_ms = 0;
  EXPECT_FALSE(ShouldCooldownAfterRepeat(0, opts));

  // And the loop runs with a (short) cooldown.
  Counter c;
  opts.cooldown_interval_ms = 1;
  opts.number = 1;
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 4);
}

TEST(TimeEvaluatorTest, ErrorsFromTheFunctionPropagateImmediately) {
  Counter c;
  c.fail_on = 3;
  TimeEvaluatorOptions opts;
  opts.repeat = 5;
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("kernel failed on call 3"));
  EXPECT_EQ(c.calls, 3);

  Counter warm;
  warm.fail_on = 1;
  r = RunTimeEvaluator(warm.MakeFunction(), {}, Device::Cpu(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(warm.calls, 1);
}

TEST(TimeEvaluatorTest, PreprocAndTimerErrorsPropagate) {
  Counter c;
  ASSERT_TRUE(Registry::RegisterPacked(
                  "test.profiling.failing_preproc",
                  [](ArgSpan) -> absl::StatusOr<Value> {
                    return absl::FailedPreconditionError("preproc refused");
                  },
                  /*override=*/true)
                  .ok());
  TimeEvaluatorOptions opts;
  opts.f_preproc = "test.profiling.failing_preproc";
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.calls, 1);  // only the warm-up ran
  Registry::Remove("test.profiling.failing_preproc");

  Counter t;
  TimerFactory broken = []() -> absl::StatusOr<std::unique_ptr<DeviceTimer>> {
    return absl::UnavailableError("no timer");
  };
  r = RunTimeEvaluator(t.MakeFunction(), {}, Device::Cpu(), TimeEvaluatorOptions{}, broken);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST(TimeEvaluatorTest, CacheFlushRunsOnCpu) {
  Counter c;
  TimeEvaluatorOptions opts;
  opts.number = 2;
  opts.repeat = 3;
  opts.cache_flush_bytes = 1 << 16;
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 7);
}

TEST(TimeEvaluatorTest, ValidatesOptions) {
  Counter c;
  auto check = [&](TimeEvaluatorOptions opts, const char* fragment) {
    absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), {}, Device::Cpu(), opts);
    ASSERT_FALSE(r.ok()) << fragment;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(fragment));
  };
  TimeEvaluatorOptions o;
  o.number = 0;
  check(o, "number must be >= 1, got 0");
  o = {};
  o.repeat = -1;
  check(o, "repeat must be >= 1, got -1");
  o = {};
  o.min_repeat_ms = -5;
  check(o, "min_repeat_ms must be >= 0, got -5");
  o = {};
  o.limit_zero_time_iterations = -1;
  check(o, "limit_zero_time_iterations");
  o = {};
  o.cooldown_interval_ms = -1;
  check(o, "cooldown_interval_ms");
  o = {};
  o.repeats_to_cooldown = 0;
  check(o, "repeats_to_cooldown must be >= 1, got 0");
  o = {};
  o.cache_flush_bytes = -4;
  check(o, "cache_flush_bytes");
  EXPECT_EQ(c.calls, 0);
}

TEST(TimeEvaluatorTest, CacheFlushPreprocessorIsRegistered) {
  RegisterProfilingFunctions();
  RegisterProfilingFunctions();  // idempotent
  Function flush = Registry::Get(kCacheFlushCpuNonFirstArg);
  ASSERT_TRUE(flush);
  const int64_t shape[] = {1024};
  absl::StatusOr<Tensor> t = Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  ASSERT_TRUE(t.ok()) << t.status();
  Value args[] = {Value(std::string("main")), Value(*t), Value(int64_t{3})};
  absl::StatusOr<Value> out = flush(args);
  ASSERT_TRUE(out.ok()) << out.status();

  // As the f_preproc of a run.
  Counter c;
  TimeEvaluatorOptions opts;
  opts.repeat = 2;
  opts.f_preproc = kCacheFlushCpuNonFirstArg;
  absl::StatusOr<BenchmarkResult> r = RunTimeEvaluator(c.MakeFunction(), args, Device::Cpu(), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->total_calls, 21);
}

}  // namespace
}  // namespace tether::profiling
