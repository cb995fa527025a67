// VM benchmarks, each with its anchor measured in the same run:
//   VmDispatch: a function of 1,000 Call instructions to a trivial
//     registered function, against the floor — a C++ loop calling the same
//     Function object directly. Reports ns per Call instruction and the ratio.
//   VmLoop: a counting loop of If, Goto and two Calls per iteration (10,000
//     iterations), against a C++ loop making the same two calls.
//   Both run as bytecode (/0, the interpreter) and, where the compiler is
//     built, compiled to native code (/1, exec_mode="compiled").
//   TimeEvaluatorOverhead: the time evaluator on an empty bytecode function,
//     reporting ns per timed call, beside one Invoke of the same function
//     timed by Google Benchmark.
#include <chrono>
#include <memory>

#include "benchmark/benchmark.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"
#ifdef TETHER_VM_BENCH_COMPILED
#include "compiler/build.h"
#endif

namespace tether::vm {
namespace {

constexpr int kCalls = 1000;
using Clock = std::chrono::steady_clock;

void RegisterBenchFunctions() {
  static const bool done = [] {
    (void)Registry::RegisterTyped("bench.identity", [](int64_t x) { return x; });
    (void)Registry::RegisterTyped("bench.positive", [](int64_t x) { return x > 0; });
    (void)Registry::RegisterTyped("bench.dec", [](int64_t x) { return x - 1; });
    return true;
  }();
  (void)done;
}

// The VM of `b`'s executable; with `compiled`, its functions compiled to
// native code first. Null (and the reason in `state`) when that fails.
std::unique_ptr<LocalVirtualMachine> MakeVm(ExecBuilder& b, benchmark::State& state,
                                            bool compiled = false) {
  auto exec = b.Get();
  if (!exec.ok()) {
    state.SkipWithError(std::string(exec.status().message()).c_str());
    return nullptr;
  }
  if (compiled) {
#ifdef TETHER_VM_BENCH_COMPILED
    if (absl::Status s = compiler::CompileVMFunctions(exec->get()); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return nullptr;
    }
#else
    state.SkipWithError("built without the compiler: no compiled mode");
    return nullptr;
#endif
  }
  auto vm = LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  if (!vm.ok()) {
    state.SkipWithError(std::string(vm.status().message()).c_str());
    return nullptr;
  }
  return std::move(*vm);
}

// Times `run_vm` (returns false when the VM got it wrong) and its anchor
// `run_floor` once per round, the VM's time as the iteration time; reports
// each per `units` under the names given, and their ratio.
template <typename RunVm, typename RunFloor>
void TimeAgainstFloor(benchmark::State& state, int64_t units, const char* vm_counter,
                      const char* floor_counter, RunVm run_vm, RunFloor run_floor) {
  double vm_ns = 0, floor_ns = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    const bool right = run_vm();
    auto t1 = Clock::now();
    if (!right) {
      state.SkipWithError("the VM computed the wrong result");
      return;
    }
    run_floor();
    auto t2 = Clock::now();
    double v = std::chrono::duration<double, std::nano>(t1 - t0).count();
    state.SetIterationTime(v * 1e-9);
    vm_ns += v;
    floor_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
    ++rounds;
  }
  state.counters[vm_counter] = vm_ns / rounds / units;
  state.counters[floor_counter] = floor_ns / rounds / units;
  state.counters["ratio_vs_floor"] = vm_ns / floor_ns;
}

void BM_VmDispatch(benchmark::State& state) {
  RegisterBenchFunctions();
  ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  for (int i = 0; i < kCalls; ++i) b.EmitCall("bench.identity", {Arg::Register(i == 0 ? 0 : 1)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = MakeVm(b, state, state.range(0) == 1);
  if (!vm) return;
  Function direct = Registry::Get("bench.identity");
  Value arg(int64_t{1});
  ArgSpan args(&arg, 1);
  TimeAgainstFloor(
      state, kCalls, "ns_per_call_instr", "floor_ns_per_call",
      [&] {
        auto out = vm->Invoke("main", args);
        return out.ok() && out->int_value() == 1;
      },
      [&] {
        // The same function object called the same number of times.
        Value x = arg;
        for (int i = 0; i < kCalls; ++i) {
          x = *direct(ArgSpan(&x, 1));
          benchmark::DoNotOptimize(x);
        }
      });
}
BENCHMARK(BM_VmDispatch)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

constexpr int64_t kIterations = 10000;

// main(n): while bench.positive(n): n = bench.dec(n); return n.
void BM_VmLoop(benchmark::State& state) {
  RegisterBenchFunctions();
  ExecBuilder b;
  b.EmitFunction("main", 1, {"n"});
  b.EmitCall("bench.positive", {Arg::Register(0)}, 1);  // pc 0
  b.EmitIf(1, 3);                                       // pc 1: false -> pc 4
  b.EmitCall("bench.dec", {Arg::Register(0)}, 0);       // pc 2
  b.EmitGoto(-3);                                       // pc 3 -> pc 0
  b.EmitRet(0);                                         // pc 4
  b.EndFunction("main");
  auto vm = MakeVm(b, state, state.range(0) == 1);
  if (!vm) return;
  Function positive = Registry::Get("bench.positive");
  Function dec = Registry::Get("bench.dec");
  Value arg(kIterations);
  TimeAgainstFloor(
      state, kIterations, "ns_per_iteration", "floor_ns_per_iteration",
      [&] {
        auto out = vm->Invoke("main", ArgSpan(&arg, 1));
        return out.ok() && out->int_value() == 0;
      },
      [&] {
        // The same two functions called as often, in a C++ loop.
        Value n = arg;
        while (positive(ArgSpan(&n, 1))->bool_value()) {
          n = *dec(ArgSpan(&n, 1));
          benchmark::DoNotOptimize(n);
        }
      });
}
BENCHMARK(BM_VmLoop)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_TimeEvaluatorOverhead(benchmark::State& state) {
  ExecBuilder b;
  b.EmitFunction("empty", 0);
  b.EmitRet(kVoidRegister);
  b.EndFunction("empty");
  auto vm = MakeVm(b, state);
  if (!vm) return;
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
  auto vm = MakeVm(b, state);
  if (!vm) return;
  for (auto _ : state) {
    auto out = vm->Invoke("empty", {});
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_InvokeEmpty);

}  // namespace
}  // namespace tether::vm

BENCHMARK_MAIN();
