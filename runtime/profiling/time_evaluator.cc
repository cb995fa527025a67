// The time evaluator loop and the built-in cache-flush preprocessor.
#include "runtime/profiling/time_evaluator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/core/tensor.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace tether::profiling {
namespace {

constexpr double kGoldenRatio = 1.618;
constexpr int64_t kMaxBatch = std::numeric_limits<int32_t>::max();

absl::Status CheckNonNegative(const char* field, int64_t value) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("time evaluator option ", field, " must be >= 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const char* field, int64_t value) {
  if (value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("time evaluator option ", field, " must be >= 1, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckAtMost(const char* field, int64_t value, int64_t bound) {
  if (value > bound) {
    return absl::InvalidArgumentError(
        absl::StrCat("time evaluator option ", field, " must be <= ", bound, ", got ", value));
  }
  return absl::OkStatus();
}

// The status a raised interrupt flag stands for; OK when it is not raised.
absl::Status Interrupted(const std::atomic<int>* interrupt, const char* where) {
  if (interrupt == nullptr) return absl::OkStatus();
  int code = interrupt->load(std::memory_order_relaxed);
  if (code == 0) return absl::OkStatus();
  return WithErrorKind(absl::Status(static_cast<absl::StatusCode>(code),
                                    absl::StrCat("time evaluator stopped ", where)),
                       ErrorKind::kCancelled);
}

// Sleeps `ms` milliseconds, waking every few milliseconds to look at the
// interrupt flag; returns its status when raised.
absl::Status InterruptibleSleep(int ms, const std::atomic<int>* interrupt) {
  const absl::Time end = absl::Now() + absl::Milliseconds(ms);
  for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
    TETHER_RETURN_IF_ERROR(Interrupted(interrupt, "during a cooldown"));
    absl::SleepFor(std::min(end - now, absl::Milliseconds(interrupt != nullptr ? 5 : ms)));
  }
  return Interrupted(interrupt, "during a cooldown");
}

// Evicts [data, data + nbytes) from every cache level.
void FlushCpuCache(const void* data, size_t nbytes) {
  if (nbytes == 0 || data == nullptr) return;
#if defined(__x86_64__) || defined(_M_X64)
  const char* p = static_cast<const char*>(data);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + nbytes;
  for (uintptr_t addr = begin; addr < end; addr += 64) {
    _mm_clflush(reinterpret_cast<const void*>(addr));
  }
  _mm_mfence();
#elif defined(__aarch64__)
  uint64_t ctr = 0;
  asm volatile("mrs %0, ctr_el0" : "=r"(ctr));
  const uintptr_t line = uintptr_t{4} << ((ctr >> 16) & 0xF);  // DminLine: log2 of words
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(line - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + nbytes;
  for (uintptr_t addr = begin; addr < end; addr += line) {
    asm volatile("dc civac, %0" : : "r"(addr) : "memory");
  }
  asm volatile("dmb ish" : : : "memory");
#else
  (void)data;
  (void)nbytes;
#endif
}

bool IsHostAccessible(DLDeviceType type) {
  return type == kDLCPU || type == kDLCUDAHost || type == kDLCUDAManaged;
}

absl::StatusOr<Value> CacheFlushCpuNonFirstArg(ArgSpan args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].is_tensor()) continue;
    Ref<TensorObj> t = args[i].AsRef<TensorObj>();
    if (!IsHostAccessible(t->device().type)) {
      return absl::InvalidArgumentError(absl::StrCat(kCacheFlushCpuNonFirstArg, ": argument ", i,
                                                     " is on ", t->device().ToString(),
                                                     ", expected host memory"));
    }
    FlushCpuCache(t->element_data(), static_cast<size_t>(std::max<int64_t>(0, t->NumBytes())));
  }
  return Value();
}

}  // namespace

absl::Status TimeEvaluatorOptions::Validate() const {
  TETHER_RETURN_IF_ERROR(CheckPositive("number", number));
  TETHER_RETURN_IF_ERROR(CheckPositive("repeat", repeat));
  TETHER_RETURN_IF_ERROR(CheckNonNegative("min_repeat_ms", min_repeat_ms));
  TETHER_RETURN_IF_ERROR(
      CheckNonNegative("limit_zero_time_iterations", limit_zero_time_iterations));
  TETHER_RETURN_IF_ERROR(CheckNonNegative("cooldown_interval_ms", cooldown_interval_ms));
  TETHER_RETURN_IF_ERROR(CheckPositive("repeats_to_cooldown", repeats_to_cooldown));
  TETHER_RETURN_IF_ERROR(CheckNonNegative("cache_flush_bytes", cache_flush_bytes));
  TETHER_RETURN_IF_ERROR(CheckAtMost("repeat", repeat, kMaxRepeat));
  TETHER_RETURN_IF_ERROR(CheckAtMost("min_repeat_ms", min_repeat_ms, kMaxRepeatMs));
  TETHER_RETURN_IF_ERROR(CheckAtMost("cooldown_interval_ms", cooldown_interval_ms, kMaxRepeatMs));
  TETHER_RETURN_IF_ERROR(CheckAtMost("cache_flush_bytes", cache_flush_bytes, kMaxCacheFlushBytes));
  return absl::OkStatus();
}

bool ShouldCooldownAfterRepeat(int repeat_index, const TimeEvaluatorOptions& opts) {
  if (opts.cooldown_interval_ms <= 0 || opts.repeats_to_cooldown < 1) return false;
  if (repeat_index + 1 >= opts.repeat) return false;
  return (repeat_index + 1) % opts.repeats_to_cooldown == 0;
}

absl::StatusOr<BenchmarkResult> RunTimeEvaluator(const Function& f, ArgSpan args, Device device,
                                                 const TimeEvaluatorOptions& opts) {
  TETHER_RETURN_IF_ERROR(opts.Validate());
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(device.type));
  return RunTimeEvaluator(f, args, device, opts,
                          [api, device] { return api->CreateTimer(device); });
}

absl::StatusOr<BenchmarkResult> RunTimeEvaluator(const Function& f, ArgSpan args, Device device,
                                                 const TimeEvaluatorOptions& opts,
                                                 const TimerFactory& make_timer) {
  TETHER_RETURN_IF_ERROR(opts.Validate());
  if (!f) return absl::InvalidArgumentError("time evaluator got a null function");
  if (!make_timer) return absl::InvalidArgumentError("time evaluator got a null timer factory");
  Function preproc;
  if (!opts.f_preproc.empty()) {
    preproc = Registry::Get(opts.f_preproc);
    if (!preproc) {
      return NotFoundError("cannot find f_preproc ", opts.f_preproc, " in the global registry");
    }
  }
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(device.type));

  int64_t total_calls = 0;
  // Warm-up: triggers lazy initialization; its result is dropped.
  {
    ++total_calls;
    absl::StatusOr<Value> warm = f(args);
    if (!warm.ok()) return warm.status();
  }

  Tensor flush_dst;
  Tensor flush_src;
  if (opts.cache_flush_bytes > 0) {
    const int64_t elems[] = {opts.cache_flush_bytes / 4};
    TETHER_ASSIGN_OR_RETURN(flush_dst, Tensor::Empty(elems, DataType::Int(32), device));
    TETHER_ASSIGN_OR_RETURN(flush_src, Tensor::Empty(elems, DataType::Int(32), device));
  }
  TETHER_RETURN_IF_ERROR(api->Sync(device, nullptr));

  int64_t number = opts.number;  // local to this call, unlike the reference
  std::vector<double> samples;
  samples.reserve(opts.repeat);
  for (int i = 0; i < opts.repeat; ++i) {
    if (preproc) {
      absl::StatusOr<Value> r = preproc(args);
      if (!r.ok()) return r.status();
    }
    double duration_ms = 0.0;
    int zero_batches = 0;
    do {
      if (duration_ms > 0.0) {
        double grown =
            std::max(opts.min_repeat_ms / (duration_ms / static_cast<double>(number)) + 1,
                     static_cast<double>(number) * kGoldenRatio);
        number = static_cast<int64_t>(std::min(grown, static_cast<double>(kMaxBatch)));
      }
      if (flush_dst) TETHER_RETURN_IF_ERROR(flush_dst.CopyFrom(flush_src));
      TETHER_RETURN_IF_ERROR(api->Sync(device, nullptr));
      TETHER_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTimer> timer, make_timer());
      TETHER_RETURN_IF_ERROR(timer->Start());
      for (int64_t j = 0; j < number; ++j) {
        ++total_calls;
        absl::StatusOr<Value> r = f(args);
        if (!r.ok()) return r.status();
      }
      TETHER_RETURN_IF_ERROR(timer->Stop());
      TETHER_ASSIGN_OR_RETURN(int64_t nanos, timer->ElapsedNanos());
      if (nanos <= 0) ++zero_batches;
      duration_ms = static_cast<double>(std::max<int64_t>(nanos, 0)) / 1e6;
    } while (duration_ms < opts.min_repeat_ms && zero_batches < opts.limit_zero_time_iterations);

    samples.push_back(duration_ms / 1e3 / static_cast<double>(number));
    if (ShouldCooldownAfterRepeat(i, opts)) {
      TETHER_RETURN_IF_ERROR(InterruptibleSleep(opts.cooldown_interval_ms, opts.interrupt));
    }
    TETHER_RETURN_IF_ERROR(Interrupted(opts.interrupt, "between repeats"));
  }
  return BenchmarkResult::FromSamples(std::move(samples), total_calls, number);
}

void RegisterProfilingFunctions() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    // A test or embedder may have registered its own version first; keep it.
    if (Registry::Get(kCacheFlushCpuNonFirstArg)) return;
    absl::Status s = Registry::RegisterPacked(kCacheFlushCpuNonFirstArg, CacheFlushCpuNonFirstArg);
    (void)s;  // ALREADY_EXISTS from a concurrent registration is fine.
    // It reads its arguments' memory and writes none: a daemon's clients
    // may name it (as f_preproc, or through call_global).
    s = Registry::SetRemoteCallable(kCacheFlushCpuNonFirstArg);
    (void)s;
  });
}

}  // namespace tether::profiling
