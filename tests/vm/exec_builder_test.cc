// Tests of ExecBuilder: the reference's test_vm_execbuilder scenarios that do
// not need an interpreter (checker, negative immediates, constant dedup,
// formalize), plus the builder's own error reporting.
#include "runtime/vm/exec_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/tensor.h"
#include "tests/vm/executable_test_util.h"

namespace tether::vm {
namespace {

using ::testing::HasSubstr;
using testing::MakeInt32Tensor;

#define EXPECT_STATUS(expr, expected_code, fragment)                  \
  do {                                                                \
    const absl::Status status_ = (expr);                              \
    EXPECT_EQ(status_.code(), (expected_code)) << status_;            \
    EXPECT_THAT(std::string(status_.message()), HasSubstr(fragment)); \
  } while (0)

// Reference item 33 (test_vm_checker): reading a register never defined.
TEST(ExecBuilderTest, RejectsUndefinedRegister) {
  ExecBuilder b;
  b.EmitFunction("func0", 2);
  b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(2)}, 2);
  b.EmitRet(2);
  b.EndFunction("func0");
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "register r2 is used as input of call test.vm.add in function func0 but never "
                "defined");
}

TEST(ExecBuilderTest, RejectsUndefinedRegisterInRetAndIf) {
  {
    ExecBuilder b;
    b.EmitFunction("f", 1);
    b.EmitRet(5);
    b.EndFunction("f");
    EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                  "register r5 is used as result of ret in function f but never defined");
  }
  {
    ExecBuilder b;
    b.EmitFunction("f", 1);
    b.EmitIf(3, 2);
    b.EmitRet(0);
    b.EmitRet(0);
    b.EndFunction("f");
    EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                  "register r3 is used as condition of if in function f but never defined");
  }
}

TEST(ExecBuilderTest, ParametersAndSpecialRegistersAreAlwaysDefined) {
  ExecBuilder b;
  b.EmitFunction("f", 2);
  b.EmitCall("g",
             {Arg::Register(0), Arg::Register(1), Arg::Register(kVMRegister),
              Arg::Register(kVoidRegister)},
             kVoidRegister);
  b.EmitRet(1);
  b.EndFunction("f");
  EXPECT_TRUE(b.Get().ok()) << b.Get().status();
}

// Reference item 34 (test_neg_imm): negative immediates survive encoding.
TEST(ExecBuilderTest, NegativeImmediatesEncodeAndDecode) {
  for (int64_t v : {int64_t{-1}, int64_t{-3}, int64_t{-123456789}, -Arg::kValueMaxLimit,
                    Arg::kValueMaxLimit, int64_t{0}}) {
    Arg a = Arg::Immediate(v);
    EXPECT_EQ(a.kind(), ArgKind::kImmediate) << v;
    EXPECT_EQ(a.value(), v);
  }
  ExecBuilder b;
  b.EmitFunction("func0", 1);
  b.EmitCall("test.vm.add_scalar", {b.ConvertConstant(int64_t{-3}), Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("func0");
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  Instruction call = (*exec)->GetInstruction(0);
  EXPECT_EQ(call.arg(0).kind(), ArgKind::kImmediate);
  EXPECT_EQ(call.arg(0).value(), -3);
  EXPECT_TRUE((*exec)->constants.empty());
  EXPECT_THAT((*exec)->AsText(), HasSubstr("in: i-3, %0"));
  // And through the file format.
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes((*exec)->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->GetInstruction(0).arg(0).value(), -3);
}

TEST(ExecBuilderTest, IntegersBeyond56BitsBecomeConstants) {
  ExecBuilder b;
  EXPECT_EQ(b.ConvertConstant(Arg::kValueMaxLimit).kind(), ArgKind::kImmediate);
  EXPECT_EQ(b.ConvertConstant(-Arg::kValueMaxLimit).kind(), ArgKind::kImmediate);
  Arg big = b.ConvertConstant(Arg::kValueMaxLimit + 1);
  EXPECT_EQ(big.kind(), ArgKind::kConstIdx);
  Arg min = b.ConvertConstant(std::numeric_limits<int64_t>::min());
  EXPECT_EQ(min.kind(), ArgKind::kConstIdx);
  EXPECT_NE(big.value(), min.value());
  EXPECT_EQ(b.ConvertConstant(Arg::kValueMaxLimit + 1), big);
}

// Reference item 35 (test_emit_cache): structurally equal constants share an index.
TEST(ExecBuilderTest, DeduplicatesConstants) {
  ExecBuilder b;
  Arg s1 = b.ConvertConstant("hello");
  Arg s2 = b.ConvertConstant(std::string("hello"));
  Arg s3 = b.ConvertConstant("world");
  EXPECT_EQ(s1.kind(), ArgKind::kConstIdx);
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1, s3);

  Arg shape1 = b.ConvertConstant(MakeShape({2, 3}));
  Arg shape2 = b.ConvertConstant(MakeShape({2, 3}));
  Arg shape3 = b.ConvertConstant(MakeShape({3, 2}));
  Arg shape4 = b.ConvertConstant(MakeShape({2, 3, 1}));
  EXPECT_EQ(shape1, shape2);
  EXPECT_NE(shape1, shape3);
  EXPECT_NE(shape1, shape4);
  EXPECT_NE(shape3, shape4);

  Arg t1 = b.ConvertConstant(MakeInt32Tensor({2}, {1, 2}));
  Arg t2 = b.ConvertConstant(MakeInt32Tensor({2}, {1, 2}));
  Arg t3 = b.ConvertConstant(MakeInt32Tensor({2}, {1, 3}));
  Arg t4 = b.ConvertConstant(MakeInt32Tensor({1, 2}, {1, 2}));
  Arg t5 = b.ConvertConstant(*Tensor::FromBytes(std::vector<int64_t>{2}, DataType::Float(32),
                                                std::vector<int32_t>{1, 2}.data(), 8));
  EXPECT_EQ(t1, t2);
  EXPECT_NE(t1, t3);
  EXPECT_NE(t1, t4);
  EXPECT_NE(t1, t5);

  // Floats by bit pattern: 0.0 and -0.0 differ, NaN equals itself.
  Arg f1 = b.ConvertConstant(1.0);
  EXPECT_EQ(f1, b.ConvertConstant(1.0));
  EXPECT_NE(b.ConvertConstant(0.0), b.ConvertConstant(-0.0));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(b.ConvertConstant(nan), b.ConvertConstant(nan));

  // Kinds never collide: true, 1.0, "1", dtype, device are all distinct.
  Arg yes = b.ConvertConstant(true);
  EXPECT_EQ(yes.kind(), ArgKind::kConstIdx);
  EXPECT_EQ(yes, b.ConvertConstant(true));
  EXPECT_NE(yes, b.ConvertConstant(false));
  EXPECT_NE(yes, f1);
  Arg dt = b.ConvertConstant(DataType::Float(32));
  EXPECT_EQ(dt, b.ConvertConstant(DataType::Float(32)));
  EXPECT_NE(dt, b.ConvertConstant(DataType::Float(32, 4)));
  Arg dev = b.ConvertConstant(Device::Cuda(0));
  EXPECT_EQ(dev, b.ConvertConstant(Device::Cuda(0)));
  EXPECT_NE(dev, b.ConvertConstant(Device::Cuda(1)));
  EXPECT_NE(dev, b.ConvertConstant(Device::Cpu(0)));
  EXPECT_EQ(b.AddConstant(Value(int64_t{5})), b.AddConstant(Value(int64_t{5})));
  EXPECT_TRUE(b.status().ok()) << b.status();
}

TEST(ExecBuilderTest, RejectsValuesThatCannotBeConstants) {
  ExecBuilder b;
  b.ConvertConstant(Value());
  EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument, "cannot add constant None");
  ExecBuilder c;
  c.ConvertConstant(MakeTuple({Value(1)}));
  EXPECT_STATUS(c.status(), absl::StatusCode::kInvalidArgument, "a Tuple cannot be a constant");
}

// Reference item 36 (test_vm_formalize): registers renumbered by first definition.
TEST(ExecBuilderTest, FormalizeRenumbersRegisters) {
  auto build = [](RegName a, RegName b_reg) {
    ExecBuilder b;
    b.EmitFunction("func0", 2);
    b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, a);
    b.EmitCall("test.vm.add", {Arg::Register(a), Arg::Register(1)}, b_reg);
    b.EmitIf(b_reg, 2);
    b.EmitRet(a);
    b.EmitRet(b_reg);
    b.EndFunction("func0");
    absl::StatusOr<Ref<Executable>> exec = b.Get();
    EXPECT_TRUE(exec.ok()) << exec.status();
    return *exec;
  };
  Ref<Executable> sparse = build(100, 50);
  Ref<Executable> dense = build(2, 3);
  EXPECT_EQ(sparse->AsText(), dense->AsText());
  EXPECT_EQ(sparse->instr_data, dense->instr_data);
  EXPECT_EQ(sparse->functions[0].register_file_size, 4);
  EXPECT_THAT(sparse->AsText(), HasSubstr("in: %2, %1" + std::string(7, ' ') + "dst: %3"));
}

TEST(ExecBuilderTest, FormalizeIsIdempotentAndGetLeavesTheBuilderAlone) {
  ExecBuilder b;
  b.EmitFunction("f", 1);
  b.EmitCall("g", {Arg::Register(0)}, 70);
  b.EmitRet(70);
  b.EndFunction("f");
  absl::StatusOr<Ref<Executable>> first = b.Get();
  ASSERT_TRUE(first.ok()) << first.status();
  // The builder still knows r70: more code may use it.
  b.EmitFunction("h", 0);
  b.EmitCall("g", {}, 9);
  b.EmitRet(9);
  b.EndFunction("h");
  absl::StatusOr<Ref<Executable>> second = b.Get();
  ASSERT_TRUE(second.ok()) << second.status();
  b.Formalize();
  b.Formalize();
  absl::StatusOr<Ref<Executable>> third = b.Get();
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ((*second)->AsText(), (*third)->AsText());
  EXPECT_THAT((*first)->AsText(), HasSubstr("dst: %1"));
  EXPECT_EQ((*third)->functions[(*third)->function_map.at("h")].register_file_size, 1);
}

TEST(ExecBuilderTest, RejectsZeroGoto) {
  ExecBuilder b;
  b.EmitFunction("f", 1);
  b.EmitGoto(0);
  b.EmitRet(0);
  b.EndFunction("f");
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function f, pc 0: goto offset is 0");
}

TEST(ExecBuilderTest, RejectsIfOffsetOfOneOrLess) {
  for (int64_t offset : {1, 0, -1}) {
    ExecBuilder b;
    b.EmitFunction("f", 1);
    b.EmitIf(0, offset);
    b.EmitRet(0);
    b.EmitRet(0);
    b.EndFunction("f");
    EXPECT_STATUS(
        b.Get().status(), absl::StatusCode::kInvalidArgument,
        absl::StrCat("function f, pc 0: if false offset ", offset, " must be greater than 1"));
  }
}

TEST(ExecBuilderTest, RejectsJumpsOutOfTheFunction) {
  ExecBuilder b;
  b.EmitFunction("f", 1);
  b.EmitRet(0);
  b.EndFunction("f");
  b.EmitFunction("g", 1);
  b.EmitGoto(-1);  // into f
  b.EmitRet(0);
  b.EndFunction("g");
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function g, pc 1: goto offset -1 jumps outside the function");
}

TEST(ExecBuilderTest, RejectsRedeclarationWithAnotherKind) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("foo", {}, 0);
  b.EmitRet(0);
  b.EndFunction("main");
  b.EmitFunction("foo", 0);
  EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument,
                "function foo already declared as a different kind");
  EXPECT_FALSE(b.Get().ok());
}

TEST(ExecBuilderTest, RedeclaringWithTheSameKindIsANoOp) {
  ExecBuilder b;
  Index a = b.DeclareFunction("vm.builtin.copy", FunctionKind::kPackedFunc);
  EXPECT_EQ(b.DeclareFunction("vm.builtin.copy", FunctionKind::kPackedFunc), a);
  EXPECT_EQ(*b.GetFunctionIndex("vm.builtin.copy"), a);
  EXPECT_EQ(b.GetFunctionIndex("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(b.status().ok());
}

TEST(ExecBuilderTest, RejectsFunctionNotEnded) {
  ExecBuilder b;
  b.EmitFunction("f", 1);
  b.EmitRet(0);
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function f was not ended (call EndFunction)");
}

TEST(ExecBuilderTest, RejectsDeclaredButNeverDefined) {
  ExecBuilder b;
  b.DeclareFunction("later", FunctionKind::kVMFunc);
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function later is declared but never defined");
}

TEST(ExecBuilderTest, RejectsEmptyFunction) {
  ExecBuilder b;
  b.EmitFunction("f", 0);
  b.EndFunction("f");
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function f has no instructions");
}

TEST(ExecBuilderTest, RejectsParamNameArityMismatch) {
  ExecBuilder b;
  b.EmitFunction("f", 2, {"x"});
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function f has 1 parameter names for 2 arguments");
}

TEST(ExecBuilderTest, RejectsMisnestedFunctions) {
  {
    ExecBuilder b;
    b.EmitFunction("f", 0);
    b.EmitFunction("g", 0);
    EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument,
                  "function g opened while function f is still open");
  }
  {
    ExecBuilder b;
    b.EmitFunction("f", 0);
    b.EndFunction("g");
    EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument,
                  "EndFunction(g) but function f is open");
  }
  {
    ExecBuilder b;
    b.EmitRet(0);
    EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument, "ret emitted outside a function");
  }
  {
    ExecBuilder b;
    b.EmitFunction("f", 0);
    b.EmitCall("g", {}, 0);
    b.EmitRet(0);
    b.EndFunction("f");
    b.EmitFunction("f", 0);
    EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument, "function f already defined");
  }
}

TEST(ExecBuilderTest, RejectsNonRegisterRetAndIfOperands) {
  ExecBuilder b;
  b.EmitFunction("f", 1);
  b.EmitRet(Arg::Immediate(1));
  EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument,
                "ret in function f expects a register argument");
  ExecBuilder c;
  c.EmitFunction("f", 1);
  c.EmitIf(Arg::ConstIdx(0), 2);
  EXPECT_STATUS(c.status(), absl::StatusCode::kInvalidArgument,
                "if in function f expects a register condition");
}

TEST(ExecBuilderTest, RejectsWritesToVmRegisterAndBadIndices) {
  {
    ExecBuilder b;
    b.EmitFunction("f", 0);
    b.EmitCall("g", {}, kVMRegister);
    b.EmitRet(kVoidRegister);
    b.EndFunction("f");
    EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                  "function f, pc 0: cannot write to %vm");
  }
  {
    ExecBuilder b;
    b.EmitFunction("f", 0);
    b.EmitCall(Index{42}, {}, 0);
    b.EmitRet(0);
    b.EndFunction("f");
    EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                  "function f, pc 0: function index 42 out of range (1 functions)");
  }
  {
    ExecBuilder b;
    b.EmitFunction("f", 0);
    b.EmitCall("g", {Arg::ConstIdx(3)}, 0);
    b.EmitRet(0);
    b.EndFunction("f");
    EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                  "function f, pc 0: constant index 3 out of range (0 constants)");
  }
}

TEST(ExecBuilderTest, FunctionArgDeclaresUnknownNamesAsPacked) {
  ExecBuilder b;
  b.EmitFunction("f", 0);
  b.EmitCall("vm.builtin.make_closure", {b.FunctionArg("test.vm.add_scalar")}, 0);
  b.EmitRet(0);
  b.EndFunction("f");
  b.DeclareFunction("test.vm.add_scalar", FunctionKind::kPackedFunc);  // a no-op now
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  const FunctionInfo& target = (*exec)->functions[(*exec)->function_map.at("test.vm.add_scalar")];
  EXPECT_EQ(target.kind, FunctionKind::kPackedFunc);
  EXPECT_THAT((*exec)->AsText(), HasSubstr("in: f[test.vm.add_scalar]"));
  // A bytecode function must be declared before it is referenced.
  ExecBuilder c;
  c.EmitFunction("f", 0);
  c.EmitCall("vm.builtin.make_closure", {c.FunctionArg("later")}, 0);
  c.EmitRet(0);
  c.EndFunction("f");
  c.EmitFunction("later", 0);
  EXPECT_STATUS(c.status(), absl::StatusCode::kInvalidArgument,
                "function later already declared as a different kind");
}

TEST(ExecBuilderTest, ChecksArityOfDirectBytecodeCalls) {
  ExecBuilder b;
  b.EmitFunction("callee", 2);
  b.EmitRet(1);
  b.EndFunction("callee");
  b.EmitFunction("main", 1);
  b.EmitCall("callee", {Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument,
                "function main, pc 1: call to callee with 1 arguments, expected 2");
}

TEST(ExecBuilderTest, BuildsMultipleFunctionsWithForwardCalls) {
  ExecBuilder b;
  Index even = b.DeclareFunction("is_even", FunctionKind::kVMFunc);
  b.EmitFunction("main", 1, {"n"});
  b.EmitCall(even, {Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  b.EmitFunction("is_even", 1, {"n"});
  b.EmitCall("test.vm.equal_zero", {Arg::Register(0)}, 1);
  b.EmitIf(1, 3);
  b.EmitCall("vm.builtin.copy", {b.ConvertConstant(true)}, 2);
  b.EmitRet(2);
  b.EmitCall("test.vm.subtract_one", {Arg::Register(0)}, 3);
  b.EmitCall("is_even", {Arg::Register(3)}, 4);
  b.EmitCall("test.vm.not", {Arg::Register(4)}, 5);
  b.EmitRet(5);
  b.EndFunction("is_even");
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  const Executable& e = **exec;
  const FunctionInfo& main = e.functions[e.function_map.at("main")];
  const FunctionInfo& is_even = e.functions[even];
  EXPECT_EQ(main.start_instr, 0);
  EXPECT_EQ(main.end_instr, 2);
  EXPECT_EQ(main.param_names, std::vector<std::string>{"n"});
  EXPECT_EQ(is_even.start_instr, 2);
  EXPECT_EQ(is_even.end_instr, 10);
  EXPECT_EQ(is_even.register_file_size, 6);
  EXPECT_EQ(e.functions[e.function_map.at("test.vm.equal_zero")].kind, FunctionKind::kPackedFunc);
  EXPECT_EQ(e.functions[e.function_map.at("test.vm.equal_zero")].num_args, -1);
}

TEST(ExecBuilderTest, AttachesKernelLibrariesAndMetadata) {
  ExecBuilder b;
  b.DeclareVMTIRFunction("fused", 3, {"a", "b", "c"});
  b.AddKernelLibrary({"llvm", "so", "bytes"});
  b.SetMetadata("target", "llvm");
  b.SetMetadata("target", "llvm -mcpu=native");
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_EQ((*exec)->kernel_libraries.size(), 1u);
  EXPECT_EQ((*exec)->kernel_libraries[0].data, "bytes");
  EXPECT_EQ((*exec)->metadata.at("target"), "llvm -mcpu=native");
  const FunctionInfo& fused = (*exec)->functions[0];
  EXPECT_EQ(fused.kind, FunctionKind::kVMTIRFunc);
  EXPECT_EQ(fused.num_args, 3);
  EXPECT_EQ(fused.register_file_size, 4);
  EXPECT_EQ((*exec)->AsText(), "@fused num_inputs=3 vm_tir_func;\n");
}

TEST(ExecBuilderTest, FirstErrorWins) {
  ExecBuilder b;
  b.EmitRet(0);           // first: outside a function
  b.EndFunction("nope");  // second
  EXPECT_STATUS(b.status(), absl::StatusCode::kInvalidArgument, "ret emitted outside a function");
  EXPECT_STATUS(b.Get().status(), absl::StatusCode::kInvalidArgument, "ret emitted outside");
}

}  // namespace
}  // namespace tether::vm
