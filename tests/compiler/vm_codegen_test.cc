// VMCodegen on hand-built lowered IR: destination-passing calls to functions
// registered in the runtime stand in for compiled kernels, so these tests need
// neither the passes nor kernels. Each executable is run on the local VM,
// interpreted and (exec_mode="compiled") as native code: both must agree.
#include "compiler/backend/vm/vm_codegen.h"

#include "compiler/build.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/registry.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

const DataType kF32 = DataType::Float(32);

// "test.codegen.add"(a, b, out): out = a + b, float32, same shapes.
// "test.codegen.scale"(a, k): a new tensor a * k.
void RegisterCodegenKernels() {
  static const bool once = [] {
    absl::Status s = Registry::RegisterTyped(
        "test.codegen.add", [](Tensor a, Tensor b, Tensor out) -> absl::Status {
          if (a->NumElements() != b->NumElements() || a->NumElements() != out->NumElements())
            return absl::InvalidArgumentError("test.codegen.add: element counts differ");
          const float* pa = static_cast<const float*>(a->element_data());
          const float* pb = static_cast<const float*>(b->element_data());
          float* po = static_cast<float*>(out->element_data());
          for (int64_t i = 0; i < a->NumElements(); ++i) po[i] = pa[i] + pb[i];
          return absl::OkStatus();
        });
    s.Update(Registry::RegisterTyped(
        "test.codegen.scale", [](Tensor a, int64_t k) -> absl::StatusOr<Value> {
          auto s = a->shape();
          TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(s, a->dtype(), Device::Cpu()));
          const float* pa = static_cast<const float*>(a->element_data());
          float* po = static_cast<float*>(out->element_data());
          for (int64_t i = 0; i < a->NumElements(); ++i) po[i] = pa[i] * static_cast<float>(k);
          return Value(out);
        }));
    EXPECT_TRUE(s.ok()) << s;
    return true;
  }();
  (void)once;
}

Expr Seq(std::vector<Binding> bindings, Expr body) {
  return MakeSeqExpr({BindingBlock{std::move(bindings), false}}, std::move(body));
}

Binding Bind(Expr var, Expr value) { return Binding{std::move(var), std::move(value), {}, {}}; }

// out = alloc_tensor(shape); kernel(inputs..., out)
std::vector<Binding> AllocAndAdd(const Expr& a, const Expr& b, std::vector<PrimExpr> shape,
                                 Expr* out) {
  *out = MakeVar("out", TensorSInfo(shape, kF32));
  Expr alloc = MakeCall(GetOp("relax.builtin.alloc_tensor"),
                        {MakeShapeExpr(shape), MakeDataTypeImm(kF32), MakePrimValue(0)});
  Expr call = MakeCall(MakeGlobalVar("test.codegen.add"), {a, b, *out});
  return {Bind(*out, alloc), Bind(MakeVar("_", TupleSInfo({})), call)};
}

// The parameter: the exec_mode the VM runs the functions in.
class VMCodegenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    tether::testing::RegisterTestFunctions();
    RegisterCodegenKernels();
  }

  // Generates `module` (exec_ keeps its bytecode), compiles it to native
  // code for exec_mode "compiled", and creates a VM for it on the CPU.
  std::unique_ptr<vm::LocalVirtualMachine> Load(const IRModule& module) {
    auto exec = VMCodegen(module, {});
    EXPECT_TRUE(exec.ok()) << exec.status();
    if (!exec.ok()) return nullptr;
    exec_ = *exec;
    if (GetParam() == "compiled") {
      exec = vm::Executable::LoadFromBytes(exec_->SaveToBytes());
      EXPECT_TRUE(exec.ok()) << exec.status();
      absl::Status compiled = CompileVMFunctions(exec->get());
      EXPECT_TRUE(compiled.ok()) << compiled;
      if (!compiled.ok()) return nullptr;
      EXPECT_EQ((*exec)->num_instructions(), 0);
    }
    auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
    EXPECT_TRUE(vm.ok()) << vm.status();
    return vm.ok() ? std::move(*vm) : nullptr;
  }

  Ref<vm::Executable> exec_;
};

// main(x: (n, 4), y: (n, 4)) = (x + y, x)[0], a DPS kernel call.
IRModule AddModule() {
  Var n("n");
  Expr x = MakeVar("x", TensorSInfo({n, 4}, kF32));
  Expr y = MakeVar("y", TensorSInfo({n, 4}, kF32));
  Expr out;
  std::vector<Binding> bs = AllocAndAdd(x, y, {n, 4}, &out);
  Expr t = MakeVar("t", TupleSInfo({TensorSInfo({n, 4}, kF32), TensorSInfo({n, 4}, kF32)}));
  bs.push_back(Bind(t, MakeTuple({out, x})));
  Expr r = MakeVar("r", TensorSInfo({n, 4}, kF32));
  bs.push_back(Bind(r, MakeTupleGetItem(t, 0)));
  IRModule m;
  m.functions["main"] = MakeFunction({x, y}, Seq(std::move(bs), r), TensorSInfo({n, 4}, kF32));
  return m;
}

TEST_P(VMCodegenTest, RunsKernelCallsWithTwoConcreteShapes) {
  auto vm = Load(AddModule());
  ASSERT_TRUE(vm);
  for (int64_t n : {1, 3}) {
    std::vector<float> a(static_cast<size_t>(n * 4)), b(a.size()), want(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i);
      b[i] = 10.0f * static_cast<float>(i);
      want[i] = a[i] + b[i];
    }
    Value args[] = {MakeFloatTensor({n, 4}, a), MakeFloatTensor({n, 4}, b)};
    auto out = vm->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    Tensor t(out->AsRef<TensorObj>());
    EXPECT_EQ(t->shape()[0], n);
    EXPECT_EQ(ReadFloats(t), want);
  }
}

TEST_P(VMCodegenTest, ShapeMismatchNamesParameterAndAnnotation) {
  Var n("n");
  Expr x = MakeVar("x", TensorSInfo({n, 784}, kF32));
  IRModule m;
  m.functions["main"] = MakeFunction({x}, Seq({}, x), TensorSInfo({n, 784}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2, 100}, std::vector<float>(200, 0.0f))};
  auto out = vm->Invoke("main", args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("main: parameter x (annotated R.Tensor((n, 784), \"float32\")): shape[1] "
                        "mismatch to specified constant: expected 784, got 100"));

  Value wrong_rank[] = {MakeFloatTensor({784}, std::vector<float>(784, 0.0f))};
  out = vm->Invoke("main", wrong_rank);
  EXPECT_THAT(out.status().message(), HasSubstr("parameter x"));
  EXPECT_THAT(out.status().message(), HasSubstr("expect Tensor with ndim 2 but get 1"));
}

TEST_P(VMCodegenTest, RepeatedSymbolicVariableMustAgree) {
  Var n("n");
  Expr x = MakeVar("x", TensorSInfo({n, 2}, kF32));
  Expr y = MakeVar("y", TensorSInfo({n, 2}, kF32));
  IRModule m;
  m.functions["main"] = MakeFunction({x, y}, Seq({}, y), TensorSInfo({n, 2}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2, 2}, std::vector<float>(4, 0.0f)),
                  MakeFloatTensor({3, 2}, std::vector<float>(6, 0.0f))};
  auto out = vm->Invoke("main", args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("parameter y (annotated R.Tensor((n, 2), \"float32\")): shape[0] mismatch "
                        "to a previous populated value: expected 2, got 3"));
}

TEST_P(VMCodegenTest, ComputesSymbolicShapeExpressionsAtRunTime) {
  // main(x: (n, m)) -> R.Shape([n * 4, n + 1, floordiv(m, 2), m - n])
  Var n("n"), mv("m");
  Expr x = MakeVar("x", TensorSInfo({n, mv}, kF32));
  Expr shape = MakeShapeExpr({n * 4, n + 1, FloorDiv(mv, 2), mv - n});
  IRModule m;
  m.functions["main"] = MakeFunction({x}, Seq({}, shape), ShapeSInfoOfRank(4));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2, 7}, std::vector<float>(14, 0.0f))};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->is_shape());
  EXPECT_THAT(out->AsRef<ShapeObj>()->dims, ::testing::ElementsAre(8, 3, 3, 5));
}

TEST_P(VMCodegenTest, ChecksCompoundDimensionsOfParameters) {
  // main(x: (n,), y: (n * 2,)): y's length is checked after n is known.
  Var n("n");
  Expr x = MakeVar("x", TensorSInfo({n}, kF32));
  Expr y = MakeVar("y", TensorSInfo({n * 2}, kF32));
  IRModule m;
  m.functions["main"] = MakeFunction({y, x}, Seq({}, x), TensorSInfo({n}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value good[] = {MakeFloatTensor({6}, std::vector<float>(6, 0.0f)),
                  MakeFloatTensor({3}, std::vector<float>(3, 0.0f))};
  EXPECT_TRUE(vm->Invoke("main", good).ok());
  Value bad[] = {MakeFloatTensor({5}, std::vector<float>(5, 0.0f)),
                 MakeFloatTensor({3}, std::vector<float>(3, 0.0f))};
  auto out = vm->Invoke("main", bad);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("parameter y (annotated R.Tensor((n * 2,), \"float32\")): shape[0] "
                        "mismatch to a previous populated value: expected 6, got 5"));
}

TEST_P(VMCodegenTest, IfRunsTheSelectedBranch) {
  // main(c: R.Prim("bool"), x) = if c: scale(x, 2) else: scale(x, 3)
  Expr c = MakeVar("c", PrimSInfo(DataType::Bool()));
  Expr x = MakeVar("x", TensorSInfo({2}, kF32));
  auto branch = [&](int64_t k) {
    Expr v = MakeVar("v", TensorSInfo({2}, kF32));
    Expr call = MakeCall(GetOp("relax.call_pure_packed"),
                         {MakeExternFunc("test.codegen.scale"), x, MakePrimValue(k)});
    return Seq({Bind(v, call)}, v);
  };
  Expr r = MakeVar("r", TensorSInfo({2}, kF32));
  IRModule m;
  m.functions["main"] = MakeFunction({c, x}, Seq({Bind(r, MakeIf(c, branch(2), branch(3)))}, r),
                                     TensorSInfo({2}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Tensor in = MakeFloatTensor({2}, {1.0f, 2.0f});
  Value yes[] = {Value(true), Value(in)};
  auto out = vm->Invoke("main", yes);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ReadFloats(Tensor(out->AsRef<TensorObj>())), (std::vector<float>{2.0f, 4.0f}));
  Value no[] = {Value(false), Value(in)};
  out = vm->Invoke("main", no);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ReadFloats(Tensor(out->AsRef<TensorObj>())), (std::vector<float>{3.0f, 6.0f}));
}

TEST_P(VMCodegenTest, ASelfCallInTailPositionIsAJump) {
  // swap(n, a, b) = if n > 0: swap(n - 1, b, a) else: (a, b). With n past
  // the VM's 65,536 frames this finishes only as a jump, and the swapped
  // arguments check that each is staged before the parameters are written.
  Var n("n");
  const StructInfo t2 = TensorSInfo({2}, kF32);
  Expr pn = MakeVar("n", PrimSInfo(DataType::Int(64), n));
  Expr a = MakeVar("a", t2), b = MakeVar("b", t2);
  const StructInfo ret = TupleSInfo({t2, t2});
  Expr again = MakeVar("again", ret);
  Expr call = MakeCall(MakeGlobalVar("swap"), {MakePrimValue(n - 1), b, a});
  Expr done = MakeVar("done", ret);
  Expr r = MakeVar("r", ret);
  Expr body =
      Seq({Bind(r, MakeIf(MakePrimValue(GT(n, PrimExpr(0))), Seq({Bind(again, call)}, again),
                          Seq({Bind(done, MakeTuple({a, b}))}, done)))},
          r);
  IRModule m;
  m.functions["swap"] = MakeFunction({pn, a, b}, body, ret);
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Tensor x = MakeFloatTensor({2}, {1.0f, 2.0f}), y = MakeFloatTensor({2}, {3.0f, 4.0f});
  for (int64_t count : {int64_t{100001}, int64_t{100000}}) {
    Value args[] = {Value(count), Value(x), Value(y)};
    auto out = vm->Invoke("swap", args);
    ASSERT_TRUE(out.ok()) << out.status();
    const auto& fields = out->AsRef<TupleObj>()->fields;
    ASSERT_EQ(fields.size(), 2u);
    const bool odd = count % 2 == 1;
    EXPECT_EQ(ReadFloats(Tensor(fields[0].AsRef<TensorObj>())),
              (odd ? std::vector<float>{3.0f, 4.0f} : std::vector<float>{1.0f, 2.0f}));
    EXPECT_EQ(ReadFloats(Tensor(fields[1].AsRef<TensorObj>())),
              (odd ? std::vector<float>{1.0f, 2.0f} : std::vector<float>{3.0f, 4.0f}));
  }
}

TEST_P(VMCodegenTest, MatchCastDefinesNewVariables) {
  // main(x: R.Tensor(ndim=2)) { y = match_cast(x, R.Tensor((a, 3))); return R.shape([a * 2]) }
  Var a("a");
  Expr x = MakeVar("x", TensorSInfoOfRank(2, kF32));
  Expr y = MakeVar("y", TensorSInfo({a, 3}, kF32));
  Binding cast{y, x, TensorSInfo({a, 3}, kF32), {}};
  IRModule m;
  m.functions["main"] = MakeFunction({x}, Seq({cast}, MakeShapeExpr({a * 2})), ShapeSInfoOfRank(1));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({5, 3}, std::vector<float>(15, 0.0f))};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->AsRef<ShapeObj>()->dims, ::testing::ElementsAre(10));

  Value bad[] = {MakeFloatTensor({5, 4}, std::vector<float>(20, 0.0f))};
  out = vm->Invoke("main", bad);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("main: match_cast of y (to R.Tensor((a, 3), \"float32\")): shape[1]"));
}

TEST_P(VMCodegenTest, CallsOtherRelaxFunctionsAndExternFuncs) {
  // double(x) = x + x (DPS kernel); main(x) = scale(double(x), 10)
  Expr dx = MakeVar("x", TensorSInfo({3}, kF32));
  Expr out;
  std::vector<Binding> body = AllocAndAdd(dx, dx, {3}, &out);
  IRModule m;
  m.functions["double"] = MakeFunction({dx}, Seq(std::move(body), out), TensorSInfo({3}, kF32));
  m.functions["scale"] = MakeExternFunc("test.codegen.scale");
  Expr x = MakeVar("x", TensorSInfo({3}, kF32));
  Expr d = MakeVar("d", TensorSInfo({3}, kF32));
  Expr s = MakeVar("s", TensorSInfo({3}, kF32));
  m.functions["main"] =
      MakeFunction({x},
                   Seq({Bind(d, MakeCall(MakeGlobalVar("double"), {x})),
                        Bind(s, MakeCall(MakeGlobalVar("scale"), {d, MakePrimValue(10)}))},
                       s),
                   TensorSInfo({3}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({3}, {1.0f, 2.0f, 3.0f})};
  auto result = vm->Invoke("main", args);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReadFloats(Tensor(result->AsRef<TensorObj>())),
            (std::vector<float>{20.0f, 40.0f, 60.0f}));
}

TEST_P(VMCodegenTest, CallTirAllocatesOutputsAndKillsRegisters) {
  // main(x: (n,)) { o = call_tir(add, (x, x), R.Tensor((n,))); k = kill_tensor(x); return o }
  Var n("n");
  Expr x = MakeVar("x", TensorSInfo({n}, kF32));
  Expr o = MakeVar("o", TensorSInfo({n}, kF32));
  Expr call =
      MakeCall(GetOp("relax.call_tir"), {MakeGlobalVar("test.codegen.add"), MakeTuple({x, x})}, {},
               {TensorSInfo({n}, kF32)});
  Expr kill = MakeCall(GetOp("relax.memory.kill_tensor"), {x});
  IRModule m;
  m.functions["main"] =
      MakeFunction({x}, Seq({Bind(o, call), Bind(MakeVar("k", TupleSInfo({})), kill)}, o),
                   TensorSInfo({n}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2}, {1.5f, 2.5f})};
  auto result = vm->Invoke("main", args);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReadFloats(Tensor(result->AsRef<TensorObj>())), (std::vector<float>{3.0f, 5.0f}));
  EXPECT_THAT(exec_->AsText(), HasSubstr("vm.builtin.null_value"));
}

TEST_P(VMCodegenTest, StorageAllocationsBecomeBuiltins) {
  // s = alloc_storage([16]); t = alloc_tensor(s, 0, [4]); add(x, x, t)
  Expr x = MakeVar("x", TensorSInfo({4}, kF32));
  Expr s = MakeVar("s", ObjectSInfo());
  Expr t = MakeVar("t", TensorSInfo({4}, kF32));
  Expr storage = MakeCall(
      GetOp("relax.memory.alloc_storage"),
      {MakeShapeExpr({16}), MakePrimValue(0), MakeStringImm("global"), MakeDataTypeImm(kF32)});
  Expr tensor = MakeCall(GetOp("relax.memory.alloc_tensor"),
                         {s, MakePrimValue(0), MakeShapeExpr({4}), MakeDataTypeImm(kF32)});
  Expr add = MakeCall(MakeGlobalVar("test.codegen.add"), {x, x, t});
  IRModule m;
  m.functions["main"] = MakeFunction(
      {x}, Seq({Bind(s, storage), Bind(t, tensor), Bind(MakeVar("_", TupleSInfo({})), add)}, t),
      TensorSInfo({4}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({4}, {1, 2, 3, 4})};
  auto result = vm->Invoke("main", args);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReadFloats(Tensor(result->AsRef<TensorObj>())), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_THAT(exec_->AsText(), HasSubstr("vm.builtin.alloc_storage"));
}

TEST_P(VMCodegenTest, ClosuresCaptureValues) {
  // adder(k, x) = scale(x, k); main(x) { f = make_closure(adder, (2,)); return invoke_closure(f,
  // (x,)) }
  Expr k = MakeVar("k", PrimSInfo(DataType::Int(64)));
  Expr ax = MakeVar("x", TensorSInfo({2}, kF32));
  Expr r = MakeVar("r", TensorSInfo({2}, kF32));
  IRModule m;
  m.functions["adder"] = MakeFunction(
      {ax, k}, Seq({Bind(r, MakeCall(MakeExternFunc("test.codegen.scale"), {ax, k}))}, r),
      TensorSInfo({2}, kF32));
  Expr x = MakeVar("x", TensorSInfo({2}, kF32));
  Expr f = MakeVar("f", ObjectSInfo());
  Expr v = MakeVar("v", TensorSInfo({2}, kF32));
  // The closure binds its captured value last: adder(x, k=2).
  m.functions["main"] =
      MakeFunction({x},
                   Seq({Bind(f, MakeCall(GetOp("relax.make_closure"),
                                         {MakeGlobalVar("adder"), MakeTuple({MakePrimValue(2)})})),
                        Bind(v, MakeCall(GetOp("relax.invoke_closure"), {f, MakeTuple({x})}, {},
                                         {TensorSInfo({2}, kF32)}))},
                       v),
                   TensorSInfo({2}, kF32));
  auto vm = Load(m);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2}, {1.0f, 4.0f})};
  auto result = vm->Invoke("main", args);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ReadFloats(Tensor(result->AsRef<TensorObj>())), (std::vector<float>{2.0f, 8.0f}));
}

TEST_P(VMCodegenTest, RecordsSignaturesInMetadata) {
  auto exec = VMCodegen(AddModule(), {vm::KernelLibraryBlob{"llvm", "so", "not-loaded"}});
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->metadata.at("signature.main"),
            "(x: R.Tensor((n, 4), \"float32\"), y: R.Tensor((n, 4), \"float32\")) -> "
            "R.Tensor((n, 4), \"float32\")");
  ASSERT_EQ((*exec)->kernel_libraries.size(), 1u);
  const auto& fn = (*exec)->functions[(*exec)->function_map.at("main")];
  EXPECT_EQ(fn.param_names, (std::vector<std::string>{"x", "y"}));
}

TEST_P(VMCodegenTest, SavedExecutableRunsAfterLoading) {
  auto exec = VMCodegen(AddModule(), {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto loaded = vm::Executable::LoadFromBytes((*exec)->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto vm = vm::LocalVirtualMachine::Create(*loaded, {Device::Cpu()});
  ASSERT_TRUE(vm.ok()) << vm.status();
  Value args[] = {MakeFloatTensor({1, 4}, {1, 2, 3, 4}), MakeFloatTensor({1, 4}, {1, 1, 1, 1})};
  auto out = (*vm)->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ReadFloats(Tensor(out->AsRef<TensorObj>())), (std::vector<float>{2, 3, 4, 5}));
}

TEST_P(VMCodegenTest, UnloweredOperatorIsAnError) {
  Expr x = MakeVar("x", TensorSInfo({2}, kF32));
  Expr y = MakeVar("y", TensorSInfo({2}, kF32));
  IRModule m;
  m.functions["main"] = MakeFunction({x}, Seq({Bind(y, MakeCall(GetOp("relax.add"), {x, x}))}, y),
                                     TensorSInfo({2}, kF32));
  auto exec = VMCodegen(m, {});
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(exec.status().message(),
              HasSubstr("main: operator relax.add was not lowered to a kernel call"));
}

TEST_P(VMCodegenTest, UndefinedSymbolicVariableIsAnError) {
  Var n("n"), k("k");
  Expr x = MakeVar("x", TensorSInfo({n}, kF32));
  IRModule m;
  m.functions["main"] = MakeFunction({x}, Seq({}, MakeShapeExpr({n + k})), ShapeSInfoOfRank(1));
  auto exec = VMCodegen(m, {});
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(exec.status().message(),
              HasSubstr("main: symbolic variable k is used before a parameter or match_cast"));
}

TEST_P(VMCodegenTest, NestedFunctionIsUnimplemented) {
  Expr x = MakeVar("x", TensorSInfo({2}, kF32));
  Expr inner = MakeFunction({x}, Seq({}, x), TensorSInfo({2}, kF32));
  Expr f = MakeVar("f", ObjectSInfo());
  IRModule m;
  m.functions["main"] = MakeFunction({x}, Seq({Bind(f, inner)}, x), TensorSInfo({2}, kF32));
  auto exec = VMCodegen(m, {});
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(exec.status().message(), HasSubstr("LambdaLift"));
}

INSTANTIATE_TEST_SUITE_P(ExecModes, VMCodegenTest, ::testing::Values("bytecode", "compiled"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "compiled" ? "Compiled" : "Bytecode";
                         });

// The runtime side of the shape programs the generator emits.
class ShapeHeapBuiltinTest : public ::testing::Test {
 protected:
  void SetUp() override { vm::RegisterBuiltins(); }
  static Tensor Heap(std::vector<int64_t> values) {
    int64_t shape[] = {static_cast<int64_t>(values.size())};
    auto t = Tensor::FromBytes(shape, DataType::Int(64), values.data(), values.size() * 8);
    EXPECT_TRUE(t.ok());
    return *t;
  }
  static absl::Status Run(const Tensor& heap, std::vector<int64_t> prog) {
    Function f = Registry::Get("vm.builtin.compute_shape_heap");
    EXPECT_TRUE(static_cast<bool>(f));
    Value args[] = {Value(heap), MakeShape(ShapeObj::Dims(prog.begin(), prog.end()))};
    return f(args).status();
  }
  static int64_t At(const Tensor& heap, int i) {
    return static_cast<const int64_t*>(heap->element_data())[i];
  }
};

TEST_F(ShapeHeapBuiltinTest, FloorDivisionRoundsTowardsNegativeInfinity) {
  Tensor heap = Heap({-7, 2, 0, 0});
  // heap[2] = floordiv(heap[0], heap[1]); heap[3] = floormod(heap[0], heap[1])
  ASSERT_TRUE(Run(heap, {1, 0, 1, 1, 6, 2, 2, 1, 0, 1, 1, 7, 2, 3}).ok());
  EXPECT_EQ(At(heap, 2), -4);
  EXPECT_EQ(At(heap, 3), 1);
}

TEST_F(ShapeHeapBuiltinTest, RejectsBadPrograms) {
  Tensor heap = Heap({5, 0});
  absl::Status s = Run(heap, {1, 0, 0, 0, 6, 2, 1});  // heap[1] = heap[0] // 0
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("division by zero"));
  s = Run(heap, {3});
  EXPECT_THAT(s.message(), HasSubstr("stack underflow"));
  s = Run(heap, {1, 9});
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  s = Run(heap, {0, 1});
  EXPECT_THAT(s.message(), HasSubstr("leaves 1 values on the stack"));
  s = Run(heap, {0, 1, 0, 1, 99});
  EXPECT_THAT(s.message(), HasSubstr("unknown opcode 99"));
}

TEST_F(ShapeHeapBuiltinTest, AllocTensorForShapeRejectsBadDevices) {
  Function f = Registry::Get("vm.builtin.alloc_tensor_for_shape");
  ASSERT_TRUE(static_cast<bool>(f));
  Value args[] = {Value(), MakeShape({2}), Value(kF32), Value(int64_t{0})};
  auto out = f(args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("vm context"));
}

}  // namespace
}  // namespace tether::compiler
