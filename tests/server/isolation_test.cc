// Isolated sessions end to end: an in-process Daemon on 127.0.0.1:0 that
// runs sessions in real tetherd worker processes (TETHERD_PATH), driven
// through the client library — calls, chunked tensors and the direct channel
// reach the worker; a worker that dies ends only its own session; closing,
// deadlines and shutdown reach the worker too.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/codec/value_codec.h"
#include "server/daemon.h"
#include "tests/server/remote_builtins.h"
#include "tests/testing/processes.h"

namespace tether::server {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The one child that `after` has and `before` had not.
pid_t NewChild(const std::set<pid_t>& before, const std::set<pid_t>& after) {
  std::vector<pid_t> fresh;
  for (pid_t pid : after) {
    if (!before.contains(pid)) fresh.push_back(pid);
  }
  EXPECT_EQ(fresh.size(), 1u);
  return fresh.empty() ? -1 : fresh[0];
}

using testing::Gone;
using testing::ReadProcFile;

std::string CommandLine(pid_t pid) {
  std::string line = ReadProcFile(absl::StrCat("/proc/", pid, "/cmdline"));
  std::replace(line.begin(), line.end(), '\0', ' ');
  return line;
}

// Whether a thread of `pid` is running or runnable (a worker in "spin").
bool Spinning(pid_t pid) {
  std::error_code error;
  for (const auto& task : fs::directory_iterator(absl::StrCat("/proc/", pid, "/task"), error)) {
    std::istringstream stat(ReadProcFile(task.path() / "stat"));
    std::string tid, comm, state;
    stat >> tid >> comm >> state;  // tetherd's comm has no spaces
    if (state == "R") return true;
  }
  return false;
}

// Whether `pid` is stopped by a signal (state T).
bool Stopped(pid_t pid) {
  std::istringstream stat(ReadProcFile(absl::StrCat("/proc/", pid, "/stat")));
  std::string tid, comm, state;
  stat >> tid >> comm >> state;
  return state == "T";
}

Tensor FloatTensor(std::vector<int64_t> shape, float start) {
  auto t = Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  EXPECT_TRUE(t.ok());
  float* data = static_cast<float*>((*t)->element_data());
  for (int64_t i = 0; i < (*t)->NumElements(); ++i) data[i] = start + static_cast<float>(i);
  return *t;
}

class IsolationTest : public ::testing::Test {
 protected:
  void Start(bool isolate_all, std::string program = TETHERD_PATH, int executor_threads = 0) {
    DaemonOptions options;
    options.executor_threads = executor_threads;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    options.isolate_sessions = isolate_all;
    options.worker_program = std::move(program);
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  // A session (isolated when asked or when the daemon isolates all) and the
  // worker process it got, if any.
  struct Opened : testing::RemoteBuiltins {
    pid_t worker = -1;
  };
  Opened Open(bool isolate, bool direct = true, client::RemoteVmOptions vm_options = {}) {
    std::set<pid_t> before = tether::testing::ChildPids();
    client::ConnectOptions options;
    options.isolate = isolate;
    options.transport = direct ? client::TransportKind::kDirect : client::TransportKind::kStream;
    Opened out;
    static_cast<testing::RemoteBuiltins&>(out) =
        testing::OpenRemoteBuiltins(daemon_->target(), options, vm_options);
    if (out.session && out.session->isolated())
      out.worker = NewChild(before, tether::testing::ChildPids());
    return out;
  }

  // Runs swap(a, b) and checks the result is (b, a).
  static void ExpectSwapWorks(client::RemoteVM& vm) {
    Tensor a = FloatTensor({2, 3}, 1);
    Tensor b = FloatTensor({4}, 100);
    std::vector<Value> args = {Value(a), Value(b)};
    auto out = vm.Invoke("swap", args);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(out->is_tuple());
    const auto& fields = out->AsRef<TupleObj>()->fields;
    ASSERT_EQ(fields.size(), 2u);
    ASSERT_TRUE(fields[0].is_tensor());
    Tensor first(fields[0].AsRef<TensorObj>());
    ASSERT_EQ(first->NumElements(), 4);
    EXPECT_EQ(static_cast<const float*>(first->element_data())[3], 103.0f);
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(IsolationTest, CallsTensorsAndTheDirectChannelReachTheWorker) {
  Start(/*isolate_all=*/true);
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct channel" : "grpc only");
    Opened s = Open(/*isolate=*/false, direct);
    ASSERT_TRUE(s.session && s.vm);
    EXPECT_TRUE(s.session->isolated());
    ASSERT_GT(s.worker, 0);
    EXPECT_THAT(CommandLine(s.worker), HasSubstr("--worker-lifeline-fd"));
    EXPECT_EQ(s.session->transport() == client::TransportKind::kDirect, direct);
    ExpectSwapWorks(*s.vm);

    // A tensor past the inline limit travels in chunks to and from the worker.
    Tensor big = FloatTensor({3, 1 << 18}, 7);  // 3 MiB
    auto remote = s.session->UploadTensor(big);
    ASSERT_TRUE(remote.ok()) << remote.status();
    auto back = s.session->DownloadTensor(*remote);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ((*back)->NumBytes(), big->NumBytes());
    EXPECT_EQ(std::memcmp((*back)->element_data(), big->element_data(), big->NumBytes()), 0);

    // The remote handle is an argument in the worker's own session.
    std::vector<Value> args = {*remote, Value(FloatTensor({1}, 0))};
    auto swapped = s.vm->Invoke("swap", args);
    ASSERT_TRUE(swapped.ok()) << swapped.status();

    // Closing the session ends the worker and reaps it.
    s.vm.reset();
    ASSERT_TRUE(s.session->Close().ok());
    EXPECT_TRUE(Gone(s.worker));
  }
}

TEST_F(IsolationTest, AWorkerThatDiesEndsOnlyItsSession) {
  Start(/*isolate_all=*/false);
  Opened victim = Open(/*isolate=*/true);
  Opened neighbour = Open(/*isolate=*/true);
  Opened in_daemon = Open(/*isolate=*/false);
  ASSERT_TRUE(victim.vm && neighbour.vm && in_daemon.vm);
  EXPECT_FALSE(in_daemon.session->isolated());
  EXPECT_EQ(in_daemon.worker, -1);
  ASSERT_GT(victim.worker, 0);
  ASSERT_NE(victim.worker, neighbour.worker);

  // What a segfaulting kernel or the OOM killer does to a process.
  ASSERT_EQ(::kill(victim.worker, SIGKILL), 0);
  Tensor a = FloatTensor({2}, 1);
  std::vector<Value> args = {Value(a), Value(a)};
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto lost = victim.vm->Invoke("swap", args);
    ASSERT_FALSE(lost.ok());
    EXPECT_EQ(lost.status().code(), absl::StatusCode::kInternal) << lost.status();
    EXPECT_THAT(lost.status().message(), HasSubstr("lost its worker process"));
    EXPECT_THAT(lost.status().message(), HasSubstr("killed by signal 9"));
  }
  auto upload = victim.session->UploadTensor(FloatTensor({4}, 0));
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInternal) << upload.status();

  // Everyone else keeps working, and new isolated sessions start.
  ExpectSwapWorks(*neighbour.vm);
  ExpectSwapWorks(*in_daemon.vm);
  Opened fresh = Open(/*isolate=*/true);
  ASSERT_TRUE(fresh.vm);
  ExpectSwapWorks(*fresh.vm);

  // The dead session still closes cleanly, leaving no zombie.
  victim.vm.reset();
  EXPECT_TRUE(victim.session->Close().ok());
  EXPECT_TRUE(Gone(victim.worker));
  EXPECT_EQ(daemon_->num_sessions(), 3u);
}

// A worker that stops answering (SIGSTOP: a debugger, a hung driver call)
// stalls only its own session: its calls end at their deadlines, the others
// go on, and closing the session ends the worker.
TEST_F(IsolationTest, AStoppedWorkerStallsOnlyItsSession) {
  Start(/*isolate_all=*/false);
  client::RemoteVmOptions short_calls;
  short_calls.call_timeout = absl::Milliseconds(300);
  Opened victim = Open(/*isolate=*/true, /*direct=*/false, short_calls);
  Opened neighbour = Open(/*isolate=*/true);
  ASSERT_TRUE(victim.vm && neighbour.vm);
  ASSERT_EQ(::kill(victim.worker, SIGSTOP), 0);
  // Stopped once the signal is delivered (up to 30 s).
  for (int i = 0; i < 30000 && !Stopped(victim.worker); ++i) ::usleep(1000);
  ASSERT_TRUE(Stopped(victim.worker));
  Tensor a = FloatTensor({2}, 1);
  std::vector<Value> args = {Value(a), Value(a)};
  auto stalled = victim.vm->Invoke("swap", args);
  EXPECT_EQ(stalled.status().code(), absl::StatusCode::kDeadlineExceeded) << stalled.status();
  ExpectSwapWorks(*neighbour.vm);
  victim.vm.reset();
  EXPECT_TRUE(victim.session->Close().ok());
  EXPECT_TRUE(Gone(victim.worker)) << "a stopped worker outlived its session";
  ExpectSwapWorks(*neighbour.vm);
}

// KeepAlive and OpenDirectChannel of an isolated session ask its worker
// without holding a daemon thread: many of them against a worker that
// stopped answering leave the daemon answering everyone else at once.
TEST_F(IsolationTest, AStoppedWorkersKeepAlivesHoldNoDaemonThread) {
  Start(/*isolate_all=*/false);
  Opened victim = Open(/*isolate=*/true, /*direct=*/false);
  ASSERT_TRUE(victim.vm);
  ASSERT_EQ(::kill(victim.worker, SIGSTOP), 0);
  for (int i = 0; i < 30000 && !Stopped(victim.worker); ++i) ::usleep(1000);
  ASSERT_TRUE(Stopped(victim.worker));
  auto stub = v1::Tether::NewStub(
      grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials()));
  constexpr int kPings = 64;
  struct Ping {
    grpc::ClientContext context;
    v1::KeepAliveRequest request;
    v1::KeepAliveResponse response;
  };
  std::vector<std::unique_ptr<Ping>> pings;
  std::atomic<int> answered{0};
  for (int i = 0; i < kPings; ++i) {
    auto ping = std::make_unique<Ping>();
    ping->request.set_session_id(victim.session->session_id());
    stub->async()->KeepAlive(&ping->context, &ping->request, &ping->response,
                             [&answered](grpc::Status) { answered.fetch_add(1); });
    pings.push_back(std::move(ping));
  }
  // Every KeepAlive waits on the stopped worker; a handshake is answered
  // before any of them (they wait 10 s for it).
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(8)));
  v1::HandshakeRequest hello;
  hello.mutable_client_protocol()->set_major(rpc::kProtocolMajor);
  v1::HandshakeResponse info;
  grpc::Status s = stub->Handshake(&ctx, hello, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(answered.load(), 0);
  ::kill(victim.worker, SIGKILL);
  for (int i = 0; i < 30000 && answered.load() < kPings; ++i) ::usleep(1000);
  EXPECT_EQ(answered.load(), kPings);
}

TEST_F(IsolationTest, DeadlinesAndMissingModulesComeBackFromTheWorker) {
  Start(/*isolate_all=*/true);
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "direct channel" : "grpc only");
    client::RemoteVmOptions vm_options;
    vm_options.call_timeout = absl::Milliseconds(200);
    Opened s = Open(/*isolate=*/true, direct, vm_options);
    ASSERT_TRUE(s.vm);
    Value args[] = {Value(int64_t{0})};
    auto timed_out = s.vm->Invoke("spin", args);
    EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded) << timed_out.status();
    ExpectSwapWorks(*s.vm);  // the worker's VM is usable after the interrupt
  }
  Opened s = Open(/*isolate=*/true);
  ASSERT_TRUE(s.vm);

  auto missing = client::RemoteVM::Create(s.session.get(), std::string(64, 'a'));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

// M3 of the security review: a daemon thread that waits for an isolated
// session's worker is lent out, so more long isolated calls than the daemon
// has threads leave the other sessions served.
TEST_F(IsolationTest, LongIsolatedCallsDoNotStallOtherSessions) {
  constexpr int kThreads = 2;
  Start(/*isolate_all=*/false, TETHERD_PATH, kThreads);
  // Over gRPC, so the neighbour's calls run on the daemon's threads too.
  Opened neighbour = Open(/*isolate=*/false, /*direct=*/false);
  ASSERT_TRUE(neighbour.vm);
  std::vector<Opened> busy;
  for (int i = 0; i < kThreads + 1; ++i) {
    busy.push_back(Open(/*isolate=*/true, /*direct=*/false));
    ASSERT_TRUE(busy.back().vm);
    ASSERT_GT(busy.back().worker, 0);
  }
  // Calls that spin until their worker is killed below.
  std::vector<std::thread> spinners;
  for (Opened& s : busy) {
    spinners.emplace_back([vm = s.vm.get()] {
      Value args[] = {Value(int64_t{0})};
      auto out = vm->Invoke("spin", args);
      EXPECT_THAT(out.status().message(), HasSubstr("lost its worker process")) << out.status();
    });
  }
  // Until the spins hold as many daemon threads as it has (each waits on a
  // worker that spins); without lending, the third never gets one.
  for (int i = 0; i < 30000; ++i) {
    int running = 0;
    for (Opened& s : busy) running += Spinning(s.worker);
    if (running >= kThreads) break;
    ::usleep(1000);
  }
  absl::Notification swapped;
  std::thread call([&] {
    ExpectSwapWorks(*neighbour.vm);
    swapped.Notify();
  });
  // Without lending, both of the daemon's threads wait for workers that
  // never answer, and this call never runs.
  EXPECT_TRUE(swapped.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the neighbour's call waited for the isolated calls";
  for (Opened& s : busy) ::kill(s.worker, SIGKILL);
  for (std::thread& t : spinners) t.join();
  call.join();
}

TEST_F(IsolationTest, ShutdownEndsEveryWorker) {
  Start(/*isolate_all=*/true);
  Opened a = Open(/*isolate=*/true);
  Opened b = Open(/*isolate=*/true);
  ASSERT_GT(a.worker, 0);
  ASSERT_GT(b.worker, 0);
  a.vm.reset();
  b.vm.reset();
  daemon_->Shutdown(absl::Seconds(2));
  EXPECT_TRUE(Gone(a.worker));
  EXPECT_TRUE(Gone(b.worker));
}

TEST_F(IsolationTest, RefusedWhereNoWorkerCanStart) {
  // No worker program: asking for isolation is refused, the rest works.
  Start(/*isolate_all=*/false, /*program=*/"");
  client::ConnectOptions options;
  options.isolate = true;
  auto refused = client::RemoteSession::Connect(daemon_->target(), options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  Opened plain = Open(/*isolate=*/false);
  ASSERT_TRUE(plain.vm);
  ExpectSwapWorks(*plain.vm);

  DaemonOptions bad;
  bad.listen = {"127.0.0.1:0"};
  bad.isolate_sessions = true;
  EXPECT_EQ(Daemon::Start(bad).status().code(), absl::StatusCode::kInvalidArgument);

  // A worker program that dies at once: UNAVAILABLE naming how, no session left.
  daemon_.reset();
  Start(/*isolate_all=*/true, "/bin/false");
  auto failed = client::RemoteSession::Connect(daemon_->target());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("exited with status 1"));
  EXPECT_EQ(daemon_->num_sessions(), 0u);
}

}  // namespace
}  // namespace tether::server
