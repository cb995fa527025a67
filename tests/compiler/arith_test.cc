// The simplifier's canonical forms, equality proofs, substitution and
// free-variable collection.
#include "compiler/tir/arith.h"

#include <cstdint>

#include "compiler/tir/kernel_ir.h"
#include "gtest/gtest.h"

namespace tether::compiler {
namespace {

TEST(ArithTest, OrdersMonomialsCanonically) {
  Var n("n"), m("m");
  EXPECT_EQ(ToString(Simplify(PrimExpr(4) * n)), "n * 4");
  EXPECT_EQ(ToString(Simplify(n * 4)), "n * 4");
  EXPECT_EQ(ToString(Simplify(m + n)), ToString(Simplify(n + m)));
  EXPECT_EQ(ToString(Simplify(n * m * 2)), ToString(Simplify(PrimExpr(2) * m * n)));
}

TEST(ArithTest, CancelsTerms) {
  Var n("n"), m("m");
  EXPECT_TRUE(Simplify((n + 1) - 1).same_as(n));
  EXPECT_TRUE(Simplify(n * 2 - n).same_as(n));
  EXPECT_EQ(*Simplify((n + m) - (m + n)).as_int(), 0);
  EXPECT_EQ(ToString(Simplify((n + 2) * (n - 2) - n * n)), "-4");
  EXPECT_EQ(ToString(Simplify(PrimExpr(0) - n)), "n * -1");
  EXPECT_EQ(ToString(Simplify(m - n + 3)), "m - n + 3");
}

// Found by text_fuzz: a shape with a dim near int64's limit made the
// simplifier overflow (undefined behaviour). Folds that overflow are
// discarded; the expression stays as written and nothing is invented.
TEST(ArithTest, FoldsThatOverflowKeepTheExpressionAsWritten) {
  Var n("n");
  const int64_t huge = int64_t{3288888888888888888};
  PrimExpr product = n * PrimExpr(huge) * PrimExpr(16);
  EXPECT_TRUE(Simplify(product).same_as(product));
  EXPECT_TRUE(Simplify(PrimExpr(huge) * PrimExpr(16)).as_int() == nullptr);
  PrimExpr min_value = PrimExpr(INT64_MIN);
  EXPECT_TRUE(Simplify(min_value - 1).as_int() == nullptr);
  EXPECT_TRUE(Simplify(FloorDiv(min_value, PrimExpr(-1))).as_int() == nullptr);
  EXPECT_FALSE(ProveEqual(product, product + 0 + n * 0 + PrimExpr(huge) * PrimExpr(8)));
  // What does not overflow still folds, after one that did.
  EXPECT_EQ(*Simplify(PrimExpr(int64_t{1} << 40) * PrimExpr(1024)).as_int(), int64_t{1} << 50);
}

TEST(ArithTest, DividesByConstantsWhereExact) {
  Var n("n");
  EXPECT_EQ(ToString(Simplify(FloorDiv(n * 4 + 2, 2))), "n * 2 + 1");
  EXPECT_EQ(ToString(Simplify(FloorMod(n * 4 + 3, 4))), "3");
  EXPECT_EQ(ToString(Simplify(FloorDiv(n * 4 + 3, 2))), "n * 2 + 1");
  EXPECT_EQ(ToString(Simplify(FloorDiv(n + 1, 2))), "floordiv(n + 1, 2)");
  EXPECT_EQ(ToString(Simplify(FloorDiv(FloorDiv(n, 2), 3))), "floordiv(n, 6)");
  EXPECT_EQ(ToString(Simplify(FloorMod(n * 3, 2))), "floormod(n, 2)");
  EXPECT_EQ(ToString(Simplify(Div(n * 6, 3))), "n * 2");
  EXPECT_EQ(ToString(Simplify(Div(n, 3))), "n / 3");
  EXPECT_TRUE(ProveEqual(FloorDiv(n + 3, 2), FloorDiv(n + 1, 2) + 1));
}

TEST(ArithTest, RecombinesAnIndexSplitByDivAndMod) {
  Var n("n"), j("j"), i("i");
  // c * floordiv(x, c) + floormod(x, c) == x: a pixel split into (row,
  // column) and flattened again.
  EXPECT_EQ(ToString(Simplify(FloorDiv(n, 7) * 7 + FloorMod(n, 7))), "n");
  // floormod's operand has its coefficients reduced (j * 32 mod 56 stays,
  // j * 60 becomes j * 4): still the same x modulo 56.
  EXPECT_TRUE(ProveEqual(FloorDiv(j * 60 + i, 56) * 56 + FloorMod(j * 60 + i, 56), j * 60 + i));
  // Inside a larger flattened index, and scaled.
  EXPECT_TRUE(ProveEqual((n * 3 + FloorDiv(i, 5)) * 5 + FloorMod(i, 5), n * 15 + i));
  EXPECT_TRUE(ProveEqual(FloorDiv(i, 5) * 15 + FloorMod(i, 5) * 3, i * 3));
  // The stride of the flattened index along i is 1 (what vectorization asks).
  PrimExpr flat = FloorDiv(j * 32 + i, 56) * 56 + FloorMod(j * 32 + i, 56);
  EXPECT_EQ(ToString(Simplify(Substitute(flat, {{i.get(), i + 1}}) - flat)), "1");
  // Not the identity: left alone.
  EXPECT_EQ(ToString(Simplify(FloorDiv(n, 7) * 6 + FloorMod(n, 7))),
            "floordiv(n, 7) * 6 + floormod(n, 7)");
  EXPECT_FALSE(ProveEqual(FloorDiv(n, 7) * 7 + FloorMod(n + 1, 7), n));
}

TEST(ArithTest, FoldsMinMaxWithConstantDifference) {
  Var n("n"), m("m");
  EXPECT_TRUE(Simplify(Min(n, n + 1)).same_as(n));
  EXPECT_EQ(ToString(Simplify(Max(n, n + 1))), "n + 1");
  EXPECT_EQ(*Simplify(Max(3, 7)).as_int(), 7);
  EXPECT_TRUE(ProveEqual(Min(n, m), Min(m, n)));
  EXPECT_FALSE(ProveEqual(Min(n, m), Max(m, n)));
}

TEST(ArithTest, FoldsFloatConstantsOnly) {
  PrimExpr x = FloatImm(DataType::Float(32), 1.5);
  PrimExpr e = Simplify(x * FloatImm(DataType::Float(32), 2.0));
  ASSERT_NE(e.as<FloatImmNode>(), nullptr);
  EXPECT_EQ(e.as<FloatImmNode>()->value, 3.0);
  Var f("f", DataType::Float(32));
  EXPECT_EQ(ToString(Simplify(f + FloatImm(DataType::Float(32), 0.0))), "f + 0.0");
}

TEST(ArithTest, ProvesEqualAndRefusesUnprovable) {
  Var n("n"), m("m");
  EXPECT_TRUE(ProveEqual(n * 4, PrimExpr(4) * n));
  EXPECT_TRUE(ProveEqual((n + 1) * (n + 1), n * n + n * 2 + 1));
  EXPECT_FALSE(ProveEqual(n, m));
  EXPECT_FALSE(ProveEqual(n * 2, n * 3));
  // Two variables with one name are different variables.
  Var n2("n");
  EXPECT_FALSE(ProveEqual(n, n2));
}

TEST(ArithTest, FoldsComparisonsOfConstantDifference) {
  Var n("n");
  EXPECT_EQ(*Simplify(LT(n, n + 1)).as_int(), 1);
  EXPECT_EQ(*Simplify(EQ(n * 2, n + n)).as_int(), 1);
  EXPECT_EQ(Simplify(LT(n, PrimExpr(4))).as_int(), nullptr);
}

TEST(ArithTest, AsConstIntSimplifiesFirst) {
  Var n("n");
  EXPECT_EQ(AsConstInt(n - n + 7), 7);
  EXPECT_EQ(AsConstInt(n + 1), std::nullopt);
  EXPECT_EQ(AsConstInt(PrimExpr()), std::nullopt);
}

TEST(ArithTest, SubstitutesVariables) {
  Var n("n"), m("m");
  VarMap map;
  map[n.get()] = PrimExpr(3);
  EXPECT_EQ(*Substitute(n * 4 + 1, map).as_int(), 13);
  PrimExpr untouched = m * 2;
  EXPECT_TRUE(Substitute(untouched, map).same_as(untouched));
  map[n.get()] = m + 1;
  EXPECT_TRUE(ProveEqual(Substitute(n * 2, map), m * 2 + 2));
}

TEST(ArithTest, SubstitutesInStatementsKeepingBuffers) {
  Var n("n"), i("i");
  Buffer a = MakeBuffer("A", DataType::Float(32), {n});
  Stmt loop = For(i, 0, n, ForKind::kSerial,
                  Store(a, {i}, Load(a, {i}) + FloatImm(DataType::Float(32), 1)));
  VarMap map;
  map[n.get()] = PrimExpr(8);
  Stmt out = Substitute(loop, map);
  const auto* f = out.as<ForNode>();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->extent.as_int(), 8);
  const auto* st = f->body.as<StoreNode>();
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->buffer.get(), a.get());
  EXPECT_TRUE(st->indices[0].same_as(i));
}

// Tensor-core tiles and asynchronous copies have their indices (and a
// copy its condition) substituted; fences and untouched statements are
// returned as they are.
TEST(ArithTest, SubstitutesInTilesAndCopies) {
  Var n("n"), w("w");
  const DataType f16 = DataType::Float(16);
  Buffer src = MakeBuffer("src", f16, {n, PrimExpr(64)});
  Buffer tile = MakeBuffer("tile", f16, {PrimExpr(16), PrimExpr(64)}, BufferNode::Scope::kShared);
  Buffer frag = MakeBuffer("frag", f16, {PrimExpr(2), PrimExpr(16), PrimExpr(16)},
                           BufferNode::Scope::kMatrixA);
  Stmt copy = AsyncCopy({tile, {PrimExpr(0), n}}, {src, {n - 1, PrimExpr(8)}}, 8, LT(n, 4));
  Stmt load = MatrixLoad({frag, {w}}, {tile, {PrimExpr(0), n}});
  Stmt fence = AsyncFence(1);
  VarMap map;
  map[n.get()] = PrimExpr(8);
  const Stmt copied = Substitute(copy, map), loaded = Substitute(load, map);
  const auto* c = copied.as<AsyncCopyNode>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dst.buffer.get(), tile.get());
  EXPECT_EQ(AsConstInt(c->dst.at[1]), 8);
  EXPECT_EQ(AsConstInt(c->src.at[0]), 7);
  EXPECT_EQ(AsConstInt(c->valid), 0);
  EXPECT_EQ(c->lanes, 8);
  const auto* m = loaded.as<MatrixTileNode>();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(AsConstInt(m->args[0].at[1]), 8);
  EXPECT_TRUE(m->frag.at[0].same_as(w));
  EXPECT_EQ(Substitute(fence, map).get(), fence.get());
  VarMap other;
  other[Var("x").get()] = PrimExpr(1);
  EXPECT_EQ(Substitute(copy, other).get(), copy.get());
}

TEST(ArithTest, StatementBindersShadowOrRename) {
  Var i("i"), j("j");
  Buffer a = MakeBuffer("A", DataType::Int(64), {10});
  Stmt loop = For(i, 0, 10, ForKind::kSerial, Store(a, {i}, i));
  VarMap to_const;
  to_const[i.get()] = PrimExpr(0);
  EXPECT_EQ(Substitute(loop, to_const).get(), loop.get());
  VarMap rename;
  rename[i.get()] = j;
  Stmt out = Substitute(loop, rename);
  const auto* f = out.as<ForNode>();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->var.same_as(j));
  EXPECT_TRUE(f->body.as<StoreNode>()->indices[0].same_as(j));
}

TEST(ArithTest, CollectsFreeVarsInFirstOccurrenceOrder) {
  Var n("n"), m("m"), k("k");
  std::vector<Var> vars;
  CollectVars(m * n + FloorDiv(n, k) + m, &vars);
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_TRUE(vars[0].same_as(m));
  EXPECT_TRUE(vars[1].same_as(n));
  EXPECT_TRUE(vars[2].same_as(k));
  CollectVars(k + n, &vars);
  EXPECT_EQ(vars.size(), 3u);
}

}  // namespace
}  // namespace tether::compiler
