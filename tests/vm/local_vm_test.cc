// Behaviour of the local interpreter that only it has: direct instruments,
// interrupts, its frame stack, allocators and function resolution at creation.
#include "runtime/vm/local_vm.h"

#include <atomic>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "tests/testing/test_functions.h"

namespace tether::vm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

class LocalVmTest : public ::testing::Test {
 protected:
  void SetUp() override { tether::testing::RegisterTestFunctions(); }

  static std::unique_ptr<LocalVirtualMachine> Make(ExecBuilder& b,
                                                   const memory::MemoryConfig& cfg = {},
                                                   std::vector<Device> devices = {Device::Cpu()}) {
    auto exec = b.Get();
    EXPECT_TRUE(exec.ok()) << exec.status();
    if (!exec.ok()) return nullptr;
    auto vm = LocalVirtualMachine::Create(*exec, std::move(devices), cfg);
    EXPECT_TRUE(vm.ok()) << vm.status();
    return vm.ok() ? std::move(*vm) : nullptr;
  }
};

// countdown(n) = n == 0 ? 0 : countdown(n - 1), as deep as the caller likes.
void EmitCountdown(ExecBuilder& b) {
  b.DeclareFunction("countdown", FunctionKind::kVMFunc);
  b.EmitFunction("countdown", 1, {"n"});
  b.EmitCall("test.vm.equal_zero", {Arg::Register(0)}, 1);
  b.EmitIf(1, 3);
  b.EmitCall("vm.builtin.copy", {Arg::Register(0)}, 2);
  b.EmitGoto(3);
  b.EmitCall("test.vm.subtract_one", {Arg::Register(0)}, 3);
  b.EmitCall("countdown", {Arg::Register(3)}, 2);
  b.EmitRet(2);
  b.EndFunction("countdown");
}

TEST_F(LocalVmTest, DeepRecursionUsesTheHeapStack) {
  ExecBuilder b;
  EmitCountdown(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {Value(int64_t{50000})};
  auto out = vm->Invoke("countdown", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->int_value(), 0);
}

TEST_F(LocalVmTest, RunawayRecursionIsResourceExhausted) {
  ExecBuilder b;
  EmitCountdown(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {Value(int64_t{LocalVirtualMachine::kMaxFrames + 10})};
  auto out = vm->Invoke("countdown", args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  Value small[] = {Value(int64_t{3})};
  EXPECT_TRUE(vm->Invoke("countdown", small).ok());  // still usable
}

TEST_F(LocalVmTest, InterruptStopsAtAnInstructionBoundary) {
  ExecBuilder b;
  EmitCountdown(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  std::atomic<int> code{static_cast<int>(absl::StatusCode::kDeadlineExceeded)};
  vm->SetInterrupt(&code);
  Value args[] = {Value(int64_t{10})};
  auto out = vm->Invoke("countdown", args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(GetErrorKind(out.status()), ErrorKind::kCancelled);
  code = 0;
  EXPECT_TRUE(vm->Invoke("countdown", args).ok());
  vm->SetInterrupt(nullptr);
}

TEST_F(LocalVmTest, DirectInstrumentSeesArguments) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"n"});
  b.EmitCall("test.vm.subtract_one", {Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  std::vector<std::string> seen;
  vm->SetInstrument(Function::FromPacked("record", [&](ArgSpan args) -> absl::StatusOr<Value> {
    seen.push_back(absl::StrCat(args[1].string_value(),
                                args[2].bool_value() ? " before " : " after ", args[3].ToString(),
                                " arg ", args[4].ToString()));
    return Value();
  }));
  Value args[] = {Value(int64_t{7})};
  ASSERT_TRUE(vm->Invoke("main", args).ok());
  EXPECT_THAT(seen, ElementsAre("test.vm.subtract_one before None arg 7",
                                "test.vm.subtract_one after 6 arg 7"));
}

TEST_F(LocalVmTest, MissingPackedFunctionFailsAtCreate) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("no.such.kernel", {}, 0);
  b.EmitRet(0);
  b.EndFunction("main");
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok());
  auto vm = LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(vm.status().message()), HasSubstr("no.such.kernel"));
}

TEST_F(LocalVmTest, KernelLibraryWithoutLoaderIsAClearError) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("vm.builtin.null_value", {}, 0);
  b.EmitRet(0);
  b.EndFunction("main");
  b.AddKernelLibrary(KernelLibraryBlob{"llvm -mtriple=riscv64", "rv-elf",
                                       "\x7f"
                                       "ELF"});
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto vm = LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(vm.status().message()), HasSubstr("rv-elf"));
}

TEST_F(LocalVmTest, MissingDeviceIsUnavailable) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("vm.builtin.null_value", {}, 0);
  b.EmitRet(0);
  b.EndFunction("main");
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok());
  if (DeviceExists(Device::Cuda(7))) GTEST_SKIP() << "this machine has a cuda:7";
  auto vm = LocalVirtualMachine::Create(*exec, {Device::Cuda(7)});
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(vm.status().message()), HasSubstr("cuda:7"));
}

// Item 49: the shape heap — match_shape stores n, make_shape builds (n, 2).
TEST_F(LocalVmTest, ShapeHeapMatchesAndMakesShapes) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("vm.builtin.alloc_shape_heap",
             {Arg::Register(kVMRegister), b.ConvertConstant(Value(int64_t{1}))}, 1);
  b.EmitCall("vm.builtin.check_tensor_info",
             {Arg::Register(0), b.ConvertConstant(Value(int64_t{2})),
              b.ConvertConstant(Value(DataType::Float(32))),
              b.ConvertConstant(Value(
                  "ErrorContext(fn=main, loc=param[0], param=x, annotation=R.Tensor((n, 2)))"))});
  // x.shape must be (n, 2): store dim 0 in slot 0, assert dim 1 == 2.
  b.EmitCall("vm.builtin.match_shape",
             {Arg::Register(0), Arg::Register(1), b.ConvertConstant(Value(int64_t{2})),
              b.ConvertConstant(Value(int64_t{1})), b.ConvertConstant(Value(int64_t{0})),
              b.ConvertConstant(Value(int64_t{0})), b.ConvertConstant(Value(int64_t{2})),
              b.ConvertConstant(Value(
                  "ErrorContext(fn=main, loc=param[0], param=x, annotation=R.Tensor((n, 2)))"))});
  b.EmitCall("vm.builtin.make_shape",
             {Arg::Register(1), b.ConvertConstant(Value(int64_t{2})),
              b.ConvertConstant(Value(int64_t{0})), b.ConvertConstant(Value(int64_t{3})),
              b.ConvertConstant(Value(int64_t{1})), b.ConvertConstant(Value(int64_t{0}))},
             2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value good[] = {MakeFloatTensor({5, 2}, std::vector<float>(10, 0))};
  auto out = vm->Invoke("main", good);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->AsRef<ShapeObj>()->dims, ElementsAre(3, 5));
  Value bad[] = {MakeFloatTensor({5, 3}, std::vector<float>(15, 0))};
  auto mismatch = vm->Invoke("main", bad);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mismatch.status().message()), HasSubstr("param=x"));
  EXPECT_THAT(std::string(mismatch.status().message()),
              HasSubstr("shape[1] mismatch to specified constant"));
  auto int_tensor = Tensor::Empty(std::vector<int64_t>{5, 2}, DataType::Int(32), Device::Cpu());
  ASSERT_TRUE(int_tensor.ok());
  Value wrong_dtype[] = {*int_tensor};
  auto dtype_error = vm->Invoke("main", wrong_dtype);
  EXPECT_THAT(std::string(dtype_error.status().message()),
              HasSubstr("dtype float32 but get int32"));
  Value not_tensor[] = {Value(int64_t{3})};
  auto type_error = vm->Invoke("main", not_tensor);
  EXPECT_EQ(GetErrorKind(type_error.status()), ErrorKind::kType);
}

// Item 46: read_if_cond takes tensors, bools and ints.
TEST_F(LocalVmTest, ReadIfCondAcceptsTensorsBoolsAndInts) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"c"});
  b.EmitCall("vm.builtin.read_if_cond", {Arg::Register(0)}, 1);
  b.EmitIf(1, 3);
  b.EmitCall("vm.builtin.copy", {b.ConvertConstant(Value(int64_t{10}))}, 2);
  b.EmitGoto(2);
  b.EmitCall("vm.builtin.copy", {b.ConvertConstant(Value(int64_t{20}))}, 2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  int32_t one = 1, zero = 0;
  int64_t scalar[] = {1};
  auto t1 = Tensor::FromBytes(std::span<const int64_t>(scalar, 0), DataType::Int(32), &one, 4);
  auto t0 = Tensor::FromBytes(std::span<const int64_t>(scalar, 0), DataType::Int(32), &zero, 4);
  ASSERT_TRUE(t1.ok() && t0.ok());
  for (auto [cond, want] : std::vector<std::pair<Value, int64_t>>{
           {*t1, 10}, {*t0, 20}, {Value(true), 10}, {Value(false), 20}, {Value(int64_t{0}), 20}}) {
    Value args[] = {cond};
    auto out = vm->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->int_value(), want) << cond.ToString();
  }
}

TEST_F(LocalVmTest, MemoryConfigPicksAllocatorsAndStatsFollowFrees) {
  for (const char* cfg_text : {"naive", "pooled", "cpu:0=naive"}) {
    auto cfg = memory::MemoryConfig::Parse(cfg_text);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    ExecBuilder b;
    b.EmitFunction("main", 0);
    b.EmitCall("vm.builtin.alloc_storage",
               {Arg::Register(kVMRegister), b.ConvertConstant(MakeShape({4096})),
                b.ConvertConstant(Value(int64_t{0})), b.ConvertConstant(Value(DataType::Float(32))),
                b.ConvertConstant(Value("global"))},
               0);
    b.EmitRet(0);
    b.EndFunction("main");
    auto vm = Make(b, *cfg);
    ASSERT_TRUE(vm);
    {
      auto storage = vm->Invoke("main", {});
      ASSERT_TRUE(storage.ok()) << storage.status();
      EXPECT_GE(vm->MemoryStats()[0].bytes_in_use, 4096) << cfg_text;
    }
    EXPECT_EQ(vm->MemoryStats()[0].bytes_in_use, 0) << cfg_text;
    vm->ClearMemory();
    EXPECT_EQ(vm->MemoryStats()[0].bytes_reserved, 0) << cfg_text;
  }
}

TEST_F(LocalVmTest, TwoCpuDevicesAllocateByIndex) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"index"});
  b.EmitCall("vm.builtin.alloc_storage",
             {Arg::Register(kVMRegister), b.ConvertConstant(MakeShape({16})), Arg::Register(0),
              b.ConvertConstant(Value(DataType::Float(32))), b.ConvertConstant(Value("global"))},
             1);
  b.EmitCall("vm.builtin.alloc_tensor",
             {Arg::Register(1), b.ConvertConstant(Value(int64_t{0})),
              b.ConvertConstant(MakeShape({4})), b.ConvertConstant(Value(DataType::Float(32)))},
             2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto vm = Make(b, {}, {Device::Cpu(0), Device::Cpu(1)});
  ASSERT_TRUE(vm);
  for (int64_t index : {0, 1, -1}) {
    Value args[] = {Value(index)};
    auto out = vm->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->AsRef<TensorObj>()->device(), index == 0 ? Device::Cpu(0) : Device::Cpu(1));
  }
  Value bad[] = {Value(int64_t{2})};
  EXPECT_EQ(vm->Invoke("main", bad).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(LocalVmTest, ClosureOverAPackedFunction) {
  ExecBuilder b;
  b.DeclareFunction("test.vm.add_scalar", FunctionKind::kPackedFunc);
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("vm.builtin.make_closure", {b.FunctionArg("test.vm.add_scalar"), Arg::Register(0)}, 1);
  b.EmitCall("vm.builtin.invoke_closure",
             {Arg::Register(kVMRegister), Arg::Register(1), b.ConvertConstant(Value(int64_t{5}))},
             2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {Value(int64_t{10})};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->int_value(), 15);
}

TEST_F(LocalVmTest, ReshapeIsZeroCopy) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("vm.builtin.reshape", {Arg::Register(0), b.ConvertConstant(MakeShape({3, 2}))}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Tensor x = MakeFloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  Value args[] = {x};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor y(out->AsRef<TensorObj>());
  EXPECT_THAT(std::vector<int64_t>(y->shape().begin(), y->shape().end()), ElementsAre(3, 2));
  EXPECT_EQ(y->element_data(), x->element_data());
  b = ExecBuilder();
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("vm.builtin.reshape", {Arg::Register(0), b.ConvertConstant(MakeShape({4, 2}))}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm2 = Make(b);
  EXPECT_EQ(vm2->Invoke("main", args).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tether::vm
