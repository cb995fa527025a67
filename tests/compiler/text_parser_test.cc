// The text-format parser: the IR each construct builds, with spans and
// shared symbolic variables.
#include "absl/status/status.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

const FunctionNode& Func(const IRModule& m, const std::string& name) {
  Expr f = m.Lookup(name);
  EXPECT_TRUE(f.defined()) << name;
  return *f.as<FunctionNode>();
}

const SeqExprNode& Body(const FunctionNode& f) { return *f.body.as<SeqExprNode>(); }

constexpr absl::string_view kMlp = R"(
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 784), "float32"), w: R.Tensor((784, 128), "float32")) -> R.Tensor(("n", 128), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1: R.Tensor((n, 128), "float32") = R.nn.relu(lv0)
            gv = R.add(lv1, R.const(1.0, "float32"))
            R.output(gv)
        return gv
)";

TEST(TextParserTest, BuildsDataflowBlockWithOutputVar) {
  absl::StatusOr<IRModule> m = ParseModule(kMlp, "mlp.rx");
  ASSERT_TRUE(m.ok()) << m.status();
  const FunctionNode& f = Func(*m, "main");
  ASSERT_EQ(f.params.size(), 2u);
  const SeqExprNode& body = Body(f);
  ASSERT_EQ(body.blocks.size(), 1u);
  const BindingBlock& block = body.blocks[0];
  EXPECT_TRUE(block.is_dataflow);
  ASSERT_EQ(block.bindings.size(), 3u);
  EXPECT_EQ(block.bindings[0].var.kind(), ExprKind::kDataflowVar);
  EXPECT_EQ(block.bindings[1].var.kind(), ExprKind::kDataflowVar);
  EXPECT_EQ(block.bindings[2].var.kind(), ExprKind::kVar);
  EXPECT_TRUE(body.body.same_as(block.bindings[2].var));

  const CallNode* matmul = block.bindings[0].value.as<CallNode>();
  ASSERT_NE(matmul, nullptr);
  EXPECT_EQ(matmul->op.as<OpNode>()->name, "relax.matmul");
  EXPECT_TRUE(matmul->args[0].same_as(f.params[0]));
  EXPECT_EQ(matmul->span.ToString(), "mlp.rx:8:19");
  EXPECT_EQ(block.bindings[1].value.as<CallNode>()->op.as<OpNode>()->name, "relax.nn.relu");
  // The annotation becomes the var's struct info.
  EXPECT_EQ(ToString(block.bindings[1].var.struct_info()), "R.Tensor((n, 128), \"float32\")");
  const CallNode* add = block.bindings[2].value.as<CallNode>();
  ASSERT_EQ(add->args.size(), 2u);
  const ConstantNode* c = add->args[1].as<ConstantNode>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(*static_cast<const float*>(c->data->element_data()), 1.0f);
}

TEST(TextParserTest, SharesOneSymbolicVarPerFunction) {
  absl::StatusOr<IRModule> m = ParseModule(kMlp);
  ASSERT_TRUE(m.ok()) << m.status();
  const FunctionNode& f = Func(*m, "main");
  const auto* x = f.params[0].struct_info().as<TensorStructInfoNode>();
  const auto* ret = f.ret_struct_info.as<TensorStructInfoNode>();
  const auto* lv1 = Body(f).blocks[0].bindings[1].var.struct_info().as<TensorStructInfoNode>();
  ASSERT_TRUE(x && ret && lv1);
  ASSERT_NE((*x->shape)[0].as<PrimVarNode>(), nullptr);
  EXPECT_TRUE((*x->shape)[0].same_as((*ret->shape)[0]));
  EXPECT_TRUE((*x->shape)[0].same_as((*lv1->shape)[0]));
}

TEST(TextParserTest, ParsesSymbolicArithmeticAndStructInfoForms) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main(a: R.Tensor(("n", "n * 2 + 1"), dtype="float16"), b: R.Tensor(ndim=2, dtype="float32"),
         c: R.Tensor, d: R.Tuple(R.Shape([4, 5]), R.Shape(ndim=2)), e: R.Prim("int64"),
         f: R.Object, g: R.Callable, h: R.Tensor(("n // 2", "n % 3"), "int8")):
    return a
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const FunctionNode& f = Func(*m, "main");
  std::vector<std::string> printed;
  for (const Expr& p : f.params) printed.push_back(ToString(p.struct_info()));
  EXPECT_THAT(printed, ::testing::ElementsAre(
                           "R.Tensor((n, n * 2 + 1), \"float16\")", "R.Tensor(\"float32\", ndim=2)",
                           "R.Tensor()", "R.Tuple(R.Shape([4, 5]), R.Shape(ndim=2))",
                           "R.Prim(\"int64\")", "R.Object", "R.Callable()",
                           "R.Tensor((floordiv(n, 2), floormod(n, 3)), \"int8\")"));
  // Normalization infers the missing return annotation from the body.
  EXPECT_EQ(ToString(f.ret_struct_info), printed[0]);
}

TEST(TextParserTest, BareFunctionFileIsAModuleOfOneFunction) {
  absl::StatusOr<IRModule> m =
      ParseModule("@R.function\ndef f(x: R.Tensor((2,), \"float32\")):\n    return x\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->functions.size(), 1u);
  EXPECT_TRUE(m->Lookup("f").defined());
}

TEST(TextParserTest, CrossCallsBecomeGlobalVarCalls) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.nn.relu(x)
        return y

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = cls.helper(x)
        z = Module.helper(y)
        return z
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const SeqExprNode& body = Body(Func(*m, "main"));
  const CallNode* c0 = body.blocks[0].bindings[0].value.as<CallNode>();
  const CallNode* c1 = body.blocks[0].bindings[1].value.as<CallNode>();
  ASSERT_TRUE(c0 && c1);
  ASSERT_NE(c0->op.as<GlobalVarNode>(), nullptr);
  EXPECT_EQ(c0->op.as<GlobalVarNode>()->name_hint, "helper");
  EXPECT_TRUE(c0->op.same_as(c1->op));
  EXPECT_FALSE(body.blocks[0].is_dataflow);
}

TEST(TextParserTest, LiteralArgumentsBecomePrimValuesShapesAndAttrs) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main(x: R.Tensor(("n", 1024), "float32"), gamma: R.Tensor((1024,), "float32")):
    n = T.int64()
    a = R.reshape(x, (n, 1024))
    b = R.sum(a, axis=[1], keepdims=True)
    c = R.nn.layer_norm(a, gamma, gamma, axes=[-1], epsilon=1e-5, name="ln", dtype=R.dtype("float16"), center=None)
    d = R.clip(a, 0, 6.5)
    e = R.shape([n, 4])
    f = R.prim_value(3)
    g = R.str("hi")
    h = R.dtype("float32")
    i = R.shape_of(x)
    j = (a, b)
    k = j[1]
    return k
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& bs = Body(Func(*m, "main")).blocks[0].bindings;
  ASSERT_EQ(bs.size(), 11u);
  const CallNode* reshape = bs[0].value.as<CallNode>();
  const ShapeExprNode* shape = reshape->args[1].as<ShapeExprNode>();
  ASSERT_NE(shape, nullptr);
  EXPECT_EQ(shape->values.size(), 2u);
  EXPECT_EQ(*shape->values[1].as_int(), 1024);
  const CallNode* sum = bs[1].value.as<CallNode>();
  EXPECT_EQ(GetIntsAttr(sum->attrs, "axis"), std::vector<int64_t>{1});
  EXPECT_TRUE(GetBoolAttr(sum->attrs, "keepdims", false));
  const CallNode* ln = bs[2].value.as<CallNode>();
  EXPECT_EQ(GetIntsAttr(ln->attrs, "axes"), std::vector<int64_t>{-1});
  EXPECT_DOUBLE_EQ(GetFloatAttr(ln->attrs, "epsilon", 0), 1e-5);
  EXPECT_EQ(GetStringAttr(ln->attrs, "name", ""), "ln");
  EXPECT_EQ(GetDTypeAttr(ln->attrs, "dtype"), DataType::Float(16));
  EXPECT_EQ(ln->attrs.count("center"), 0u);  // None leaves the attribute out
  const CallNode* clip = bs[3].value.as<CallNode>();
  ASSERT_NE(clip->args[1].as<PrimValueNode>(), nullptr);
  EXPECT_EQ(*clip->args[1].as<PrimValueNode>()->value.as_int(), 0);
  EXPECT_EQ(clip->args[2].as<PrimValueNode>()->value.dtype(), DataType::Float(32));
  EXPECT_NE(bs[4].value.as<ShapeExprNode>(), nullptr);
  EXPECT_NE(bs[5].value.as<PrimValueNode>(), nullptr);
  EXPECT_EQ(bs[6].value.as<StringImmNode>()->value, "hi");
  EXPECT_EQ(bs[7].value.as<DataTypeImmNode>()->value, DataType::Float(32));
  EXPECT_EQ(bs[8].value.as<CallNode>()->op.as<OpNode>()->name, "relax.shape_of");
  EXPECT_EQ(bs[9].value.as<TupleNode>()->fields.size(), 2u);
  EXPECT_EQ(bs[10].value.as<TupleGetItemNode>()->index, 1);
}

TEST(TextParserTest, ParsesMatchCastAndDeclaresItsNewVars) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main(x: R.Tensor(ndim=2, dtype="float32")):
    lv = R.match_cast(x, R.Tensor((m, 4), "float32"))
    lv2: R.Tensor((m, 4), "float32") = R.nn.relu(lv)
    return lv2
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& bs = Body(Func(*m, "main")).blocks[0].bindings;
  ASSERT_TRUE(bs[0].is_match_cast());
  const auto* target = bs[0].match_cast.as<TensorStructInfoNode>();
  const auto* ann = bs[1].var.struct_info().as<TensorStructInfoNode>();
  EXPECT_TRUE((*target->shape)[0].same_as((*ann->shape)[0]));
}

TEST(TextParserTest, ParsesIfWithBothBranchesBindingOneName) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main(c: R.Prim("bool"), x: R.Tensor((2,), "float32")):
    if c:
        a = R.nn.relu(x)
        y = R.add(a, x)
    else:
        y = R.multiply(x, x)
    return y
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const SeqExprNode& body = Body(Func(*m, "main"));
  ASSERT_EQ(body.blocks[0].bindings.size(), 1u);
  const IfNode* node = body.blocks[0].bindings[0].value.as<IfNode>();
  ASSERT_NE(node, nullptr);
  const SeqExprNode* t = node->true_branch.as<SeqExprNode>();
  const SeqExprNode* f = node->false_branch.as<SeqExprNode>();
  ASSERT_TRUE(t && f);
  EXPECT_EQ(t->blocks[0].bindings.size(), 2u);
  EXPECT_TRUE(t->body.same_as(t->blocks[0].bindings[1].var));
  EXPECT_TRUE(body.body.same_as(body.blocks[0].bindings[0].var));
}

TEST(TextParserTest, ParsesPackedCallsWithStructInfoArguments) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function(pure=False)
def main(x: R.Tensor((2, 3), "float32")):
    a = R.call_dps_packed("my_add", (x, x), out_sinfo=R.Tensor((2, 3), "float32"))
    b = R.call_pure_packed("my_relu", a, sinfo_args=R.Tensor((2, 3), "float32"))
    c = R.call_dps_packed("two", (b,), out_sinfo=[R.Tensor((2,), "float32")])
    return c
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const FunctionNode& f = Func(*m, "main");
  EXPECT_FALSE(f.is_pure);
  const auto& bs = Body(f).blocks[0].bindings;
  const CallNode* dps = bs[0].value.as<CallNode>();
  EXPECT_EQ(dps->op.as<OpNode>()->name, "relax.call_dps_packed");
  EXPECT_EQ(dps->args[0].as<ExternFuncNode>()->global_symbol, "my_add");
  EXPECT_EQ(dps->args[1].as<TupleNode>()->fields.size(), 2u);
  ASSERT_EQ(dps->sinfo_args.size(), 1u);
  const CallNode* pure = bs[1].value.as<CallNode>();
  EXPECT_EQ(pure->args.size(), 2u);
  EXPECT_EQ(pure->args[0].as<ExternFuncNode>()->global_symbol, "my_relu");
  EXPECT_EQ(ToString(bs[2].value.as<CallNode>()->sinfo_args[0]), "R.Tensor((2,), \"float32\")");
}

TEST(TextParserTest, ParsesNestedListConstants) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main():
    a = R.const([[1, 2, 3], [4, 5, 6]], "int32")
    b = R.const([0.5, -1.5])
    c = R.const(True)
    d = R.const(-7)
    e = R.const([1, 3000000000])
    return (a, b, c, d, e)
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& bs = Body(Func(*m, "main")).blocks[0].bindings;
  const Tensor& a = bs[0].value.as<ConstantNode>()->data;
  EXPECT_EQ(std::vector<int64_t>(a->shape().begin(), a->shape().end()),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->dtype(), DataType::Int(32));
  EXPECT_EQ(static_cast<const int32_t*>(a->element_data())[5], 6);
  const Tensor& b = bs[1].value.as<ConstantNode>()->data;
  EXPECT_EQ(b->dtype(), DataType::Float(32));
  EXPECT_EQ(static_cast<const float*>(b->element_data())[1], -1.5f);
  EXPECT_EQ(bs[2].value.as<ConstantNode>()->data->dtype(), DataType::Bool());
  const Tensor& d = bs[3].value.as<ConstantNode>()->data;
  EXPECT_EQ(d->ndim(), 0);
  // TVM's default for a Python int: int32 (relax.const).
  EXPECT_EQ(d->dtype(), DataType::Int(32));
  EXPECT_EQ(*static_cast<const int32_t*>(d->element_data()), -7);
  // One that int32 cannot hold stays int64 instead of wrapping.
  const Tensor& e = bs[4].value.as<ConstantNode>()->data;
  EXPECT_EQ(e->dtype(), DataType::Int(64));
  EXPECT_EQ(static_cast<const int64_t*>(e->element_data())[1], 3000000000);
}

TEST(TextParserTest, ReadsFilesAndReportsMissingOnes) {
  absl::StatusOr<IRModule> m = ParseModuleFile("/nonexistent/model.rx");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent/model.rx"));
}

}  // namespace
}  // namespace tether::compiler
