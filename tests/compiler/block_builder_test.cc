// BlockBuilder normalization: ANF, struct info inference, match_cast,
// positioned errors, and the module well-formedness check; builtin ops.
#include "compiler/relax/block_builder.h"

#include "compiler/op/op.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/relax/visitor.h"
#include "compiler/tir/arith.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

// A test-only unary op: the result has the struct info of its argument.
const bool kRegistered = [] {
  OpInfo info;
  info.name = "test.bb_identity";
  info.num_args = 1;
  info.infer = [](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (call.args[0].struct_info().kind() != StructInfoKind::kTensor) {
      return absl::InvalidArgumentError("test.bb_identity: expects a tensor");
    }
    return call.args[0].struct_info();
  };
  RegisterOp(std::move(info));
  return true;
}();

Expr Id(Expr x) { return MakeCall(GetOp("test.bb_identity"), {std::move(x)}); }

StructInfo F32(std::vector<PrimExpr> shape) {
  return TensorSInfo(std::move(shape), DataType::Float(32));
}

TEST(BlockBuilderTest, BindsNestedCallsToFreshVars) {
  ASSERT_TRUE(kRegistered);
  Var n("n");
  Expr x = MakeVar("x", F32({n, 4}));
  BlockBuilder bb;
  bb.BeginDataflowBlock();
  absl::StatusOr<Expr> out = bb.Emit(Id(Id(x)));
  ASSERT_TRUE(out.ok()) << out.status();
  BindingBlock block = bb.EndBlock();
  ASSERT_EQ(block.bindings.size(), 2u);
  EXPECT_EQ(block.bindings[0].var.kind(), ExprKind::kDataflowVar);
  const auto* call = block.bindings[1].value.as<CallNode>();
  ASSERT_NE(call, nullptr);
  EXPECT_TRUE(call->args[0].same_as(block.bindings[0].var));
  EXPECT_TRUE(ProveEqual((*TensorShape(out->struct_info()))[0], n));
}

TEST(BlockBuilderTest, NormalizeWithoutBlockWrapsInSeqExpr) {
  Expr x = MakeVar("x", F32({2, 3}));
  BlockBuilder bb;
  absl::StatusOr<Expr> e = bb.Normalize(Id(Id(x)));
  ASSERT_TRUE(e.ok()) << e.status();
  const auto* seq = e->as<SeqExprNode>();
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->blocks.size(), 1u);
  EXPECT_EQ(ToString(e->struct_info()), "R.Tensor((2, 3), \"float32\")");
}

TEST(BlockBuilderTest, InfersTupleAndTupleGetItem) {
  Expr x = MakeVar("x", F32({2}));
  Expr s = MakeVar("s", ShapeSInfo({5}));
  absl::StatusOr<StructInfo> t = InferStructInfo(MakeTuple({x, s}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(ToString(*t), "R.Tuple(R.Tensor((2,), \"float32\"), R.Shape([5]))");
  absl::StatusOr<StructInfo> item = InferStructInfo(MakeTupleGetItem(MakeTuple({x, s}), 1));
  ASSERT_TRUE(item.ok());
  EXPECT_EQ(ToString(*item), "R.Shape([5])");
  absl::StatusOr<StructInfo> bad = InferStructInfo(MakeTupleGetItem(MakeTuple({x, s}), 2));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("tuple index 2 out of range"));
}

TEST(BlockBuilderTest, IfTakesLeastUpperBoundOfBranches) {
  Var n("n"), m("m");
  Expr c = MakeVar("c", PrimSInfo(DataType::Bool()));
  Expr a = MakeVar("a", F32({n, 4}));
  Expr b = MakeVar("b", F32({m, 4}));
  Expr a2 = MakeVar("a2", F32({n, 4}));
  BlockBuilder bb;
  absl::StatusOr<Expr> same = bb.Normalize(MakeIf(c, Id(a), a2));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(ToString(same->struct_info()), "R.Tensor((n, 4), \"float32\")");
  ASSERT_NE(same->as<IfNode>(), nullptr);
  EXPECT_NE(same->as<IfNode>()->true_branch.as<SeqExprNode>(), nullptr);
  absl::StatusOr<StructInfo> diff = InferStructInfo(MakeIf(c, a, b));
  ASSERT_TRUE(diff.ok());
  EXPECT_EQ(ToString(*diff), "R.Tensor(\"float32\", ndim=2)");
  absl::StatusOr<StructInfo> obj = InferStructInfo(MakeIf(c, a, c));
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(obj->kind(), StructInfoKind::kObject);
}

TEST(BlockBuilderTest, MatchCastDeclaresSymbolicVars) {
  Var k("k");
  Expr x = MakeVar("x", TensorSInfoOfRank(2, DataType::Float(32)));
  BlockBuilder bb;
  bb.BeginBindingBlock();
  EXPECT_FALSE(bb.IsSymbolicVarDefined(k.get()));
  absl::StatusOr<Expr> y = bb.EmitMatchCast(x, F32({k, 8}), "y");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(bb.IsSymbolicVarDefined(k.get()));
  absl::StatusOr<Expr> z = bb.Emit(Id(*y), "z");
  ASSERT_TRUE(z.ok());
  EXPECT_TRUE(ProveEqual((*TensorShape(z->struct_info()))[0], k));
  BindingBlock block = bb.EndBlock();
  ASSERT_EQ(block.bindings.size(), 2u);
  EXPECT_TRUE(block.bindings[0].is_match_cast());
  // A cast that can never match is refused.
  bb.BeginBindingBlock();
  absl::StatusOr<Expr> bad = bb.EmitMatchCast(x, F32({1, 2, 3}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("can never match"));
}

TEST(BlockBuilderTest, UnknownOperatorIsAnErrorWithSpan) {
  Expr x = MakeVar("x", F32({2}));
  Expr call = WithSpan(MakeCall(GetOp("relax.foo"), {x}), Span{"model.rx", 12, 5});
  absl::StatusOr<StructInfo> s = InferStructInfo(call);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("model.rx:12:5: unknown operator relax.foo"));
}

TEST(BlockBuilderTest, OperatorErrorsArePrefixedWithTheSpan) {
  Expr s = MakeVar("s", ShapeSInfo({2}));
  Expr call = WithSpan(Id(s), Span{"model.rx", 3, 9});
  absl::StatusOr<StructInfo> r = InferStructInfo(call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "model.rx:3:9: test.bb_identity: expects a tensor");
}

TEST(BlockBuilderTest, EmitOutputOutsideDataflowIsFailedPrecondition) {
  BlockBuilder bb;
  bb.BeginBindingBlock();
  absl::StatusOr<Expr> r = bb.EmitOutput(MakeVar("x", F32({1})));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

Expr MainWithEscapingDataflowVar(bool escape) {
  Expr x = MakeVar("x", F32({4}));
  Expr lv = MakeDataflowVar("lv");
  Expr gv = MakeVar("gv");
  BindingBlock df{{Binding{lv, Id(x), {}, {}}, Binding{gv, Id(lv), {}, {}}}, true};
  return MakeFunction({x}, MakeSeqExpr({df}, escape ? lv : gv), StructInfo());
}

TEST(BlockBuilderTest, NormalizeModuleFillsFunctionStructInfo) {
  IRModule mod;
  mod.functions["main"] = MainWithEscapingDataflowVar(false);
  absl::StatusOr<IRModule> out = NormalizeModule(mod);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ToString(out->functions["main"].struct_info()),
            "R.Callable((R.Tensor((4,), \"float32\"),), R.Tensor((4,), \"float32\"))");
}

TEST(BlockBuilderTest, DataflowVarEscapingItsBlockIsAnError) {
  IRModule mod;
  mod.functions["main"] = MainWithEscapingDataflowVar(true);
  absl::StatusOr<IRModule> out = NormalizeModule(mod);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("main: dataflow var lv is used outside its dataflow block"));
}

TEST(BlockBuilderTest, UndefinedSymbolicParamVarIsAnError) {
  Var n("n");
  Expr x = MakeVar("x", F32({n + 1}));
  IRModule mod;
  mod.functions["main"] = MakeFunction({x}, MakeSeqExpr({}, x), StructInfo());
  absl::StatusOr<IRModule> out = NormalizeModule(mod);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("symbolic var n in the params of main"));
}

TEST(BlockBuilderTest, CallToGlobalFunctionBindsSymbolicDims) {
  Var n("n");
  Expr p = MakeVar("p", F32({n, 4}));
  IRModule mod;
  mod.functions["f"] = MakeFunction({p}, MakeSeqExpr({}, Id(p)), F32({n, 4}));
  Expr x = MakeVar("x", F32({7, 4}));
  mod.functions["main"] =
      MakeFunction({x}, MakeSeqExpr({}, MakeCall(MakeGlobalVar("f"), {x})), StructInfo());
  absl::StatusOr<IRModule> out = NormalizeModule(mod);
  ASSERT_TRUE(out.ok()) << out.status();
  const auto* fn = out->functions["main"].as<FunctionNode>();
  EXPECT_EQ(ToString(fn->ret_struct_info), "R.Tensor((7, 4), \"float32\")");
}

TEST(BlockBuilderTest, UndefinedVarUseIsAnError) {
  Expr x = MakeVar("x", F32({4}));
  Expr y = MakeVar("y", F32({4}));
  IRModule mod;
  mod.functions["main"] = MakeFunction({x}, MakeSeqExpr({}, Id(y)), StructInfo());
  absl::StatusOr<IRModule> out = NormalizeModule(mod);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("var y is used before its definition"));
}

TEST(BlockBuilderTest, AddKernelRenamesOnCollision) {
  IRModule mod;
  BlockBuilder bb(&mod);
  Buffer a = MakeBuffer("A", DataType::Float(32), {4});
  Var i("i");
  KernelFunc k = MakeKernelFunc("add", {KernelParam::Tensor(a)}, Store(a, {0}, Load(a, {0})));
  EXPECT_EQ(bb.AddKernel(k), "add");
  EXPECT_EQ(bb.AddKernel(k), "add_1");
  EXPECT_EQ(mod.kernels.at("add_1")->name, "add_1");
}

TEST(BuiltinOpsTest, ShapeOfAndCallPurePacked) {
  Var n("n");
  Expr x = MakeVar("x", F32({n, 3}));
  absl::StatusOr<StructInfo> s = InferStructInfo(MakeCall(GetOp("relax.shape_of"), {x}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Shape([n, 3])");
  absl::StatusOr<StructInfo> p = InferStructInfo(
      MakeCall(GetOp("relax.call_pure_packed"), {MakeExternFunc("my_func"), x}, {}, {F32({2})}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(ToString(*p), "R.Tensor((2,), \"float32\")");
  absl::StatusOr<StructInfo> bad =
      InferStructInfo(MakeCall(GetOp("relax.call_pure_packed"), {MakeExternFunc("f"), x}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("relax.call_pure_packed: expects exactly one"));
}

TEST(BuiltinOpsTest, CallTirAndMemoryOps) {
  Expr x = MakeVar("x", F32({4}));
  absl::StatusOr<StructInfo> t = InferStructInfo(
      MakeCall(GetOp("relax.call_tir"), {MakeGlobalVar("k"), MakeTuple({x})}, {}, {F32({4})}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(ToString(*t), "R.Tensor((4,), \"float32\")");
  absl::StatusOr<StructInfo> bad =
      InferStructInfo(MakeCall(GetOp("relax.call_tir"), {MakeGlobalVar("k"), x}, {}, {F32({4})}));
  EXPECT_THAT(bad.status().message(), HasSubstr("argument 1 must be a tuple"));
  Expr storage = MakeVar("st", ObjectSInfo());
  absl::StatusOr<StructInfo> a = InferStructInfo(MakeCall(
      GetOp("relax.memory.alloc_tensor"),
      {storage, MakePrimValue(0), MakeShapeExpr({2, 3}), MakeDataTypeImm(DataType::Float(16))}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(ToString(*a), "R.Tensor((2, 3), \"float16\")");
  absl::StatusOr<StructInfo> kill =
      InferStructInfo(MakeCall(GetOp("relax.memory.kill_tensor"), {x}));
  ASSERT_TRUE(kill.ok());
  EXPECT_EQ(ToString(*kill), "R.Tuple()");
}

TEST(StructInfoUtilTest, IsBaseOfAndLca) {
  Var n("n");
  EXPECT_TRUE(IsBaseOf(ObjectSInfo(), F32({2})));
  EXPECT_TRUE(IsBaseOf(TensorSInfoOfRank(2, DataType::Float(32)), F32({n, 4})));
  EXPECT_TRUE(IsBaseOf(F32({n * 4}), F32({PrimExpr(4) * n})));
  EXPECT_FALSE(IsBaseOf(F32({n, 4}), TensorSInfoOfRank(2, DataType::Float(32))));
  EXPECT_FALSE(IsBaseOf(F32({2}), TensorSInfo({2}, DataType::Int(32))));
  EXPECT_EQ(ToString(StructInfoLCA(F32({2}), F32({3}))), "R.Tensor(\"float32\", ndim=1)");
  EXPECT_EQ(ToString(EraseToRank(TupleSInfo({F32({n})}))),
            "R.Tuple(R.Tensor(\"float32\", ndim=1))");
}

TEST(StructInfoUtilTest, MatchBindsVarsAndRejectsConstants) {
  Var n("n");
  VarMap b;
  EXPECT_TRUE(MatchStructInfo(F32({n, n}), F32({3, 3}), &b));
  EXPECT_EQ(*b[n.get()].as_int(), 3);
  VarMap b2;
  EXPECT_FALSE(MatchStructInfo(F32({n, n}), F32({3, 4}), &b2));
  VarMap b3;
  EXPECT_EQ(ToString(SubstituteStructInfo(F32({n * 2}), VarMap{{n.get(), PrimExpr(5)}})),
            "R.Tensor((10,), \"float32\")");
}

class CountCalls : public ExprVisitor {
 public:
  void VisitCall(const Expr& e) override {
    ++calls;
    ExprVisitor::VisitCall(e);
  }
  int calls = 0;
};

// Replaces test.bb_identity(x) by x.
class DropIdentity : public ExprMutator {
 public:
  Expr VisitCall(const Expr& e) override {
    Expr r = ExprMutator::VisitCall(e);
    const auto* c = r.as<CallNode>();
    const auto* op = c->op.as<OpNode>();
    if (op && op->name == "test.bb_identity") return c->args[0];
    return r;
  }
};

TEST(VisitorTest, VisitsAndMutatesKeepingUntouchedNodes) {
  Expr x = MakeVar("x", F32({4}));
  Expr e = MakeTuple({Id(Id(x)), x});
  CountCalls counter;
  counter.VisitExpr(e);
  EXPECT_EQ(counter.calls, 2);
  DropIdentity drop;
  Expr out = drop.VisitExpr(e);
  const auto* t = out.as<TupleNode>();
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->fields[0].same_as(x));
  Expr untouched = MakeTuple({x});
  EXPECT_TRUE(drop.VisitExpr(untouched).same_as(untouched));
}

TEST(VisitorTest, MutatorKeepsSpanAndStructInfo) {
  Expr x = MakeVar("x", F32({4}));
  Expr y = MakeVar("y", F32({4}));
  Expr item = WithSpan(MakeTupleGetItem(MakeTuple({x}), 0), Span{"a.rx", 2, 3});
  item->set_struct_info(F32({4}));
  class Swap : public ExprMutator {
   public:
    Swap(Expr from, Expr to) { var_remap_[from.get()] = to; }
  } swap(x, y);
  Expr out = swap.VisitExpr(item);
  ASSERT_FALSE(out.same_as(item));
  EXPECT_EQ(out->span.line, 2);
  EXPECT_EQ(ToString(out.struct_info()), "R.Tensor((4,), \"float32\")");
  EXPECT_TRUE(out.as<TupleGetItemNode>()->tuple.as<TupleNode>()->fields[0].same_as(y));
}

// TVM's PyExprMutator helpers: visit_expr_post_order rewrites the children
// and normalizes (the struct info of a rebuilt call is inferred, not
// copied), with_struct_info renames a var with a new struct info, and the
// builder normalizes what the pass builds.
TEST(VisitorTest, PostOrderNormalizesWithStructInfoAndBuilder) {
  Expr x = MakeVar("x", F32({4}));
  Expr wide = MakeVar("wide", F32({2, 4}));
  class Widen : public ExprMutator {
   public:
    Widen(Expr from, Expr to) { var_remap_[from.get()] = to; }
  } widen(x, wide);
  // relax.add(x, x) over (4,) becomes add(wide, wide) over (2, 4).
  Expr add = MakeCall(GetOp("relax.add"), {x, x});
  add->set_struct_info(F32({4}));
  absl::StatusOr<Expr> post = widen.VisitExprPostOrder(add);
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(ToString(post->struct_info()), "R.Tensor((2, 4), \"float32\")");
  EXPECT_TRUE(post->as<CallNode>()->args[0].same_as(wide));

  Expr narrowed = widen.WithStructInfo(x, F32({4}));
  EXPECT_TRUE(narrowed.same_as(x));  // already that struct info
  Expr y = widen.WithStructInfo(x, F32({8}));
  EXPECT_FALSE(y.same_as(x));
  EXPECT_EQ(y.as<VarNode>()->name_hint, "x");
  EXPECT_EQ(ToString(y.struct_info()), "R.Tensor((8,), \"float32\")");
  EXPECT_TRUE(widen.VisitExpr(x).same_as(y));  // its uses now read the new var

  absl::StatusOr<Expr> built = widen.builder()->Normalize(MakeCall(GetOp("relax.add"), {y, y}));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(ToString(built->struct_info()), "R.Tensor((8,), \"float32\")");
  // A call that does not normalize is an error, not a crash.
  EXPECT_FALSE(widen.VisitExprPostOrder(MakeCall(GetOp("relax.add"), {y, wide})).ok());
}

}  // namespace
}  // namespace tether::compiler
