// RemoteSession and RemoteVM against a real in-process tetherd on
// 127.0.0.1:0: exact tensor round trips for every dtype around the inline /
// chunked threshold (and one 256 MiB tensor), module uploads skipped when the
// daemon has the module, errors keeping code and kind, and Close releasing the
// session on the daemon, also while another thread's call is in flight.
#include "client/remote_session.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/remote_vm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"
#include "server/daemon.h"
#include "tests/testing/test_functions.h"

namespace tether::client {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

class RemoteSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    auto daemon = server::Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    if (daemon_) daemon_->Shutdown();
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    auto session = RemoteSession::Connect(daemon_->target());
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
  }

  // A VM whose main(x) returns x: tensors go in and come back out by value.
  std::unique_ptr<RemoteVM> IdentityVm() {
    vm::ExecBuilder b;
    b.EmitFunction("main", 1, {"x"});
    b.EmitRet(0);
    b.EndFunction("main");
    auto exec = b.Get();
    EXPECT_TRUE(exec.ok()) << exec.status();
    auto sha = session_->UploadModule((*exec)->SaveToBytes());
    EXPECT_TRUE(sha.ok()) << sha.status();
    auto vm = RemoteVM::Create(session_.get(), *sha);
    EXPECT_TRUE(vm.ok()) << vm.status();
    return vm.ok() ? std::move(*vm) : nullptr;
  }

  static server::Daemon* daemon_;
  std::unique_ptr<RemoteSession> session_;
};
server::Daemon* RemoteSessionTest::daemon_ = nullptr;

Tensor RandomTensor(DataType dtype, int64_t numel, uint32_t seed) {
  const int64_t shape[] = {numel};
  auto t = Tensor::Empty(shape, dtype, Device::Cpu());
  EXPECT_TRUE(t.ok()) << t.status();
  std::mt19937 rng(seed);
  auto* bytes = static_cast<uint8_t*>((*t)->element_data());
  for (int64_t i = 0; i < (*t)->NumBytes(); ++i) {
    bytes[i] = dtype.is_bool() ? static_cast<uint8_t>(rng() & 1) : static_cast<uint8_t>(rng());
  }
  return *t;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a->dtype() == b->dtype() && a->NumBytes() == b->NumBytes() &&
         std::equal(a->shape().begin(), a->shape().end(), b->shape().begin(), b->shape().end()) &&
         std::memcmp(a->element_data(), b->element_data(), static_cast<size_t>(a->NumBytes())) == 0;
}

TEST_F(RemoteSessionTest, TensorsRoundTripExactlyForEveryDtype) {
  const DataType dtypes[] = {DataType::Float(16),  DataType::Float(32), DataType::Float(64),
                             DataType::BFloat16(), DataType::Int(8),    DataType::Int(16),
                             DataType::Int(32),    DataType::Int(64),   DataType::UInt(8),
                             DataType::UInt(16),   DataType::UInt(32),  DataType::UInt(64),
                             DataType::Bool()};
  auto vm = IdentityVm();
  ASSERT_TRUE(vm);
  uint32_t seed = 1;
  for (DataType dtype : dtypes) {
    const int64_t elem = dtype.bytes();
    // 0 bytes, 1 byte (1-byte dtypes), and the inline threshold minus, at and
    // plus one element (one byte for 1-byte dtypes).
    std::vector<int64_t> counts = {0, kMiB / elem - 1, kMiB / elem, kMiB / elem + 1};
    if (elem == 1) counts.push_back(1);
    for (int64_t n : counts) {
      SCOPED_TRACE(absl::StrCat(dtype.ToString(), " x ", n));
      Tensor t = RandomTensor(dtype, n, seed++);
      // Through the tensor stream.
      auto remote = session_->UploadTensor(t);
      ASSERT_TRUE(remote.ok()) << remote.status();
      auto back = session_->DownloadTensor(*remote);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(SameBytes(t, *back));
      ASSERT_TRUE(session_->FreeObjects({AsRemoteHandle(*remote)->id()}).ok());
      // Through a VM call: inline at or below the threshold, handles above.
      Value args[] = {t};
      auto out = vm->Invoke("main", args);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_TRUE(out->is_tensor());
      EXPECT_TRUE(SameBytes(t, Tensor(out->AsRef<TensorObj>())));
    }
  }
}

TEST_F(RemoteSessionTest, Float32Of256MiBRoundTrips) {
  Tensor t = RandomTensor(DataType::Float(32), 64 * kMiB, 7);
  auto remote = session_->UploadTensor(t);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto back = session_->DownloadTensor(*remote);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(t, *back));
  EXPECT_TRUE(session_->FreeObjects({AsRemoteHandle(*remote)->id()}).ok());
}

TEST_F(RemoteSessionTest, NonContiguousTensorsAreCompacted) {
  Tensor base = RandomTensor(DataType::Int(32), 6, 3);
  // A transposed 2x3 view of a 3x2 row-major tensor.
  auto view = Tensor(Ref<TensorObj>(new TensorObj(base->data(), Device::Cpu(), DataType::Int(32),
                                                  {2, 3}, {1, 2}, 0, base.ref())));
  auto remote = session_->UploadTensor(view);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto back = session_->DownloadTensor(*remote);
  ASSERT_TRUE(back.ok()) << back.status();
  const auto* src = static_cast<const int32_t*>(base->element_data());
  const auto* got = static_cast<const int32_t*>((*back)->element_data());
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], src[j * 2 + i]);
  }
}

TEST_F(RemoteSessionTest, SecondModuleUploadDoesNotStream) {
  vm::ExecBuilder b;
  b.EmitFunction("unique_for_upload_test", 1, {"x"});
  b.EmitRet(0);
  b.EndFunction("unique_for_upload_test");
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok());
  std::string bytes = (*exec)->SaveToBytes();
  const uint64_t before = session_->module_streams();
  auto first = session_->UploadModule(bytes);
  ASSERT_TRUE(first.ok()) << first.status();
  auto present = session_->HasModule(*first);
  ASSERT_TRUE(present.ok() && *present);
  auto second = session_->UploadModule(bytes);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, *second);
  EXPECT_LE(session_->module_streams(), before + 1);
  // The second upload found the module and streamed nothing.
  const uint64_t after_first = session_->module_streams();
  ASSERT_TRUE(session_->UploadModule(bytes).ok());
  EXPECT_EQ(session_->module_streams(), after_first);
}

TEST_F(RemoteSessionTest, ErrorsKeepCodeAndKindAcrossTheWire) {
  tether::testing::RegisterTestFunctions();
  vm::ExecBuilder b;
  b.EmitFunction("main", 2, {"x", "y"});
  b.EmitCall("test.vm.add", {vm::Arg::Register(0), vm::Arg::Register(1)}, 2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok());
  auto local = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  ASSERT_TRUE(local.ok()) << local.status();
  auto sha = session_->UploadModule((*exec)->SaveToBytes());
  ASSERT_TRUE(sha.ok()) << sha.status();
  auto remote = RemoteVM::Create(session_.get(), *sha);
  ASSERT_TRUE(remote.ok()) << remote.status();

  Value one[] = {Value(int64_t{1})};
  auto check = [](const absl::Status& l, const absl::Status& r) {
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(r.code(), l.code()) << r;
    EXPECT_EQ(GetErrorKind(r), GetErrorKind(l)) << r;
    EXPECT_EQ(r.message(), l.message());
  };
  check((*local)->Invoke("nope", {}).status(), (*remote)->Invoke("nope", {}).status());
  check((*local)->Invoke("main", one).status(), (*remote)->Invoke("main", one).status());
  check((*local)->InvokeStateful("main"), (*remote)->InvokeStateful("main"));
  // An unknown module is NOT_FOUND.
  auto missing = RemoteVM::Create(session_.get(), std::string(64, 'a'));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

TEST_F(RemoteSessionTest, LargeOutputsCanStayRemote) {
  vm::ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  b.EmitRet(0);
  b.EndFunction("main");
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok());
  auto sha = session_->UploadModule((*exec)->SaveToBytes());
  ASSERT_TRUE(sha.ok());
  RemoteVmOptions options;
  options.fetch_outputs = false;
  auto vm = RemoteVM::Create(session_.get(), *sha, {}, "", options);
  ASSERT_TRUE(vm.ok()) << vm.status();
  Tensor t = RandomTensor(DataType::Float(32), kMiB, 11);  // 4 MiB: uploaded as a handle
  Value args[] = {t};
  auto out = (*vm)->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  RemoteHandleObj* handle = AsRemoteHandle(*out);
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(handle->spec().num_bytes, 4 * kMiB);
  auto back = session_->DownloadTensor(*out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(t, *back));
  // And a remote tensor goes back in as an argument without re-sending.
  Value again[] = {*out};
  auto twice = (*vm)->Invoke("main", again);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_NE(AsRemoteHandle(*twice), nullptr);
}

TEST_F(RemoteSessionTest, CloseReleasesTheSession) {
  const size_t before = daemon_->num_sessions();
  auto other = RemoteSession::Connect(daemon_->target());
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(daemon_->num_sessions(), before + 1);
  EXPECT_TRUE((*other)->Close().ok());
  EXPECT_EQ(daemon_->num_sessions(), before);
  EXPECT_TRUE((*other)->Close().ok());  // idempotent
  EXPECT_EQ((*other)->HasModule(std::string(64, 'a')).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// test.client.hold(block): a call that counts itself in and, when `block`
// is true, does not return until the test releases it, like a kernel the VM
// cannot interrupt. Registered once in the daemon's (this process's) registry.
class HeldCalls {
 public:
  static HeldCalls& Get() {
    static HeldCalls* calls = new HeldCalls;
    static std::once_flag once;
    std::call_once(once, [] {
      absl::Status s = Registry::RegisterTyped("test.client.hold", [](int64_t block) {
        HeldCalls& held = Get();
        absl::MutexLock lock(&held.mu_);
        ++held.entered_;
        if (block != 0) held.mu_.Await(absl::Condition(&held.released_));
        return block;
      });
      EXPECT_TRUE(s.ok()) << s;
    });
    return *calls;
  }
  int entered() {
    absl::MutexLock lock(&mu_);
    return entered_;
  }
  // Waits, at most a minute, for a call after the first `before` to enter.
  bool AwaitEntered(int before) {
    absl::MutexLock lock(&mu_);
    auto more = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ > before; };
    return mu_.AwaitWithTimeout(absl::Condition(&more), absl::Minutes(1));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  // Blocking calls block again (for --gtest_repeat).
  void Rearm() {
    absl::MutexLock lock(&mu_);
    released_ = false;
  }

 private:
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// held(block) = test.client.hold(block), then spins until interrupted.
std::string HoldThenSpinExecutable() {
  HeldCalls::Get();
  vm::ExecBuilder b;
  b.EmitFunction("held", 1, {"block"});
  b.EmitCall("test.client.hold", {vm::Arg::Register(0)}, 1);
  b.EmitGoto(1);
  b.EmitGoto(-1);
  b.EmitRet(1);
  b.EndFunction("held");
  auto exec = b.Get();
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? (*exec)->SaveToBytes() : std::string();
}

// Close() from another thread while `held(block)` runs, on each path a call
// can take: the direct channel, the CallStream, a unary Call.
class CloseDuringCallTest : public RemoteSessionTest,
                            public ::testing::WithParamInterface<TransportKind> {
 protected:
  // A session on the daemon, a VM of HoldThenSpinExecutable() on it, and the
  // path its calls take checked.
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    ConnectOptions options;
    options.transport = GetParam();
    auto session = RemoteSession::Connect(daemon_->target(), options);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
    auto sha = session_->UploadModule(HoldThenSpinExecutable());
    ASSERT_TRUE(sha.ok()) << sha.status();
    auto vm = RemoteVM::Create(session_.get(), *sha);
    ASSERT_TRUE(vm.ok()) << vm.status();
    vm_ = std::move(*vm);
    ASSERT_EQ(vm_->transport(), GetParam());
  }
  void TearDown() override {
    vm_.reset();
    session_.reset();
  }

  absl::Status Held(bool block) {
    Value args[] = {Value(int64_t{block ? 1 : 0})};
    return vm_->Invoke("held", args).status();
  }

  // Closes the session while held(block) runs and returns how the call
  // ended. Close, and then the call, must return within a minute each; if
  // either hangs, the kernel is released and the daemon shut down so that
  // the test ends.
  absl::Status CloseDuringHeldCall(bool block) {
    HeldCalls& held = HeldCalls::Get();
    held.Rearm();
    const int before = held.entered();
    absl::Status call = absl::UnknownError("not run");
    absl::Notification returned;
    std::thread calling([&] {
      call = Held(block);
      returned.Notify();
    });
    EXPECT_TRUE(held.AwaitEntered(before));
    absl::Notification closed;
    std::thread closing([&] {
      EXPECT_TRUE(session_->Close().ok());
      closed.Notify();
    });
    bool in_time = closed.WaitForNotificationWithTimeout(absl::Minutes(1));
    EXPECT_TRUE(in_time) << "Close() did not return while a call was in flight";
    if (in_time) {
      in_time = returned.WaitForNotificationWithTimeout(absl::Minutes(1));
      EXPECT_TRUE(in_time) << "the call still waits after Close() returned";
    }
    if (!in_time) {
      held.Release();
      daemon_->Shutdown();
    }
    closing.join();
    calling.join();
    return call;
  }

  std::unique_ptr<RemoteVM> vm_;
};

TEST_P(CloseDuringCallTest, StopsTheCall) {
  const size_t before = daemon_->num_sessions();
  absl::Status call = CloseDuringHeldCall(/*block=*/false);
  EXPECT_EQ(call.code(), absl::StatusCode::kCancelled) << call;
  EXPECT_EQ(GetErrorKind(call), ErrorKind::kCancelled) << call;
  EXPECT_EQ(daemon_->num_sessions(), before - 1);
}

TEST_P(CloseDuringCallTest, ReturnsWhileAKernelIgnoresTheInterrupt) {
  const size_t before = daemon_->num_sessions();
  absl::Status call = CloseDuringHeldCall(/*block=*/true);
  // The daemon is still inside test.client.hold; the client gave up on it.
  EXPECT_EQ(call.code(), absl::StatusCode::kCancelled) << call;
  EXPECT_THAT(std::string(call.message()), ::testing::HasSubstr("closed while the call ran"));
  EXPECT_EQ(daemon_->num_sessions(), before - 1);
  // Once the kernel returns, the daemon ends the call and keeps serving.
  HeldCalls::Get().Release();
  auto next = RemoteSession::Connect(daemon_->target());
  ASSERT_TRUE(next.ok()) << next.status();
  auto sha = (*next)->UploadModule(HoldThenSpinExecutable());
  ASSERT_TRUE(sha.ok()) << sha.status();
  auto vm = RemoteVM::Create(next->get(), *sha);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_TRUE((*next)->HasModule(std::string(64, 'a')).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, CloseDuringCallTest,
                         ::testing::Values(TransportKind::kDirect, TransportKind::kStream,
                                           TransportKind::kUnary),
                         [](const ::testing::TestParamInfo<TransportKind>& info) {
                           switch (info.param) {
                             case TransportKind::kDirect:
                               return "Direct";
                             case TransportKind::kStream:
                               return "Stream";
                             case TransportKind::kUnary:
                               return "Unary";
                           }
                           return "Unknown";
                         });

TEST_F(RemoteSessionTest, HandshakeDescribesTheDaemon) {
  const v1::HandshakeResponse& hello = session_->handshake();
  EXPECT_EQ(hello.protocol().major(), rpc::kProtocolMajor);
  ASSERT_GE(hello.devices_size(), 1);
  EXPECT_EQ(hello.devices(0).name(), "cpu:0");
  EXPECT_EQ(session_->limits().max_inline_tensor_bytes(), static_cast<uint64_t>(kMiB));
  EXPECT_GT(session_->limits().chunk_bytes(), 0u);
}

TEST(RemoteSessionConnectTest, UnreachableDaemonIsUnavailable) {
  ConnectOptions options;
  options.deadline = absl::Milliseconds(200);
  auto session = RemoteSession::Connect("127.0.0.1:1", options);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnavailable) << session.status();
}

}  // namespace
}  // namespace tether::client
