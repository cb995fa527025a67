// The elementwise operators: struct-info inference (broadcasting, dtypes,
// symbolic dims, errors) and their kernels against C++ references on random
// inputs of several shapes, broadcasting, size-1 and odd sizes included.
#include <cmath>
#include <map>

#include "compiler/tir/arith.h"
#include "tests/compiler/op_test_util.h"

namespace tether::compiler::optest {
namespace {

using Fn1 = std::function<double(double)>;
using Fn2 = std::function<double(double, double)>;

struct ShapePair {
  Shape a, b;
};
const std::vector<ShapePair>& BinaryShapes() {
  static const auto* shapes = new std::vector<ShapePair>{
      {{3, 5}, {3, 5}},                // same shape
      {{4, 1, 7}, {5, 1}},             // both sides stretch
      {{1}, {67, 13}},                 // size-1 against an odd 2-D shape
      {{}, {2, 3}},                    // rank 0
      {{2, 5000}, {5000}},             // small outer, chunked inner
      {{2, 70, 5, 7}, {70, 1, 1}},     // short rows as flat rows, per-channel operand
      {{2, 70, 5, 7}, {2, 70, 5, 1}},  // broadcast along the rows: row by row
  };
  return *shapes;
}

void CheckBinary(const std::string& op, DataType dtype, const Fn2& ref, bool bool_result = false,
                 double lo = -3, double hi = 3) {
  uint32_t seed = 1;
  for (const ShapePair& sp : BinaryShapes()) {
    SCOPED_TRACE(op + " " + dtype.ToString() + " shapes " + std::to_string(sp.a.size()) + "/" +
                 std::to_string(sp.b.size()));
    HostTensor a = Random(sp.a, dtype, seed++, lo, hi);
    HostTensor b = Random(sp.b, dtype, seed++, lo, hi);
    if (op == "relax.divide" || op == "relax.floor_divide") {
      for (double& v : b.data) {
        if (v == 0) v = 1;
      }
    }
    OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp(op, {a, b}));
    DataType out_dtype = bool_result ? kBool : dtype;
    HostTensor expected = BroadcastRef({a, b}, out_dtype, [&](const std::vector<double>& v) {
      return RoundTo(out_dtype, ref(v[0], v[1]));
    });
    ExpectClose(out[0], expected);
  }
}

void CheckUnary(const std::string& op, DataType dtype, const Fn1& ref, double lo = -3,
                double hi = 3) {
  uint32_t seed = 100;
  for (const Shape& shape : std::vector<Shape>{{}, {1}, {7, 33}, {3, 1, 130}, {70000}}) {
    SCOPED_TRACE(op + " " + dtype.ToString() + " rank " + std::to_string(shape.size()));
    HostTensor x = Random(shape, dtype, seed++, lo, hi);
    OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp(op, {x}));
    HostTensor expected = BroadcastRef(
        {x}, dtype, [&](const std::vector<double>& v) { return RoundTo(dtype, ref(v[0])); });
    ExpectClose(out[0], expected);
  }
}

TEST(ElementwiseOpTest, InfersBroadcastShape) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.add", {TensorVar("a", {4, 1, 7}, kF32), TensorVar("b", {5, 1}, kF32)});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({4, 5, 7}, kF32)));
}

TEST(ElementwiseOpTest, InfersSymbolicBroadcastShape) {
  Var n("n");
  absl::StatusOr<StructInfo> s =
      InferOp("relax.multiply", {TensorVar("a", {n, 1}, kF32), TensorVar("b", {1, 8}, kF32)});
  ASSERT_TRUE(s.ok()) << s.status();
  const auto* t = s->as<TensorStructInfoNode>();
  ASSERT_TRUE(t->shape.has_value());
  EXPECT_TRUE(ProveEqual((*t->shape)[0], n));
  EXPECT_EQ(AsConstInt((*t->shape)[1]), 8);
}

TEST(ElementwiseOpTest, UnprovableSymbolicDimsKeepOnlyTheRank) {
  Var n("n"), m("m");
  absl::StatusOr<StructInfo> s =
      InferOp("relax.add", {TensorVar("a", {n}, kF32), TensorVar("b", {m}, kF32)});
  ASSERT_TRUE(s.ok()) << s.status();
  const auto* t = s->as<TensorStructInfoNode>();
  EXPECT_FALSE(t->shape.has_value());
  EXPECT_EQ(t->ndim, 1);
}

TEST(ElementwiseOpTest, ComparisonsInferBool) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.less", {TensorVar("a", {3}, kI32), TensorVar("b", {3}, kI32)});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s->as<TensorStructInfoNode>()->dtype, kBool);
}

TEST(ElementwiseOpTest, RejectsBroadcastMismatch) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.add", {TensorVar("a", {2, 3}, kF32), TensorVar("b", {4}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.add"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("cannot broadcast"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("(2, 3)"), std::string::npos) << s.status();
}

TEST(ElementwiseOpTest, RejectsDTypeMismatch) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.subtract", {TensorVar("a", {3}, kF32), TensorVar("b", {3}, kI32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.subtract"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("int32"), std::string::npos) << s.status();
}

TEST(ElementwiseOpTest, RejectsFloatMathOnInts) {
  absl::StatusOr<StructInfo> s = InferOp("relax.exp", {TensorVar("a", {3}, kI32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.exp"), std::string::npos) << s.status();
}

TEST(ElementwiseOpTest, RejectsNonBoolCondition) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.where",
              {TensorVar("c", {3}, kF32), TensorVar("a", {3}, kF32), TensorVar("b", {3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.where"), std::string::npos) << s.status();
}

TEST(ElementwiseOpTest, RejectsWrongArgumentCount) {
  absl::StatusOr<StructInfo> s = InferOp("relax.add", {TensorVar("a", {3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("expected 2 arguments"), std::string::npos) << s.status();
}

TEST(ElementwiseOpTest, ArithmeticFloat32MatchesReference) {
  CheckBinary("relax.add", kF32, [](double a, double b) { return a + b; });
  CheckBinary("relax.subtract", kF32, [](double a, double b) { return a - b; });
  CheckBinary("relax.multiply", kF32, [](double a, double b) { return a * b; });
  CheckBinary("relax.divide", kF32, [](double a, double b) { return a / b; });
  CheckBinary("relax.maximum", kF32, [](double a, double b) { return std::max(a, b); });
  CheckBinary("relax.minimum", kF32, [](double a, double b) { return std::min(a, b); });
  CheckBinary("relax.floor_divide", kF32, [](double a, double b) { return std::floor(a / b); });
  CheckBinary(
      "relax.power", kF32, [](double a, double b) { return std::pow(a, b); }, false, 0.1, 3);
}

TEST(ElementwiseOpTest, ArithmeticIntMatchesReference) {
  for (DataType t : {kI32, kI64}) {
    CheckBinary(
        "relax.add", t, [](double a, double b) { return a + b; }, false, -100, 100);
    CheckBinary(
        "relax.subtract", t, [](double a, double b) { return a - b; }, false, -100, 100);
    CheckBinary(
        "relax.multiply", t, [](double a, double b) { return a * b; }, false, -100, 100);
    CheckBinary(
        "relax.maximum", t, [](double a, double b) { return std::max(a, b); }, false);
    CheckBinary(
        "relax.minimum", t, [](double a, double b) { return std::min(a, b); }, false);
    CheckBinary(
        "relax.floor_divide", t, [](double a, double b) { return std::floor(a / b); }, false, -20,
        20);
  }
}

TEST(ElementwiseOpTest, Float16AddAndMultiplyMatchReference) {
  CheckBinary("relax.add", kF16, [](double a, double b) { return a + b; });
  CheckBinary("relax.multiply", kF16, [](double a, double b) { return a * b; });
}

TEST(ElementwiseOpTest, ComparisonsMatchReference) {
  for (DataType t : {kF32, kI32}) {
    CheckBinary(
        "relax.equal", t, [](double a, double b) { return a == b; }, true, -2, 2);
    CheckBinary(
        "relax.not_equal", t, [](double a, double b) { return a != b; }, true, -2, 2);
    CheckBinary(
        "relax.less", t, [](double a, double b) { return a < b; }, true, -2, 2);
    CheckBinary(
        "relax.less_equal", t, [](double a, double b) { return a <= b; }, true, -2, 2);
    CheckBinary(
        "relax.greater", t, [](double a, double b) { return a > b; }, true, -2, 2);
    CheckBinary(
        "relax.greater_equal", t, [](double a, double b) { return a >= b; }, true, -2, 2);
  }
}

TEST(ElementwiseOpTest, LogicalOpsMatchReference) {
  CheckBinary(
      "relax.logical_and", kBool, [](double a, double b) { return a && b; }, true);
  CheckBinary(
      "relax.logical_or", kBool, [](double a, double b) { return a || b; }, true);
  CheckUnary("relax.logical_not", kBool, [](double a) { return !a; });
}

TEST(ElementwiseOpTest, UnaryMathMatchesReference) {
  CheckUnary("relax.negative", kF32, [](double x) { return -x; });
  CheckUnary("relax.abs", kF32, [](double x) { return std::fabs(x); });
  CheckUnary("relax.exp", kF32, [](double x) { return std::exp(x); });
  CheckUnary(
      "relax.log", kF32, [](double x) { return std::log(x); }, 0.01, 10);
  CheckUnary(
      "relax.sqrt", kF32, [](double x) { return std::sqrt(x); }, 0, 10);
  CheckUnary(
      "relax.rsqrt", kF32, [](double x) { return 1 / std::sqrt(x); }, 0.05, 10);
  CheckUnary("relax.tanh", kF32, [](double x) { return std::tanh(x); });
  CheckUnary("relax.sigmoid", kF32, [](double x) { return 1 / (1 + std::exp(-x)); });
  CheckUnary("relax.erf", kF32, [](double x) { return std::erf(x); });
}

TEST(ElementwiseOpTest, InverseTrigMatchesReference) {
  for (DataType dtype : {kF32, DataType::Float(64)}) {
    CheckUnary(
        "relax.atan", dtype, [](double x) { return std::atan(x); }, -40, 40);
    CheckUnary(
        "relax.atan", dtype, [](double x) { return std::atan(x); }, -1.2, 1.2);
    CheckUnary(
        "relax.asin", dtype, [](double x) { return std::asin(x); }, -1, 1);
    CheckUnary(
        "relax.acos", dtype, [](double x) { return std::acos(x); }, -1, 1);
  }
}

TEST(ElementwiseOpTest, ActivationsMatchReference) {
  CheckUnary("relax.nn.relu", kF32, [](double x) { return std::max(x, 0.0); });
  CheckUnary("relax.nn.gelu", kF32,
             [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  CheckUnary("relax.nn.gelu_tanh", kF32, [](double x) {
    return 0.5 * x * (1 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  });
  CheckUnary("relax.nn.silu", kF32, [](double x) { return x / (1 + std::exp(-x)); });
}

TEST(ElementwiseOpTest, IntUnaryMatchesReference) {
  CheckUnary(
      "relax.negative", kI32, [](double x) { return -x; }, -50, 50);
  CheckUnary(
      "relax.abs", kI64, [](double x) { return std::fabs(x); }, -50, 50);
  CheckUnary(
      "relax.nn.relu", kI32, [](double x) { return std::max(x, 0.0); }, -50, 50);
}

TEST(ElementwiseOpTest, Float16MathMatchesReference) {
  CheckUnary("relax.exp", kF16, [](double x) { return std::exp(x); });
  CheckUnary("relax.nn.gelu", kF16,
             [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
}

TEST(ElementwiseOpTest, ClipMatchesReference) {
  for (const Shape& shape : std::vector<Shape>{{}, {9}, {5, 17}}) {
    HostTensor x = Random(shape, kF32, 7, -3, 3);
    OP_TEST_ASSERT_OK_AND_ASSIGN(
        out, RunOp("relax.clip", {x}, {},
                   {MakePrimValue(FloatImm(kF32, -1.0)), MakePrimValue(FloatImm(kF32, 1.5))}));
    ExpectClose(out[0], BroadcastRef({x}, kF32, [](const std::vector<double>& v) {
                  return std::min(std::max(v[0], -1.0), 1.5);
                }));
  }
}

TEST(ElementwiseOpTest, WhereMatchesReference) {
  struct Case {
    Shape c, a, b;
  };
  for (const Case& cs :
       std::vector<Case>{{{4, 5}, {4, 5}, {4, 5}}, {{3, 1}, {1, 6}, {}}, {{1}, {2, 3, 7}, {7}}}) {
    HostTensor c = Random(cs.c, kBool, 11);
    HostTensor a = Random(cs.a, kF32, 12);
    HostTensor b = Random(cs.b, kF32, 13);
    OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp("relax.where", {c, a, b}));
    ExpectClose(out[0], BroadcastRef({c, a, b}, kF32, [](const std::vector<double>& v) {
                  return v[0] != 0 ? v[1] : v[2];
                }));
  }
}

TEST(ElementwiseOpTest, AstypeMatchesReference) {
  struct Case {
    DataType from, to;
  };
  for (const Case& cs : std::vector<Case>{{kF32, kI32},
                                          {kI32, kF32},
                                          {kF32, kF16},
                                          {kF16, kF32},
                                          {kI64, kI32},
                                          {kF32, kBool},
                                          {kBool, kF32}}) {
    SCOPED_TRACE(cs.from.ToString() + " -> " + cs.to.ToString());
    for (const Shape& shape : std::vector<Shape>{{}, {3, 1}, {129}}) {
      HostTensor x = Random(shape, cs.from, 21, -100, 100);
      OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp("relax.astype", {x}, {{"dtype", cs.to}}));
      DataType to = cs.to;
      ExpectClose(out[0], BroadcastRef({x}, to, [to](const std::vector<double>& v) {
                    return RoundTo(to, v[0]);
                  }));
    }
  }
}

TEST(ElementwiseOpTest, FillLikeMatchesReference) {
  HostTensor x = Random({3, 4}, kF32, 31);
  OP_TEST_ASSERT_OK_AND_ASSIGN(zeros, RunOp("relax.zeros_like", {x}));
  ExpectClose(zeros[0], Filled({3, 4}, kF32, 0));
  OP_TEST_ASSERT_OK_AND_ASSIGN(ones, RunOp("relax.ones_like", {x}, {{"dtype", kI32}}));
  ExpectClose(ones[0], Filled({3, 4}, kI32, 1));
}

TEST(ElementwiseOpTest, SymbolicKernelRunsAtTwoSizes) {
  Var n("n");
  absl::StatusOr<Expr> call =
      MakeOpCall("relax.add", {TensorVar("a", {n, 4}, kF32), TensorVar("b", {4}, kF32)});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "add_n");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, CompiledKernel::Create(*kernel));
  for (int64_t rows : {3, 1000}) {
    HostTensor a = Random({rows, 4}, kF32, static_cast<uint32_t>(rows));
    HostTensor b = Random({4}, kF32, 5);
    absl::StatusOr<std::vector<HostTensor>> out = compiled.Run({a, b}, {{rows, 4}});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectClose((*out)[0], BroadcastRef({a, b}, kF32, [](const std::vector<double>& v) {
                  return RoundTo(kF32, v[0] + v[1]);
                }));
  }
}

}  // namespace
}  // namespace tether::compiler::optest
