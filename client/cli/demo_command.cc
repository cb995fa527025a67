// `tether demo` and `tether run-demo`: a two-layer MLP written as bytecode with
// the ExecBuilder, its weights in the constant pool, its kernels plain C++
// functions registered in this process (generated kernels arrive with the
// compiler). The demo saves the executable, loads it back from the file and
// drives it as a user of the VM API would.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/commands.h"
#include "runtime/core/registry.h"
#include "runtime/memory/allocator.h"
#include "runtime/threading/thread_pool.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"

namespace tether::cli {
namespace {

constexpr int64_t kIn = 32, kHidden = 64, kOut = 10;

// out[n, m] = x[n, k] @ w[k, m] + b[m]
absl::StatusOr<Value> Dense(Tensor x, Tensor w, Tensor b) {
  if (x->ndim() != 2 || w->ndim() != 2 || b->ndim() != 1 || x->shape()[1] != w->shape()[0] ||
      b->shape()[0] != w->shape()[1] || x->dtype() != DataType::Float(32)) {
    return ValueError("demo.dense: incompatible operands ", x.ToString(), ", ", w.ToString(), ", ",
                      b.ToString());
  }
  int64_t n = x->shape()[0], k = x->shape()[1], m = w->shape()[1];
  int64_t shape[] = {n, m};
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, DataType::Float(32), x->device()));
  const float* xp = static_cast<const float*>(x->element_data());
  const float* wp = static_cast<const float*>(w->element_data());
  const float* bp = static_cast<const float*>(b->element_data());
  float* op = static_cast<float*>(out->element_data());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) op[i * m + j] = bp[j];
    for (int64_t p = 0; p < k; ++p) {
      float a = xp[i * k + p];
      for (int64_t j = 0; j < m; ++j) op[i * m + j] += a * wp[p * m + j];
    }
  }
  return Value(out);
}

absl::StatusOr<Value> Relu(Tensor x) {
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(x->shape(), x->dtype(), x->device()));
  const float* xp = static_cast<const float*>(x->element_data());
  float* op = static_cast<float*>(out->element_data());
  for (int64_t i = 0; i < x->NumElements(); ++i) op[i] = xp[i] > 0 ? xp[i] : 0;
  return Value(out);
}

}  // namespace

void RegisterDemoKernels() {
  static const bool registered = [] {
    (void)Registry::RegisterTyped("demo.dense", Dense);
    (void)Registry::RegisterTyped("demo.relu", Relu);
    return true;
  }();
  (void)registered;
}

namespace {

Tensor RandomTensor(std::vector<int64_t> shape, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = dist(rng);
  return *Tensor::FromBytes(shape, DataType::Float(32), values.data(),
                            values.size() * sizeof(float));
}

// main(x: R.Tensor(("n", 32), "float32")) -> (logits (n, 10), hidden (n, 64))
absl::StatusOr<Ref<vm::Executable>> BuildMlp() {
  using vm::Arg;
  std::mt19937 rng(42);
  vm::ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  Value ctx(
      "ErrorContext(fn=main, loc=param[0], param=x, annotation=R.Tensor((n, 32), \"float32\"))");
  b.EmitCall("vm.builtin.check_tensor_info",
             {Arg::Register(0), b.ConvertConstant(Value(int64_t{2})),
              b.ConvertConstant(Value(DataType::Float(32))), b.ConvertConstant(ctx)});
  b.EmitCall("vm.builtin.alloc_shape_heap",
             {Arg::Register(vm::kVMRegister), b.ConvertConstant(Value(int64_t{1}))}, 1);
  // x.shape = (n, 32): n goes to heap slot 0, dim 1 must be 32.
  b.EmitCall("vm.builtin.match_shape",
             {Arg::Register(0), Arg::Register(1), b.ConvertConstant(Value(int64_t{2})),
              b.ConvertConstant(Value(int64_t{1})), b.ConvertConstant(Value(int64_t{0})),
              b.ConvertConstant(Value(int64_t{0})), b.ConvertConstant(Value(kIn)),
              b.ConvertConstant(ctx)});
  b.EmitCall("demo.dense",
             {Arg::Register(0), b.ConvertConstant(RandomTensor({kIn, kHidden}, rng, 0.2f)),
              b.ConvertConstant(RandomTensor({kHidden}, rng, 0.1f))},
             2);
  b.EmitCall("demo.relu", {Arg::Register(2)}, 3);
  b.EmitCall("demo.dense",
             {Arg::Register(3), b.ConvertConstant(RandomTensor({kHidden, kOut}, rng, 0.2f)),
              b.ConvertConstant(RandomTensor({kOut}, rng, 0.1f))},
             4);
  b.EmitCall("vm.builtin.make_tuple", {Arg::Register(4), Arg::Register(3)}, 5);
  b.EmitRet(5);
  b.EndFunction("main");
  b.SetMetadata("producer", "tether demo");
  b.SetMetadata("model", "mlp 32-64-10");
  return b.Get();
}

std::string Preview(const Value& v) {
  if (!v.is_tensor()) return v.ToString();
  Tensor t(v.AsRef<TensorObj>());
  std::string out = absl::StrCat(t.ToString(), "  [");
  const float* p = static_cast<const float*>(t->element_data());
  for (int64_t i = 0; i < std::min<int64_t>(t->NumElements(), 4); ++i) {
    absl::StrAppend(&out, i ? ", " : "", absl::StrFormat("%.4f", p[i]));
  }
  absl::StrAppend(&out, t->NumElements() > 4 ? ", ...]" : "]");
  return out;
}

void PrintOutputs(const Value& out, const std::string& indent) {
  if (out.is_tuple()) {
    const auto& fields = out.AsRef<TupleObj>()->fields;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].is_tuple()) {
        std::printf("%s[%zu]\n", indent.c_str(), i);
        PrintOutputs(fields[i], indent + "  ");
      } else {
        std::printf("%s[%zu] %s\n", indent.c_str(), i, Preview(fields[i]).c_str());
      }
    }
  } else {
    std::printf("%s%s\n", indent.c_str(), Preview(out).c_str());
  }
}

struct Options {
  std::string output = "tether-demo.tx";
  std::string file;
  Device device = Device::Cpu();
  std::string memory_cfg = "pooled";
};

int ParseOptions(const std::vector<std::string>& args, bool want_file, Options* opts) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* name) -> const std::string* {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tether: %s needs a value\n", name);
        return nullptr;
      }
      return &args[++i];
    };
    if (a == "--help") {
      std::printf(
          "usage: tether demo [--output FILE] [--device DEV] [--memory-cfg CFG]\n"
          "       tether run-demo FILE [--device DEV] [--memory-cfg CFG]\n"
          "  --output FILE      where the demo executable is written (default tether-demo.tx)\n"
          "  --device DEV       cpu:0 (default), ...\n"
          "  --memory-cfg CFG   naive | pooled | cpu:0=naive,...\n");
      return 0;
    } else if (a == "--output") {
      const std::string* v = value("--output");
      if (!v) return 2;
      opts->output = *v;
    } else if (a == "--device") {
      const std::string* v = value("--device");
      if (!v) return 2;
      auto d = Device::Parse(*v);
      if (!d.ok()) return Fail("bad --device", d.status()) + 1;
      opts->device = *d;
    } else if (a == "--memory-cfg") {
      const std::string* v = value("--memory-cfg");
      if (!v) return 2;
      opts->memory_cfg = *v;
    } else if (want_file && opts->file.empty() && !a.empty() && a[0] != '-') {
      opts->file = a;
    } else {
      std::fprintf(stderr, "tether: unexpected argument %s\n", a.c_str());
      return 2;
    }
  }
  if (want_file && opts->file.empty()) {
    std::fprintf(stderr, "usage: tether run-demo FILE [--device DEV] [--memory-cfg CFG]\n");
    return 2;
  }
  return -1;  // proceed
}

// Loads `path`, runs the stateful API, timing and profiling on it.
int RunExecutableFile(const std::string& path, const Options& opts) {
  auto exec = vm::Executable::LoadFromFile(path);
  if (!exec.ok()) return Fail("", exec.status());
  std::printf("loaded %s: %zu functions, %zu constants, %lld instructions\n", path.c_str(),
              (*exec)->functions.size(), (*exec)->constants.size(),
              static_cast<long long>((*exec)->num_instructions()));
  auto cfg = memory::MemoryConfig::Parse(opts.memory_cfg);
  if (!cfg.ok()) return Fail("bad --memory-cfg", cfg.status());
  auto machine = vm::LocalVirtualMachine::Create(*exec, {opts.device}, *cfg);
  if (!machine.ok()) return Fail("cannot create the vm", machine.status());
  vm::LocalVirtualMachine& vm = **machine;

  std::mt19937 rng(7);
  Value x = RandomTensor({4, kIn}, rng, 1.0f);
  std::printf("\n== set_input / invoke_stateful / get_outputs ==\n");
  std::printf("input x: %s\n", Preview(x).c_str());
  Value inputs[] = {x};
  if (absl::Status s = vm.SetInput("main", inputs); !s.ok()) return Fail("set_input", s);
  if (absl::Status s = vm.InvokeStateful("main"); !s.ok()) return Fail("invoke_stateful", s);
  auto out = vm.GetOutputs("main");
  if (!out.ok()) return Fail("get_outputs", out.status());
  std::printf("outputs of main (logits, hidden):\n");
  PrintOutputs(*out, "  ");

  std::printf("\n== time_evaluator(\"invoke_stateful\")(\"main\"), number=100 repeat=5 ==\n");
  profiling::TimeEvaluatorOptions timing;
  timing.number = 100;
  timing.repeat = 5;
  Value name[] = {Value("main")};
  auto result = vm.TimeEvaluator(vm::kInvokeStatefulName, opts.device, timing, name);
  if (!result.ok()) return Fail("time_evaluator", result.status());
  std::printf("%s\n", result->ToString().c_str());
  std::printf("p50 %.4f ms  p90 %.4f ms  p99 %.4f ms  over %lld calls (warm-up included)\n",
              result->p50() * 1e3, result->p90() * 1e3, result->p99() * 1e3,
              static_cast<long long>(result->total_calls));

  std::printf("\n== save_function(\"main\", \"saved_main\", x) timed with min_repeat_ms=20 ==\n");
  if (absl::Status s = vm.SaveFunction("main", "saved_main", inputs, /*include_return=*/false);
      !s.ok()) {
    return Fail("save_function", s);
  }
  // The saved function must not be blocked by the stateful inputs of main.
  profiling::TimeEvaluatorOptions saved_timing;
  saved_timing.repeat = 3;
  saved_timing.min_repeat_ms = 20;
  auto saved = vm.TimeEvaluator("saved_main", opts.device, saved_timing, {});
  if (!saved.ok()) return Fail("time_evaluator", saved.status());
  std::printf("%s\n", saved->ToString().c_str());
  std::printf("batch grew to %lld calls per repeat; %lld calls in all\n",
              static_cast<long long>(saved->number_per_repeat),
              static_cast<long long>(saved->total_calls));

  std::printf("\n== profile(\"main\") ==\n");
  auto report = vm.Profile("main", {});
  if (!report.ok()) return Fail("profile", report.status());
  std::printf("%s\n", report->Table().c_str());
  return 0;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  Options opts;
  if (int rc = ParseOptions(args, /*want_file=*/false, &opts); rc >= 0) return rc;
  RegisterDemoKernels();
  auto exec = BuildMlp();
  if (!exec.ok()) return Fail("cannot build the demo executable", exec.status());
  if (absl::Status s = (*exec)->SaveToFile(opts.output); !s.ok()) return Fail("cannot save", s);
  std::printf("== built and saved %s ==\n%s\n", opts.output.c_str(), (*exec)->AsText().c_str());
  return RunExecutableFile(opts.output, opts);
}

int RunDemoFile(const std::vector<std::string>& args) {
  Options opts;
  if (int rc = ParseOptions(args, /*want_file=*/true, &opts); rc >= 0) return rc;
  RegisterDemoKernels();
  return RunExecutableFile(opts.file, opts);
}

}  // namespace tether::cli
