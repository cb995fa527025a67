// DeadCodeElimination: unused pure bindings go, transitively; the result
// and calls of functions stay.
#include "compiler/transform/dead_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/transform_test_util.h"

namespace tether::compiler {
namespace {

using ::testing::ElementsAre;
using testing::F32;
using testing::NormalizedModule;
using testing::Op;
using testing::RawFunction;

std::vector<std::string> BoundNames(const IRModule& m) {
  std::vector<std::string> names;
  for (const Binding& b : testing::Bindings(m)) names.push_back(b.var.as<VarNode>()->name_hint);
  return names;
}

TEST(DeadCodeEliminationTest, RemovesUnusedChainsTransitively) {
  RawFunction f;
  Expr x = f.Param("x", F32({4}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  f.Bind("b", Op("relax.add", {a, a}));  // only user of a, itself unused
  Expr c = f.Bind("c", Op("relax.nn.relu", {x}));
  f.Bind("t", MakeTuple({c, x}));  // unused tuple
  Expr gv = f.Output("gv", Op("relax.negative", {c}));
  auto m = NormalizedModule(f.Finish(gv));
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = DeadCodeElimination(*m);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(BoundNames(*out), ElementsAre("c", "gv"));
}

TEST(DeadCodeEliminationTest, KeepsCallsOfExternFunctions) {
  RawFunction f;
  Expr x = f.Param("x", F32({4}));
  f.Bind("p", MakeCall(GetOp("relax.call_dps_packed"),
                       {MakeExternFunc("test.side_effect"), MakeTuple({x})}, {}, {F32({4})}));
  Expr gv = f.Output("gv", Op("relax.exp", {x}));
  auto m = NormalizedModule(f.Finish(gv));
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = DeadCodeElimination(*m);
  ASSERT_TRUE(out.ok()) << out.status();
  // call_dps_packed is an operator call: pure by Relax's contract, removed.
  EXPECT_THAT(BoundNames(*out), ElementsAre("gv"));
  // A call of an extern function value directly is kept.
  RawFunction g;
  Expr y = g.Param("y", F32({4}));
  Expr ext = MakeExternFunc("test.side_effect");
  g.Bind("q", MakeCall(ext, {y}, {}, {F32({4})}));
  Expr gv2 = g.Output("gv", Op("relax.exp", {y}));
  auto m2 = NormalizedModule(g.Finish(gv2));
  ASSERT_TRUE(m2.ok()) << m2.status();
  auto out2 = DeadCodeElimination(*m2);
  ASSERT_TRUE(out2.ok()) << out2.status();
  EXPECT_THAT(BoundNames(*out2), ElementsAre("q", "gv"));
}

}  // namespace
}  // namespace tether::compiler
