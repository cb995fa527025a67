// VM conformance: the reference scenarios of tvm-semantics.md §7 (items 21, 23,
// 27-29, 31-32, 37-43, 54) against the VirtualMachine interface. The suite is
// parameterised by a VM factory so every backend runs the same assertions:
// the local interpreter (vm_conformance_test.cc), the remote VM through a
// real tetherd over each transport (vm_conformance_remote_test.cc), and the
// functions compiled to native code (tests/compiler/vm_conformance_compiled_test.cc).
// This file is linked into both test binaries (tests/CMakeLists.txt).
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/test_functions.h"
#include "tests/vm/vm_conformance.h"

namespace tether::vm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

// Counts instrument callbacks per (symbol, before/after); skips test.vm.mul.
struct InstrumentCounts {
  absl::Mutex mu;
  std::map<std::string, int> before, after;
  int none_before = 0;  // before-callbacks whose ret_value was None
};
InstrumentCounts& Counts() {
  static InstrumentCounts* counts = new InstrumentCounts();
  return *counts;
}

void RegisterConformanceFunctions() {
  tether::testing::RegisterTestFunctions();
  static std::once_flag once;
  std::call_once(once, [] {
    absl::Status s = Registry::RegisterTyped("test.vm.skip_mul_instrument", [] {
      return Function::FromPacked("skip_mul", [](ArgSpan args) -> absl::StatusOr<Value> {
        InstrumentCounts& c = Counts();
        absl::MutexLock lock(&c.mu);
        const std::string& symbol = args[1].string_value();
        if (args[2].bool_value()) {
          ++c.before[symbol];
          if (args[3].is_none()) ++c.none_before;
          return Value(static_cast<int64_t>(symbol == "test.vm.mul" ? InstrumentReturnKind::kSkipRun
                                                                    : InstrumentReturnKind::kNoOp));
        }
        ++c.after[symbol];
        return Value();
      });
    });
    ASSERT_TRUE(s.ok()) << s;
    // Set through a daemon too: an embedding program marks what its
    // clients may name (docs/design/security.md, "Remote functions").
    s = Registry::SetRemoteCallable("test.vm.skip_mul_instrument");
    ASSERT_TRUE(s.ok()) << s;
  });
}

}  // namespace

void VmConformanceTest::SetUp() { RegisterConformanceFunctions(); }

namespace {

// Item 31.
TEST_P(VmConformanceTest, ExecutesACall) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({3}, {1, 2, 3}), MakeFloatTensor({3}, {10, 20, 30})};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_tensor());
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(11, 22, 33));
}

// Item 32.
TEST_P(VmConformanceTest, RunsSeveralFunctions) {
  ExecBuilder b;
  EmitAdd(b, "add");
  b.EmitFunction("mul", 2, {"x", "y"});
  b.EmitCall("test.vm.mul", {Arg::Register(0), Arg::Register(1)}, 2);
  b.EmitRet(2);
  b.EndFunction("mul");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2}, {2, 3}), MakeFloatTensor({2}, {4, 5})};
  auto sum = vm->Invoke("add", args);
  auto product = vm->Invoke("mul", args);
  ASSERT_TRUE(sum.ok() && product.ok());
  EXPECT_THAT(ReadFloats(Tensor(sum->AsRef<TensorObj>())), ElementsAre(6, 8));
  EXPECT_THAT(ReadFloats(Tensor(product->AsRef<TensorObj>())), ElementsAre(8, 15));
}

// Item 34 at run time: a negative immediate reaches the callee intact.
TEST_P(VmConformanceTest, PassesNegativeImmediates) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("test.vm.mul_scalar", {Arg::Register(0), b.ConvertConstant(Value(int64_t{-2}))}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {Value(int64_t{1})};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->int_value(), -2);
}

// Item 37.
TEST_P(VmConformanceTest, PassesDeviceOperands) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("test.vm.get_device_id", {b.ConvertConstant(Value(Device::Cpu(3)))}, 0);
  b.EmitRet(0);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  auto out = vm->Invoke("main", {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->int_value(), 3);
}

// Item 38.
TEST_P(VmConformanceTest, ShapeOfConstantTensor) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  Tensor t = MakeFloatTensor({2, 3}, {1, 2, 3, 4, 5, 6});
  b.EmitCall("vm.builtin.shape_of", {b.ConvertConstant(Value(t))}, 0);
  b.EmitRet(0);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  auto out = vm->Invoke("main", {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_shape());
  EXPECT_THAT(out->AsRef<ShapeObj>()->dims, ElementsAre(2, 3));
}

// Item 39: alloc_storage then alloc_tensor gives a CPU tensor of shape (4, 6).
TEST_P(VmConformanceTest, AllocatesStorageAndTensor) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("vm.builtin.alloc_storage",
             {Arg::Register(kVMRegister), b.ConvertConstant(MakeShape({96})),
              b.ConvertConstant(Value(int64_t{0})), b.ConvertConstant(Value(DataType::Float(32))),
              b.ConvertConstant(Value("global"))},
             1);
  b.EmitCall("vm.builtin.alloc_tensor",
             {Arg::Register(1), b.ConvertConstant(Value(int64_t{0})),
              b.ConvertConstant(MakeShape({4, 6})), b.ConvertConstant(Value(DataType::Float(32)))},
             2);
  b.EmitCall("vm.builtin.shape_of", {Arg::Register(2)}, 3);
  b.EmitRet(3);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  auto out = vm->Invoke("main", {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->AsRef<ShapeObj>()->dims, ElementsAre(4, 6));
}

TEST_P(VmConformanceTest, TensorPastStorageEndIsAnError) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("vm.builtin.alloc_storage",
             {Arg::Register(kVMRegister), b.ConvertConstant(MakeShape({24})),
              b.ConvertConstant(Value(int64_t{0})), b.ConvertConstant(Value(DataType::Float(32))),
              b.ConvertConstant(Value("global"))},
             1);
  b.EmitCall("vm.builtin.alloc_tensor",
             {Arg::Register(1), b.ConvertConstant(Value(int64_t{0})),
              b.ConvertConstant(MakeShape({4, 6})), b.ConvertConstant(Value(DataType::Float(32)))},
             2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  auto out = vm->Invoke("main", {});
  EXPECT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("storage"));
}

// Item 40: Goto skips an instruction.
TEST_P(VmConformanceTest, GotoSkipsAnInstruction) {
  ExecBuilder b;
  b.EmitFunction("main", 2, {"x", "y"});
  b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, 2);
  b.EmitGoto(2);
  b.EmitCall("test.vm.mul", {Arg::Register(2), Arg::Register(1)}, 2);
  b.EmitRet(2);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2}, {1, 2}), MakeFloatTensor({2}, {3, 4})};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(4, 6));
}

// Item 41: If with false_offset 3 — condition 1 adds, condition 0 multiplies.
TEST_P(VmConformanceTest, IfPicksTheBranch) {
  ExecBuilder b;
  b.EmitFunction("main", 3, {"cond", "x", "y"});
  b.EmitIf(0, 3);
  b.EmitCall("test.vm.add", {Arg::Register(1), Arg::Register(2)}, 3);
  b.EmitGoto(2);
  b.EmitCall("test.vm.mul", {Arg::Register(1), Arg::Register(2)}, 3);
  b.EmitRet(3);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Tensor x = MakeFloatTensor({2}, {2, 3}), y = MakeFloatTensor({2}, {4, 5});
  Value take[] = {Value(int64_t{1}), x, y};
  Value skip[] = {Value(int64_t{0}), x, y};
  auto added = vm->Invoke("main", take);
  auto multiplied = vm->Invoke("main", skip);
  ASSERT_TRUE(added.ok() && multiplied.ok());
  EXPECT_THAT(ReadFloats(Tensor(added->AsRef<TensorObj>())), ElementsAre(6, 8));
  EXPECT_THAT(ReadFloats(Tensor(multiplied->AsRef<TensorObj>())), ElementsAre(8, 15));
}

// Items 17-18: nested and recursive bytecode calls; f(n) = n == 0 ? 1 : 2 * f(n - 1).
TEST_P(VmConformanceTest, RecursionComputesPowersOfTwo) {
  ExecBuilder b;
  b.DeclareFunction("pow2", FunctionKind::kVMFunc);
  b.EmitFunction("pow2", 1, {"n"});
  b.EmitCall("test.vm.equal_zero", {Arg::Register(0)}, 1);
  b.EmitIf(1, 3);
  b.EmitCall("vm.builtin.copy", {b.ConvertConstant(Value(int64_t{1}))}, 2);
  b.EmitGoto(4);
  b.EmitCall("test.vm.subtract_one", {Arg::Register(0)}, 3);
  b.EmitCall("pow2", {Arg::Register(3)}, 4);
  b.EmitCall("test.vm.mul_scalar", {Arg::Register(4), b.ConvertConstant(Value(int64_t{2}))}, 2);
  b.EmitRet(2);
  b.EndFunction("pow2");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  for (int64_t n : {0, 1, 5, 20}) {
    Value args[] = {Value(n)};
    auto out = vm->Invoke("pow2", args);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->int_value(), int64_t{1} << n);
  }
}

// Item 20 and 42: a closure made in the VM is returned and invoked with extra arguments.
TEST_P(VmConformanceTest, ReturnedClosureIsInvocable) {
  ExecBuilder b;
  // add3(x, y, z) = x + y + z; main(x) returns make_closure(add3, x).
  b.EmitFunction("add3", 3, {"y", "z", "x"});
  b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, 3);
  b.EmitCall("test.vm.add", {Arg::Register(3), Arg::Register(2)}, 4);
  b.EmitRet(4);
  b.EndFunction("add3");
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("vm.builtin.make_closure", {b.FunctionArg("add3"), Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value x[] = {MakeFloatTensor({2}, {1, 1})};
  auto closure = vm->Invoke("main", x);
  ASSERT_TRUE(closure.ok()) << closure.status();
  Value yz[] = {MakeFloatTensor({2}, {10, 20}), MakeFloatTensor({2}, {100, 200})};
  auto out = vm->InvokeClosure(*closure, yz);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(111, 221));
}

// Item 43: after a failing call the next valid call succeeds.
TEST_P(VmConformanceTest, StaysUsableAfterFailure) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"x"});
  b.EmitCall("vm.builtin.check_tensor_info",
             {Arg::Register(0), b.ConvertConstant(Value(int64_t{1})),
              b.ConvertConstant(Value(DataType::Float(32))),
              b.ConvertConstant(Value("ErrorContext(fn=main, loc=param[0], param=x)"))});
  b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value bad[] = {MakeFloatTensor({1, 2}, {1, 2})};
  auto failed = vm->Invoke("main", bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("param=x"));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("ndim 1 but get 2"));
  Value good[] = {MakeFloatTensor({2}, {1, 2})};
  auto out = vm->Invoke("main", good);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(2, 4));
}

// A kernel's error reaches the caller with its code, its kind (TypeError,
// IndexError, ...) and its message, whichever transport carries it.
TEST_P(VmConformanceTest, ErrorsKeepTheirKind) {
  ExecBuilder b;
  b.EmitFunction("main", 1, {"kind"});
  b.EmitCall("test.vm.raise", {Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  const std::pair<ErrorKind, absl::StatusCode> cases[] = {
      {ErrorKind::kType, absl::StatusCode::kInvalidArgument},
      {ErrorKind::kValue, absl::StatusCode::kInvalidArgument},
      {ErrorKind::kIndex, absl::StatusCode::kOutOfRange},
      {ErrorKind::kRuntime, absl::StatusCode::kInternal},
      {ErrorKind::kOutOfMemory, absl::StatusCode::kResourceExhausted},
  };
  for (const auto& [kind, code] : cases) {
    SCOPED_TRACE(ErrorKindName(kind));
    Value args[] = {Value(static_cast<int64_t>(kind))};
    auto failed = vm->Invoke("main", args);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), code);
    EXPECT_EQ(GetErrorKind(failed.status()), kind);
    EXPECT_THAT(std::string(failed.status().message()),
                HasSubstr(absl::StrCat("test.vm.raise raised kind ", static_cast<int>(kind))));
  }
}

// Item 23: positional and named set_input, then tuple and nested-tuple outputs.
TEST_P(VmConformanceTest, StatefulCallsReturnNestedTuples) {
  ExecBuilder b;
  EmitAdd(b);
  // nested(x) = ((x, (x,)), x)
  b.EmitFunction("nested", 1, {"x"});
  b.EmitCall("vm.builtin.make_tuple", {Arg::Register(0)}, 1);
  b.EmitCall("vm.builtin.make_tuple", {Arg::Register(0), Arg::Register(1)}, 2);
  b.EmitCall("vm.builtin.make_tuple", {Arg::Register(2), Arg::Register(0)}, 3);
  b.EmitRet(3);
  b.EndFunction("nested");
  auto vm = Make(b);
  ASSERT_TRUE(vm);

  Value x = MakeFloatTensor({2}, {1, 2}), y = MakeFloatTensor({2}, {3, 4});
  Value positional[] = {x, y};
  ASSERT_TRUE(vm->SetInput("main", positional).ok());
  ASSERT_TRUE(vm->InvokeStateful("main").ok());
  auto out = vm->GetOutputs("main");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(4, 6));

  // Named: y by name, x by position.
  Value first[] = {MakeFloatTensor({2}, {10, 10})};
  ASSERT_TRUE(vm->SetInputNamed("main", first, {{"y", MakeFloatTensor({2}, {1, 2})}}).ok());
  ASSERT_TRUE(vm->InvokeStateful("main").ok());
  out = vm->GetOutputs("main");
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(11, 12));

  Value nx[] = {x};
  ASSERT_TRUE(vm->SetInput("nested", nx).ok());
  ASSERT_TRUE(vm->InvokeStateful("nested").ok());
  auto nested = vm->GetOutputs("nested");
  ASSERT_TRUE(nested.ok()) << nested.status();
  ASSERT_TRUE(nested->is_tuple());
  const auto& top = nested->AsRef<TupleObj>()->fields;
  ASSERT_EQ(top.size(), 2u);
  ASSERT_TRUE(top[0].is_tuple());
  const auto& inner = top[0].AsRef<TupleObj>()->fields;
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_TRUE(inner[0].is_tensor());
  ASSERT_TRUE(inner[1].is_tuple());
  EXPECT_EQ(inner[1].AsRef<TupleObj>()->fields.size(), 1u);
  EXPECT_THAT(ReadFloats(Tensor(top[1].AsRef<TensorObj>())), ElementsAre(1, 2));
}

TEST_P(VmConformanceTest, NamedInputErrorsNameTheParameter) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value one[] = {MakeFloatTensor({1}, {1})};
  absl::Status unknown = vm->SetInputNamed("main", one, {{"z", MakeFloatTensor({1}, {1})}});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("no parameter named z"));
  absl::Status missing = vm->SetInputNamed("main", one, {});
  EXPECT_THAT(std::string(missing.message()), HasSubstr("missing argument y"));
  absl::Status twice = vm->SetInputNamed(
      "main", one, {{"x", MakeFloatTensor({1}, {1})}, {"y", MakeFloatTensor({1}, {1})}});
  EXPECT_THAT(std::string(twice.message()), HasSubstr("given twice"));
}

// Item 27: a stateless call after set_input is refused.
TEST_P(VmConformanceTest, StatelessCallAfterSetInputFails) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({1}, {1}), MakeFloatTensor({1}, {2})};
  ASSERT_TRUE(vm->SetInput("main", args).ok());
  auto out = vm->Invoke("main", args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("invoke_stateful"));
}

// Item 28.
TEST_P(VmConformanceTest, InvokeStatefulWithoutSetInputFails) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  absl::Status s = vm->InvokeStateful("main");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no inputs set for stateful call of main"));
}

// Item 29.
TEST_P(VmConformanceTest, GetOutputsBeforeInvokeFails) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({1}, {1}), MakeFloatTensor({1}, {2})};
  ASSERT_TRUE(vm->SetInput("main", args).ok());
  auto out = vm->GetOutputs("main");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("use invoke_stateful"));
}

TEST_P(VmConformanceTest, UnknownFunctionAndWrongArityAreClearErrors) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  auto unknown = vm->Invoke("nope", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("nope"));
  Value one[] = {MakeFloatTensor({1}, {1})};
  auto arity = vm->Invoke("main", one);
  EXPECT_EQ(arity.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(arity.status().message()),
              HasSubstr("expects 2 arguments (x, y), got 1"));
  auto names = vm->GetFunctionParamNames("main");
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ElementsAre("x", "y"));
  auto n = vm->GetFunctionArity("main");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
}

// Item 25: save_function binds arguments; the saved function takes none.
TEST_P(VmConformanceTest, SavedFunctionRunsWithBoundArguments) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2}, {1, 2}), MakeFloatTensor({2}, {5, 5})};
  ASSERT_TRUE(vm->SaveFunction("main", "saved_main", args).ok());
  auto out = vm->Invoke("saved_main", {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(6, 7));
  ASSERT_TRUE(vm->SaveFunction("main", "quiet_main", args, /*include_return=*/false).ok());
  auto quiet = vm->Invoke("quiet_main", {});
  ASSERT_TRUE(quiet.ok());
  EXPECT_TRUE(quiet->is_none());
  absl::Status shadow = vm->SaveFunction("main", "main", args);
  EXPECT_EQ(shadow.code(), absl::StatusCode::kInvalidArgument);
}

// Item 21: time_evaluator over invoke_stateful and over a saved function.
TEST_P(VmConformanceTest, TimeEvaluatorRunsStatefulAndSavedFunctions) {
  ExecBuilder b;
  EmitAdd(b);
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({4}, {1, 2, 3, 4}), MakeFloatTensor({4}, {1, 1, 1, 1})};
  ASSERT_TRUE(vm->SetInput("main", args).ok());
  profiling::TimeEvaluatorOptions options;
  options.number = 3;
  options.repeat = 4;
  Value name[] = {Value("main")};
  auto stateful = vm->TimeEvaluator(kInvokeStatefulName, Device::Cpu(), options, name);
  ASSERT_TRUE(stateful.ok()) << stateful.status();
  EXPECT_EQ(stateful->results.size(), 4u);
  EXPECT_EQ(stateful->total_calls, 1 + 3 * 4);
  auto out = vm->GetOutputs("main");
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(2, 3, 4, 5));

  ASSERT_TRUE(vm->SaveFunction("main", "saved_main", args, /*include_return=*/false).ok());
  auto saved = vm->TimeEvaluator("saved_main", Device::Cpu(), options, {});
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->results.size(), 4u);
  for (double s : saved->results) EXPECT_GE(s, 0.0);
  EXPECT_LE(saved->min, saved->median);
  EXPECT_LE(saved->median, saved->max);
}

// Item 54: instrument hit counts; SKIP_RUN skips the call and its after-callback.
TEST_P(VmConformanceTest, InstrumentSeesEveryCallAndCanSkip) {
  ExecBuilder b;
  b.EmitFunction("main", 2, {"x", "y"});
  b.EmitCall("test.vm.mul", {Arg::Register(0), Arg::Register(1)}, 2);
  b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, 3);
  b.EmitCall("test.vm.mul", {Arg::Register(0), Arg::Register(1)}, 4);
  b.EmitCall("test.vm.add", {Arg::Register(3), Arg::Register(1)}, 5);
  b.EmitCall("vm.builtin.make_tuple", {Arg::Register(4), Arg::Register(5)}, 6);
  b.EmitRet(6);
  b.EndFunction("main");
  auto vm = Make(b);
  ASSERT_TRUE(vm);
  {
    InstrumentCounts& c = Counts();
    absl::MutexLock lock(&c.mu);
    c.before.clear();
    c.after.clear();
    c.none_before = 0;
  }
  ASSERT_TRUE(vm->SetInstrumentByName("test.vm.skip_mul_instrument", {}).ok());
  Value args[] = {MakeFloatTensor({1}, {2}), MakeFloatTensor({1}, {3})};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  const auto& fields = out->AsRef<TupleObj>()->fields;
  EXPECT_TRUE(fields[0].is_none());  // the skipped mul left None
  EXPECT_THAT(ReadFloats(Tensor(fields[1].AsRef<TensorObj>())), ElementsAre(8));
  {
    InstrumentCounts& c = Counts();
    absl::MutexLock lock(&c.mu);
    EXPECT_EQ(c.before["test.vm.mul"], 2);
    EXPECT_EQ(c.after["test.vm.mul"], 0);
    EXPECT_EQ(c.before["test.vm.add"], 2);
    EXPECT_EQ(c.after["test.vm.add"], 2);
    EXPECT_EQ(c.none_before, 5);
  }
  ASSERT_TRUE(vm->SetInstrumentByName("", {}).ok());
  auto plain = vm->Invoke("main", args);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->AsRef<TupleObj>()->fields[0].is_tensor());
  EXPECT_EQ(vm->SetInstrumentByName("no.such.factory", {}).code(), absl::StatusCode::kNotFound);
}

// The built-in trace instrument: a row per packed call with its shapes and
// start, fetched (and cleared) through GetTrace, locally and over the wire.
TEST_P(VmConformanceTest, TraceInstrumentRecordsEveryCall) {
  auto vm = MakeAddThenMul();
  ASSERT_TRUE(vm);
  EXPECT_EQ(vm->GetTrace(false).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(vm->SetInstrumentByName("trace", {}).ok());
  Value args[] = {MakeFloatTensor({2, 3}, std::vector<float>(6, 1.0f)),
                  MakeFloatTensor({2, 3}, std::vector<float>(6, 2.0f))};
  ASSERT_TRUE(vm->Invoke("main", args).ok());
  ASSERT_TRUE(vm->Invoke("main", args).ok());
  auto trace = vm->GetTrace(/*clear=*/true);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->calls.size(), 4u);
  const char* names[] = {"test.vm.add", "test.vm.mul", "test.vm.add", "test.vm.mul"};
  double last_start = -1;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(std::get<std::string>(trace->calls[i].at("Name")), names[i]);
    EXPECT_EQ(std::get<std::string>(trace->calls[i].at("Argument Shapes")),
              "float32[2, 3], float32[2, 3]");
    double start = std::get<profiling::Duration>(trace->calls[i].at("Start (us)")).microseconds;
    EXPECT_GE(start, last_start);
    last_start = start;
    EXPECT_GE(std::get<profiling::Duration>(trace->calls[i].at("Duration (us)")).microseconds, 0);
  }
  EXPECT_EQ(std::get<profiling::Count>(trace->configuration.at("Dropped")).value, 0);
  auto cleared = vm->GetTrace(false);
  ASSERT_TRUE(cleared.ok());
  EXPECT_TRUE(cleared->calls.empty());

  // A record limit drops (and counts) what does not fit.
  Value limit[] = {Value(int64_t{1})};
  ASSERT_TRUE(vm->SetInstrumentByName("trace", limit).ok());
  ASSERT_TRUE(vm->Invoke("main", args).ok());
  auto limited = vm->GetTrace(false);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->calls.size(), 1u);
  EXPECT_EQ(std::get<profiling::Count>(limited->configuration.at("Dropped")).value, 1);
  Value bad[] = {Value(std::string("many"))};
  EXPECT_EQ(vm->SetInstrumentByName("trace", bad).code(), absl::StatusCode::kInvalidArgument);
}

// The built-in skip instrument (the seed's SKIP_RUN on the daemon): calls
// whose symbol matches do not run and leave None; the others are traced.
TEST_P(VmConformanceTest, SkipInstrumentSkipsMatchingCallsAndTracesTheRest) {
  auto vm = MakeAddThenMul();
  ASSERT_TRUE(vm);
  Value pattern[] = {Value(std::string("vm.mul"))};
  ASSERT_TRUE(vm->SetInstrumentByName("skip", pattern).ok());
  Value args[] = {MakeFloatTensor({2, 3}, std::vector<float>(6, 1.0f)),
                  MakeFloatTensor({2, 3}, std::vector<float>(6, 2.0f))};
  auto skipped = vm->Invoke("main", args);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_TRUE(skipped->is_none());  // mul did not run
  auto trace = vm->GetTrace(true);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->calls.size(), 1u);
  EXPECT_EQ(std::get<std::string>(trace->calls[0].at("Name")), "test.vm.add");
  // Uninstalled: mul runs again.
  ASSERT_TRUE(vm->SetInstrumentByName("", {}).ok());
  auto full = vm->Invoke("main", args);
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->is_tensor());
  EXPECT_EQ(vm->SetInstrumentByName("skip", {}).code(), absl::StatusCode::kInvalidArgument);
  Value bad[] = {Value(int64_t{3})};
  EXPECT_EQ(vm->SetInstrumentByName("skip", bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(VmConformanceTest, ProfileReportsEachPackedCall) {
  auto vm = MakeAddThenMul();
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({1, 64}, std::vector<float>(64, 1.0f)),
                  MakeFloatTensor({1, 64}, std::vector<float>(64, 2.0f))};
  auto report = vm->Profile("main", args);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->calls.size(), 2u);
  EXPECT_EQ(std::get<std::string>(report->calls[0].at("Name")), "test.vm.add");
  EXPECT_EQ(std::get<std::string>(report->calls[1].at("Name")), "test.vm.mul");
  EXPECT_EQ(std::get<std::string>(report->calls[0].at("Argument Shapes")),
            "float32[1, 64], float32[1, 64]");
  EXPECT_TRUE(report->device_metrics.contains("cpu0"));
  std::string table = report->Table();
  EXPECT_THAT(table, HasSubstr("test.vm.add"));
  EXPECT_THAT(table, HasSubstr("Duration (us)"));
  // With inputs set, Profile uses them and refuses extra arguments.
  ASSERT_TRUE(vm->SetInput("main", args).ok());
  EXPECT_TRUE(vm->Profile("main", {}).ok());
  EXPECT_EQ(vm->Profile("main", args).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(VmConformanceTest, SurvivesASaveLoadRoundTrip) {
  ExecBuilder b;
  EmitAdd(b);
  auto exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto loaded = Executable::LoadFromBytes((*exec)->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->AsText(), (*exec)->AsText());
  auto vm = GetParam().make(*loaded);
  ASSERT_TRUE(vm.ok()) << vm.status();
  Value args[] = {MakeFloatTensor({1}, {1}), MakeFloatTensor({1}, {2})};
  auto out = (*vm)->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(3));
}

}  // namespace
}  // namespace tether::vm
