// Structural equality and hashing; BindParams and BindSymbolicVars.
#include "compiler/relax/structural_equal.h"

#include "compiler/relax/bind.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/tir/arith.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

StructInfo F32(std::vector<PrimExpr> shape) {
  return TensorSInfo(std::move(shape), DataType::Float(32));
}

// fn(x: (n, 4), w: (4,)) -> shape_of(x) bound to a var, returns x.
Expr MakeFn(const std::string& n_name) {
  Var n(n_name);
  Expr x = MakeVar("x", F32({n, 4}));
  Expr w = MakeVar("w", F32({4}));
  Expr s = MakeVar("s");
  BindingBlock block{{Binding{s, MakeCall(GetOp("relax.shape_of"), {x}), {}, {}}}, false};
  return MakeFunction({x, w}, MakeSeqExpr({block}, x), StructInfo());
}

Tensor FloatTensor(std::vector<int64_t> shape, float fill) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> data(static_cast<size_t>(count), fill);
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, DataType::Float(32), data.data(), data.size() * sizeof(float));
  return *t;
}

TEST(StructuralEqualTest, AlphaEquivalentFunctionsAreEqualAndHashEqual) {
  Expr a = MakeFn("n");
  Expr b = MakeFn("m");
  EXPECT_TRUE(StructuralEqual(a, b));
  EXPECT_EQ(StructuralHash(a), StructuralHash(b));
}

TEST(StructuralEqualTest, FreeVarsNeedMapping) {
  Var n("n"), m("m");
  EXPECT_FALSE(StructuralEqual(n + 1, m + 1));
  EXPECT_TRUE(StructuralEqual(n + 1, m + 1, /*map_free_vars=*/true));
  EXPECT_FALSE(StructuralEqual(n + m, n + n, /*map_free_vars=*/true));
  Expr x = MakeVar("x", F32({2}));
  Expr y = MakeVar("y", F32({2}));
  EXPECT_FALSE(StructuralEqual(MakeTuple({x}), MakeTuple({y})));
  EXPECT_TRUE(StructuralEqual(MakeTuple({x}), MakeTuple({y}), true));
}

TEST(StructuralEqualTest, DifferentConstantsAreUnequal) {
  Expr a = MakeConstant(FloatTensor({2}, 1.0f));
  Expr b = MakeConstant(FloatTensor({2}, 1.0f));
  Expr c = MakeConstant(FloatTensor({2}, 2.0f));
  EXPECT_TRUE(StructuralEqual(a, b));
  EXPECT_EQ(StructuralHash(a), StructuralHash(b));
  EXPECT_FALSE(StructuralEqual(a, c));
  EXPECT_FALSE(StructuralEqual(GetOp("relax.shape_of"), GetOp("relax.call_tir")));
}

TEST(StructuralEqualTest, ComparesStructInfo) {
  Var n("n");
  EXPECT_TRUE(StructuralEqual(F32({n, 2}), F32({n, 2})));
  EXPECT_FALSE(StructuralEqual(F32({n, 2}), F32({n, 3})));
  EXPECT_FALSE(StructuralEqual(F32({2}), TensorSInfo({2}, DataType::Int(32))));
}

TEST(BindParamsTest, InfersAndSubstitutesSymbolicVars) {
  Expr fn = MakeFn("n");
  absl::StatusOr<Expr> bound = BindParams(fn, {{"x", FloatTensor({3, 4}, 0.5f)}});
  ASSERT_TRUE(bound.ok()) << bound.status();
  const auto* f = bound->as<FunctionNode>();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->params.size(), 1u);
  EXPECT_EQ(ToString(bound->struct_info()),
            "R.Callable((R.Tensor((4,), \"float32\"),), R.Tensor((3, 4), \"float32\"))");
  const auto* seq = f->body.as<SeqExprNode>();
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(ToString(seq->blocks[0].bindings[0].var.struct_info()), "R.Shape([3, 4])");
  EXPECT_EQ(seq->body.kind(), ExprKind::kConstant);
}

TEST(BindParamsTest, RejectsMismatchedTensorsAndUnknownNames) {
  Expr fn = MakeFn("n");
  absl::StatusOr<Expr> bad = BindParams(fn, {{"w", FloatTensor({5}, 0.f)}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("param w of"));
  absl::StatusOr<Expr> unknown = BindParams(fn, {{"q", FloatTensor({5}, 0.f)}});
  EXPECT_THAT(unknown.status().message(), HasSubstr("no param named q"));
}

TEST(BindSymbolicVarsTest, ReplacesVarsByConstants) {
  Expr fn = MakeFn("n");
  absl::StatusOr<Expr> bound = BindSymbolicVars(fn, {{"n", 16}});
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(ToString(bound->struct_info()),
            "R.Callable((R.Tensor((16, 4), \"float32\"), R.Tensor((4,), \"float32\")), "
            "R.Tensor((16, 4), \"float32\"))");
  absl::StatusOr<Expr> unknown = BindSymbolicVars(fn, {{"k", 1}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tether::compiler
