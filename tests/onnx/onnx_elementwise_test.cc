// The elementwise converters (convert_elementwise.cc) through the whole
// stack: a one-node ONNX model imported, built and run on the local VM,
// compared with values computed here or taken from the ONNX spec's examples.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

TEST(OnnxElementwiseTest, AddBroadcastsInitializer) {
  auto out = RunNode("Add", {In("a", MakeTensor<float>({2, 2}, {1, 2, 3, 4})),
                             Init("b", MakeTensor<float>({2}, {10, 20}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {11, 22, 13, 24})));
}

TEST(OnnxElementwiseTest, ShrinkZeroesTheBandAndShiftsTheRest) {
  auto out = RunNode("Shrink", {In("x", MakeTensor<float>({5}, {-3, -1, 0, 1, 3}))},
                     {MakeFloatAttr("lambd", 1.5f), MakeFloatAttr("bias", 0.5f)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ReadTensor<float>((*out)[0]), (std::vector<float>{-2.5f, 0, 0, 0, 2.5f}));
}

// PRelu-6: a slope per channel (axis 1), where numpy rules would align the
// slope with the last dim.
TEST(OnnxElementwiseTest, PRelu6SlopeIsPerChannel) {
  std::vector<float> x = {-1, -2, 3, -4, -5, 6, -7, -8, 9, -10, -11, 12};  // (1, 3, 2, 2)
  auto out = RunNode("PRelu",
                     {In("x", MakeTensor<float>({1, 3, 2, 2}, x)),
                      Init("slope", MakeTensor<float>({3}, {0.5f, 2, 10}))},
                     {}, 1, /*opset=*/6);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> got = ReadTensor<float>((*out)[0]);
  const float slope[] = {0.5f, 2, 10};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(got[i], x[i] < 0 ? x[i] * slope[i / 4] : x[i]) << i;
}

TEST(OnnxElementwiseTest, MismatchedDTypesAreInvalid) {
  auto m = ImportNode(
      "Add", {In("a", MakeTensor<float>({2}, {1, 2})), In("b", MakeTensor<double>({2}, {1, 2}))});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("different dtypes float32 and float64"));
}

TEST(OnnxElementwiseTest, IntegerDivTruncatesTowardZero) {
  auto out = RunNode("Div", {In("a", MakeTensor<int32_t>({4}, {7, -7, 7, -7})),
                             In("b", MakeTensor<int32_t>({4}, {2, 2, -2, -2}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({4}, {3, -3, -3, 3})));
}

TEST(OnnxElementwiseTest, PowOfIntBaseAndFloatExponent) {
  auto f = RunNode("Pow", {In("a", MakeTensor<float>({3}, {2, -2, 4})),
                           In("b", MakeTensor<int64_t>({3}, {3, 2, 0}))});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], MakeTensor<float>({3}, {8, 4, 1})));
  auto i = RunNode("Pow", {In("a", MakeTensor<int32_t>({2}, {3, -2})),
                           In("b", MakeTensor<int32_t>({2}, {2, 3}))});
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(TensorsNear((*i)[0], MakeTensor<int32_t>({2}, {9, -8})));
}

TEST(OnnxElementwiseTest, ComparisonsAndLogic) {
  Tensor a = MakeTensor<int64_t>({3}, {1, 2, 3});
  Tensor b = MakeTensor<int64_t>({3}, {2, 2, 2});
  struct Case {
    const char* op;
    std::vector<bool> want;
  };
  for (const Case& c : std::vector<Case>{{"Equal", {false, true, false}},
                                         {"Less", {true, false, false}},
                                         {"Greater", {false, false, true}},
                                         {"LessOrEqual", {true, true, false}},
                                         {"GreaterOrEqual", {false, true, true}}}) {
    auto out = RunNode(c.op, {In("a", a), In("b", b)});
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeBoolTensor({3}, c.want))) << c.op;
  }
  Tensor p = MakeBoolTensor({4}, {false, false, true, true});
  Tensor q = MakeBoolTensor({4}, {false, true, false, true});
  for (const Case& c : std::vector<Case>{{"And", {false, false, false, true}},
                                         {"Or", {false, true, true, true}},
                                         {"Xor", {false, true, true, false}}}) {
    auto out = RunNode(c.op, {In("p", p), In("q", q)});
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeBoolTensor({4}, c.want))) << c.op;
  }
  auto n = RunNode("Not", {In("p", p)});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(TensorsNear((*n)[0], MakeBoolTensor({4}, {true, true, false, false})));
}

TEST(OnnxElementwiseTest, WhereBroadcasts) {
  auto out = RunNode("Where", {In("c", MakeBoolTensor({2, 1}, {true, false})),
                               In("x", MakeTensor<float>({2}, {1, 2})),
                               In("y", MakeTensor<float>({2}, {-1, -2}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {1, 2, -1, -2})));
}

// (op, attributes, x, expected) for one-input float activations, the
// expected values computed from the ONNX definitions.
struct UnaryCase {
  std::string op;
  std::vector<::onnx::AttributeProto> attrs;
  std::function<double(double)> ref;
};

class OnnxUnaryTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(OnnxUnaryTest, MatchesDefinitionInFloat32AndFloat64) {
  const UnaryCase& c = GetParam();
  const std::vector<double> xs = {-3.5, -1.0, -0.25, 0.0, 0.3, 0.5, 1.0, 2.5, 4.0};
  std::vector<double> want;
  for (double x : xs) want.push_back(c.ref(x));
  for (DataType dtype : {DataType::Float(32), DataType::Float(64)}) {
    auto out = RunNode(c.op, {In("x", MakeTensorOf(dtype, {9}, xs))}, c.attrs);
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensorOf(dtype, {9}, want), 1e-5, 1e-5))
        << c.op << " " << dtype.ToString();
  }
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

INSTANTIATE_TEST_SUITE_P(
    Activations, OnnxUnaryTest,
    ::testing::Values(
        UnaryCase{"Relu", {}, [](double x) { return std::max(x, 0.0); }},
        UnaryCase{"Sigmoid", {}, Sigmoid},
        UnaryCase{"Tanh", {}, [](double x) { return std::tanh(x); }},
        UnaryCase{"Erf", {}, [](double x) { return std::erf(x); }},
        UnaryCase{"Exp", {}, [](double x) { return std::exp(x); }},
        UnaryCase{"Abs", {}, [](double x) { return std::fabs(x); }},
        UnaryCase{"Neg", {}, [](double x) { return -x; }},
        UnaryCase{"Floor", {}, [](double x) { return std::floor(x); }},
        UnaryCase{"Ceil", {}, [](double x) { return std::ceil(x); }},
        UnaryCase{"Round", {}, [](double x) { return std::nearbyint(x); }},
        UnaryCase{"Sign", {}, [](double x) { return double((x > 0) - (x < 0)); }},
        UnaryCase{"Sin", {}, [](double x) { return std::sin(x); }},
        UnaryCase{"Cos", {}, [](double x) { return std::cos(x); }},
        UnaryCase{"Tan", {}, [](double x) { return std::tan(x); }},
        UnaryCase{"Sinh", {}, [](double x) { return std::sinh(x); }},
        UnaryCase{"Cosh", {}, [](double x) { return std::cosh(x); }},
        UnaryCase{"Asinh", {}, [](double x) { return std::asinh(x); }},
        UnaryCase{"Atan", {}, [](double x) { return std::atan(x); }},
        UnaryCase{"LeakyRelu",
                  {MakeFloatAttr("alpha", 0.1f)},
                  [](double x) { return x < 0 ? double(0.1f) * x : x; }},
        UnaryCase{"HardSigmoid",
                  {},
                  [](double x) { return std::clamp(double(0.2f) * x + 0.5, 0.0, 1.0); }},
        UnaryCase{"HardSwish", {}, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
        UnaryCase{"Elu",
                  {MakeFloatAttr("alpha", 2.0f)},
                  [](double x) { return x < 0 ? 2 * (std::exp(x) - 1) : x; }},
        UnaryCase{"Selu",
                  {},
                  [](double x) {
                    const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
                    return g * (x < 0 ? a * (std::exp(x) - 1) : x);
                  }},
        UnaryCase{
            "Celu",
            {MakeFloatAttr("alpha", 2.0f)},
            [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); }},
        UnaryCase{"Softplus", {}, [](double x) { return std::log1p(std::exp(x)); }},
        UnaryCase{"Softsign", {}, [](double x) { return x / (1 + std::fabs(x)); }},
        UnaryCase{"ThresholdedRelu",
                  {MakeFloatAttr("alpha", 0.4f)},
                  [](double x) { return x > double(0.4f) ? x : 0.0; }},
        UnaryCase{"Reciprocal", {}, [](double x) { return 1 / x; }}),
    [](const ::testing::TestParamInfo<UnaryCase>& info) { return info.param.op; });

TEST(OnnxElementwiseTest, RoundIsHalfToEven) {
  auto out =
      RunNode("Round", {In("x", MakeTensor<float>({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({6}, {0, 2, 2, 0, -2, 2})));
}

TEST(OnnxElementwiseTest, SqrtLogAcoshAtanhOnTheirDomains) {
  std::vector<float> xs = {1.25f, 2.0f, 9.0f};
  auto s = RunNode("Sqrt", {In("x", MakeTensor<float>({3}, xs))});
  auto l = RunNode("Log", {In("x", MakeTensor<float>({3}, xs))});
  auto a = RunNode("Acosh", {In("x", MakeTensor<float>({3}, xs))});
  auto t = RunNode("Atanh", {In("x", MakeTensor<float>({3}, {-0.5f, 0.0f, 0.75f}))});
  auto as = RunNode("Asin", {In("x", MakeTensor<float>({3}, {-1.0f, 0.0f, 0.75f}))});
  auto ac = RunNode("Acos", {In("x", MakeTensor<float>({3}, {-1.0f, 0.0f, 0.75f}))});
  ASSERT_TRUE(as.ok() && ac.ok());
  EXPECT_TRUE(
      TensorsNear((*as)[0], MakeTensor<float>({3}, {std::asin(-1.0f), 0, std::asin(0.75f)})));
  EXPECT_TRUE(TensorsNear(
      (*ac)[0], MakeTensor<float>({3}, {std::acos(-1.0f), std::acos(0.0f), std::acos(0.75f)})));
  ASSERT_TRUE(s.ok() && l.ok() && a.ok() && t.ok());
  EXPECT_TRUE(TensorsNear((*s)[0], MakeTensor<float>({3}, {std::sqrt(1.25f), std::sqrt(2.0f), 3})));
  EXPECT_TRUE(TensorsNear(
      (*l)[0], MakeTensor<float>({3}, {std::log(1.25f), std::log(2.0f), std::log(9.0f)})));
  EXPECT_TRUE(TensorsNear(
      (*a)[0], MakeTensor<float>({3}, {std::acosh(1.25f), std::acosh(2.0f), std::acosh(9.0f)})));
  EXPECT_TRUE(
      TensorsNear((*t)[0], MakeTensor<float>({3}, {std::atanh(-0.5f), 0, std::atanh(0.75f)})));
}

TEST(OnnxElementwiseTest, PReluBroadcastsSlope) {
  auto out = RunNode("PRelu", {In("x", MakeTensor<float>({2, 2}, {-1, 2, -3, 4})),
                               Init("s", MakeTensor<float>({2}, {0.5f, 0.25f}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {-0.5f, 2, -1.5f, 4})));
}

TEST(OnnxElementwiseTest, ClipAttributeFormBeforeOpset11) {
  auto out = RunNode("Clip", {In("x", MakeTensor<float>({4}, {-5, 0.5f, 2, 9}))},
                     {MakeFloatAttr("min", -1), MakeFloatAttr("max", 1)}, 1, 9);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({4}, {-1, 0.5f, 1, 1})));
}

TEST(OnnxElementwiseTest, ClipInputFormWithOnlyMax) {
  auto out = RunNode("Clip", {In("x", MakeTensor<int32_t>({3}, {-5, 2, 9})), Absent(),
                              Init("hi", MakeTensorOf(DataType::Int(32), {}, {3}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({3}, {-5, 2, 3})));
}

TEST(OnnxElementwiseTest, VariadicMaxMinSumMean) {
  std::vector<NodeInput> ins = {In("a", MakeTensor<float>({2}, {1, 6})),
                                In("b", MakeTensor<float>({2}, {4, 2})),
                                In("c", MakeTensor<float>({1}, {3}))};
  struct Case {
    const char* op;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{
           {"Max", {4, 6}}, {"Min", {1, 2}}, {"Sum", {8, 11}}, {"Mean", {8.0f / 3, 11.0f / 3}}}) {
    auto out = RunNode(c.op, ins);
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, c.want))) << c.op;
  }
}

TEST(OnnxElementwiseTest, ModIntegerAndFmod) {
  auto i = RunNode("Mod", {In("a", MakeTensor<int32_t>({4}, {7, -7, 7, -7})),
                           In("b", MakeTensor<int32_t>({4}, {3, 3, -3, -3}))});
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(TensorsNear((*i)[0], MakeTensor<int32_t>({4}, {1, 2, -2, -1})));
  auto f = RunNode("Mod",
                   {In("a", MakeTensor<float>({4}, {7.5f, -7.5f, 7.5f, -7.5f})),
                    In("b", MakeTensor<float>({4}, {2, 2, -2, -2}))},
                   {MakeIntAttr("fmod", 1)});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], MakeTensor<float>({4}, {1.5f, -1.5f, 1.5f, -1.5f})));
  auto bad = ImportNode(
      "Mod", {In("a", MakeTensor<float>({1}, {1})), In("b", MakeTensor<float>({1}, {1}))});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("fmod"));
}

TEST(OnnxElementwiseTest, IsNaNAndIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = MakeTensor<float>({4}, {1, std::nanf(""), inf, -inf});
  auto nan = RunNode("IsNaN", {In("x", x)});
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_TRUE(TensorsNear((*nan)[0], MakeBoolTensor({4}, {false, true, false, false})));
  auto both = RunNode("IsInf", {In("x", x)});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE(TensorsNear((*both)[0], MakeBoolTensor({4}, {false, false, true, true})));
  auto neg = RunNode("IsInf", {In("x", x)}, {MakeIntAttr("detect_positive", 0)});
  ASSERT_TRUE(neg.ok()) << neg.status();
  EXPECT_TRUE(TensorsNear((*neg)[0], MakeBoolTensor({4}, {false, false, false, true})));
}

TEST(OnnxCastTest, FloatToIntTruncatesAndToBoolIsNonZero) {
  Tensor x = MakeTensor<float>({4}, {-1.7f, 0.0f, 0.4f, 2.9f});
  auto i = RunNode("Cast", {In("x", x)}, {MakeIntAttr("to", ::onnx::TensorProto::INT32)});
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(TensorsNear((*i)[0], MakeTensor<int32_t>({4}, {-1, 0, 0, 2})));
  auto b = RunNode("Cast", {In("x", x)}, {MakeIntAttr("to", ::onnx::TensorProto::BOOL)});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(TensorsNear((*b)[0], MakeBoolTensor({4}, {true, false, true, true})));
  auto f = RunNode("Cast", {In("b", MakeBoolTensor({2}, {true, false}))},
                   {MakeIntAttr("to", ::onnx::TensorProto::DOUBLE)});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], MakeTensor<double>({2}, {1, 0})));
}

TEST(OnnxCastTest, CastLikeTakesTheSecondInputsDType) {
  auto out = RunNode("CastLike", {In("x", MakeTensor<int64_t>({2}, {3, -4})),
                                  In("t", MakeTensor<double>({1}, {0}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<double>({2}, {3, -4})));
}

TEST(OnnxCastTest, CastToStringIsUnimplemented) {
  auto m = ImportNode("Cast", {In("x", MakeTensor<float>({1}, {1}))},
                      {MakeIntAttr("to", ::onnx::TensorProto::STRING)});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("(Cast, opset 17): cast to element type STRING"));
}

TEST(OnnxElementwiseTest, KnownIntArithmeticFoldsAtImportTime) {
  // (Shape(x) + 1) * 2 - 3 / 2 on x (n, 4): with n fixed, a constant.
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "4"})
      .Initializer("one", MakeTensor<int64_t>({1}, {1}))
      .Initializer("two", MakeTensor<int64_t>({1}, {2}))
      .Node("Shape", {"x"}, {"s"})
      .Node("Add", {"s", "one"}, {"a"})
      .Node("Mul", {"a", "two"}, {"m"})
      .Node("Div", {"m", "two"}, {"d"})
      .Node("Equal", {"d", "one"}, {"e"})
      .Node("Where", {"e", "one", "d"}, {"w"})
      .Node("Cast", {"w"}, {"y"}, {MakeIntAttr("to", ::onnx::TensorProto::INT32)})
      .Output("y");
  OnnxImportOptions options;
  options.input_shapes["x"] = {3, 4};
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes(), options);
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = RunModel(b.model(), {MakeTensor<float>({3, 4}, std::vector<float>(12))}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({2}, {4, 5})));
}

TEST(OnnxElementwiseTest, BitShiftLeftWrapsAndRightDivides) {
  Tensor x = MakeTensor<uint8_t>({3}, {16, 4, 255});
  Tensor y = MakeTensor<uint8_t>({3}, {1, 2, 3});
  auto l = RunNode("BitShift", {In("x", x), In("y", y)}, {MakeStringAttr("direction", "LEFT")});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(TensorsNear((*l)[0], MakeTensor<uint8_t>({3}, {32, 16, 248})));
  auto r = RunNode("BitShift", {In("x", x), In("y", y)}, {MakeStringAttr("direction", "RIGHT")});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(TensorsNear((*r)[0], MakeTensor<uint8_t>({3}, {8, 1, 31})));
  auto bad = ImportNode("BitShift", {In("x", x), In("y", y)}, {MakeStringAttr("direction", "UP")});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("direction must be LEFT or RIGHT, got 'UP'"));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
