// Streaming a stateful model (docs/design/rpc-protocol.md, "Streaming"), with
// its anchor in the same run on the same daemon: the time per chunk of
//   Streamed: client::StatefulStream::Step — the chunk goes up inline, the
//     state stays on the daemon as a handle, the previous one is freed by the
//     same call: one round trip, no state on the wire;
//   Naive: RemoteVM::Invoke with the state as a local tensor — it goes up
//     with each call and comes back with the outputs (inline up to the
//     daemon's 1 MiB limit, else through a chunked upload and download).
// The model is step(chunk [1], state [N]) = (sum(state'), state' = state +
// chunk[0]), C++ kernels registered in this process, so what is measured is
// the overhead around a cheap call; state sizes 1 KiB (a voice-activity
// model's [2, 1, 128] float32), 64 KiB and 1 MiB, on the direct channel and
// on the gRPC CallStream. Each Streamed row's `ratio` counter is its time over
// the Naive row's of the same size and transport (RatioReporter; the Naive
// rows run first). The
// daemon runs in this process (127.0.0.1:0), sharing the machine's cores with
// the client; the CPU is named in the context ("cpu").
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "benchmark/benchmark.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "client/stateful_stream.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "server/daemon.h"

namespace tether {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

void RegisterStep() {
  static const bool done = [] {
    (void)Registry::RegisterTyped(
        "bench.stream.accumulate", [](Tensor state, Tensor chunk) -> absl::StatusOr<Value> {
          TETHER_ASSIGN_OR_RETURN(Tensor out,
                                  Tensor::Empty(state->shape(), state->dtype(), Device::Cpu()));
          const float c = static_cast<const float*>(chunk->element_data())[0];
          const float* s = static_cast<const float*>(state->element_data());
          float* o = static_cast<float*>(out->element_data());
          for (int64_t i = 0; i < state->NumElements(); ++i) o[i] = s[i] + c;
          return Value(out);
        });
    (void)Registry::RegisterTyped("bench.stream.sum", [](Tensor state) -> absl::StatusOr<Value> {
      const int64_t one[] = {1};
      TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(one, state->dtype(), Device::Cpu()));
      const float* s = static_cast<const float*>(state->element_data());
      float sum = 0;
      for (int64_t i = 0; i < state->NumElements(); ++i) sum += s[i];
      static_cast<float*>(out->element_data())[0] = sum;
      return Value(out);
    });
    return true;
  }();
  (void)done;
}

// The daemon and, per transport, a session with the model's VM; made once.
struct Fixture {
  std::unique_ptr<server::Daemon> daemon;
  std::map<client::TransportKind, std::unique_ptr<client::RemoteSession>> sessions;
  std::map<client::TransportKind, std::unique_ptr<client::RemoteVM>> vms;
};

Fixture& Shared() {
  static Fixture* f = [] {
    RegisterStep();
    auto* fixture = new Fixture;
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    fixture->daemon = std::move(*server::Daemon::Start(options));
    vm::ExecBuilder b;
    b.EmitFunction("step", 2, {"chunk", "state"});
    b.EmitCall("bench.stream.accumulate", {vm::Arg::Register(1), vm::Arg::Register(0)}, 2);
    b.EmitCall("bench.stream.sum", {vm::Arg::Register(2)}, 3);
    b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(3), vm::Arg::Register(2)}, 4);
    b.EmitRet(4);
    b.EndFunction("step");
    const std::string bytes = (*b.Get())->SaveToBytes();
    for (client::TransportKind kind :
         {client::TransportKind::kDirect, client::TransportKind::kStream}) {
      client::ConnectOptions connect;
      connect.transport = kind;
      auto session = std::move(*client::RemoteSession::Connect(fixture->daemon->target(), connect));
      const std::string sha = *session->UploadModule(bytes);
      client::RemoteVmOptions vm_options;
      vm_options.transport = kind;
      fixture->vms[kind] =
          std::move(*client::RemoteVM::Create(session.get(), sha, {}, "", vm_options));
      fixture->sessions[kind] = std::move(session);
    }
    return fixture;
  }();
  return *f;
}

Tensor Filled(int64_t n, float value) {
  const int64_t shape[] = {n};
  Tensor t = *Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  float* p = static_cast<float*>(t->element_data());
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return t;
}

client::TransportKind KindOf(int64_t arg) {
  return arg == 0 ? client::TransportKind::kDirect : client::TransportKind::kStream;
}

void Label(benchmark::State& state) {
  state.SetLabel(std::string(client::TransportKindName(KindOf(state.range(1)))));
  state.counters["state_bytes"] = static_cast<double>(state.range(0));
}

void BM_Naive(benchmark::State& state) {
  client::RemoteVM* vm = Shared().vms[KindOf(state.range(1))].get();
  Value s(Filled(state.range(0) / 4, 0.0f));
  const Value chunk(Filled(1, 1.0f));
  for (auto _ : state) {
    const Value args[] = {chunk, s};
    absl::StatusOr<Value> out = vm->Invoke("step", args);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    s = out->AsRef<TupleObj>()->fields[1];
  }
  Label(state);
}

void BM_Streamed(benchmark::State& state) {
  client::RemoteVM* vm = Shared().vms[KindOf(state.range(1))].get();
  auto stream = client::StatefulStream::Create(
      vm, "step", {Value(), Value(Filled(state.range(0) / 4, 0.0f))}, {{1, 1}});
  if (!stream.ok()) {
    state.SkipWithError(stream.status().ToString().c_str());
    return;
  }
  const std::pair<int, Value> chunk[] = {{0, Value(Filled(1, 1.0f))}};
  for (auto _ : state) {
    absl::StatusOr<std::vector<Value>> out = (*stream)->Step(chunk);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
  }
  Label(state);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t transport : {0, 1}) {
    for (int64_t bytes : {int64_t{1} << 10, int64_t{64} << 10, int64_t{1} << 20}) {
      b->Args({bytes, transport});
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Naive)->Apply(Sizes);
BENCHMARK(BM_Streamed)->Apply(Sizes);

// Prints each Streamed row's time over the Naive row of the same arguments.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    std::vector<Run> out = runs;
    for (Run& run : out) {
      const std::string name = run.benchmark_name();
      const size_t slash = name.find('/');
      const std::string args = slash == std::string::npos ? "" : name.substr(slash);
      const double per_iter = run.GetAdjustedRealTime();
      if (name.rfind("BM_Naive", 0) == 0) {
        naive_[args] = per_iter;
      } else if (auto it = naive_.find(args); it != naive_.end() && it->second > 0) {
        run.counters["ratio"] = per_iter / it->second;
      }
    }
    ConsoleReporter::ReportRuns(out);
  }

 private:
  std::map<std::string, double> naive_;
};

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu", tether::CpuModel());
  tether::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  tether::Shared().vms.clear();
  tether::Shared().sessions.clear();
  tether::Shared().daemon->Shutdown();
  return 0;
}
