// RPC benchmarks on loopback, each with its anchor timed in the same run:
//   RoundTrip: an empty VM call through RemoteVM on the direct channel (the
//     default for a daemon on this host) and on the CallStream (gRPC only),
//     against a raw gRPC unary echo (sync client and server, default settings).
//     gate_us is what exclusive timing adds to each call: a shared hold of
//     the timing gate taken and released (docs/design/rpc-protocol.md).
//   Upload / Download: a tensor of 1, 16 or 256 MiB through the daemon's
//     chunked streams against a raw gRPC stream of the same bytes in 1 MiB
//     chunks, and memcpy of the same bytes.
//   TimeEvaluatorRemoteVsLocal: the medians of the same CPU kernel timed by
//     the local VM and remotely by the daemon.
//   Rss: resident memory idle, at the peak of a 256 MiB upload + download, and
//     after the tensors are freed (it must fall back). The daemon runs in this
//     process, so the figures include the client.
//   RoundTripPlacement: the RoundTrip figures (direct channel and stream) with tetherd, the echo
//   server
//     and the client as separate processes, the servers pinned to CPU 0 and
//     the client to the same CPU (/0) or the other one (/1).
//   DaemonRss: the same for a separate tetherd process (its /proc status), and
//     the memory a vanished client leaves behind: a child process uploads
//     256 MiB and exits without closing its session; the daemon holds the
//     tensor until the session's idle lease (1 s here) expires, then releases
//     it. Reports the daemon's RSS at each step and how long the release took.
// The daemon runs in this process (its gRPC server on 127.0.0.1:0), so client
// and daemon share the machine's two cores.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "benchmark/benchmark.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "echo.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"
#include "server/daemon.h"
#include "server/timing_gate.h"

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

class EchoService final : public bench::Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const bench::Blob* in, bench::Blob* out) override {
    *out = *in;
    return grpc::Status::OK;
  }
  grpc::Status Sink(grpc::ServerContext*, grpc::ServerReader<bench::Blob>* reader,
                    bench::Size* out) override {
    bench::Blob chunk;
    uint64_t total = 0;
    while (reader->Read(&chunk)) total += chunk.data().size();
    out->set_bytes(total);
    return grpc::Status::OK;
  }
  grpc::Status Source(grpc::ServerContext*, const bench::Size* size,
                      grpc::ServerWriter<bench::Blob>* writer) override {
    bench::Blob chunk;
    chunk.mutable_data()->assign(size->chunk_bytes(), 'x');
    for (uint64_t sent = 0; sent < size->bytes(); sent += size->chunk_bytes()) writer->Write(chunk);
    return grpc::Status::OK;
  }
};

// One daemon, one echo server and their clients for the whole run.
struct Fixture {
  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<client::RemoteSession> session;
  std::unique_ptr<client::RemoteVM> vm;
  std::unique_ptr<client::RemoteVM> stream_vm;  // the same, with the direct channel off
  std::unique_ptr<vm::LocalVirtualMachine> local_vm;
  EchoService echo_service;
  std::unique_ptr<grpc::Server> echo_server;
  std::unique_ptr<bench::Echo::Stub> echo;
  std::string error;

  Fixture() {
    (void)Registry::RegisterTyped("bench.matmul", [](Tensor a, Tensor b) -> absl::StatusOr<Value> {
      int64_t n = a->shape()[0], k = a->shape()[1], m = b->shape()[1];
      int64_t shape[] = {n, m};
      TETHER_ASSIGN_OR_RETURN(Tensor c, Tensor::Empty(shape, DataType::Float(32), Device::Cpu()));
      const float* x = static_cast<const float*>(a->element_data());
      const float* y = static_cast<const float*>(b->element_data());
      float* z = static_cast<float*>(c->element_data());
      std::memset(z, 0, static_cast<size_t>(n * m) * sizeof(float));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < k; ++p)
          for (int64_t j = 0; j < m; ++j) z[i * m + j] += x[i * k + p] * y[p * m + j];
      return Value(c);
    });
    vm::ExecBuilder b;
    b.EmitFunction("empty", 0);
    b.EmitRet(vm::kVoidRegister);
    b.EndFunction("empty");
    b.EmitFunction("mm", 2, {"a", "b"});
    b.EmitCall("bench.matmul", {vm::Arg::Register(0), vm::Arg::Register(1)}, 2);
    b.EmitRet(2);
    b.EndFunction("mm");
    auto exec = b.Get();
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    auto daemon_or = server::Daemon::Start(options);
    if (!exec.ok() || !daemon_or.ok()) {
      error = "cannot start the daemon";
      return;
    }
    daemon = std::move(*daemon_or);
    auto session_or = client::RemoteSession::Connect(daemon->target());
    if (!session_or.ok()) {
      error = std::string(session_or.status().message());
      return;
    }
    session = std::move(*session_or);
    auto sha = session->UploadModule((*exec)->SaveToBytes());
    auto vm_or = sha.ok() ? client::RemoteVM::Create(session.get(), *sha) : sha.status();
    auto local_or = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
    if (!vm_or.ok() || !local_or.ok()) {
      error = "cannot create the vms";
      return;
    }
    vm = std::move(*vm_or);
    local_vm = std::move(*local_or);
    client::RemoteVmOptions stream_options;
    stream_options.transport = client::TransportKind::kStream;
    auto stream_or = client::RemoteVM::Create(session.get(), *sha, {}, "", stream_options);
    if (!stream_or.ok()) {
      error = "cannot create the stream vm";
      return;
    }
    stream_vm = std::move(*stream_or);
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&echo_service);
    echo_server = builder.BuildAndStart();
    echo = bench::Echo::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                    grpc::InsecureChannelCredentials()));
  }
};

Fixture& F() {
  static Fixture* f = new Fixture();
  return *f;
}

void BM_RoundTrip(benchmark::State& state) {
  Fixture& f = F();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  if (f.vm->transport() != client::TransportKind::kDirect) {
    return state.SkipWithError("the vm is not on the direct channel");
  }
  double tether_s = 0, stream_s = 0, echo_s = 0, gate_s = 0;
  int64_t n = 0;
  bench::Blob request, reply;
  std::string lock = std::filesystem::temp_directory_path() /
                     ("rpc-bench-gate-" + std::to_string(getpid()) + ".lock");
  auto gate = server::TimingGate::Open(lock);
  if (!gate.ok()) return state.SkipWithError("cannot open a timing gate");
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto out = f.vm->Invoke("empty", {});
    auto t1 = Clock::now();
    grpc::ClientContext ctx;
    grpc::Status s = f.echo->Echo(&ctx, request, &reply);
    auto t2 = Clock::now();
    auto streamed = f.stream_vm->Invoke("empty", {});
    auto t3 = Clock::now();
    bool held = (*gate)
                    ->Acquire(server::TimingGate::Mode::kShared, absl::InfiniteFuture(),
                              [] { return absl::OkStatus(); })
                    .ok();
    gate_s += Seconds(t3, Clock::now());
    if (!out.ok() || !s.ok() || !streamed.ok() || !held) return state.SkipWithError("call failed");
    state.SetIterationTime(Seconds(t0, t1));
    tether_s += Seconds(t0, t1);
    echo_s += Seconds(t1, t2);
    stream_s += Seconds(t2, t3);
    ++n;
  }
  state.counters["tether_us"] = tether_s / n * 1e6;
  state.counters["stream_us"] = stream_s / n * 1e6;
  state.counters["grpc_echo_us"] = echo_s / n * 1e6;
  state.counters["gate_us"] = gate_s / n * 1e6;
  state.counters["ratio_vs_echo"] = tether_s / echo_s;
  state.counters["stream_ratio"] = stream_s / echo_s;
  gate->reset();
  std::filesystem::remove(lock);
}
BENCHMARK(BM_RoundTrip)->UseManualTime()->Unit(benchmark::kMicrosecond);

Tensor BytesTensor(int64_t bytes) {
  int64_t shape[] = {bytes};
  Tensor t = *Tensor::Empty(shape, DataType::UInt(8), Device::Cpu());
  std::memset(t->element_data(), 7, static_cast<size_t>(bytes));
  return t;
}

void Report(benchmark::State& state, double tether_s, double raw_s, double memcpy_s, int64_t rounds,
            int64_t bytes) {
  double gb = static_cast<double>(bytes) * rounds / 1e9;
  state.counters["tether_GBps"] = gb / tether_s;
  state.counters["raw_stream_GBps"] = gb / raw_s;
  state.counters["memcpy_GBps"] = gb / memcpy_s;
  state.counters["ratio_vs_raw"] = raw_s / tether_s;
  state.counters["fraction_of_memcpy"] = memcpy_s / tether_s;
}

void BM_Upload(benchmark::State& state) {
  Fixture& f = F();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  int64_t bytes = state.range(0) << 20;
  Tensor t = BytesTensor(bytes);
  std::string scratch(static_cast<size_t>(bytes), '\0');
  double tether_s = 0, raw_s = 0, memcpy_s = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto remote = f.session->UploadTensor(t);
    auto t1 = Clock::now();
    if (!remote.ok()) return state.SkipWithError(std::string(remote.status().message()).c_str());
    (void)f.session->FreeObjects({client::AsRemoteHandle(*remote)->id()});
    auto t2 = Clock::now();
    grpc::ClientContext ctx;
    bench::Size ack;
    auto writer = f.echo->Sink(&ctx, &ack);
    bench::Blob chunk;
    const char* data = static_cast<const char*>(t->element_data());
    for (int64_t off = 0; off < bytes; off += 1 << 20) {
      chunk.mutable_data()->assign(data + off,
                                   static_cast<size_t>(std::min<int64_t>(1 << 20, bytes - off)));
      writer->Write(chunk);
    }
    writer->WritesDone();
    (void)writer->Finish();
    auto t3 = Clock::now();
    std::memcpy(scratch.data(), t->element_data(), static_cast<size_t>(bytes));
    benchmark::DoNotOptimize(scratch.data());
    auto t4 = Clock::now();
    state.SetIterationTime(Seconds(t0, t1));
    tether_s += Seconds(t0, t1);
    raw_s += Seconds(t2, t3);
    memcpy_s += Seconds(t3, t4);
    ++rounds;
  }
  Report(state, tether_s, raw_s, memcpy_s, rounds, bytes);
}
BENCHMARK(BM_Upload)->Arg(1)->Arg(16)->Arg(256)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Download(benchmark::State& state) {
  Fixture& f = F();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  int64_t bytes = state.range(0) << 20;
  Tensor t = BytesTensor(bytes);
  auto remote = f.session->UploadTensor(t);
  if (!remote.ok()) return state.SkipWithError("upload failed");
  std::string scratch(static_cast<size_t>(bytes), '\0');
  double tether_s = 0, raw_s = 0, memcpy_s = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto local = f.session->DownloadTensor(*remote);
    auto t1 = Clock::now();
    if (!local.ok()) return state.SkipWithError(std::string(local.status().message()).c_str());
    grpc::ClientContext ctx;
    bench::Size size;
    size.set_bytes(static_cast<uint64_t>(bytes));
    size.set_chunk_bytes(1 << 20);
    auto reader = f.echo->Source(&ctx, size);
    bench::Blob chunk;
    int64_t got = 0;
    while (reader->Read(&chunk)) {
      std::memcpy(scratch.data() + got, chunk.data().data(), chunk.data().size());
      got += static_cast<int64_t>(chunk.data().size());
    }
    (void)reader->Finish();
    auto t2 = Clock::now();
    std::memcpy(scratch.data(), t->element_data(), static_cast<size_t>(bytes));
    benchmark::DoNotOptimize(scratch.data());
    auto t3 = Clock::now();
    state.SetIterationTime(Seconds(t0, t1));
    tether_s += Seconds(t0, t1);
    raw_s += Seconds(t1, t2);
    memcpy_s += Seconds(t2, t3);
    ++rounds;
  }
  (void)f.session->FreeObjects({client::AsRemoteHandle(*remote)->id()});
  Report(state, tether_s, raw_s, memcpy_s, rounds, bytes);
}
BENCHMARK(BM_Download)->Arg(1)->Arg(16)->Arg(256)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_TimeEvaluatorRemoteVsLocal(benchmark::State& state) {
  Fixture& f = F();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  int64_t shape[] = {128, 128};
  Tensor a = *Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  Tensor b = *Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  std::memset(a->element_data(), 0, static_cast<size_t>(a->NumBytes()));
  std::memset(b->element_data(), 0, static_cast<size_t>(b->NumBytes()));
  Value args[] = {a, b};
  profiling::TimeEvaluatorOptions options;
  options.number = 20;
  options.repeat = 10;
  double local_s = 0, remote_s = 0;
  int64_t rounds = 0;
  for (auto _ : state) {
    auto local = f.local_vm->TimeEvaluator("mm", Device::Cpu(), options, args);
    auto remote = f.vm->TimeEvaluator("mm", Device::Cpu(), options, args);
    if (!local.ok() || !remote.ok()) return state.SkipWithError("time_evaluator failed");
    local_s += local->median;
    remote_s += remote->median;
    ++rounds;
  }
  state.counters["local_median_us"] = local_s / rounds * 1e6;
  state.counters["remote_median_us"] = remote_s / rounds * 1e6;
  state.counters["remote_over_local"] = remote_s / local_s;
}
BENCHMARK(BM_TimeEvaluatorRemoteVsLocal)->Unit(benchmark::kMillisecond)->Iterations(5);

// Resident set size of a process in MiB, from /proc/<pid>/status.
double RssMiB(const std::string& pid = "self") {
  std::ifstream status("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

void BM_Rss(benchmark::State& state) {
  Fixture& f = F();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  double idle = 0, peak = 0, after = 0;
  for (auto _ : state) {
    idle = RssMiB();
    {
      Tensor t = BytesTensor(int64_t{256} << 20);
      auto remote = f.session->UploadTensor(t);
      if (!remote.ok()) return state.SkipWithError("upload failed");
      auto back = f.session->DownloadTensor(*remote);
      if (!back.ok()) return state.SkipWithError("download failed");
      peak = RssMiB();
      (void)f.session->FreeObjects({client::AsRemoteHandle(*remote)->id()});
    }
    after = RssMiB();
  }
  state.counters["rss_idle_MiB"] = idle;
  state.counters["rss_peak_MiB"] = peak;
  state.counters["rss_after_free_MiB"] = after;
}
BENCHMARK(BM_Rss)->Iterations(1)->Unit(benchmark::kMillisecond);

extern "C" char** environ;

// Starts `argv` as a child process; its pid, or -1.
// Starts `argv` as a child process, its stdout to `stdout_path` when given;
// its pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& stdout_path = "") {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Waits up to 5 s for a port number in `path`; "" when none came.
std::string WaitForPort(const std::string& path) {
  std::string port;
  for (int i = 0; i < 100 && port.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(path);
    std::getline(in, port);
  }
  return port;
}

// `rpc_bench --echo-server PORT_FILE`: the raw gRPC echo anchor as its own
// process (so it can be pinned like the daemon); runs until killed.
int EchoServer(const std::string& port_file) {
  EchoService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 2;
  std::ofstream(port_file) << port << "\n";
  server->Wait();
  return 0;
}

// `rpc_bench --round-trip-client DAEMON ECHO N`: N empty VM calls through a
// RemoteVM on DAEMON (the direct channel), N unary echoes on ECHO and N
// calls of a RemoteVM kept on the CallStream, alternating; prints the mean
// microseconds of each ("tether_us echo_us stream_us").
int RoundTripClient(const std::string& daemon, const std::string& echo_target, int n) {
  vm::ExecBuilder b;
  b.EmitFunction("empty", 0);
  b.EmitRet(vm::kVoidRegister);
  b.EndFunction("empty");
  auto exec = b.Get();
  auto session = client::RemoteSession::Connect(daemon);
  if (!exec.ok() || !session.ok()) return 2;
  auto sha = (*session)->UploadModule((*exec)->SaveToBytes());
  if (!sha.ok()) return 3;
  auto vm = client::RemoteVM::Create(session->get(), *sha);
  client::RemoteVmOptions stream_options;
  stream_options.transport = client::TransportKind::kStream;
  auto stream_vm = client::RemoteVM::Create(session->get(), *sha, {}, "", stream_options);
  if (!vm.ok() || !stream_vm.ok()) return 4;
  if ((*vm)->transport() != client::TransportKind::kDirect) return 6;
  auto echo =
      bench::Echo::NewStub(grpc::CreateChannel(echo_target, grpc::InsecureChannelCredentials()));
  bench::Blob request, reply;
  double tether_s = 0, echo_s = 0, stream_s = 0;
  for (int i = 0; i < n + 100; ++i) {  // the first 100 of each warm up
    auto t0 = Clock::now();
    auto out = (*vm)->Invoke("empty", {});
    auto t1 = Clock::now();
    grpc::ClientContext ctx;
    grpc::Status st = echo->Echo(&ctx, request, &reply);
    auto t2 = Clock::now();
    auto streamed = (*stream_vm)->Invoke("empty", {});
    auto t3 = Clock::now();
    if (!out.ok() || !st.ok() || !streamed.ok()) return 5;
    if (i < 100) continue;
    tether_s += Seconds(t0, t1);
    echo_s += Seconds(t1, t2);
    stream_s += Seconds(t2, t3);
  }
  std::printf("%.3f %.3f %.3f\n", tether_s / n * 1e6, echo_s / n * 1e6, stream_s / n * 1e6);
  return 0;
}

// Round trip with the daemon and the echo server pinned to CPU 0 and the
// client pinned to CPU 0 (arg 0: same core) or CPU 1 (arg 1: different
// cores), each a separate process, through taskset.
void BM_RoundTripPlacement(benchmark::State& state) {
  const bool other_core = state.range(0) != 0;
  if (std::thread::hardware_concurrency() < 2 && other_core) {
    return state.SkipWithError("one CPU: no different-core placement");
  }
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("rpc-bench-rt-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string taskset = "/usr/bin/taskset";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  pid_t daemon = Spawn({taskset, "-c", "0", TETHERD_PATH, "--listen", "127.0.0.1:0", "--port-file",
                        (dir / "daemon_port").string(), "--store-dir", (dir / "store").string()});
  pid_t echo = Spawn({taskset, "-c", "0", self, "--echo-server", (dir / "echo_port").string()});
  auto stop = [&] {
    for (pid_t p : {daemon, echo}) {
      if (p > 0) {
        kill(p, SIGTERM);
        waitpid(p, nullptr, 0);
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  };
  const std::string daemon_port = WaitForPort((dir / "daemon_port").string());
  const std::string echo_port = WaitForPort((dir / "echo_port").string());
  if (daemon <= 0 || echo <= 0 || daemon_port.empty() || echo_port.empty()) {
    stop();
    return state.SkipWithError("tetherd or the echo server did not start (is taskset there?)");
  }
  double tether_us = 0, echo_us = 0, stream_us = 0;
  for (auto _ : state) {
    const std::string out = (dir / "client.txt").string();
    pid_t client = Spawn({taskset, "-c", other_core ? "1" : "0", self, "--round-trip-client",
                          "127.0.0.1:" + daemon_port, "127.0.0.1:" + echo_port, "2000"},
                         out);
    int status = 0;
    if (client <= 0 || waitpid(client, &status, 0) != client || WEXITSTATUS(status) != 0) {
      stop();
      return state.SkipWithError("the round-trip client failed");
    }
    std::ifstream(out) >> tether_us >> echo_us >> stream_us;
  }
  stop();
  state.counters["tether_us"] = tether_us;
  state.counters["stream_us"] = stream_us;
  state.counters["grpc_echo_us"] = echo_us;
  state.counters["ratio_vs_echo"] = echo_us > 0 ? tether_us / echo_us : 0;
  state.counters["stream_ratio"] = echo_us > 0 ? stream_us / echo_us : 0;
}
BENCHMARK(BM_RoundTripPlacement)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

// `rpc_bench --vanishing-client TARGET`: opens a session with a 1 s idle
// lease, uploads 256 MiB and exits without closing anything.
int VanishingClient(const std::string& target) {
  client::ConnectOptions options;
  options.idle_timeout = absl::Seconds(1);
  options.client_name = "vanishing-client";
  auto session = client::RemoteSession::Connect(target, options);
  if (!session.ok()) return 2;
  auto remote = (*session)->UploadTensor(BytesTensor(int64_t{256} << 20));
  std::fflush(stdout);
  _exit(remote.ok() ? 0 : 3);
}

void BM_DaemonRss(benchmark::State& state) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("rpc-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string port_file = (dir / "port").string();
  pid_t daemon = Spawn({TETHERD_PATH, "--listen", "127.0.0.1:0", "--port-file", port_file,
                        "--store-dir", (dir / "store").string(), "--session-idle-timeout", "1"});
  auto stop = [&] {
    if (daemon > 0) {
      kill(daemon, SIGTERM);
      waitpid(daemon, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  };
  std::string port;
  for (int i = 0; i < 100 && port.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(port_file);
    std::getline(in, port);
  }
  if (daemon <= 0 || port.empty()) {
    stop();
    return state.SkipWithError("tetherd did not start");
  }
  const std::string target = "127.0.0.1:" + port, pid = std::to_string(daemon);
  double idle = 0, peak = 0, after = 0, held = 0, expired = 0, release_s = 0;
  for (auto _ : state) {
    idle = RssMiB(pid);
    {
      auto session = client::RemoteSession::Connect(target);
      if (!session.ok()) return stop(), state.SkipWithError("cannot connect");
      auto remote = (*session)->UploadTensor(BytesTensor(int64_t{256} << 20));
      if (!remote.ok()) return stop(), state.SkipWithError("upload failed");
      auto back = (*session)->DownloadTensor(*remote);
      if (!back.ok()) return stop(), state.SkipWithError("download failed");
      peak = RssMiB(pid);
      (void)(*session)->FreeObjects({client::AsRemoteHandle(*remote)->id()});
      after = RssMiB(pid);
    }
    pid_t child = Spawn({"/proc/self/exe", "--vanishing-client", target});
    int status = 0;
    if (child <= 0 || waitpid(child, &status, 0) != child || WEXITSTATUS(status) != 0) {
      return stop(), state.SkipWithError("the vanishing client failed");
    }
    held = RssMiB(pid);
    Clock::time_point gone = Clock::now();
    expired = held;
    while (Seconds(gone, Clock::now()) < 10 && expired > after + 64) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      expired = RssMiB(pid);
    }
    release_s = Seconds(gone, Clock::now());
  }
  stop();
  state.counters["rss_idle_MiB"] = idle;
  state.counters["rss_peak_MiB"] = peak;
  state.counters["rss_after_free_MiB"] = after;
  state.counters["rss_orphan_held_MiB"] = held;
  state.counters["rss_after_expiry_MiB"] = expired;
  state.counters["expiry_release_s"] = release_s;
}
BENCHMARK(BM_DaemonRss)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--vanishing-client") {
    return tether::VanishingClient(argv[2]);
  }
  if (argc == 3 && std::string(argv[1]) == "--echo-server") return tether::EchoServer(argv[2]);
  if (argc == 5 && std::string(argv[1]) == "--round-trip-client") {
    return tether::RoundTripClient(argv[2], argv[3], std::atoi(argv[4]));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
