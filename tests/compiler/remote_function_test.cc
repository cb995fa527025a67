// Module functions, conformance style: one suite over a model built by
// Build() with real LLVM kernels, run against the local VM and through a
// real in-process tetherd on 127.0.0.1:0 (direct channel, CallStream, unary
// Call): listing the module's functions, calling one kernel and checking it
// against the model, timing one kernel, and refusing wrong calls while the
// daemon keeps serving. Then the daemon's global functions, device sync and
// streams through RemoteRuntime.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/remote_runtime.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/registry.h"
#include "runtime/threading/thread_pool.h"
#include "runtime/vm/local_vm.h"
#include "server/daemon.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

constexpr char kScaleAdd[] = R"(
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), y: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        with R.dataflow():
            lv0 = R.add(x, y)
            gv = R.multiply(lv0, y)
            R.output(gv)
        return gv
)";

// A daemon and a session for the whole binary's remote backends.
struct RemoteEnvironment {
  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<client::RemoteSession> session;

  static RemoteEnvironment& Get() {
    static RemoteEnvironment* env = new RemoteEnvironment();  // lives to exit
    return *env;
  }
  absl::StatusOr<client::RemoteSession*> Session() {
    if (session) return session.get();
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    TETHER_ASSIGN_OR_RETURN(daemon, server::Daemon::Start(options));
    TETHER_ASSIGN_OR_RETURN(session, client::RemoteSession::Connect(daemon->target()));
    return session.get();
  }
};

// A backend: makes the VM, and places tensors where its kernels can write
// them (local tensors, or remote tensors of the session) and reads them back.
struct Backend {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<vm::VirtualMachine>>(Ref<vm::Executable>)> make;
  std::function<absl::StatusOr<Value>(const Tensor&)> place;
  std::function<absl::StatusOr<Tensor>(const Value&)> read;
};
void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

Backend Local() {
  return {"local",
          [](Ref<vm::Executable> exec) -> absl::StatusOr<std::unique_ptr<vm::VirtualMachine>> {
            TETHER_ASSIGN_OR_RETURN(auto vm,
                                    vm::LocalVirtualMachine::Create(exec, {Device::Cpu()}));
            return std::unique_ptr<vm::VirtualMachine>(std::move(vm));
          },
          [](const Tensor& t) -> absl::StatusOr<Value> { return Value(t); },
          [](const Value& v) -> absl::StatusOr<Tensor> { return Tensor(v.AsRef<TensorObj>()); }};
}

Backend Remote(std::string name, client::TransportKind transport) {
  return {
      std::move(name),
      [transport](Ref<vm::Executable> exec) -> absl::StatusOr<std::unique_ptr<vm::VirtualMachine>> {
        TETHER_ASSIGN_OR_RETURN(client::RemoteSession * session,
                                RemoteEnvironment::Get().Session());
        TETHER_ASSIGN_OR_RETURN(std::string sha, session->UploadModule(exec->SaveToBytes()));
        client::RemoteVmOptions options;
        options.transport = transport;
        TETHER_ASSIGN_OR_RETURN(
            auto vm, client::RemoteVM::Create(session, sha, {Device::Cpu()}, "", options));
        return std::unique_ptr<vm::VirtualMachine>(std::move(vm));
      },
      [](const Tensor& t) -> absl::StatusOr<Value> {
        TETHER_ASSIGN_OR_RETURN(client::RemoteSession * session,
                                RemoteEnvironment::Get().Session());
        return session->UploadTensor(t);
      },
      [](const Value& v) -> absl::StatusOr<Tensor> {
        TETHER_ASSIGN_OR_RETURN(client::RemoteSession * session,
                                RemoteEnvironment::Get().Session());
        return session->DownloadTensor(v);
      }};
}

class ModuleFunctionTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto module = ParseModule(kScaleAdd);
    ASSERT_TRUE(module.ok()) << module.status();
    auto exec = Build(*module, {});
    ASSERT_TRUE(exec.ok()) << exec.status();
    auto vm = GetParam().make(*exec);
    ASSERT_TRUE(vm.ok()) << vm.status();
    vm_ = std::move(*vm);
    auto functions = vm_->ListFunctions();
    ASSERT_TRUE(functions.ok()) << functions.status();
    functions_ = *functions;
    for (const vm::ModuleFunction& f : functions_) {
      if (f.kind == vm::ModuleFunction::Kind::kKernel) kernel_ = f;
    }
    ASSERT_FALSE(kernel_.name.empty()) << "the model has no kernel";
  }

  // The kernel's arguments for n rows: each tensor parameter a [n, 3]
  // float32 placed on the backend (inputs x, y; the last one the output),
  // each int parameter n.
  std::vector<Value> KernelArgs(int64_t n, const std::vector<float>& x,
                                const std::vector<float>& y) {
    std::vector<Value> args;
    int tensors = 0;
    for (const KernelParamSignature& p : kernel_.kernel.params) {
      if (!p.is_tensor) {
        args.push_back(Value(n));
        continue;
      }
      const std::vector<float>& data = tensors == 0   ? x
                                       : tensors == 1 ? y
                                                      : std::vector<float>(x.size(), -1.0f);
      ++tensors;
      absl::StatusOr<Value> placed = GetParam().place(MakeFloatTensor({n, 3}, data));
      EXPECT_TRUE(placed.ok()) << placed.status();
      args.push_back(placed.ok() ? *placed : Value());
    }
    return args;
  }

  std::unique_ptr<vm::VirtualMachine> vm_;
  std::vector<vm::ModuleFunction> functions_;
  vm::ModuleFunction kernel_;
};

TEST_P(ModuleFunctionTest, ListsBytecodeFunctionsAndKernels) {
  ASSERT_FALSE(functions_.empty());
  EXPECT_EQ(functions_[0].name, "main");
  EXPECT_EQ(functions_[0].kind, vm::ModuleFunction::Kind::kVmFunction);
  EXPECT_EQ(functions_[0].num_args, 2);
  EXPECT_THAT(functions_[0].param_names, ::testing::ElementsAre("x", "y"));
  EXPECT_EQ(kernel_.kernel.device_type, kDLCPU);
  EXPECT_TRUE(kernel_.kernel.unchecked.empty());
  EXPECT_EQ(kernel_.num_args, static_cast<int64_t>(kernel_.kernel.params.size()));
  int tensors = 0;
  for (const KernelParamSignature& p : kernel_.kernel.params) {
    if (!p.is_tensor) continue;
    ++tensors;
    EXPECT_EQ(p.dtype, DataType::Float(32));
    EXPECT_EQ(p.ndim, 2);
  }
  EXPECT_EQ(tensors, 3);  // x, y and the output: add and multiply fused
}

TEST_P(ModuleFunctionTest, CallsOneKernelAsTheModelDoes) {
  const int64_t n = 4;
  std::vector<float> x(12), y(12);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.5f * static_cast<float>(i);
    y[i] = 1.0f - 0.25f * static_cast<float>(i);
  }
  Value model_args[] = {MakeFloatTensor({n, 3}, x), MakeFloatTensor({n, 3}, y)};
  auto model = vm_->Invoke("main", model_args);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> want = ReadFloats(Tensor(model->AsRef<TensorObj>()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(want[i], (x[i] + y[i]) * y[i]);

  std::vector<Value> args = KernelArgs(n, x, y);
  auto out = vm_->CallKernel(kernel_.name, args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->is_none());
  auto written = GetParam().read(args[2]);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(ReadFloats(*written), want);
}

TEST_P(ModuleFunctionTest, TimesOneKernel) {
  std::vector<float> x(6, 1.0f), y(6, 2.0f);
  std::vector<Value> args = KernelArgs(2, x, y);
  profiling::TimeEvaluatorOptions options;
  options.number = 2;
  options.repeat = 3;
  auto result = vm_->TimeEvaluator(kernel_.name, Device::Cpu(), options, args);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->results.size(), 3u);
  EXPECT_EQ(result->total_calls, 1 + 2 * 3);
  auto written = GetParam().read(args[2]);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(ReadFloats(*written), std::vector<float>(6, 6.0f));
}

TEST_P(ModuleFunctionTest, RefusesWrongCallsBeforeTheKernelRunsAndKeepsServing) {
  std::vector<float> x(6, 1.0f), y(6, 2.0f);
  std::vector<Value> args = KernelArgs(2, x, y);

  std::vector<Value> short_args(args.begin(), args.end() - 1);
  auto arity = vm_->CallKernel(kernel_.name, short_args);
  EXPECT_EQ(arity.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(arity.status().message(), HasSubstr("arguments, got"));

  std::vector<Value> wrong_dtype = args;
  const int64_t dims[] = {2, 3};
  Tensor f64 = *Tensor::Empty(dims, DataType::Float(64), Device::Cpu());
  wrong_dtype[0] = *GetParam().place(f64);
  auto dtype = vm_->CallKernel(kernel_.name, wrong_dtype);
  EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.status().message(), HasSubstr("float64"));

  std::vector<Value> wrong_shape = args;
  wrong_shape[2] = *GetParam().place(MakeFloatTensor({3, 3}, std::vector<float>(9, 0.0f)));
  auto shape = vm_->CallKernel(kernel_.name, wrong_shape);
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("dim 0 is 3"));

  std::vector<Value> wrong_rank = args;
  wrong_rank[1] = *GetParam().place(MakeFloatTensor({6}, y));
  EXPECT_EQ(vm_->CallKernel(kernel_.name, wrong_rank).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::vector<Value> not_a_tensor = args;
  not_a_tensor[0] = Value(int64_t{7});
  EXPECT_EQ(vm_->CallKernel(kernel_.name, not_a_tensor).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Still serving: the right call works.
  ASSERT_TRUE(vm_->CallKernel(kernel_.name, args).ok());
  EXPECT_EQ(ReadFloats(*GetParam().read(args[2])), std::vector<float>(6, 6.0f));
}

TEST_P(ModuleFunctionTest, UnknownKernelIsNotFound) {
  auto call = vm_->CallKernel("no_such_kernel", {});
  EXPECT_EQ(call.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(call.status().message(), HasSubstr("no kernel named \"no_such_kernel\""));
  // "main" is a bytecode function, not a kernel, and a kernel is no
  // bytecode function to invoke.
  EXPECT_EQ(vm_->CallKernel("main", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(vm_->Invoke(kernel_.name, {}).status().code(), absl::StatusCode::kNotFound);
  profiling::TimeEvaluatorOptions options;
  EXPECT_EQ(vm_->TimeEvaluator("no_such_kernel", Device::Cpu(), options, {}).status().code(),
            absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Backends, ModuleFunctionTest,
                         ::testing::Values(Local(),
                                           Remote("direct", client::TransportKind::kDirect),
                                           Remote("stream", client::TransportKind::kStream),
                                           Remote("unary", client::TransportKind::kUnary)),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param.name;
                         });

// The daemon's global functions: only the remote-callable ones are listed
// and callable; the answers are the runtime's own.
TEST(RemoteRuntimeTest, ListsAndCallsOnlyRemoteCallableGlobals) {
  tether::testing::RegisterTestFunctions();
  auto session = RemoteEnvironment::Get().Session();
  ASSERT_TRUE(session.ok()) << session.status();
  client::RemoteRuntime remote(*session);
  auto names = remote.ListGlobalFunctions();
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, Contains("tether.runtime.num_threads"));
  EXPECT_THAT(*names, Contains("tether.runtime.device_attr"));
  EXPECT_THAT(*names, Not(Contains("test.vm.add")));
  EXPECT_EQ(*names, Registry::ListRemoteCallable());

  auto threads = remote.CallGlobal("tether.runtime.num_threads", {});
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_EQ(threads->int_value(), NumThreads());
  Value attr_args[] = {Value(Device::Cpu()), Value(std::string("exist"))};
  auto exist = remote.CallGlobal("tether.runtime.device_attr", attr_args);
  ASSERT_TRUE(exist.ok()) << exist.status();
  EXPECT_TRUE(exist->is_int() ? exist->int_value() != 0 : exist->bool_value());
  Value bad_attr[] = {Value(Device::Cpu()), Value(std::string("colour"))};
  EXPECT_EQ(remote.CallGlobal("tether.runtime.device_attr", bad_attr).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Registered but not marked: refused; unknown: not found.
  auto refused = remote.CallGlobal("test.vm.add", {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("is not remote-callable"));
  EXPECT_EQ(remote.CallGlobal("no.such.function", {}).status().code(), absl::StatusCode::kNotFound);

  // A function marked by the process is callable, with tensors; unmarked again, refused.
  ASSERT_TRUE(Registry::SetRemoteCallable("test.vm.add").ok());
  Value add_args[] = {MakeFloatTensor({2}, {1, 2}), MakeFloatTensor({2}, {10, 20})};
  auto sum = remote.CallGlobal("test.vm.add", add_args);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(ReadFloats(Tensor(sum->AsRef<TensorObj>())), (std::vector<float>{11, 22}));
  ASSERT_TRUE(Registry::SetRemoteCallable("test.vm.add", false).ok());
  EXPECT_EQ(remote.CallGlobal("test.vm.add", add_args).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Registry::SetRemoteCallable("no.such.function").code(), absl::StatusCode::kNotFound);
}

TEST(RemoteRuntimeTest, SyncsDevicesAndRefusesStreamsWhereThereAreNone) {
  auto session = RemoteEnvironment::Get().Session();
  ASSERT_TRUE(session.ok()) << session.status();
  client::RemoteRuntime remote(*session);
  EXPECT_TRUE(remote.Sync(Device::Cpu()).ok());
  auto cpu_stream = remote.CreateStream(Device::Cpu());
  EXPECT_EQ(cpu_stream.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cpu_stream.status().message(), HasSubstr("cpu:0 has no streams"));
  // No machine has 64 GPUs here: absent.
  EXPECT_EQ(remote.Sync(Device::Cuda(63)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(remote.CreateStream(Device::Cuda(63)).status().code(), absl::StatusCode::kUnavailable);
  // Setting no stream is always fine; a handle that is no stream is refused.
  EXPECT_TRUE(remote.SetStream(Device::Cpu(), Value()).ok());
  EXPECT_EQ(remote.SetStream(Device::Cpu(), Value(int64_t{3})).code(),
            absl::StatusCode::kInvalidArgument);
  // The session still serves.
  EXPECT_TRUE(remote.ListGlobalFunctions().ok());
}

}  // namespace
}  // namespace tether::compiler
