// model_bench: ONNX models timed with Tether and with ONNX Runtime on the
// same inputs, with 1 and 2 threads, in one run. By default the three
// example models (examples/onnx/make_models.py: an MLP, a small CNN, a
// transformer encoder block); with flags, the corpus of realistic generated
// models or any directory of models:
//
//   model_bench [--corpus] [--model_dir=DIR] [--models=A,B,...] [--number=N]
//               [Google Benchmark flags]
//
//   --corpus         bench/models/make_corpus.py's models (MobileNetV3,
//                    a DBNet detector, ResNet-50, a BERT-base layer, an
//                    LSTM stack, written as exporters write them) instead
//                    of the examples, generated into a scratch directory.
//   --model_dir=DIR  the models already in DIR, nothing generated: each
//                    NAME.onnx with its one input "x" in NAME.x.npy (make
//                    them once with `make_corpus.py DIR`).
//   --models=A,B     only these names (default: all of the set or of DIR).
//   --number=N       calls per sample on both sides (default 20 for the
//                    examples, 5 otherwise: the corpus models take
//                    10-200 ms a call).
//   --rounds=R       every row R times over (default 1); the table holds
//                    each side's fastest round (a shared cloud VM's
//                    neighbours slow one round or another by up to 1.8x).
//
//   Model/Tether/<model>/<threads>  remote time_evaluator on an embedded
//       tetherd (the timing loop runs in the daemon); one sample per
//       benchmark iteration, each the mean of --number calls.
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
// Runtime on the CPU: <= 1.5). compile = the wall seconds of
// ImportOnnxFile + Build for that row's target, once per model.
// Both sides compute the same model on the same input; the outputs' largest
// magnitude is printed for both so a broken run is visible. Node is only
// needed here: without bench/ort/node_modules the anchor rows are skipped
// with a message, and the Tether rows still run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
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

constexpr int kSamples = 15;  // samples (benchmark iterations) per row
const char* const kExamples[] = {"mlp", "cnn", "transformer"};
const char* const kCorpus[] = {"mobilenetv3", "dbnet", "resnet50", "bert", "lstm"};

int& Number() {  // calls per sample (--number)
  static int number = 20;
  return number;
}

// Where the models are read from.
std::filesystem::path& ModelDir() {
  static auto* dir = new std::filesystem::path();
  return *dir;
}

// This run's scratch directory (generated models, the anchors' JSON),
// removed at the end.
std::filesystem::path& WorkDir() {
  static auto* dir = new std::filesystem::path();
  return *dir;
}

// One table row: Tether and its anchor on the same model and input.
struct Figures {
  std::string anchor;  // what anchor_ms timed
  double tether_ms = 0, anchor_ms = 0;
  double tether_out = 0, anchor_out = 0;
  double compile_s = 0;  // ImportOnnxFile + Build for this row's target
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

// A model compiled and uploaded: its module's hash on the daemon, and how
// long the compile took.
struct UploadedModel {
  std::string sha;
  double compile_s = 0;  // wall seconds of ImportOnnxFile + Build
};

// The model compiled for `target` (empty: this host) and uploaded, once
// each.
absl::StatusOr<UploadedModel> Uploaded(const std::string& model, const std::string& target = "") {
  static auto* uploaded = new std::map<std::string, UploadedModel>();
  const std::string key = absl::StrCat(model, "|", target);
  if (auto it = uploaded->find(key); it != uploaded->end()) return it->second;
  TETHER_ASSIGN_OR_RETURN(Remote * remote, GetRemote());
  const absl::Time start = absl::Now();
  TETHER_ASSIGN_OR_RETURN(
      compiler::onnx_frontend::ImportedModel imported,
      compiler::onnx_frontend::ImportOnnxFile((ModelDir() / (model + ".onnx")).string()));
  compiler::BuildOptions options;
  if (!target.empty()) options.target = target;
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec,
                          compiler::Build(std::move(imported.module), options));
  UploadedModel u;
  u.compile_s = absl::ToDoubleSeconds(absl::Now() - start);
  std::string bytes = exec->SaveToBytes();
  TETHER_ASSIGN_OR_RETURN(u.sha, remote->session->UploadModule(bytes));
  (*uploaded)[key] = u;
  return u;
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
  absl::StatusOr<UploadedModel> uploaded = Uploaded(model);
  if (!uploaded.ok()) return fail(uploaded.status());
  Remote* remote = *GetRemote();
  client::RemoteVmOptions vm_options;
  vm_options.num_threads = threads;
  auto vm = client::RemoteVM::Create(remote->session.get(), uploaded->sha, {Device::Cpu()}, "",
                                     vm_options);
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
  warm.number = Number();
  warm.min_repeat_ms = 300;
  if (auto w = (*vm)->TimeEvaluator("main", Device::Cpu(), warm, args); !w.ok()) {
    return fail(w.status());
  }
  profiling::TimeEvaluatorOptions timing;
  timing.number = Number();
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
  f.compile_s = uploaded->compile_s;
  state.counters["ms"] = f.tether_ms;
  if (f.anchor_ms > 0) state.counters["ratio"] = f.tether_ms / f.anchor_ms;
}

// The model on cuda:0 (see the file comment).
void TetherGpuModel(benchmark::State& state, const std::string& model) {
  auto fail = [&](const absl::Status& s) { state.SkipWithError(s.ToString().c_str()); };
  const Device gpu = Device::Cuda();
  absl::StatusOr<std::string> target = compiler::CudaTargetForDevice(gpu);
  if (!target.ok()) return fail(target.status());
  absl::StatusOr<UploadedModel> uploaded = Uploaded(model, *target);
  if (!uploaded.ok()) return fail(uploaded.status());
  Remote* remote = *GetRemote();
  auto vm = client::RemoteVM::Create(remote->session.get(), uploaded->sha, {gpu});
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
  timing.number = Number();
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
  f.compile_s = uploaded->compile_s;
  if (f.anchor_ms == 0) {  // no PyTorch: ONNX Runtime on the CPU
    const Figures& cpu = Results()[absl::StrCat(model, " t2")];
    f.anchor = cpu.anchor + " t2";
    f.anchor_ms = cpu.anchor_ms;
    f.anchor_out = cpu.anchor_out;
  }
  state.counters["ms"] = f.tether_ms;
  if (f.anchor_ms > 0) state.counters["ratio"] = f.tether_ms / f.anchor_ms;
}

// The python that runs make_models.py, make_corpus.py and torch_bench.py:
// $PYTHON, or Debian's python3.
std::string Python() {
  const char* p = std::getenv("PYTHON");
  return p != nullptr ? p : "/usr/bin/python3";
}

// Runs ort_bench.js and returns its JSON line.
absl::StatusOr<std::string> RunNode(const std::string& model, int threads) {
  std::filesystem::path script =
      std::filesystem::path(TETHER_SOURCE_DIR) / "bench/ort/ort_bench.js";
  std::filesystem::path out = WorkDir() / absl::StrCat("ort_", model, "_", threads, ".json");
  std::string cmd =
      absl::StrCat("node '", script.string(), "' '", (ModelDir() / (model + ".onnx")).string(),
                   "' 'x=", (ModelDir() / (model + ".x.npy")).string(), "' ", threads, " ",
                   kSamples, " ", Number(), " > '", out.string(), "'");
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
  std::filesystem::path out = WorkDir() / absl::StrCat("torch_", model, ".json");
  auto file = [&](const char* suffix) { return (ModelDir() / (model + suffix)).string(); };
  if (!std::filesystem::exists(file(".expected.npy"))) {  // the corpus has none
    state.SkipWithError(
        absl::StrCat("no ", model, ".expected.npy to check PyTorch against").c_str());
    return;
  }
  std::string cmd = absl::StrCat(Python(), " '", script.string(), "' '", file(".onnx"), "' '",
                                 file(".x.npy"), "' '", file(".expected.npy"), "' ", kSamples, " ",
                                 Number(), " > '", out.string(), "'");
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

namespace tether {
namespace {

// The model set of the command line (see the file comment); the flags are
// taken out of argv, which Google Benchmark parses after.
struct ModelSet {
  bool corpus = false;
  std::string model_dir;  // --model_dir: read as is
  std::vector<std::string> models;
  int number = 0;  // --number; 0: the set's default
  int rounds = 1;  // --rounds
};

absl::StatusOr<ModelSet> ParseModelSet(int* argc, char** argv) {
  ModelSet set;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (arg.rfind(flag + "=", 0) != 0) return std::nullopt;
      return arg.substr(flag.size() + 1);
    };
    if (arg == "--corpus") {
      set.corpus = true;
    } else if (auto dir = value("--model_dir")) {
      set.model_dir = *dir;
    } else if (auto names = value("--models")) {
      set.models = absl::StrSplit(*names, ',', absl::SkipEmpty());
    } else if (auto number = value("--number")) {
      if (!absl::SimpleAtoi(*number, &set.number) || set.number <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("--number=", *number, " is not a count"));
      }
    } else if (auto rounds = value("--rounds")) {
      if (!absl::SimpleAtoi(*rounds, &set.rounds) || set.rounds <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("--rounds=", *rounds, " is not a count"));
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return set;
}

// The models of `set` in ModelDir(), generating them into WorkDir() unless
// --model_dir names them.
absl::StatusOr<std::vector<std::string>> PrepareModels(const ModelSet& set) {
  std::vector<std::string> all;
  if (!set.model_dir.empty()) {
    ModelDir() = set.model_dir;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(ModelDir(), ec)) {
      const std::filesystem::path& p = entry.path();
      if (p.extension() != ".onnx") continue;
      std::filesystem::path x = p;
      x.replace_extension(".x.npy");
      if (std::filesystem::exists(x)) all.push_back(p.stem().string());
    }
    if (ec) return absl::InvalidArgumentError(absl::StrCat(set.model_dir, ": ", ec.message()));
    std::sort(all.begin(), all.end());
  } else {
    ModelDir() = WorkDir();
    const char* script =
        set.corpus ? "bench/models/make_corpus.py" : "examples/onnx/make_models.py";
    std::string make = absl::StrCat(Python(), " '", TETHER_SOURCE_DIR, "/", script, "' '",
                                    ModelDir().string(), "'");
    if (set.corpus) {  // only the models asked for
      for (const std::string& m : set.models) absl::StrAppend(&make, " '", m, "'");
    }
    absl::StrAppend(&make, " > /dev/null");
    if (std::system(make.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat(make, " failed"));
    }
    if (set.corpus) {
      all.assign(std::begin(kCorpus), std::end(kCorpus));
    } else {
      all.assign(std::begin(kExamples), std::end(kExamples));
    }
  }
  if (set.models.empty()) return all;
  for (const std::string& m : set.models) {
    if (std::find(all.begin(), all.end(), m) == all.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no model ", m, " (with ", m, ".x.npy) in ", ModelDir().string()));
    }
  }
  return set.models;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  absl::StatusOr<tether::ModelSet> set = tether::ParseModelSet(&argc, argv);
  if (!set.ok()) {
    std::fprintf(stderr, "model_bench: %s\n", set.status().ToString().c_str());
    return 1;
  }
  tether::Number() =
      set->number > 0 ? set->number : (set->corpus || !set->model_dir.empty() ? 5 : 20);
  tether::WorkDir() =
      std::filesystem::temp_directory_path() / absl::StrCat("tether-model-bench-", getpid());
  std::filesystem::create_directories(tether::WorkDir());
  absl::StatusOr<std::vector<std::string>> models = tether::PrepareModels(*set);
  if (!models.ok()) {
    std::fprintf(stderr, "model_bench: %s\n", models.status().ToString().c_str());
    std::error_code ec;
    std::filesystem::remove_all(tether::WorkDir(), ec);
    return 1;
  }
  for (const std::string& m : *models) {
    for (int threads : {1, 2}) {
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
  for (const std::string& m : *models) {
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
  // Each round runs every row again (the models compiled and uploaded once);
  // the table keeps each side's fastest round, so a burst of the
  // neighbours' load on a shared machine slows neither side's figure.
  std::map<std::string, tether::Figures> best;
  benchmark::ConsoleReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                                                            : benchmark::ConsoleReporter::OO_None);
  for (int round = 0; round < set->rounds; ++round) {
    tether::Results().clear();
    benchmark::RunSpecifiedBenchmarks(&reporter);
    for (const auto& [name, f] : tether::Results()) {
      auto [it, fresh] = best.emplace(name, f);
      if (fresh) continue;
      tether::Figures& b = it->second;
      if (f.tether_ms > 0 && (b.tether_ms == 0 || f.tether_ms < b.tether_ms)) {
        b.tether_ms = f.tether_ms;
      }
      if (f.anchor_ms > 0 && (b.anchor_ms == 0 || f.anchor_ms < b.anchor_ms)) {
        b.anchor_ms = f.anchor_ms;
        b.anchor = f.anchor;
      }
    }
  }
  if (set->rounds > 1) {
    std::printf("\nthe fastest of %d rounds' medians, each side's own:", set->rounds);
  }
  std::printf("\n%-18s %-18s %12s %12s %8s %12s %14s\n", "model", "anchor", "anchor (ms)",
              "Tether (ms)", "ratio", "compile (s)", "max|out| a/t");
  for (const auto& [name, f] : best) {
    if (f.tether_ms == 0 && f.anchor_ms == 0) continue;
    std::printf("%-18s %-18s %12.4f %12.4f %8.2f %12.2f %7.3f/%-7.3f\n", name.c_str(),
                f.anchor.c_str(), f.anchor_ms, f.tether_ms,
                f.anchor_ms > 0 ? f.tether_ms / f.anchor_ms : 0.0, f.compile_s, f.anchor_out,
                f.tether_out);
  }
  std::error_code ec;
  std::filesystem::remove_all(tether::WorkDir(), ec);
  benchmark::Shutdown();
  return 0;
}
