// Exclusive timing: the TimingGate lock file on its own (shared and exclusive
// holds, a waiting measurement holding off new calls, deadlines, interrupts,
// a holder that dies), then end to end through a real daemon on 127.0.0.1 —
// a measurement waits for another session's running call, including one in
// an isolated session's worker process, and a call waits for a measurement
// held through the same lock file by anyone else.
#include "server/timing_gate.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "tests/server/remote_builtins.h"
#include "tests/testing/status_matchers.h"

namespace tether::server {
namespace {

using ::testing::HasSubstr;
using ::tether::testing::StatusIs;
using Mode = TimingGate::Mode;
namespace fs = std::filesystem;

absl::Status NeverStop() { return absl::OkStatus(); }

class TimingGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "timing-gate-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/timing.lock";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<TimingGate> OpenGate() {
    auto gate = TimingGate::Open(path_);
    EXPECT_TRUE(gate.ok()) << gate.status();
    return gate.ok() ? std::move(*gate) : nullptr;
  }
  // Whether `mode` could be taken right now (the probe is released at once).
  static bool Free(TimingGate& gate, Mode mode) {
    auto hold = gate.TryAcquire(mode);
    EXPECT_TRUE(hold.ok()) << hold.status();
    return hold.ok() && hold->held();
  }
  // Polls until `mode` cannot be taken (another holder got there).
  static bool BecomesBusy(TimingGate& gate, Mode mode) {
    for (int i = 0; i < 1000; ++i) {
      if (!Free(gate, mode)) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(TimingGateTest, SharedHoldsCoexistAndExcludeAMeasurement) {
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  EXPECT_TRUE(Free(*gate, Mode::kExclusive));
  auto a = gate->Acquire(Mode::kShared, absl::InfiniteFuture(), NeverStop);
  auto b = gate->Acquire(Mode::kShared, absl::InfiniteFuture(), NeverStop);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->held() && b->held());
  EXPECT_FALSE(Free(*gate, Mode::kExclusive));
  *a = TimingGate::Hold();
  EXPECT_FALSE(Free(*gate, Mode::kExclusive));  // b still holds
  *b = TimingGate::Hold();
  EXPECT_TRUE(Free(*gate, Mode::kExclusive));
}

TEST_F(TimingGateTest, AMeasurementExcludesEveryoneUntilReleased) {
  auto gate = OpenGate();
  auto other = OpenGate();  // another process's view: its own open file
  ASSERT_NE(gate, nullptr);
  ASSERT_NE(other, nullptr);
  auto measure = gate->Acquire(Mode::kExclusive, absl::InfiniteFuture(), NeverStop);
  ASSERT_TRUE(measure.ok()) << measure.status();
  EXPECT_FALSE(Free(*gate, Mode::kShared));
  EXPECT_FALSE(Free(*other, Mode::kShared));
  EXPECT_FALSE(Free(*other, Mode::kExclusive));
  auto late = other->Acquire(Mode::kShared, absl::Now() + absl::Milliseconds(30), NeverStop);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.status().message(), HasSubstr("waiting for another session's measurement"));
  *measure = TimingGate::Hold();
  EXPECT_TRUE(Free(*other, Mode::kShared));
}

TEST_F(TimingGateTest, AWaitingMeasurementHoldsOffNewCallsThenRuns) {
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  auto running = gate->Acquire(Mode::kShared, absl::InfiniteFuture(), NeverStop);
  ASSERT_TRUE(running.ok());
  std::atomic<bool> measured{false};
  double waited = 0;
  std::thread measurement([&] {
    auto hold = gate->Acquire(Mode::kExclusive, absl::InfiniteFuture(), NeverStop);
    ASSERT_TRUE(hold.ok()) << hold.status();
    waited = hold->waited_seconds();
    measured.store(true);
  });
  // Once the measurement waits, a new call may not start (no starvation)...
  EXPECT_TRUE(BecomesBusy(*gate, Mode::kShared));
  EXPECT_FALSE(measured.load());
  // ...and it runs as soon as the running call ends.
  *running = TimingGate::Hold();
  measurement.join();
  EXPECT_TRUE(measured.load());
  EXPECT_GT(waited, 0);
  EXPECT_TRUE(Free(*gate, Mode::kShared));
}

TEST_F(TimingGateTest, AMeasurementThatGivesUpLetsCallsThroughAgain) {
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  auto running = gate->Acquire(Mode::kShared, absl::InfiniteFuture(), NeverStop);
  ASSERT_TRUE(running.ok());
  auto timed_out = gate->Acquire(Mode::kExclusive, absl::Now() + absl::Milliseconds(30), NeverStop);
  EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(timed_out.status().message(), HasSubstr("waiting for other sessions' calls to end"));
  int polls = 0;
  auto stopped = gate->Acquire(Mode::kExclusive, absl::InfiniteFuture(), [&] {
    return ++polls < 3 ? absl::OkStatus() : absl::CancelledError("the client cancelled");
  });
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(polls, 3);
  // Neither left the turnstile locked: calls still get in.
  EXPECT_TRUE(Free(*gate, Mode::kShared));
}

// A call that never ends must not freeze the daemon: a measurement waiting
// for it holds every new call off only for `max_turnstile`, then gives up.
TEST_F(TimingGateTest, AMeasurementHoldsTheTurnstileOnlySoLong) {
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  auto endless = gate->Acquire(Mode::kShared, absl::InfiniteFuture(), NeverStop);
  ASSERT_TRUE(endless.ok());
  auto gave_up = gate->Acquire(Mode::kExclusive, absl::InfiniteFuture(), NeverStop,
                               /*max_turnstile=*/absl::Milliseconds(40));
  EXPECT_THAT(gave_up.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("a call in another session has not ended")));
  EXPECT_TRUE(Free(*gate, Mode::kShared));
}

TEST_F(TimingGateTest, AHolderThatDiesReleasesTheGate) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only fresh objects and async-signal-safe calls after fork.
    auto gate = TimingGate::Open(path_);
    if (!gate.ok()) ::_exit(1);
    auto hold = (*gate)->TryAcquire(Mode::kExclusive);
    char ok = hold.ok() && hold->held() ? 'y' : 'n';
    (void)::write(ready[1], &ok, 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(ok, 'y');
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  EXPECT_FALSE(Free(*gate, Mode::kShared));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(Free(*gate, Mode::kShared));
  EXPECT_TRUE(Free(*gate, Mode::kExclusive));
}

TEST_F(TimingGateTest, AnUnopenableLockFileIsAnError) {
  auto gate = TimingGate::Open(dir_ + "/missing/timing.lock");
  EXPECT_EQ(gate.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(gate.status().message(), HasSubstr(dir_ + "/missing/timing.lock"));
}

// Whoever can lock the file stalls every daemon sharing it: a link, or a
// file other users may open, is refused.
TEST_F(TimingGateTest, ALockFileOthersCouldHoldIsRefused) {
  const std::string open_file = dir_ + "/open.lock";
  { std::ofstream(open_file) << ""; }
  ASSERT_EQ(::chmod(open_file.c_str(), 0666), 0);
  EXPECT_THAT(TimingGate::Open(open_file).status(),
              ::tether::testing::StatusIs(absl::StatusCode::kPermissionDenied,
                                          HasSubstr("closed to other users")));
  const std::string link = dir_ + "/link.lock";
  ASSERT_EQ(::symlink(open_file.c_str(), link.c_str()), 0);
  EXPECT_THAT(TimingGate::Open(link).status(),
              ::tether::testing::StatusIs(absl::StatusCode::kInternal, HasSubstr(link)));
  ASSERT_EQ(::chmod(open_file.c_str(), 0640), 0);
  EXPECT_TRUE(TimingGate::Open(open_file).ok());
}

// End to end: a daemon whose gate is this test's lock file.
class ExclusiveTimingTest : public TimingGateTest {
 protected:
  void StartDaemon(bool exclusive = true) {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    options.worker_program = TETHERD_PATH;
    options.exclusive_timing = exclusive;
    options.timing_lock = path_;
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  using Opened = testing::RemoteBuiltins;
  // `direct`: calls on the direct channel; a session whose call is to be
  // ended by closing it from another thread keeps to gRPC (the client's
  // Close waits for a direct call in flight).
  Opened Open(bool isolate = false, client::RemoteVmOptions vm_options = {}, bool direct = true) {
    client::ConnectOptions options;
    options.isolate = isolate;
    options.transport = direct ? client::TransportKind::kDirect : client::TransportKind::kStream;
    return testing::OpenRemoteBuiltins(daemon_->target(), options, vm_options);
  }

  // Starts spin() in `s` on a thread; it ends when the session closes.
  std::thread Spin(Opened& s) {
    return std::thread([vm = s.vm.get()] {
      std::vector<Value> args = {Value(int64_t{0})};
      auto out = vm->Invoke("spin", args);
      EXPECT_FALSE(out.ok());
    });
  }

  static absl::StatusOr<profiling::BenchmarkResult> TimeSwap(client::RemoteVM& vm) {
    std::vector<int64_t> shape = {4};
    auto a = Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
    if (!a.ok()) return a.status();
    std::vector<Value> args = {Value(*a), Value(*a)};
    profiling::TimeEvaluatorOptions options;
    options.number = 3;
    options.repeat = 2;
    return vm.TimeEvaluator("swap", Device::Cpu(), options, args);
  }

  std::unique_ptr<Daemon> daemon_;
};

TEST_F(ExclusiveTimingTest, AMeasurementWaitsForAnotherSessionsCall) {
  StartDaemon();
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  // Alone, a measurement is exclusive at once.
  client::RemoteVmOptions short_calls;
  short_calls.call_timeout = absl::Milliseconds(300);
  Opened bench = Open(false, short_calls);
  ASSERT_NE(bench.vm, nullptr);
  auto alone = TimeSwap(*bench.vm);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->exclusive);
  EXPECT_EQ(alone->results.size(), 2u);
  // The reply carries the machine's state, read by the daemon after measuring.
  EXPECT_GT(bench.vm->last_device_state().online_cpus(), 0u);
  EXPECT_FALSE(bench.vm->last_device_state().kernel().empty());

  Opened busy = Open(false, {}, /*direct=*/false);
  ASSERT_NE(busy.vm, nullptr);
  std::thread spinning = Spin(busy);
  ASSERT_TRUE(BecomesBusy(*gate, Mode::kExclusive));  // the spin holds the gate
  auto blocked = TimeSwap(*bench.vm);
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded) << blocked.status();
  // The session's other calls are not held off by its own measurement.
  std::vector<Value> args = {Value(int64_t{1}), Value(int64_t{2})};
  EXPECT_TRUE(bench.vm->Invoke("swap", args).ok());

  // A concurrent measurement runs beside the spin and says so.
  client::RemoteVmOptions concurrent = short_calls;
  concurrent.concurrent_timing = true;
  Opened side = Open(false, concurrent);
  ASSERT_NE(side.vm, nullptr);
  auto beside = TimeSwap(*side.vm);
  ASSERT_TRUE(beside.ok()) << beside.status();
  EXPECT_FALSE(beside->exclusive);

  // A measurement that waits starts once the spin ends, and reports the wait.
  client::RemoteVmOptions patient;
  Opened waiter = Open(false, patient);
  ASSERT_NE(waiter.vm, nullptr);
  absl::StatusOr<profiling::BenchmarkResult> waited = absl::UnknownError("not run");
  std::thread measuring([&] { waited = TimeSwap(*waiter.vm); });
  // Waiting, the measurement holds the turnstile: no new call gets in.
  EXPECT_TRUE(BecomesBusy(*gate, Mode::kShared));
  ASSERT_TRUE(busy.session->Close().ok());
  spinning.join();
  measuring.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(waited->exclusive);
  EXPECT_GT(waited->wait_seconds, 0);
  EXPECT_TRUE(Free(*gate, Mode::kExclusive));
}

TEST_F(ExclusiveTimingTest, CallsWaitForAMeasurementHeldThroughTheLockFile) {
  // Another daemon on the host (here: this test) measuring through the same
  // lock file holds this daemon's calls off.
  StartDaemon();
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  client::RemoteVmOptions short_calls;
  short_calls.call_timeout = absl::Milliseconds(200);
  Opened s = Open(false, short_calls);
  ASSERT_NE(s.vm, nullptr);
  std::vector<Value> args = {Value(int64_t{1}), Value(int64_t{2})};
  {
    auto measuring = gate->Acquire(Mode::kExclusive, absl::InfiniteFuture(), NeverStop);
    ASSERT_TRUE(measuring.ok());
    auto held_off = s.vm->Invoke("swap", args);
    EXPECT_EQ(held_off.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(held_off.status().message(), HasSubstr("measurement"));
  }
  EXPECT_TRUE(s.vm->Invoke("swap", args).ok());
  // The profile of a measurement says how it ran.
  auto report = s.vm->Profile("swap", args);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->configuration.contains("Timing"));
  EXPECT_EQ(std::get<std::string>(report->configuration.at("Timing")), "exclusive");
  EXPECT_GT(s.vm->last_device_state().read_unix_ms(), 0);
}

TEST_F(ExclusiveTimingTest, AnIsolatedSessionsWorkerHoldsTheSameGate) {
  StartDaemon();
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  Opened isolated = Open(/*isolate=*/true, {}, /*direct=*/false);
  ASSERT_NE(isolated.vm, nullptr);
  ASSERT_TRUE(isolated.session->isolated());
  std::thread spinning = Spin(isolated);
  // The worker process runs the spin and holds this daemon's gate.
  EXPECT_TRUE(BecomesBusy(*gate, Mode::kExclusive));
  ASSERT_TRUE(isolated.session->Close().ok());
  spinning.join();
  // Closing killed the worker; what it held is gone with it.
  for (int i = 0; i < 200 && !Free(*gate, Mode::kExclusive); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(Free(*gate, Mode::kExclusive));
  // A measurement in an isolated session is exclusive too.
  Opened again = Open(/*isolate=*/true);
  ASSERT_NE(again.vm, nullptr);
  auto timed = TimeSwap(*again.vm);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_TRUE(timed->exclusive);
  // The worker, on the same machine, reads the device state.
  EXPECT_GT(again.vm->last_device_state().read_unix_ms(), 0);
}

TEST_F(ExclusiveTimingTest, OffMeansMeasurementsRunBesideOtherCalls) {
  StartDaemon(/*exclusive=*/false);
  auto gate = OpenGate();
  ASSERT_NE(gate, nullptr);
  client::RemoteVmOptions short_calls;
  short_calls.call_timeout = absl::Seconds(20);
  Opened busy = Open(false, {}, /*direct=*/false);
  Opened bench = Open(false, short_calls);
  ASSERT_NE(busy.vm, nullptr);
  ASSERT_NE(bench.vm, nullptr);
  std::thread spinning = Spin(busy);
  auto timed = TimeSwap(*bench.vm);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_FALSE(timed->exclusive);
  EXPECT_TRUE(Free(*gate, Mode::kExclusive));  // the daemon never touched it
  std::vector<Value> args = {Value(int64_t{1}), Value(int64_t{2})};
  auto report = bench.vm->Profile("swap", args);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->configuration.contains("Timing"));
  EXPECT_EQ(std::get<std::string>(report->configuration.at("Timing")), "concurrent");
  ASSERT_TRUE(busy.session->Close().ok());
  spinning.join();
}

}  // namespace
}  // namespace tether::server
