// The built-in "trace" instrument: installed with SetInstrumentByName("trace"
// [, max_records]), it records every packed call the VM makes (kernels and
// builtins) with its start, duration and argument shapes; GetTrace returns
// the records as a profiling Report (the same shape as Profile's, plus a
// "Start (us)" column), locally or over the wire.
//
// Times are host wall-clock around each call: for asynchronous devices
// (CUDA) a kernel's row is its submission, not its execution — Profile times
// with device timers when that matters.
#ifndef TETHER_RUNTIME_VM_TRACE_H_
#define TETHER_RUNTIME_VM_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/core/function.h"
#include "runtime/profiling/report.h"

namespace tether::vm {

// Thread contract: thread-safe.
class TraceLogObj : public Object {
 public:
  static constexpr int64_t kDefaultMaxRecords = 1'000'000;
  // The most records a client may ask for: a trace lives in the daemon's
  // memory for as long as the VM does.
  static constexpr int64_t kMaxRecords = 16'000'000;
  explicit TraceLogObj(int64_t max_records) : max_records_(max_records) {}
  absl::string_view type_key() const override { return "vm.TraceLog"; }

  // The instrument callback: (func, symbol, before, result, args...).
  absl::StatusOr<Value> OnCall(ArgSpan args);
  // One row per completed call in completion order, plus configuration
  // "Instrument" = "trace" and "Dropped" = calls past max_records. With
  // `clear`, the records are removed afterwards.
  profiling::Report ToReport(bool clear);
  int64_t size() const;

 private:
  struct Open {
    std::string symbol;
    absl::Time start;
  };
  struct Record {
    std::string symbol;
    absl::Duration start;  // since the first call traced
    absl::Duration duration;
    Device device;
    std::string shapes;
  };
  const int64_t max_records_;
  mutable absl::Mutex mu_;
  std::vector<Open> open_ ABSL_GUARDED_BY(mu_);  // calls begun, innermost last
  std::vector<Record> records_ ABSL_GUARDED_BY(mu_);
  absl::Time origin_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// The instrument function that feeds `log`.
Function MakeTraceInstrument(Ref<TraceLogObj> log);

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_TRACE_H_
