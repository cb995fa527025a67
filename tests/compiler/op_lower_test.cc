// LowerCallToKernel and the loop nests it builds: parameters, parallel and
// vectorized loops for each kind of shape, and the errors for calls that
// cannot be lowered.
#include "tests/compiler/op_test_util.h"

namespace tether::compiler::optest {
namespace {

std::string NestFor(std::vector<PrimExpr> shape) {
  Buffer out = MakeBuffer("out", kF32, std::move(shape));
  return ToString(MakeElementwiseLoopNest(
      out, [](const std::vector<PrimExpr>&) { return FloatImm(kF32, 1.0); }));
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(ElementwiseLoopNestTest, RankZeroIsOneStore) {
  std::string s = NestFor({});
  EXPECT_EQ(Count(s, "for "), 0u) << s;
  EXPECT_NE(s.find("out[] = "), std::string::npos) << s;
}

TEST(ElementwiseLoopNestTest, LargeOuterDimIsParallelInnerVectorized) {
  std::string s = NestFor({256, 3, 32});
  EXPECT_EQ(Count(s, "T.parallel(256)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.serial(3)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(32)"), 1u) << s;
}

// Short rows that are not whole vectors (3 rows of 17) are walked as one
// flat row of 51 elements inside the parallel loop: 3 vectors of 16 and
// one of 3, not 3 vectors of 17.
TEST(ElementwiseLoopNestTest, ShortRowsAreOneFlatRowOfWholeVectors) {
  std::string s = NestFor({256, 3, 17});
  EXPECT_EQ(Count(s, "T.parallel(256)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(16)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(3)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(17)"), 0u) << s;
}

// An operand broadcast along the innermost dimension would be a gather
// along the flat row: the rows stay.
TEST(ElementwiseLoopNestTest, OperandBroadcastAlongRowsKeepsTheRows) {
  Buffer out = MakeBuffer("out", kF32, {256, 3, 17});
  Buffer b = MakeBuffer("b", kF32, {256, 3, 1});
  std::string s = ToString(MakeElementwiseLoopNest(out, [&](const std::vector<PrimExpr>& i) {
    return Load(b, {i[0], i[1], PrimExpr(0)});
  }));
  EXPECT_EQ(Count(s, "T.vectorized(17)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(16)"), 0u) << s;
}

TEST(ElementwiseLoopNestTest, SmallOuterDimsAreFused) {
  std::string s = NestFor({4, 8, 5, 33});
  // 4 * 8 is below the threshold, 4 * 8 * 5 is not.
  EXPECT_EQ(Count(s, "T.parallel(160)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.parallel"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(33)"), 1u) << s;
}

TEST(ElementwiseLoopNestTest, SmallOuterWithLongRowIsChunked) {
  std::string s = NestFor({2, 100000});
  EXPECT_EQ(Count(s, "T.parallel"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized"), 1u) << s;
  EXPECT_EQ(s.find("T.parallel(2)"), std::string::npos) << s;
}

TEST(ElementwiseLoopNestTest, SmallOneDimIsOnlyVectorized) {
  std::string s = NestFor({10});
  EXPECT_EQ(Count(s, "T.parallel"), 0u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(10)"), 1u) << s;
}

TEST(ElementwiseLoopNestTest, SymbolicOuterDimIsParallel) {
  Var n("n");
  std::string s = NestFor({n, 4});
  EXPECT_EQ(Count(s, "T.parallel(n)"), 1u) << s;
  EXPECT_EQ(Count(s, "T.vectorized(4)"), 1u) << s;
}

TEST(LowerCallToKernelTest, ParamsAreInputsThenOutput) {
  absl::StatusOr<Expr> call =
      MakeOpCall("relax.add", {TensorVar("a", {3, 4}, kF32), TensorVar("b", {4}, kF32)});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> k = LowerCallToKernel(*call->as<CallNode>(), "add");
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ((*k)->params.size(), 3u);
  EXPECT_EQ((*k)->num_outputs, 1);
  EXPECT_EQ((*k)->params[1].buffer->shape.size(), 1u);
  EXPECT_EQ((*k)->params[2].buffer->shape.size(), 2u);
  EXPECT_EQ((*k)->name, "add");
  std::string text = ToString(*k);
  EXPECT_NE(text.find("A1[i1]"), std::string::npos) << text;
}

TEST(LowerCallToKernelTest, RejectsUnknownOperator) {
  Expr call = MakeCall(GetOp("relax.no_such_op"), {TensorVar("a", {3}, kF32)});
  call->set_struct_info(TensorSInfo({3}, kF32));
  absl::StatusOr<KernelFunc> k = LowerCallToKernel(*call.as<CallNode>(), "k");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(k.status().message().find("relax.no_such_op"), std::string::npos) << k.status();
}

TEST(LowerCallToKernelTest, RejectsUnknownShape) {
  Expr call = MakeCall(GetOp("relax.exp"), {MakeVar("a", TensorSInfoOfRank(2, kF32))});
  call->set_struct_info(TensorSInfoOfRank(2, kF32));
  absl::StatusOr<KernelFunc> k = LowerCallToKernel(*call.as<CallNode>(), "k");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(k.status().message().find("unknown"), std::string::npos) << k.status();
}

TEST(LowerCallToKernelTest, RejectsMissingStructInfo) {
  Expr call = MakeCall(GetOp("relax.exp"), {TensorVar("a", {3}, kF32)});
  absl::StatusOr<KernelFunc> k = LowerCallToKernel(*call.as<CallNode>(), "k");
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(k.status().message().find("no struct info"), std::string::npos) << k.status();
}

TEST(LowerCallToKernelTest, AVariableOnlyInsideExpressionsBecomesAScalarParameter) {
  Var n("n");
  // Every dim is 2 * n: no tensor parameter binds n itself, so the kernel
  // takes it by value, after the output (the caller passes it as tir_vars).
  Expr call = MakeCall(GetOp("relax.exp"), {TensorVar("a", {n * 2}, kF32)});
  call->set_struct_info(TensorSInfo({n * 2}, kF32));
  absl::StatusOr<KernelFunc> k = LowerCallToKernel(*call.as<CallNode>(), "k");
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ((*k)->params.size(), 3u);
  EXPECT_TRUE((*k)->params[0].is_tensor());
  EXPECT_TRUE((*k)->params[1].is_tensor());
  ASSERT_FALSE((*k)->params[2].is_tensor());
  EXPECT_TRUE((*k)->params[2].var.same_as(n));
}

TEST(LowerCallToKernelTest, AVariableThatIsADimensionNeedsNoScalar) {
  Var n("n");
  Expr call = MakeCall(GetOp("relax.exp"), {TensorVar("a", {n, 4}, kF32)});
  call->set_struct_info(TensorSInfo({n, 4}, kF32));
  absl::StatusOr<KernelFunc> k = LowerCallToKernel(*call.as<CallNode>(), "k");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ((*k)->params.size(), 2u);
}

}  // namespace
}  // namespace tether::compiler::optest
