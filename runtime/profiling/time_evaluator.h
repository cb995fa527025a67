// The time evaluator: runs a function many times on a device and reports the
// seconds per call, the reference's WrapTimeEvaluator (tvm-semantics.md §4.2)
// with its quirks fixed. The whole loop runs where the function lives, so a
// remote caller's network never enters a measurement.
//
// Algorithm (one RunTimeEvaluator call):
//   0. Validate the options; look up f_preproc (NOT_FOUND before any call).
//   1. Call f(args) once and discard the result (warm-up).
//   2. With cache_flush_bytes > 0, allocate two int32 tensors of
//      cache_flush_bytes / 4 elements on the device.
//   3. Sync the device's default stream.
//   4. For each repeat i in [0, repeat):
//      a. with f_preproc, call f_preproc(args) (its result is discarded);
//      b. measure batches until one lasts at least min_repeat_ms or
//         limit_zero_time_iterations batches measured exactly 0 ns. Before every
//         batch after a non-zero one, grow
//           number = int(max(min_repeat_ms / (duration_ms / number) + 1, number * 1.618)).
//         Each batch: copy flush tensor 2 -> 1 (cache flush), sync, start the
//         device timer, call f(args) `number` times, stop, read the elapsed time;
//      c. record duration / number of the last batch (seconds per call);
//      d. cool down (see ShouldCooldownAfterRepeat), waking early when
//         opts.interrupt is raised.
//
// Differences from the reference:
//   - `number` is local to one RunTimeEvaluator call: it grows across the
//     repeats of that call (so later repeats do not re-grow), but the next call
//     starts from opts.number again. The reference's mutable lambda leaked it.
//   - Cooldown rule: sleep cooldown_interval_ms after repeat i (0-based) iff
//     (i + 1) % repeats_to_cooldown == 0 and i + 1 < repeat, i.e. after every
//     repeats_to_cooldown-th repeat, never after repeat 0 unless
//     repeats_to_cooldown == 1, and never after the last repeat (nothing is
//     measured after it). The reference tested i % repeats_to_cooldown == 0,
//     which also fired after repeat 0 and after the last repeat.
//   - The result carries the raw samples, their statistics, the exact number of
//     calls of f (warm-up included: 1 + the sum of all batch sizes, re-run
//     short batches included) and the final batch size.
//   - Every error (from f, f_preproc, the timer, a copy, a sync) stops the run
//     and is returned as is.
//   - The batch size is capped at 2^31 - 1 calls so growth cannot overflow.
//   - Options are bounded (repeat, min_repeat_ms, cooldown_interval_ms,
//     cache_flush_bytes) and the run is interruptible, cooldowns included.
#ifndef TETHER_RUNTIME_PROFILING_TIME_EVALUATOR_H_
#define TETHER_RUNTIME_PROFILING_TIME_EVALUATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/device.h"
#include "runtime/core/function.h"
#include "runtime/core/value.h"
#include "runtime/device/device_api.h"
#include "runtime/profiling/benchmark_result.h"

namespace tether::profiling {

// The reference's time_evaluator parameters, with its defaults.
// Thread contract: a value type; thread-compatible.
struct TimeEvaluatorOptions {
  int number = 10;                       // calls per batch (the starting batch size)
  int repeat = 1;                        // measured repeats, one sample each
  int min_repeat_ms = 0;                 // grow the batch until one lasts this long
  int limit_zero_time_iterations = 100;  // give up growing after this many 0 ns batches
  int cooldown_interval_ms = 0;          // sleep between repeats (see the rule above)
  int repeats_to_cooldown = 1;           // cool down after every this many repeats
  int64_t cache_flush_bytes = 0;         // bytes of device cache to evict before each batch
  std::string f_preproc;                 // global function called before each repeat
  // When set, a non-zero value (an absl::StatusCode) stops the run between
  // calls and during a cooldown, which returns that code: how a deadline, a
  // closed session or a shutdown ends a measurement. Not owned; must outlive
  // the run.
  const std::atomic<int>* interrupt = nullptr;

  // Upper bounds: a measurement on a shared daemon must end. Validate refuses
  // larger values (the reference has none).
  static constexpr int kMaxRepeat = 1000000;
  static constexpr int kMaxRepeatMs = 600000;  // min_repeat_ms, cooldown_interval_ms
  static constexpr int64_t kMaxCacheFlushBytes = int64_t{1} << 32;

  // INVALID_ARGUMENT naming the field and value for number < 1, repeat < 1,
  // repeats_to_cooldown < 1, any negative field, or a field over its bound.
  absl::Status Validate() const;
};

// Whether RunTimeEvaluator sleeps after repeat `repeat_index` (0-based).
bool ShouldCooldownAfterRepeat(int repeat_index, const TimeEvaluatorOptions& opts);

// Makes the timer for one batch. The default is
// DeviceAPI::Get(device.type)->CreateTimer(device).
using TimerFactory = std::function<absl::StatusOr<std::unique_ptr<DeviceTimer>>()>;

// Times `f(args)` on `device` as described above. `args` must stay valid for
// the call. Errors: INVALID_ARGUMENT for bad options; NOT_FOUND "cannot find
// f_preproc X in the global registry"; UNIMPLEMENTED/UNAVAILABLE from the
// device; any error f or f_preproc returns. Thread contract: as thread-safe as
// f itself; concurrent runs on one device disturb each other's timings.
absl::StatusOr<BenchmarkResult> RunTimeEvaluator(const Function& f, ArgSpan args, Device device,
                                                 const TimeEvaluatorOptions& opts);
// The same with another timer source (a wall clock, or a fake in tests).
absl::StatusOr<BenchmarkResult> RunTimeEvaluator(const Function& f, ArgSpan args, Device device,
                                                 const TimeEvaluatorOptions& opts,
                                                 const TimerFactory& make_timer);

// The name of the built-in preprocessor that evicts the data of every tensor
// argument but the first from the CPU caches (_mm_clflush per 64-byte line on
// x86-64, `dc civac` per line then `dmb ish` on AArch64, nothing elsewhere).
// Non-tensor arguments are skipped (with invoke_stateful the only argument is
// a function name); a tensor not in host memory is INVALID_ARGUMENT.
inline constexpr char kCacheFlushCpuNonFirstArg[] = "cache_flush_cpu_non_first_arg";

// Registers the profiling globals (kCacheFlushCpuNonFirstArg) in the global
// Registry. Idempotent and thread-safe; the VM calls it when it is set up (no
// static initializers, which a static library would drop).
void RegisterProfilingFunctions();

}  // namespace tether::profiling

#endif  // TETHER_RUNTIME_PROFILING_TIME_EVALUATOR_H_
