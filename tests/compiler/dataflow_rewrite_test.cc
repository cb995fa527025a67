// DataflowBlockRewrite: adding bindings, replacing uses across the function,
// removing unused bindings, and the errors of each edit.
#include "compiler/relax/dataflow_rewrite.h"

#include "compiler/op/op.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/structural_equal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

// A test-only unary op: the result has the struct info of its tensor argument.
const bool kRegistered = [] {
  OpInfo info;
  info.name = "test.dfrw.identity";
  info.num_args = 1;
  info.infer = [](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (call.args[0].struct_info().kind() != StructInfoKind::kTensor) {
      return absl::InvalidArgumentError("test.dfrw.identity: expects a tensor");
    }
    return call.args[0].struct_info();
  };
  RegisterOp(std::move(info));
  return true;
}();

Expr Id(Expr x) { return MakeCall(GetOp("test.dfrw.identity"), {std::move(x)}); }
Expr AddOp(Expr a, Expr b) { return MakeCall(GetOp("relax.add"), {std::move(a), std::move(b)}); }
StructInfo F32(std::vector<PrimExpr> shape) {
  return TensorSInfo(std::move(shape), DataType::Float(32));
}
Binding Bind(Expr var, Expr value) { return Binding{std::move(var), std::move(value), {}, {}}; }

// A normalized function built by hand: blocks of bindings whose vars carry
// no struct info yet (the normalizer fills it in).
Expr Fn(std::vector<Expr> params, std::vector<BindingBlock> blocks, Expr body) {
  absl::StatusOr<Expr> f = BlockBuilder().Normalize(MakeFunction(
      std::move(params), MakeSeqExpr(std::move(blocks), std::move(body)), StructInfo()));
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : Expr();
}

BindingBlock Dataflow(std::vector<Binding> bindings) {
  return BindingBlock{std::move(bindings), true};
}

// fn(x: R.Tensor((2, 3), "float32")):
//   with R.dataflow():
//     lv0 = identity(x); lv1 = add(lv0, x); gv = identity(lv1); R.output(gv)
//   return gv
struct Simple {
  Expr x = MakeVar("x", F32({2, 3}));
  Expr lv0 = MakeDataflowVar("lv0");
  Expr lv1 = MakeDataflowVar("lv1");
  Expr gv = MakeVar("gv");
  Expr fn;
  Simple() {
    fn = Fn({x}, {Dataflow({Bind(lv0, Id(x)), Bind(lv1, AddOp(lv0, x)), Bind(gv, Id(lv1))})}, gv);
  }
};

TEST(DataflowBlockRewriteTest, AddAppendsANormalizedBinding) {
  ASSERT_TRUE(kRegistered);
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  absl::StatusOr<Expr> t = rw->Add(Id(Id(s.gv)), "", /*is_dataflow_var=*/true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind(), ExprKind::kDataflowVar);
  EXPECT_EQ(t->as<VarNode>()->name_hint, "tmp0");
  EXPECT_TRUE(StructuralEqual(t->struct_info(), F32({2, 3})));
  // TVM's default (is_dfvar=False): an output of the block.
  absl::StatusOr<Expr> out = rw->Add(AddOp(*t, s.x), "out");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kind(), ExprKind::kVar);

  Expr x = MakeVar("x", F32({2, 3}));
  Expr lv0 = MakeDataflowVar("lv0"), lv1 = MakeDataflowVar("lv1"), gv = MakeVar("gv");
  Expr inner = MakeDataflowVar("lv"), tmp = MakeDataflowVar("tmp0"), o = MakeVar("out");
  Expr expected =
      Fn({x},
         {Dataflow({Bind(lv0, Id(x)), Bind(lv1, AddOp(lv0, x)), Bind(gv, Id(lv1)),
                    Bind(inner, Id(gv)), Bind(tmp, Id(inner)), Bind(o, AddOp(tmp, x))})},
         gv);
  absl::StatusOr<Expr> got = rw->MutatedRootFn();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(StructuralEqual(*got, expected));
  // The input function is untouched.
  EXPECT_EQ(s.fn.as<FunctionNode>()->body.as<SeqExprNode>()->blocks[0].bindings.size(), 3u);
}

TEST(DataflowBlockRewriteTest, AddRejectsUndefinedVarAndLeavesFunctionUnchanged) {
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  Expr stranger = MakeVar("stranger", F32({2, 3}));
  absl::StatusOr<Expr> t = rw->Add(Id(stranger), "t");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("stranger"));
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), s.fn));
}

TEST(DataflowBlockRewriteTest, AddThenReplaceReordersTheBlock) {
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  absl::StatusOr<Expr> t = rw->Add(AddOp(s.x, s.x), "t", /*is_dataflow_var=*/true);
  ASSERT_TRUE(t.ok()) << t.status();
  // gv = identity(lv1) now reads t, which is bound after it: gv moves down.
  ASSERT_TRUE(rw->ReplaceAllUses(s.lv1, *t).ok());
  Expr x = MakeVar("x", F32({2, 3}));
  Expr lv0 = MakeDataflowVar("lv0"), lv1 = MakeDataflowVar("lv1"), gv = MakeVar("gv");
  Expr tv = MakeDataflowVar("t");
  Expr expected = Fn({x},
                     {Dataflow({Bind(lv0, Id(x)), Bind(lv1, AddOp(lv0, x)), Bind(tv, AddOp(x, x)),
                                Bind(gv, Id(tv))})},
                     gv);
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), expected));

  // lv1 and then lv0 are now dead.
  rw->RemoveAllUnused();
  Expr x2 = MakeVar("x", F32({2, 3}));
  Expr gv2 = MakeVar("gv"), tv2 = MakeDataflowVar("t");
  Expr pruned = Fn({x2}, {Dataflow({Bind(tv2, AddOp(x2, x2)), Bind(gv2, Id(tv2))})}, gv2);
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), pruned));
  EXPECT_EQ(rw->mutated_block().bindings.size(), 2u);
}

TEST(DataflowBlockRewriteTest, ReplaceAllUsesReachesLaterBlocksAndTheBody) {
  // block 0 (dataflow): lv0 = id(x); gv0 = id(lv0); gv1 = add(x, x)
  // block 1:            y = add(gv0, gv0)
  // return (gv0, y)
  Expr x = MakeVar("x", F32({2, 3}));
  Expr lv0 = MakeDataflowVar("lv0"), gv0 = MakeVar("gv0"), gv1 = MakeVar("gv1"), y = MakeVar("y");
  Expr fn = Fn({x},
               {Dataflow({Bind(lv0, Id(x)), Bind(gv0, Id(lv0)), Bind(gv1, AddOp(x, x))}),
                BindingBlock{{Bind(y, AddOp(gv0, gv0))}, false}},
               MakeTuple({gv0, y}));
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  absl::Status st = rw->ReplaceAllUses(gv0, gv1);
  ASSERT_TRUE(st.ok()) << st;

  Expr ex = MakeVar("x", F32({2, 3}));
  Expr elv0 = MakeDataflowVar("lv0"), egv0 = MakeVar("gv0"), egv1 = MakeVar("gv1"),
       ey = MakeVar("y");
  Expr expected =
      Fn({ex},
         {Dataflow({Bind(elv0, Id(ex)), Bind(egv0, Id(elv0)), Bind(egv1, AddOp(ex, ex))}),
          BindingBlock{{Bind(ey, AddOp(egv1, egv1))}, false}},
         MakeTuple({egv1, ey}));
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), expected));

  // gv0 is unused now, but it is an output: remove_all_unused keeps it,
  // remove_unused removes it on request.
  rw->RemoveAllUnused();
  EXPECT_EQ(rw->mutated_block().bindings.size(), 3u);
  ASSERT_TRUE(rw->RemoveUnused(gv0).ok());
  EXPECT_EQ(rw->mutated_block().bindings.size(), 2u);
}

TEST(DataflowBlockRewriteTest, ReplaceRejectsIncompatibleStructInfo) {
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  absl::StatusOr<Expr> narrow = rw->Add(MakeShapeExpr({2, 3}), "shape");
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  absl::Status st = rw->ReplaceAllUses(s.lv0, *narrow);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("not compatible"));
  EXPECT_THAT(st.message(), HasSubstr("lv0"));
  st = rw->ReplaceAllUses(s.lv0, Id(s.x));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

TEST(DataflowBlockRewriteTest, ReplaceRejectsDataflowVarEscapingTheBlock) {
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  // gv is the function's result: a DataflowVar cannot stand in for it.
  absl::Status st = rw->ReplaceAllUses(s.gv, s.lv1);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("outside its dataflow block"));
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), s.fn));
}

TEST(DataflowBlockRewriteTest, ReplaceRejectsCyclicDefinition) {
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  // lv1 = add(lv0, x) would become lv1 = add(lv1, x).
  absl::Status st = rw->ReplaceAllUses(s.lv0, s.lv1);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("cyclic"));
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), s.fn));
}

TEST(DataflowBlockRewriteTest, RemoveUnusedRemovesOnlyUnusedBindings) {
  Expr x = MakeVar("x", F32({2, 3}));
  Expr dead = MakeDataflowVar("dead"), lv = MakeDataflowVar("lv"), gv = MakeVar("gv");
  Expr fn = Fn({x}, {Dataflow({Bind(dead, Id(x)), Bind(lv, Id(x)), Bind(gv, Id(lv))})}, gv);
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();

  absl::Status used = rw->RemoveUnused(lv);
  EXPECT_EQ(used.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(used.message(), HasSubstr("lv is still used"));

  ASSERT_TRUE(rw->RemoveUnused(dead).ok());
  Expr ex = MakeVar("x", F32({2, 3}));
  Expr elv = MakeDataflowVar("lv"), egv = MakeVar("gv");
  Expr expected = Fn({ex}, {Dataflow({Bind(elv, Id(ex)), Bind(egv, Id(elv))})}, egv);
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), expected));

  absl::Status gone = rw->RemoveUnused(dead);
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(gone.message(), HasSubstr("dead is not bound in dataflow block 0"));
  EXPECT_TRUE(rw->RemoveUnused(dead, /*allow_undef=*/true).ok());
  EXPECT_EQ(rw->RemoveUnused(x).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rw->RemoveUnused(Id(x)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DataflowBlockRewriteTest, RemoveUnusedKeepsMatchCastDefiningUsedSymbolicVar) {
  Var n("n");
  Expr x = MakeVar("x", TensorSInfoOfRank(1, DataType::Float(32)));
  Expr m = MakeDataflowVar("m"), shape = MakeVar("shape");
  Binding cast{m, x, F32({n}), {}};
  Expr fn = Fn({x}, {Dataflow({cast, Bind(shape, MakeShapeExpr({n}))})}, shape);
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  absl::Status st = rw->RemoveUnused(m);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("symbolic var n"));
  // remove_all_unused never drops a match cast.
  rw->RemoveAllUnused();
  EXPECT_EQ(rw->mutated_block().bindings.size(), 2u);
}

TEST(DataflowBlockRewriteTest, RemoveAllUnusedKeepsOutputsAndImpureCalls) {
  // a = id(x); b = id(a); s = shape_of(x); effect = call extern(x); out = add(x, x)
  // return x: a, b and s are dead and pure; effect is impure; out is an output.
  Expr x = MakeVar("x", F32({2, 3}));
  Expr a = MakeDataflowVar("a"), b = MakeDataflowVar("b"), s = MakeDataflowVar("s"),
       effect = MakeDataflowVar("effect"), out = MakeVar("out");
  Expr call_extern = MakeCall(MakeExternFunc("test.dfrw.effect"), {x}, {}, {ObjectSInfo()});
  Expr fn =
      Fn({x},
         {Dataflow({Bind(a, Id(x)), Bind(b, Id(a)), Bind(s, MakeCall(GetOp("relax.shape_of"), {x})),
                    Bind(effect, call_extern), Bind(out, AddOp(x, x))})},
         x);
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  rw->RemoveAllUnused();

  Expr ex = MakeVar("x", F32({2, 3}));
  Expr eeffect = MakeDataflowVar("effect"), eout = MakeVar("out");
  Expr expected = Fn({ex},
                     {Dataflow({Bind(eeffect, MakeCall(MakeExternFunc("test.dfrw.effect"), {ex}, {},
                                                       {ObjectSInfo()})),
                                Bind(eout, AddOp(ex, ex))})},
                     ex);
  EXPECT_TRUE(StructuralEqual(*rw->MutatedRootFn(), expected));
}

TEST(DataflowBlockRewriteTest, AddBindingKeepsTheVarAndRejectsRebinding) {
  Simple s;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  Expr z = MakeDataflowVar("z", F32({2, 3}));
  ASSERT_TRUE(rw->AddBinding(Bind(z, AddOp(s.gv, s.lv0))).ok());
  EXPECT_TRUE(rw->mutated_block().bindings.back().var.same_as(z));
  absl::Status again = rw->AddBinding(Bind(z, Id(s.x)));
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(again.message(), HasSubstr("already bound"));
  absl::Status param = rw->AddBinding(Bind(s.x, Id(s.x)));
  EXPECT_EQ(param.code(), absl::StatusCode::kInvalidArgument);
  Expr wrong = MakeDataflowVar("wrong", F32({4}));
  absl::Status mismatch = rw->AddBinding(Bind(wrong, Id(s.x)));
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatch.message(), HasSubstr("does not match its annotation"));
}

TEST(DataflowBlockRewriteTest, CreateRejectsBadBlockIndexAndNonFunctions) {
  Expr x = MakeVar("x", F32({2, 3}));
  Expr lv = MakeDataflowVar("lv"), gv = MakeVar("gv"), y = MakeVar("y");
  Expr fn = Fn(
      {x}, {Dataflow({Bind(lv, Id(x)), Bind(gv, Id(lv))}), BindingBlock{{Bind(y, Id(gv))}, false}},
      y);
  absl::StatusOr<DataflowBlockRewrite> binding_block = DataflowBlockRewrite::Create(fn, 1);
  EXPECT_EQ(binding_block.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(binding_block.status().message(), HasSubstr("not a dataflow block"));
  absl::StatusOr<DataflowBlockRewrite> past = DataflowBlockRewrite::Create(fn, 2);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.status().message(), HasSubstr("block index 2 out of range"));
  EXPECT_EQ(DataflowBlockRewrite::Create(x, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataflowBlockRewrite::Create(Expr(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataflowBlockRewriteTest, MutateIRModuleReplacesTheNamedFunction) {
  Simple s;
  IRModule module;
  module.functions["main"] = s.fn;
  module.functions["other"] = s.fn;
  absl::StatusOr<DataflowBlockRewrite> rw = DataflowBlockRewrite::Create(s.fn, 0);
  ASSERT_TRUE(rw.ok()) << rw.status();
  ASSERT_TRUE(rw->Add(Id(s.x), "extra").ok());
  absl::StatusOr<IRModule> mutated = rw->MutateIRModule(module, "main");
  ASSERT_TRUE(mutated.ok()) << mutated.status();
  EXPECT_TRUE(StructuralEqual(mutated->functions["main"], *rw->MutatedRootFn()));
  EXPECT_TRUE(mutated->functions["other"].same_as(s.fn));
  EXPECT_TRUE(module.functions["main"].same_as(s.fn));
  absl::StatusOr<IRModule> missing = rw->MutateIRModule(module, "absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("absent"));
}

}  // namespace
}  // namespace tether::compiler
