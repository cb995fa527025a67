// A CUDA kernel fault in an isolated session on a real GPU (issue 21: a
// faulting kernel in an isolated session ends only that session). An
// in-process Daemon on 127.0.0.1:0 runs isolated sessions in real tetherd
// worker processes (WorkerProgram()), driven through the client library. Each
// session's VM runs on cuda:0 a program whose kernel library is hand-written
// PTX: an add kernel, and a kernel that stores through a null pointer. The
// fault poisons the CUDA context of that one worker for good (the driver
// makes it sticky): the faulting call fails with INTERNAL naming
// CUDA_ERROR_ILLEGAL_ADDRESS, then the worker ends, and every later call of
// that session says it lost its worker after a kernel faulted. An isolated
// session opened before the fault, one inside the daemon and one opened
// after it keep running kernels on cuda:0 with the right numbers, and the
// daemon keeps answering handshakes. The test drives everything from its one
// thread; it skips when no CUDA device is present (no driver, or zero
// devices).
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/cuda/cuda_kernel_library.h"
#include "runtime/device/device_api.h"
#include "runtime/vm/exec_builder.h"
#include "server/daemon.h"
#include "tests/testing/cuda_fixtures.h"
#include "tests/testing/processes.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_functions.h"
#include "tether/v1/tether.grpc.pb.h"

#ifndef TETHERD_PATH
#error "TETHERD_PATH names the tetherd binary (tests/CMakeLists.txt defines it)"
#endif

namespace tether {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::tether::testing::StatusIs;

// DLPack device types, as vm.builtin.to_device takes them.
constexpr int64_t kCpuType = kDLCPU;
constexpr int64_t kCudaType = kDLCUDA;

// The add and store_null kernels (testing::AddAndStoreNullPtx).
const std::string& Ptx() {
  static const std::string* ptx = new std::string(testing::AddAndStoreNullPtx());
  return *ptx;
}

// The serialized program. Its functions take and return CPU tensors and move
// them with vm.builtin.to_device, so each call runs its kernel and then
// copies from the GPU, which reports a fault within that same call:
//   gpu_add(a, b)           = a + b, computed by the add kernel on cuda:0
//   gpu_store_null(x, addr) = x after store_null(x, addr) ran on cuda:0
std::string GpuProgram() {
  vm::ExecBuilder b;
  // dst = a copy of register `from` on device 0 of `type`.
  auto to_device = [&b](vm::RegName from, int64_t type, vm::RegName dst) {
    b.EmitCall("vm.builtin.to_device",
               {vm::Arg::Register(from), vm::Arg::Immediate(type), vm::Arg::Immediate(0)}, dst);
  };
  b.EmitFunction("gpu_add", 2, {"a", "b"});
  to_device(0, kCudaType, 2);
  to_device(1, kCudaType, 3);
  to_device(0, kCudaType, 4);  // the output buffer: a copy the kernel overwrites
  b.EmitCall("add", {vm::Arg::Register(2), vm::Arg::Register(3), vm::Arg::Register(4)});
  to_device(4, kCpuType, 5);
  b.EmitRet(5);
  b.EndFunction("gpu_add");
  b.EmitFunction("gpu_store_null", 2, {"x", "addr"});
  to_device(0, kCudaType, 2);
  b.EmitCall("store_null", {vm::Arg::Register(2), vm::Arg::Register(1)});
  to_device(2, kCpuType, 3);
  b.EmitRet(3);
  b.EndFunction("gpu_store_null");
  b.AddKernelLibrary(
      MakeCudaKernelLibraryBlob("cuda -arch=sm_75", {{75, Ptx()}},
                                testing::CudaManifestWithAdd("kernel store_null 2 1\n"
                                                             "tensor float32 1 *\n"
                                                             "int64\n"
                                                             "launch store_null_k0 1 1 1\n")));
  absl::StatusOr<Ref<vm::Executable>> exec = b.Get();
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? (*exec)->SaveToBytes() : std::string();
}

// The tetherd that runs the workers: the one beside this binary where there
// is one (a bundle from deploy/bundle.sh --tests, run on a GPU machine,
// keeps both in libexec/, far from the build tree), else the one it was
// built with.
std::string WorkerProgram() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    std::filesystem::path beside = self.parent_path() / "tetherd";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return TETHERD_PATH;
}

using testing::ChildPids;

// Whether `pid` is gone within 30 s (the driver tears down a faulted context
// as the process ends).
bool Gone(pid_t pid) { return testing::Gone(pid, std::chrono::seconds(30)); }

class CudaIsolationGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DeviceExists(Device::Cuda(0))) {
      GTEST_SKIP() << "no CUDA device: cuda:0 does not exist (no driver or no GPU)";
    }
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    options.isolate_sessions = false;  // sessions ask for it
    options.worker_program = WorkerProgram();
    auto daemon = server::Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  // A session (isolated when asked) with a VM of GpuProgram() on cuda:0,
  // and the worker process it got, if any. `transport` kDirect: calls go
  // straight to the worker's own direct channel; kStream: through the
  // daemon, which forwards them to the worker. Failures are test failures
  // and leave the missing parts null.
  struct Opened {
    std::unique_ptr<client::RemoteSession> session;
    std::unique_ptr<client::RemoteVM> vm;  // destroyed before the session
    pid_t worker = -1;
  };
  Opened Open(bool isolate, client::TransportKind transport = client::TransportKind::kDirect) {
    Opened out;
    std::set<pid_t> before = ChildPids();
    client::ConnectOptions options;
    options.isolate = isolate;
    options.transport = transport;
    auto session = client::RemoteSession::Connect(daemon_->target(), options);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return out;
    out.session = std::move(*session);
    EXPECT_EQ(out.session->isolated(), isolate);
    if (out.session->isolated()) {
      std::vector<pid_t> fresh;
      for (pid_t pid : ChildPids()) {
        if (!before.contains(pid)) fresh.push_back(pid);
      }
      EXPECT_EQ(fresh.size(), 1u);
      if (fresh.size() == 1) out.worker = fresh[0];
    }
    static const std::string* program = new std::string(GpuProgram());
    auto sha = out.session->UploadModule(*program);
    EXPECT_TRUE(sha.ok()) << sha.status();
    if (!sha.ok()) return out;
    auto vm = client::RemoteVM::Create(out.session.get(), *sha, {Device::Cuda(0)});
    EXPECT_TRUE(vm.ok()) << vm.status();
    if (vm.ok()) out.vm = std::move(*vm);
    return out;
  }

  // Runs gpu_add on 4096 elements (16 blocks) in session `who` and checks it
  // against host math.
  static void ExpectAddRunsOnTheGpu(const char* who, client::RemoteVM& vm) {
    SCOPED_TRACE(who);
    constexpr int64_t kN = 4096;
    std::vector<float> a(kN);
    std::vector<float> b(kN);
    for (int64_t i = 0; i < kN; ++i) {
      a[i] = 0.5f * static_cast<float>(i % 1000) + 0.25f;
      b[i] = -1.75f * static_cast<float>(i % 1000) + 0.25f;  // never 0: c = a would show
    }
    std::vector<Value> args = {Value(testing::MakeFloatTensor({kN}, a)),
                               Value(testing::MakeFloatTensor({kN}, b))};
    absl::StatusOr<Value> out = vm.Invoke("gpu_add", args);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(out->is_tensor()) << out->TypeName();
    std::vector<float> c = testing::ReadFloats(Tensor(out->AsRef<TensorObj>()));
    ASSERT_EQ(c.size(), a.size());
    for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "at " << i;
  }

  std::unique_ptr<server::Daemon> daemon_;
};

TEST_F(CudaIsolationGpuTest, AFaultingKernelEndsOnlyItsSession) {
  // Opened before the fault, each with a live CUDA context: an isolated
  // neighbour, a session inside the daemon, and the victim, whose calls the
  // daemon forwards to its worker (so the fault's status passes through it).
  Opened neighbour = Open(/*isolate=*/true);
  Opened in_daemon = Open(/*isolate=*/false);
  Opened victim = Open(/*isolate=*/true, client::TransportKind::kStream);
  ASSERT_TRUE(neighbour.vm && in_daemon.vm && victim.vm);
  ASSERT_GT(neighbour.worker, 0);
  ASSERT_GT(victim.worker, 0);
  ASSERT_NE(victim.worker, neighbour.worker);
  EXPECT_EQ(victim.vm->transport(), client::TransportKind::kStream);
  ExpectAddRunsOnTheGpu("neighbour, before the fault", *neighbour.vm);
  ExpectAddRunsOnTheGpu("in-daemon, before the fault", *in_daemon.vm);
  ExpectAddRunsOnTheGpu("victim, before the fault", *victim.vm);

  // The kernel stores through address 0. Its launch is asynchronous; the copy
  // back to the host in the same call reports the fault (CudaStatus:
  // INTERNAL, with the note that the device is unusable in that process).
  std::vector<Value> store_args = {Value(testing::MakeFloatTensor({4}, {1.0f, 2.0f, 3.0f, 4.0f})),
                                   Value(int64_t{0})};
  absl::StatusOr<Value> fault = victim.vm->Invoke("gpu_store_null", store_args);
  EXPECT_THAT(fault, StatusIs(absl::StatusCode::kInternal,
                              AllOf(HasSubstr("cuda error CUDA_ERROR_ILLEGAL_ADDRESS"),
                                    HasSubstr("on cuda:0 (a kernel faulted; cuda:0 is unusable "
                                              "in this process from now on"))));
  EXPECT_EQ(GetErrorKind(fault.status()), ErrorKind::kRuntime);  // through worker and daemon

  // The fault is sticky in the victim's worker, so the worker ends once it
  // has answered (kWorkerExitStickyFault), freeing the GPU memory it held;
  // the session's next call says so, every time (the first finds the worker
  // gone and reaps it).
  constexpr int64_t kN = 8;
  std::vector<Value> add_args = {Value(testing::MakeFloatTensor({kN}, std::vector<float>(kN, 1))),
                                 Value(testing::MakeFloatTensor({kN}, std::vector<float>(kN, 2)))};
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<Value> after = victim.vm->Invoke("gpu_add", add_args);
    EXPECT_THAT(after, StatusIs(absl::StatusCode::kInternal,
                                AllOf(HasSubstr("lost its worker process"),
                                      HasSubstr("ended after a kernel faulted on its GPU"))));
  }
  EXPECT_TRUE(Gone(victim.worker)) << "the faulted worker did not end";

  // Everyone else keeps running kernels on cuda:0, and new isolated sessions
  // start and run them too.
  ExpectAddRunsOnTheGpu("neighbour, after the fault", *neighbour.vm);
  ExpectAddRunsOnTheGpu("in-daemon, after the fault", *in_daemon.vm);
  Opened fresh = Open(/*isolate=*/true);
  ASSERT_TRUE(fresh.vm);
  ASSERT_GT(fresh.worker, 0);
  ExpectAddRunsOnTheGpu("fresh, opened after the fault", *fresh.vm);

  // The daemon answers a handshake, with cuda:0 among its devices.
  auto stub = v1::Tether::NewStub(
      grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::HandshakeRequest hello;
  hello.mutable_client_protocol()->set_major(rpc::kProtocolMajor);
  v1::HandshakeResponse info;
  grpc::Status handshake = stub->Handshake(&context, hello, &info);
  ASSERT_TRUE(handshake.ok()) << handshake.error_message();
  std::vector<std::string> devices;
  for (const v1::DeviceInfo& d : info.devices()) devices.push_back(d.name());
  EXPECT_THAT(devices, ::testing::Contains("cuda:0"));

  // The victim's session still closes cleanly; the others stay open.
  victim.vm.reset();
  EXPECT_TRUE(victim.session->Close().ok());
  EXPECT_EQ(daemon_->num_sessions(), 3u);
  EXPECT_EQ(::kill(neighbour.worker, 0), 0) << "the neighbour's worker ended";
  ExpectAddRunsOnTheGpu("neighbour, after the victim closed", *neighbour.vm);
}

}  // namespace
}  // namespace tether
