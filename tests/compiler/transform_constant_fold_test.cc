// ConstantFolding: calls on constants are evaluated through the host JIT and
// become constants with the right values; shape_of and tuple items of
// literals fold; anything depending on a parameter stays.
#include "compiler/transform/constant_fold.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/transform_test_util.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using testing::ConstF32;
using ::testing::ElementsAre;
using testing::F32;
using testing::FindBinding;
using ::testing::FloatNear;
using testing::NormalizedModule;
using testing::Op;
using ::testing::Pointwise;
using testing::RawFunction;
using tether::testing::ReadFloats;

IRModule Folded(Expr main, const ConstantFoldingOptions& options = {}) {
  auto m = NormalizedModule(std::move(main));
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto out = ConstantFolding(*m, options);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : IRModule{};
}

// Folded with results of at most `bytes` bytes.
IRModule FoldedUpTo(Expr main, int64_t bytes) {
  ConstantFoldingOptions options;
  options.max_result_bytes = bytes;
  return Folded(std::move(main), options);
}

// The value bound to `name` in main.
Expr ValueOf(const IRModule& m, const std::string& name) {
  std::vector<Binding> all = testing::Bindings(m);
  const Binding* b = FindBinding(all, name);
  return b == nullptr ? Expr() : b->value;
}

TEST(ConstantFoldingTest, AddOfTwoConstantsBecomesAConstant) {
  RawFunction f;
  Expr x = f.Param("x", F32({2, 3}));
  Expr c = f.Bind(
      "c", Op("relax.add", {ConstF32({2, 3}, {1, 2, 3, 4, 5, 6}), ConstF32({3}, {10, 20, 30})}));
  Expr gv = f.Output("gv", Op("relax.add", {x, c}));
  IRModule m = Folded(f.Finish(gv));
  const auto* folded = ValueOf(m, "c").as<ConstantNode>();
  ASSERT_NE(folded, nullptr);
  EXPECT_THAT(folded->data->shape(), ElementsAre(2, 3));
  EXPECT_THAT(ReadFloats(folded->data),
              Pointwise(FloatNear(1e-6), std::vector<float>{11, 22, 33, 14, 25, 36}));
  // The use of the parameter is not folded.
  EXPECT_EQ(CalledOpName(ValueOf(m, "gv")), "relax.add");
}

TEST(ConstantFoldingTest, FoldingCascadesThroughBindings) {
  RawFunction f;
  Expr c = f.Bind("c", Op("relax.multiply", {ConstF32({2}, {1.5f, -2}), ConstF32({2}, {2, 3})}));
  Expr d = f.Bind("d", Op("relax.nn.relu", {c}));
  Expr gv = f.Output("gv", Op("relax.exp", {d}));
  IRModule m = Folded(f.Finish(gv));
  const auto* d_const = ValueOf(m, "d").as<ConstantNode>();
  ASSERT_NE(d_const, nullptr);
  EXPECT_THAT(ReadFloats(d_const->data), Pointwise(FloatNear(1e-6), std::vector<float>{3, 0}));
  const auto* gv_const = ValueOf(m, "gv").as<ConstantNode>();
  ASSERT_NE(gv_const, nullptr);
  EXPECT_THAT(ReadFloats(gv_const->data),
              Pointwise(FloatNear(1e-4), std::vector<float>{std::exp(3.0f), 1.0f}));
}

// One wave compiles its calls as one library, identical kernels once: the
// two adds of the same shapes share a kernel yet fold to their own values,
// and calls on the results of earlier calls run in the same wave (e reads
// c and d, gv reads e): the whole subgraph is one compilation.
TEST(ConstantFoldingTest, CallsOfOneWaveShareKernelsAndKeepTheirValues) {
  RawFunction f;
  Expr c = f.Bind("c", Op("relax.add", {ConstF32({2}, {1, 2}), ConstF32({2}, {10, 20})}));
  Expr d = f.Bind("d", Op("relax.add", {ConstF32({2}, {3, 4}), ConstF32({2}, {30, 40})}));
  Expr s = f.Bind("s", Op("relax.subtract", {ConstF32({2}, {5, 5}), ConstF32({2}, {1, 2})}));
  Expr e = f.Bind("e", Op("relax.multiply", {c, d}));
  Expr gv = f.Output("gv", Op("relax.add", {e, s}));
  auto normalized = NormalizedModule(f.Finish(gv));
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  int libraries = 0;
  ConstantFoldingOptions options;
  options.libraries_built = &libraries;
  auto folded = ConstantFolding(*normalized, options);
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(libraries, 1);
  const IRModule& m = *folded;
  auto floats = [&](const std::string& name) {
    const auto* k = ValueOf(m, name).as<ConstantNode>();
    return k == nullptr ? std::vector<float>{} : ReadFloats(k->data);
  };
  EXPECT_THAT(floats("c"), Pointwise(FloatNear(1e-6), std::vector<float>{11, 22}));
  EXPECT_THAT(floats("d"), Pointwise(FloatNear(1e-6), std::vector<float>{33, 44}));
  EXPECT_THAT(floats("s"), Pointwise(FloatNear(1e-6), std::vector<float>{4, 3}));
  EXPECT_THAT(floats("e"), Pointwise(FloatNear(1e-4), std::vector<float>{363, 968}));
  EXPECT_THAT(floats("gv"), Pointwise(FloatNear(1e-4), std::vector<float>{367, 971}));
}

// A call of a wave whose result is over the limit is not folded, and
// neither is a call on its result; a call beside them still is.
TEST(ConstantFoldingTest, CallsOnAnUnfoldedResultStayInTheSameWave) {
  RawFunction f;
  Expr big =
      f.Bind("big", Op("relax.add", {ConstF32({4}, {1, 2, 3, 4}), ConstF32({4}, {1, 1, 1, 1})}));
  Expr first = f.Bind("first", Op("relax.sum", {big}));
  Expr small = f.Bind("small", Op("relax.multiply", {ConstF32({1}, {3}), ConstF32({1}, {5})}));
  Expr gv = f.Output("gv", Op("relax.add", {first, small}));
  IRModule out = FoldedUpTo(f.Finish(gv), 8);
  EXPECT_EQ(CalledOpName(ValueOf(out, "big")), "relax.add");
  EXPECT_EQ(CalledOpName(ValueOf(out, "first")), "relax.sum");
  const auto* k = ValueOf(out, "small").as<ConstantNode>();
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(ReadFloats(k->data), ElementsAre(15));
  EXPECT_EQ(CalledOpName(ValueOf(out, "gv")), "relax.add");
}

TEST(ConstantFoldingTest, ShapeOfStaticTensorBecomesShapeExpr) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 5}));
  Expr gv = f.Output("gv", Op("relax.shape_of", {x}));
  IRModule m = Folded(f.Finish(gv));
  const auto* shape = ValueOf(m, "gv").as<ShapeExprNode>();
  ASSERT_NE(shape, nullptr);
  ASSERT_EQ(shape->values.size(), 2u);
  EXPECT_EQ(*shape->values[0].as_int(), 4);
  EXPECT_EQ(*shape->values[1].as_int(), 5);
}

TEST(ConstantFoldingTest, ShapeOfSymbolicTensorStays) {
  RawFunction f;
  Var n("n");
  Expr x = f.Param("x", F32({n, 5}));
  Expr gv = f.Output("gv", Op("relax.shape_of", {x}));
  IRModule m = Folded(f.Finish(gv));
  EXPECT_EQ(CalledOpName(ValueOf(m, "gv")), "relax.shape_of");
}

TEST(ConstantFoldingTest, TupleItemOfLiteralTupleFolds) {
  RawFunction f;
  Expr x = f.Param("x", F32({2}));
  Expr k = ConstF32({2}, {7, 8});
  Expr t = f.Bind("t", MakeTuple({x, k}));
  Expr item = f.Bind("item", MakeTupleGetItem(t, 1));
  Expr keep = f.Bind("keep", MakeTupleGetItem(t, 0));
  Expr gv = f.Output("gv", Op("relax.add", {item, keep}));
  IRModule m = Folded(f.Finish(gv));
  EXPECT_EQ(ValueOf(m, "item").kind(), ExprKind::kConstant);
  EXPECT_EQ(ValueOf(m, "keep").kind(), ExprKind::kTupleGetItem);  // a parameter: stays
}

TEST(ConstantFoldingTest, ResultsOverTheLimitStay) {
  RawFunction f;
  Expr c =
      f.Output("gv", Op("relax.add", {ConstF32({4}, {1, 2, 3, 4}), ConstF32({4}, {1, 1, 1, 1})}));
  EXPECT_EQ(CalledOpName(ValueOf(FoldedUpTo(f.Finish(c), 8), "gv")), "relax.add");
}

}  // namespace
}  // namespace tether::compiler
