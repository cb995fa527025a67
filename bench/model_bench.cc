// model_bench: the three example ONNX models (examples/onnx/make_models.py:
// an MLP, a small CNN, a transformer encoder block) timed with Tether and
// with ONNX Runtime on the same inputs, with 1 and 2 threads, in one run.
//
//   Model/Tether/<model>/<threads>  remote time_evaluator on an embedded
//       tetherd (the timing loop runs in the daemon); one sample per
//       benchmark iteration, each the mean of `kNumber` calls.
//   Model/ORT/<model>/<threads>     onnxruntime-node (ONNX Runtime's CPU
//       build from the npm registry; bench/ort/install.sh), driven by
//       bench/ort/ort_bench.js with intra_op_num_threads = threads and full
//       graph optimization; one sample per iteration, same batch size.
//
//   Model/PyTorch/<model>/cuda      the same graph run op by op by PyTorch
//       (eager, float32) on cuda:0, timed with CUDA events
//       (bench/torch/torch_bench.py with $PYTHON, default python3; its
//       result is checked against NumPy's first). Skipped where that python
//       has no PyTorch or PyTorch no GPU: neither Debian nor npm has it, so
//       this anchor exists only where the machine brings it.
//   Model/Tether/<model>/cuda       the model compiled for cuda:0's own
//       architecture, its input set once (copied to the GPU), invoke_stateful
//       timed by the daemon's time_evaluator with CUDA events; skipped
//       without a CUDA device. Its anchor is the PyTorch row, or where that
//       was skipped ONNX Runtime's CPU row with 2 threads (the npm registry
//       has no GPU build of ONNX Runtime).
//
// ratio = Tether latency / the anchor's (the target against ONNX
// Runtime on the CPU: <= 1.5).
// Both sides compute the same model on the same input; the outputs' largest
// magnitude is printed for both so a broken run is visible. Node is only
// needed here: without bench/ort/node_modules the anchor rows are skipped
// with a message, and the Tether rows still run.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "client/npy.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/build.h"
#include "compiler/frontend/onnx/importer.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/vm/virtual_machine.h"
#include "server/daemon.h"

namespace tether {
namespace {

constexpr int kNumber = 20;   // calls per sample
constexpr int kSamples = 15;  // samples (benchmark iterations) per row
const char* const kModels[] = {"mlp", "cnn", "transformer"};

std::filesystem::path& ModelDir() {
  static auto* dir = new std::filesystem::path();
  return *dir;
}

// One table row: Tether and its anchor on the same model and input.
struct Figures {
  std::string anchor;  // what anchor_ms timed
  double tether_ms = 0, anchor_ms = 0;
  double tether_out = 0, anchor_out = 0;
};
std::map<std::string, Figures>& Results() {
  static auto* r = new std::map<std::string, Figures>();
  return *r;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// One embedded daemon and session for the whole run.
struct Remote {
  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<client::RemoteSession> session;
};
absl::StatusOr<Remote*> GetRemote() {
  static Remote* remote = nullptr;
  if (remote != nullptr) return remote;
  auto r = std::make_unique<Remote>();
  server::DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.log_events = false;
  TETHER_ASSIGN_OR_RETURN(r->daemon, server::Daemon::Start(options));
  client::ConnectOptions connect;
  connect.client_name = "model_bench";
  TETHER_ASSIGN_OR_RETURN(r->session, client::RemoteSession::Connect(r->daemon->target(), connect));
  remote = r.release();
  return remote;
}

// The model compiled for `target` (empty: this host) and uploaded, once
// each.
absl::StatusOr<std::string> Uploaded(const std::string& model, const std::string& target = "") {
  static auto* shas = new std::map<std::string, std::string>();
  const std::string key = absl::StrCat(model, "|", target);
  if (auto it = shas->find(key); it != shas->end()) return it->second;
  TETHER_ASSIGN_OR_RETURN(Remote * remote, GetRemote());
  TETHER_ASSIGN_OR_RETURN(
      compiler::onnx_frontend::ImportedModel imported,
      compiler::onnx_frontend::ImportOnnxFile((ModelDir() / (model + ".onnx")).string()));
  compiler::BuildOptions options;
  if (!target.empty()) options.target = target;
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec,
                          compiler::Build(std::move(imported.module), options));
  std::string bytes = exec->SaveToBytes();
  TETHER_ASSIGN_OR_RETURN(std::string sha, remote->session->UploadModule(bytes));
  (*shas)[key] = sha;
  return sha;
}

// The largest magnitude of a float32 tensor result (0 for anything else).
double MaxAbs(const Value& v) {
  double m = 0;
  if (!v.is_tensor()) return m;
  Tensor t(v.AsRef<TensorObj>());
  if (t->dtype() != DataType::Float(32)) return m;
  const float* p = static_cast<const float*>(t->element_data());
  for (int64_t i = 0; i < t->NumElements(); ++i) m = std::max(m, double{std::fabs(p[i])});
  return m;
}

void TetherModel(benchmark::State& state, const std::string& model, int threads) {
  auto fail = [&](const absl::Status& s) { state.SkipWithError(s.ToString().c_str()); };
  absl::StatusOr<std::string> sha = Uploaded(model);
  if (!sha.ok()) return fail(sha.status());
  Remote* remote = *GetRemote();
  client::RemoteVmOptions vm_options;
  vm_options.num_threads = threads;
  auto vm = client::RemoteVM::Create(remote->session.get(), *sha, {Device::Cpu()}, "", vm_options);
  if (!vm.ok()) return fail(vm.status());
  absl::StatusOr<Tensor> x = client::ReadNpyFile((ModelDir() / (model + ".x.npy")).string());
  if (!x.ok()) return fail(x.status());
  std::vector<Value> args = {Value(*x)};
  absl::StatusOr<Value> out = (*vm)->Invoke("main", args);  // warm-up, and the output check
  if (!out.ok()) return fail(out.status());
  // Warm up to a steady state first (about 300 ms of calls): the first few
  // hundred calls of a process that wakes a second core run several times
  // slower on these machines. The ORT side warms up likewise in its process.
  profiling::TimeEvaluatorOptions warm;
  warm.number = kNumber;
  warm.min_repeat_ms = 300;
  if (auto w = (*vm)->TimeEvaluator("main", Device::Cpu(), warm, args); !w.ok()) {
    return fail(w.status());
  }
  profiling::TimeEvaluatorOptions timing;
  timing.number = kNumber;
  std::vector<double> samples;
  for (auto _ : state) {
    auto r = (*vm)->TimeEvaluator("main", Device::Cpu(), timing, args);
    if (!r.ok()) return fail(r.status());
    state.SetIterationTime(r->mean);
    samples.push_back(r->mean * 1e3);
  }
  Figures& f = Results()[absl::StrCat(model, " t", threads)];
  f.tether_ms = Median(samples);
  f.tether_out = MaxAbs(*out);
  state.counters["ms"] = f.tether_ms;
  if (f.anchor_ms > 0) state.counters["ratio"] = f.tether_ms / f.anchor_ms;
}

// The model on cuda:0 (see the file comment).
void TetherGpuModel(benchmark::State& state, const std::string& model) {
  auto fail = [&](const absl::Status& s) { state.SkipWithError(s.ToString().c_str()); };
  const Device gpu = Device::Cuda();
  absl::StatusOr<std::string> target = compiler::CudaTargetForDevice(gpu);
  if (!target.ok()) return fail(target.status());
  absl::StatusOr<std::string> sha = Uploaded(model, *target);
  if (!sha.ok()) return fail(sha.status());
  Remote* remote = *GetRemote();
  auto vm = client::RemoteVM::Create(remote->session.get(), *sha, {gpu});
  if (!vm.ok()) return fail(vm.status());
  absl::StatusOr<Tensor> x = client::ReadNpyFile((ModelDir() / (model + ".x.npy")).string());
  if (!x.ok()) return fail(x.status());
  Value args[] = {Value(*x)};
  Value name[] = {Value(std::string("main"))};
  // The input crosses to the GPU once; the output is checked once.
  if (absl::Status s = (*vm)->SetInput("main", args); !s.ok()) return fail(s);
  if (absl::Status s = (*vm)->InvokeStateful("main"); !s.ok()) return fail(s);
  absl::StatusOr<Value> out = (*vm)->GetOutputs("main");
  if (!out.ok()) return fail(out.status());
  profiling::TimeEvaluatorOptions timing;
  timing.number = kNumber;
  timing.min_repeat_ms = 300;  // the warm-up
  if (auto w = (*vm)->TimeEvaluator(vm::kInvokeStatefulName, gpu, timing, name); !w.ok()) {
    return fail(w.status());
  }
  timing.min_repeat_ms = 0;
  std::vector<double> samples;
  for (auto _ : state) {
    auto r = (*vm)->TimeEvaluator(vm::kInvokeStatefulName, gpu, timing, name);
    if (!r.ok()) return fail(r.status());
    state.SetIterationTime(r->mean);
    samples.push_back(r->mean * 1e3);
  }
  Figures& f = Results()[absl::StrCat(model, " cuda:0")];
  f.tether_ms = Median(samples);
  f.tether_out = MaxAbs(*out);
  if (f.anchor_ms == 0) {  // no PyTorch: ONNX Runtime on the CPU
    const Figures& cpu = Results()[absl::StrCat(model, " t2")];
    f.anchor = cpu.anchor + " t2";
    f.anchor_ms = cpu.anchor_ms;
    f.anchor_out = cpu.anchor_out;
  }
  state.counters["ms"] = f.tether_ms;
  if (f.anchor_ms > 0) state.counters["ratio"] = f.tether_ms / f.anchor_ms;
}

// The python that runs make_models.py and torch_bench.py: $PYTHON, or
// Debian's python3.
std::string Python() {
  const char* p = std::getenv("PYTHON");
  return p != nullptr ? p : "/usr/bin/python3";
}

// Runs ort_bench.js and returns its JSON line.
absl::StatusOr<std::string> RunNode(const std::string& model, int threads) {
  std::filesystem::path script =
      std::filesystem::path(TETHER_SOURCE_DIR) / "bench/ort/ort_bench.js";
  std::filesystem::path out = ModelDir() / absl::StrCat("ort_", model, "_", threads, ".json");
  std::string cmd =
      absl::StrCat("node '", script.string(), "' '", (ModelDir() / (model + ".onnx")).string(),
                   "' 'x=", (ModelDir() / (model + ".x.npy")).string(), "' ", threads, " ",
                   kSamples, " ", kNumber, " > '", out.string(), "'");
  if (std::system(cmd.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("onnxruntime-node failed: ", cmd));
  }
  return ReadFileToString(out.string());
}

// The numbers after "key": in a flat JSON object (ours, from ort_bench.js
// or torch_bench.py).
std::vector<double> JsonNumbers(const std::string& json, const std::string& key) {
  std::vector<double> v;
  size_t at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return v;
  const char* p = json.c_str() + at + key.size() + 3;
  while (*p == ' ') ++p;
  bool list = *p == '[';
  if (list) ++p;
  while (true) {
    char* end = nullptr;
    double d = std::strtod(p, &end);
    if (end == p) break;
    v.push_back(d);
    p = end;
    if (!list || *p != ',') break;
    ++p;
  }
  return v;
}

void OrtModel(benchmark::State& state, const std::string& model, int threads) {
  if (!std::filesystem::exists(std::filesystem::path(TETHER_SOURCE_DIR) /
                               "bench/ort/node_modules/onnxruntime-node")) {
    state.SkipWithError("onnxruntime-node is not installed: run bench/ort/install.sh");
    return;
  }
  absl::StatusOr<std::string> json = RunNode(model, threads);
  if (!json.ok()) {
    state.SkipWithError(json.status().ToString().c_str());
    return;
  }
  std::vector<double> samples = JsonNumbers(*json, "samples_ms");
  size_t i = 0;
  for (auto _ : state) state.SetIterationTime(samples[i++ % samples.size()] / 1e3);
  Figures& f = Results()[absl::StrCat(model, " t", threads)];
  f.anchor = "ORT cpu";
  f.anchor_ms = Median(samples);
  std::vector<double> out = JsonNumbers(*json, "max_abs_out");
  f.anchor_out = out.empty() ? 0 : out[0];
  state.counters["ms"] = f.anchor_ms;
}

// The model on cuda:0 with PyTorch (see the file comment).
void TorchModel(benchmark::State& state, const std::string& model) {
  std::filesystem::path script =
      std::filesystem::path(TETHER_SOURCE_DIR) / "bench/torch/torch_bench.py";
  std::filesystem::path out = ModelDir() / absl::StrCat("torch_", model, ".json");
  auto file = [&](const char* suffix) { return (ModelDir() / (model + suffix)).string(); };
  std::string cmd = absl::StrCat(Python(), " '", script.string(), "' '", file(".onnx"), "' '",
                                 file(".x.npy"), "' '", file(".expected.npy"), "' ", kSamples, " ",
                                 kNumber, " > '", out.string(), "'");
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    state.SkipWithError(WIFEXITED(rc) && WEXITSTATUS(rc) == 2
                            ? "no PyTorch with a CUDA device for $PYTHON"
                            : absl::StrCat("torch_bench.py failed: ", cmd).c_str());
    return;
  }
  absl::StatusOr<std::string> json = ReadFileToString(out.string());
  std::vector<double> samples =
      json.ok() ? JsonNumbers(*json, "samples_ms") : std::vector<double>{};
  if (samples.empty()) {
    state.SkipWithError(absl::StrCat("no samples from torch_bench.py in ", out.string()).c_str());
    return;
  }
  size_t i = 0;
  for (auto _ : state) state.SetIterationTime(samples[i++ % samples.size()] / 1e3);
  Figures& f = Results()[absl::StrCat(model, " cuda:0")];
  f.anchor = "PyTorch cuda:0";
  f.anchor_ms = Median(samples);
  std::vector<double> max_out = JsonNumbers(*json, "max_abs_out");
  f.anchor_out = max_out.empty() ? 0 : max_out[0];
  state.counters["ms"] = f.anchor_ms;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  using tether::ModelDir;
  ModelDir() =
      std::filesystem::temp_directory_path() / absl::StrCat("tether-model-bench-", getpid());
  std::string make =
      absl::StrCat(tether::Python(), " '", TETHER_SOURCE_DIR, "/examples/onnx/make_models.py' '",
                   ModelDir().string(), "' > /dev/null");
  if (std::system(make.c_str()) != 0) {
    std::fprintf(stderr, "model_bench: %s failed\n", make.c_str());
    return 1;
  }
  for (const char* model : tether::kModels) {
    for (int threads : {1, 2}) {
      std::string m = model;
      benchmark::RegisterBenchmark(
          absl::StrCat("Model/ORT/", m, "/", threads).c_str(),
          [m, threads](benchmark::State& s) { tether::OrtModel(s, m, threads); })
          ->UseManualTime()
          ->Iterations(tether::kSamples)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(
          absl::StrCat("Model/Tether/", m, "/", threads).c_str(),
          [m, threads](benchmark::State& s) { tether::TetherModel(s, m, threads); })
          ->UseManualTime()
          ->Iterations(tether::kSamples)
          ->Unit(benchmark::kMillisecond);
    }
  }
  // After the CPU rows: the ORT anchor with 2 threads is measured by then.
  for (const char* model : tether::kModels) {
    std::string m = model;
    benchmark::RegisterBenchmark(absl::StrCat("Model/PyTorch/", m, "/cuda").c_str(),
                                 [m](benchmark::State& s) { tether::TorchModel(s, m); })
        ->UseManualTime()
        ->Iterations(tether::kSamples)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(absl::StrCat("Model/Tether/", m, "/cuda").c_str(),
                                 [m](benchmark::State& s) { tether::TetherGpuModel(s, m); })
        ->UseManualTime()
        ->Iterations(tether::kSamples)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::printf("\n%-18s %-18s %12s %12s %8s %14s\n", "model", "anchor", "anchor (ms)", "Tether (ms)",
              "ratio", "max|out| a/t");
  for (const auto& [name, f] : tether::Results()) {
    if (f.tether_ms == 0 && f.anchor_ms == 0) continue;
    std::printf("%-18s %-18s %12.4f %12.4f %8.2f %7.3f/%-7.3f\n", name.c_str(), f.anchor.c_str(),
                f.anchor_ms, f.tether_ms, f.anchor_ms > 0 ? f.tether_ms / f.anchor_ms : 0.0,
                f.anchor_out, f.tether_out);
  }
  std::error_code ec;
  std::filesystem::remove_all(ModelDir(), ec);
  benchmark::Shutdown();
  return 0;
}
