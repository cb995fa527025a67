// The loss converters (convert_loss.cc): NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss with each reduction, class weights, ignore_index
// (out-of-range and negative ignored targets included), 1-D and N-D
// targets, the log_prob output, and the errors for malformed nodes. The
// expected values come from a direct C++ transcription of the ONNX
// reference (Reference below), run through the whole stack on the local VM.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

struct LossCase {
  std::vector<int64_t> shape;  // of the input [N, C, d...]
  std::vector<double> x;       // input (log-probabilities for NLL, scores for SCE)
  std::vector<int64_t> target;
  std::optional<std::vector<double>> weight;
  std::optional<int64_t> ignore_index;
  std::string reduction = "mean";
};

// The target's shape: the input's without dim 1.
std::vector<int64_t> TargetShape(const std::vector<int64_t>& shape) {
  std::vector<int64_t> t{shape[0]};
  t.insert(t.end(), shape.begin() + 2, shape.end());
  return t;
}

// log_softmax over dim 1 of a row-major [N, C, D] array.
std::vector<double> LogSoftmaxAxis1(const std::vector<int64_t>& shape,
                                    const std::vector<double>& x) {
  const int64_t n = shape[0], c = shape[1];
  const int64_t d = static_cast<int64_t>(x.size()) / (n * c);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < c; ++j) m = std::max(m, x[(i * c + j) * d + k]);
      for (int64_t j = 0; j < c; ++j) s += std::exp(x[(i * c + j) * d + k] - m);
      for (int64_t j = 0; j < c; ++j)
        out[(i * c + j) * d + k] = x[(i * c + j) * d + k] - m - std::log(s);
    }
  }
  return out;
}

// The ONNX reference's negative log-likelihood of `logp` ([N, C, D] row
// major): the per-position losses for "none", else one value.
std::vector<double> Reference(const LossCase& c, const std::vector<double>& logp) {
  const int64_t n = c.shape[0], classes = c.shape[1];
  const int64_t d = static_cast<int64_t>(logp.size()) / (n * classes);
  std::vector<double> loss(static_cast<size_t>(n * d));
  double total = 0, weights = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      const int64_t t = c.target[i * d + k];
      if (c.ignore_index.has_value() && t == *c.ignore_index) continue;
      const double w = c.weight.has_value() ? (*c.weight)[t] : 1.0;
      loss[i * d + k] = -logp[(i * classes + t) * d + k] * w;
      total += loss[i * d + k];
      weights += w;
    }
  }
  if (c.reduction == "none") return loss;
  if (c.reduction == "sum") return {total};
  if (c.weight.has_value() || c.ignore_index.has_value()) return {total / weights};
  return {total / static_cast<double>(loss.size())};
}

// The node's inputs: "x" and "t" fed at run time, the weight an initializer.
std::vector<NodeInput> Inputs(const LossCase& c, DataType dtype, DataType target_dtype) {
  std::vector<NodeInput> in{
      In("x", MakeTensorOf(dtype, c.shape, c.x)),
      In("t", MakeTensorOf(target_dtype, TargetShape(c.shape),
                           std::vector<double>(c.target.begin(), c.target.end())))};
  if (c.weight.has_value()) {
    in.push_back(Init("w", MakeTensorOf(dtype, {c.shape[1]}, *c.weight)));
  }
  return in;
}

std::vector<::onnx::AttributeProto> Attrs(const LossCase& c) {
  std::vector<::onnx::AttributeProto> attrs{MakeStringAttr("reduction", c.reduction)};
  if (c.ignore_index.has_value()) attrs.push_back(MakeIntAttr("ignore_index", *c.ignore_index));
  return attrs;
}

Tensor Expected(const LossCase& c, DataType dtype, const std::vector<double>& values) {
  return MakeTensorOf(dtype, c.reduction == "none" ? TargetShape(c.shape) : std::vector<int64_t>{},
                      values);
}

// Runs NegativeLogLikelihoodLoss on `c` and checks it against Reference.
void ExpectNllMatches(const LossCase& c, DataType dtype = DataType::Float(32),
                      DataType target_dtype = DataType::Int(64), int opset = 13) {
  auto out =
      RunNode("NegativeLogLikelihoodLoss", Inputs(c, dtype, target_dtype), Attrs(c), 1, opset);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_TRUE(TensorsNear((*out)[0], Expected(c, dtype, Reference(c, c.x))));
}

// (3, 4): three rows of four log-probability-like values.
LossCase Rows() {
  LossCase c;
  c.shape = {3, 4};
  c.x = {-1.5, -0.2, -3.0, -2.5, -0.1, -4.0, -2.2, -1.0, -0.7, -1.9, -2.8, -0.3};
  c.target = {1, 0, 3};
  return c;
}

// (2, 3, 2, 2) with target (2, 2, 2).
LossCase Volumes() {
  LossCase c;
  c.shape = {2, 3, 2, 2};
  for (int i = 0; i < 24; ++i) c.x.push_back(-0.25 * ((i * 7) % 11) - 0.1);
  c.target = {0, 2, 1, 1, 2, 0, 0, 1};
  return c;
}

TEST(OnnxLossTest, NllMeanWithoutWeightIsPlainMean) {
  LossCase c = Rows();
  ExpectNllMatches(c);
  // Spelled out: -(x[0,1] + x[1,0] + x[2,3]) / 3.
  auto out =
      RunNode("NegativeLogLikelihoodLoss", Inputs(c, DataType::Float(32), DataType::Int(64)));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({}, {(0.2f + 0.1f + 0.3f) / 3})));
}

TEST(OnnxLossTest, NllSumAndNone) {
  LossCase c = Rows();
  c.reduction = "sum";
  ExpectNllMatches(c);
  c.reduction = "none";
  ExpectNllMatches(c);
}

TEST(OnnxLossTest, NllWeightedMeanDividesBySummedWeights) {
  LossCase c = Rows();
  c.weight = std::vector<double>{0.5, 2.0, 1.0, 4.0};
  ExpectNllMatches(c);
  // (0.2 * 2 + 0.1 * 0.5 + 0.3 * 4) / (2 + 0.5 + 4).
  auto out =
      RunNode("NegativeLogLikelihoodLoss", Inputs(c, DataType::Float(32), DataType::Int(64)));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({}, {1.65f / 6.5f})));
  c.reduction = "none";
  ExpectNllMatches(c);
}

TEST(OnnxLossTest, NllIgnoresOutOfRangeIgnoredTarget) {
  LossCase c = Rows();
  c.target = {1, 10, 3};  // 10 is no class of 4: only its being ignored makes it valid
  c.ignore_index = 10;
  ExpectNllMatches(c);  // (0.2 + 0.3) / 2
  c.weight = std::vector<double>{0.5, 2.0, 1.0, 4.0};
  ExpectNllMatches(c);
  c.reduction = "none";
  auto out = RunNode("NegativeLogLikelihoodLoss", Inputs(c, DataType::Float(32), DataType::Int(64)),
                     Attrs(c));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, {0.4f, 0.0f, 1.2f})));
}

TEST(OnnxLossTest, NllNegativeIgnoreIndexOnNdTargets) {
  LossCase c = Volumes();
  c.target = {0, -1, 1, 1, 2, 0, -1, 1};
  c.ignore_index = -1;
  for (const char* r : {"none", "sum", "mean"}) {
    SCOPED_TRACE(r);
    c.reduction = r;
    ExpectNllMatches(c);
  }
}

TEST(OnnxLossTest, NllNdTargetsWithWeights) {
  LossCase c = Volumes();
  c.weight = std::vector<double>{0.2, 1.0, 3.0};
  for (const char* r : {"none", "sum", "mean"}) {
    SCOPED_TRACE(r);
    c.reduction = r;
    ExpectNllMatches(c);
  }
}

TEST(OnnxLossTest, NllInt32TargetsAndDoubleInputAtOpset12) {
  LossCase c = Volumes();
  c.weight = std::vector<double>{0.2, 1.0, 3.0};
  c.ignore_index = 2;
  ExpectNllMatches(c, DataType::Float(64), DataType::Int(32), /*opset=*/12);
}

TEST(OnnxLossTest, NllFloat16MeanDividesInFloat16) {
  LossCase c = Volumes();
  c.weight = std::vector<double>{0.5, 1.0, 2.0};
  c.ignore_index = 1;
  auto out = RunNode("NegativeLogLikelihoodLoss", Inputs(c, DataType::Float(16), DataType::Int(64)),
                     Attrs(c));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(
      TensorsNear((*out)[0], Expected(c, DataType::Float(16), Reference(c, c.x)), 2e-3, 2e-3));
}

TEST(OnnxLossTest, NllIgnoreIndexBeyondInt32NeverMatchesInt32Targets) {
  LossCase c = Rows();
  c.weight = std::vector<double>{0.5, 2.0, 1.0, 4.0};
  c.ignore_index = int64_t{1} << 40;
  ExpectNllMatches(c, DataType::Float(32), DataType::Int(32));
}

TEST(OnnxLossTest, SoftmaxCrossEntropyReturnsLossAndLogProb) {
  LossCase c = Volumes();
  for (double& v : c.x) v *= 3;  // scores, not log-probabilities
  c.weight = std::vector<double>{0.2, 1.0, 3.0};
  c.ignore_index = 0;
  const std::vector<double> logp = LogSoftmaxAxis1(c.shape, c.x);
  for (const char* r : {"none", "sum", "mean"}) {
    SCOPED_TRACE(r);
    c.reduction = r;
    auto out = RunNode("SoftmaxCrossEntropyLoss", Inputs(c, DataType::Float(32), DataType::Int(64)),
                       Attrs(c), /*num_outputs=*/2);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_TRUE(
        TensorsNear((*out)[0], Expected(c, DataType::Float(32), Reference(c, logp)), 1e-5, 1e-5));
    EXPECT_TRUE(
        TensorsNear((*out)[1], MakeTensorOf(DataType::Float(32), c.shape, logp), 1e-5, 1e-5));
  }
}

TEST(OnnxLossTest, SoftmaxCrossEntropyOneDTargetsDefaultMean) {
  LossCase c = Rows();
  c.x = {1.0, 2.0, 0.5, -1.0, 3.0, 0.0, 0.0, 1.0, -2.0, 4.0, 1.5, 0.25};
  auto out = RunNode("SoftmaxCrossEntropyLoss", Inputs(c, DataType::Float(32), DataType::Int(64)));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(
      (*out)[0], Expected(c, DataType::Float(32), Reference(c, LogSoftmaxAxis1(c.shape, c.x))),
      1e-5, 1e-5));
}

TEST(OnnxLossTest, SoftmaxCrossEntropyIgnoredTargetOfExtremeScoreStaysFinite) {
  // Class 0 has log-probability -inf at the ignored position (its target 5
  // is gathered as class 0); the loss there must still be 0, not NaN.
  LossCase c{{2, 2}, {-INFINITY, 1000.0, 0.0, 1.0}, {5, 1}, std::nullopt, 5, "sum"};
  auto out = RunNode("SoftmaxCrossEntropyLoss", Inputs(c, DataType::Float(32), DataType::Int(64)),
                     Attrs(c));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0],
                          MakeTensor<float>({}, {static_cast<float>(std::log1p(std::exp(-1.0)))})));
}

TEST(OnnxLossTest, RejectsUnknownReduction) {
  LossCase c = Rows();
  c.reduction = "avg";
  auto imported = ImportNode("NegativeLogLikelihoodLoss",
                             Inputs(c, DataType::Float(32), DataType::Int(64)), Attrs(c));
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("reduction 'avg'"));
  EXPECT_THAT(imported.status().message(), HasSubstr("NegativeLogLikelihoodLoss"));
}

TEST(OnnxLossTest, RejectsTargetOfWrongRank) {
  auto imported = ImportNode("NegativeLogLikelihoodLoss",
                             {In("x", MakeTensor<float>({2, 3}, {0, 0, 0, 0, 0, 0})),
                              In("t", MakeTensor<int64_t>({2, 1}, {0, 1}))});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("target has 2 dims, expected 1"));
}

TEST(OnnxLossTest, RejectsFloatTarget) {
  auto imported =
      ImportNode("SoftmaxCrossEntropyLoss", {In("x", MakeTensor<float>({2, 3}, {0, 0, 0, 0, 0, 0})),
                                             In("t", MakeTensor<float>({2}, {0, 1}))});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("target must be int32 or int64, got float32"));
}

TEST(OnnxLossTest, RejectsMismatchedShapes) {
  auto bad_target = ImportNode("NegativeLogLikelihoodLoss",
                               {In("x", MakeTensor<float>({2, 3}, {0, 0, 0, 0, 0, 0})),
                                In("t", MakeTensor<int64_t>({3}, {0, 1, 2}))});
  ASSERT_FALSE(bad_target.ok());
  EXPECT_EQ(bad_target.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_target.status().message(), HasSubstr("does not match input dim 2"));
  auto bad_weight = ImportNode(
      "NegativeLogLikelihoodLoss",
      {In("x", MakeTensor<float>({2, 3}, {0, 0, 0, 0, 0, 0})),
       In("t", MakeTensor<int64_t>({2}, {0, 1})), Init("w", MakeTensor<float>({2}, {1, 1}))});
  ASSERT_FALSE(bad_weight.ok());
  EXPECT_EQ(bad_weight.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_weight.status().message(), HasSubstr("weight has 2 elements, input 3 classes"));
}

TEST(OnnxLossTest, RejectsOneDInput) {
  auto imported = ImportNode(
      "NegativeLogLikelihoodLoss",
      {In("x", MakeTensor<float>({3}, {0, 0, 0})), In("t", MakeTensor<int64_t>({}, {0}))});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("at least 2 dims"));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
