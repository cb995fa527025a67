// VM benchmarks, each with its anchor measured in the same run:
//   VmDispatch: a bytecode function of 1,000 Call instructions to a trivial
//     registered function, against the floor — a C++ loop calling the same
//     Function object directly. Reports ns per Call instruction and the ratio.
//   TimeEvaluatorOverhead: the time evaluator on an empty bytecode function,
//     reporting ns per timed call, beside one Invoke of the same function
//     timed by Google Benchmark.
#include <chrono>
#include <memory>

#include "benchmark/benchmark.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {
namespace {

constexpr int kCalls = 1000;
using Clock = std::chrono::steady_clock;

void RegisterBenchFunctions() {
  static const bool done = [] {
    (void)Registry::RegisterTyped("bench.identity", [](int64_t x) { return x; });
    return true;
  }();
  (void)done;
}

std::unique_ptr<LocalVirtualMachine> MakeVm(ExecBuilder& b) {
  auto exec = b.Get();
  if (!exec.ok()) return nullptr;
  auto vm = LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  return vm.ok() ? std::move(*vm) : nullptr;
}

void BM_VmDispatch(benchmark::State& state) {
  RegisterBenchFunctions();
  ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  for (int i = 0; i < kCalls; ++i) b.EmitCall("bench.identity", {Arg::Register(i == 0 ? 0 : 1)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = MakeVm(b);
  if (!vm) {
    state.SkipWithError("cannot build the dispatch executable");
    return;
  }
  Function direct = Registry::Get("bench.identity");
  Value arg(int64_t{1});
  ArgSpan args(&arg, 1);
  double vm_ns = 0, floor_ns = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto out = vm->Invoke("main", args);
    auto t1 = Clock::now();
    benchmark::DoNotOptimize(out);
    // The floor: the same function object called the same number of times.
    Value x = arg;
    for (int i = 0; i < kCalls; ++i) {
      auto r = direct(ArgSpan(&x, 1));
      x = *std::move(r);
      benchmark::DoNotOptimize(x);
    }
    auto t2 = Clock::now();
    double v = std::chrono::duration<double, std::nano>(t1 - t0).count();
    state.SetIterationTime(v * 1e-9);
    vm_ns += v;
    floor_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
    ++rounds;
  }
  state.counters["ns_per_call_instr"] = vm_ns / rounds / kCalls;
  state.counters["floor_ns_per_call"] = floor_ns / rounds / kCalls;
  state.counters["ratio_vs_floor"] = vm_ns / floor_ns;
}
BENCHMARK(BM_VmDispatch)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_TimeEvaluatorOverhead(benchmark::State& state) {
  ExecBuilder b;
  b.EmitFunction("empty", 0);
  b.EmitRet(kVoidRegister);
  b.EndFunction("empty");
  auto vm = MakeVm(b);
  if (!vm) {
    state.SkipWithError("cannot build the empty executable");
    return;
  }
  profiling::TimeEvaluatorOptions options;
  options.number = 10000;
  options.repeat = 10;
  double sum_ns = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    auto result = vm->TimeEvaluator("empty", Device::Cpu(), options, {});
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    sum_ns += result->median * 1e9;
    ++rounds;
  }
  state.counters["ns_per_timed_call"] = sum_ns / rounds;
}
BENCHMARK(BM_TimeEvaluatorOverhead)->Unit(benchmark::kMillisecond);

// The anchor of the overhead: one Invoke of the empty function, timed by Google Benchmark.
void BM_InvokeEmpty(benchmark::State& state) {
  ExecBuilder b;
  b.EmitFunction("empty", 0);
  b.EmitRet(kVoidRegister);
  b.EndFunction("empty");
  auto vm = MakeVm(b);
  for (auto _ : state) {
    auto out = vm->Invoke("empty", {});
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_InvokeEmpty);

}  // namespace
}  // namespace tether::vm

BENCHMARK_MAIN();
