// The trace instrument's records and their report.
#include "runtime/vm/trace.h"

#include "runtime/vm/profile_recorder.h"

namespace tether::vm {

absl::StatusOr<Value> TraceLogObj::OnCall(ArgSpan args) {
  if (args.size() < 4 || !args[1].is_string() || !args[2].is_bool()) {
    return TypeError("trace instrument: expected (func, symbol, before, result, args...)");
  }
  const std::string& symbol = args[1].string_value();
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (args[2].bool_value()) {
    if (origin_ == absl::InfinitePast()) origin_ = now;
    open_.push_back({symbol, now});
    return Value(static_cast<int64_t>(0));  // kNoOp
  }
  // A call that failed never reports back: drop the calls it left open.
  while (!open_.empty() && open_.back().symbol != symbol) open_.pop_back();
  if (open_.empty()) return Value();
  Open begun = std::move(open_.back());
  open_.pop_back();
  if (static_cast<int64_t>(records_.size()) >= max_records_) {
    ++dropped_;
    return Value();
  }
  ArgSpan call_args = args.subspan(4);
  Device device = Device::Cpu();
  for (const Value& a : call_args) {
    if (a.is_tensor()) device = a.AsRef<TensorObj>()->device();
  }
  records_.push_back(
      {symbol, begun.start - origin_, now - begun.start, device, ArgumentShapes(call_args)});
  return Value();
}

profiling::Report TraceLogObj::ToReport(bool clear) {
  absl::MutexLock lock(&mu_);
  profiling::ReportBuilder builder;
  for (const Record& r : records_) {
    builder.AddCall(r.symbol, absl::ToDoubleMicroseconds(r.duration), r.device, r.shapes, 1,
                    {{std::string(profiling::kStartColumn),
                      profiling::Duration{absl::ToDoubleMicroseconds(r.start)}}});
  }
  builder.SetConfiguration("Instrument", std::string("trace"));
  builder.SetConfiguration("Dropped", profiling::Count{dropped_});
  profiling::Report report = builder.Build();
  if (clear) {
    records_.clear();
    dropped_ = 0;
    origin_ = absl::InfinitePast();
  }
  return report;
}

int64_t TraceLogObj::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(records_.size());
}

Function MakeTraceInstrument(Ref<TraceLogObj> log) {
  return Function::FromPacked("trace",
                              [log = std::move(log)](ArgSpan args) { return log->OnCall(args); });
}

}  // namespace tether::vm
