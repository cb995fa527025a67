// LegalizeOps: operator calls become call_tir of kernels with the call's
// struct info as out_sinfo; identical calls share a kernel; reshape becomes
// a view; errors name the function and the operator.
#include "compiler/transform/legalize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/transform_test_util.h"

namespace tether::compiler {
namespace {

using testing::BindingsCalling;
using testing::F32;
using ::testing::HasSubstr;
using testing::NormalizedModule;
using testing::Op;
using testing::RawFunction;

const CallNode* CallOf(const Binding& b) { return b.value.as<CallNode>(); }

std::string KernelOf(const Binding& b) { return CallOf(b)->args[0].as<GlobalVarNode>()->name_hint; }

IRModule Legalized(Expr main) {
  auto m = NormalizedModule(std::move(main));
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto out = LegalizeOps(*m);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  absl::Status wf = CheckWellFormed(out->Lookup("main"), "main", &*out);
  EXPECT_TRUE(wf.ok()) << wf;
  return *out;
}

TEST(LegalizeOpsTest, BroadcastAddBecomesCallTIR) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr y = f.Param("y", F32({8}));
  Expr gv = f.Output("gv", Op("relax.add", {x, y}));
  IRModule m = Legalized(f.Finish(gv));
  auto calls = BindingsCalling(m, "relax.call_tir");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(KernelOf(calls[0]), "add");
  const auto* args = CallOf(calls[0])->args[1].as<TupleNode>();
  ASSERT_NE(args, nullptr);
  ASSERT_EQ(args->fields.size(), 2u);
  EXPECT_TRUE(args->fields[0].same_as(x));
  EXPECT_TRUE(args->fields[1].same_as(y));
  ASSERT_EQ(CallOf(calls[0])->sinfo_args.size(), 1u);
  EXPECT_EQ(ToString(CallOf(calls[0])->sinfo_args[0]), ToString(F32({4, 8})));
  ASSERT_EQ(m.kernels.count("add"), 1u);
  EXPECT_EQ(m.kernels.at("add")->params.size(), 3u);
  EXPECT_EQ(m.kernels.at("add")->name, "add");
}

TEST(LegalizeOpsTest, IdenticalCallsShareOneKernel) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr z = f.Param("z", F32({3}));
  Expr a = f.Bind("a", Op("relax.add", {x, x}));
  Expr b = f.Bind("b", Op("relax.add", {a, x}));
  Expr c = f.Bind("c", Op("relax.add", {z, z}));
  Expr gv = f.Output("gv", MakeTuple({b, c}));
  IRModule m = Legalized(f.Finish(gv));
  auto calls = BindingsCalling(m, "relax.call_tir");
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(KernelOf(calls[0]), "add");
  EXPECT_EQ(KernelOf(calls[1]), "add");
  EXPECT_EQ(KernelOf(calls[2]), "add_1");
  EXPECT_EQ(m.kernels.size(), 2u);
}

// Kernels are told apart by their text: constants that differ past six
// significant digits must print apart, or two calls would share one kernel
// and compute the same thing.
TEST(LegalizeOpsTest, KernelsDifferingInAFloatPastSixDigitsStayApart) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  auto prim = [](double v) { return MakePrimValue(FloatImm(DataType::Float(64), v)); };
  Expr a = f.Bind("a", Op("relax.clip", {x, prim(0.0), prim(1.0000001)}));
  Expr b = f.Bind("b", Op("relax.clip", {a, prim(0.0), prim(1.0)}));
  Expr c = f.Bind("c", Op("relax.clip", {b, prim(0.0), prim(1.0)}));
  Expr gv = f.Output("gv", MakeTuple({a, c}));
  IRModule m = Legalized(f.Finish(gv));
  auto calls = BindingsCalling(m, "relax.call_tir");
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_NE(KernelOf(calls[0]), KernelOf(calls[1]));
  EXPECT_EQ(KernelOf(calls[1]), KernelOf(calls[2]));
  EXPECT_EQ(m.kernels.size(), 2u);
}

TEST(LegalizeOpsTest, MatmulWithSymbolicBatchKeepsSymbolicOutSInfo) {
  RawFunction f;
  Var n("n");
  Expr x = f.Param("x", F32({n, 16}));
  Expr w = f.Param("w", F32({16, 32}));
  Expr gv = f.Output("gv", Op("relax.matmul", {x, w}));
  IRModule m = Legalized(f.Finish(gv));
  auto calls = BindingsCalling(m, "relax.call_tir");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(KernelOf(calls[0]), "matmul");
  const auto* out = CallOf(calls[0])->sinfo_args[0].as<TensorStructInfoNode>();
  ASSERT_NE(out, nullptr);
  ASSERT_TRUE(out->shape.has_value());
  EXPECT_TRUE((*out->shape)[0].same_as(n));
  EXPECT_EQ(*(*out->shape)[1].as_int(), 32);
}

TEST(LegalizeOpsTest, ReductionAndNormalizationFamilies) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 10}));
  Expr s = f.Bind("s", Op("relax.sum", {x}, {{"axis", std::vector<int64_t>{1}}}));
  Expr p = f.Bind("p", Op("relax.nn.softmax", {x}, {{"axis", int64_t{-1}}}));
  Expr gv = f.Output("gv", MakeTuple({s, p}));
  IRModule m = Legalized(f.Finish(gv));
  auto calls = BindingsCalling(m, "relax.call_tir");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(KernelOf(calls[0]), "sum");
  EXPECT_EQ(ToString(CallOf(calls[0])->sinfo_args[0]), ToString(F32({4})));
  EXPECT_EQ(KernelOf(calls[1]), "softmax");
  EXPECT_EQ(ToString(CallOf(calls[1])->sinfo_args[0]), ToString(F32({4, 10})));
}

TEST(LegalizeOpsTest, ReshapeBecomesAView) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 6}));
  Expr gv = f.Output("gv", Op("relax.reshape", {x, MakeShapeExpr({8, 3})}));
  IRModule m = Legalized(f.Finish(gv));
  EXPECT_TRUE(BindingsCalling(m, "relax.call_tir").empty());
  auto views = BindingsCalling(m, "relax.call_pure_packed");
  ASSERT_EQ(views.size(), 1u);
  const CallNode* call = CallOf(views[0]);
  EXPECT_EQ(call->args[0].as<ExternFuncNode>()->global_symbol, "vm.builtin.reshape");
  EXPECT_TRUE(call->args[1].same_as(x));
  EXPECT_EQ(ToString(call->sinfo_args[0]), ToString(F32({8, 3})));
  EXPECT_TRUE(m.kernels.empty());
}

TEST(LegalizeOpsTest, ReshapeCopiesWhenViewsAreOff) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 6}));
  Expr gv = f.Output("gv", Op("relax.reshape", {x, MakeShapeExpr({8, 3})}));
  auto m = NormalizedModule(f.Finish(gv));
  ASSERT_TRUE(m.ok()) << m.status();
  LegalizeOptions options;
  options.reshape_as_view = false;
  auto out = LegalizeOps(*m, options);
  ASSERT_TRUE(out.ok()) << out.status();
  auto calls = BindingsCalling(*out, "relax.call_tir");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(KernelOf(calls[0]), "reshape");
}

TEST(LegalizeOpsTest, LeavesNonKernelOperatorsAlone) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 6}));
  Expr gv = f.Output("gv", Op("relax.shape_of", {x}));
  IRModule m = Legalized(f.Finish(gv));
  EXPECT_EQ(BindingsCalling(m, "relax.shape_of").size(), 1u);
  EXPECT_TRUE(m.kernels.empty());
}

TEST(LegalizeOpsTest, UnknownShapeIsAnErrorNamingFunctionAndOperator) {
  RawFunction f;
  Expr x = f.Param("x", TensorSInfoOfRank(2, DataType::Float(32)));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {x}));
  auto m = NormalizedModule(f.Finish(gv));
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = LegalizeOps(*m);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("main: cannot legalize relax.nn.relu"));
}

}  // namespace
}  // namespace tether::compiler
