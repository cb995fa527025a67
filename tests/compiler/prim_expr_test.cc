// PrimExpr construction folds constants and prints readably.
#include "compiler/tir/prim_expr.h"

#include "gtest/gtest.h"

namespace tether::compiler {
namespace {

TEST(PrimExprTest, FoldsConstants) {
  PrimExpr e = PrimExpr(2) + PrimExpr(3) * PrimExpr(4);
  ASSERT_NE(e.as_int(), nullptr);
  EXPECT_EQ(*e.as_int(), 14);
  EXPECT_EQ(*FloorDiv(-7, 2).as_int(), -4);
  EXPECT_EQ(*FloorMod(-7, 2).as_int(), 1);
}

TEST(PrimExprTest, AppliesIdentities) {
  Var n("n");
  EXPECT_TRUE((n * 1).same_as(n));
  EXPECT_TRUE((n + 0).same_as(n));
  EXPECT_EQ(*(n * 0).as_int(), 0);
}

TEST(PrimExprTest, PrintsWithMinimalParentheses) {
  Var n("n"), m("m");
  EXPECT_EQ(ToString((n + m) * 4), "(n + m) * 4");
  EXPECT_EQ(ToString(n + m * 4), "n + m * 4");
  EXPECT_EQ(ToString(n - (m - 1)), "n - (m - 1)");
  EXPECT_EQ(ToString(FloorDiv(n, 2)), "floordiv(n, 2)");
}

}  // namespace
}  // namespace tether::compiler
