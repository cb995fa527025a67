// The NN converters (convert_nn.cc, convert_norm.cc): MatMul, Gemm, Conv,
// the pools, the normalizations and the softmaxes through the whole stack
// (a one-node ONNX model imported, built and run on the local VM), compared
// with references computed here.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

// Deterministic, non-trivial values: i -> a small float with mixed signs.
std::vector<float> Ramp(int64_t n, float scale = 0.1f, int64_t offset = 0) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(scale * static_cast<float>((i * 7 + offset) % 11 - 5));
  return v;
}

// Naive NCHW / OIHW convolution.
std::vector<float> RefConv2d(const std::vector<float>& x, const std::vector<int64_t>& xs,
                             const std::vector<float>& w, const std::vector<int64_t>& ws,
                             std::vector<int64_t> stride, std::vector<int64_t> pad_begin,
                             std::vector<int64_t> dil, int64_t groups, int64_t oh, int64_t ow) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const int64_t og = m / groups;
  std::vector<float> y(n * m * oh * ow, 0.0f);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = 0;
          const int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t hi = i * stride[0] - pad_begin[0] + a * dil[0];
                const int64_t wi = j * stride[1] - pad_begin[1] + e * dil[1];
                if (hi < 0 || hi >= h || wi < 0 || wi >= wd) continue;
                acc += x[((b * c + g * cg + ci) * h + hi) * wd + wi] *
                       w[((o * cg + ci) * kh + a) * kw + e];
              }
          y[((b * m + o) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

// ---- MatMul, Gemm ----

TEST(OnnxNNTest, MatMulBroadcastsBatchDims) {
  std::vector<float> a = Ramp(12), b = Ramp(6, 0.3f, 2);
  auto out = RunNode(
      "MatMul", {In("a", MakeTensor<float>({2, 2, 3}, a)), In("b", MakeTensor<float>({3, 2}, b))});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want(8);
  for (int bt = 0; bt < 2; ++bt)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        float s = 0;
        for (int k = 0; k < 3; ++k) s += a[(bt * 2 + i) * 3 + k] * b[k * 2 + j];
        want[(bt * 2 + i) * 2 + j] = s;
      }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2, 2}, want)));
}

TEST(OnnxNNTest, MatMulPromotesOneDimOperand) {
  auto out = RunNode("MatMul", {In("a", MakeTensor<float>({3}, {1, 2, 3})),
                                In("b", MakeTensor<float>({3, 2}, {1, 0, 0, 1, 1, 1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {4, 5})));
}

TEST(OnnxNNTest, GemmAppliesTransposesAlphaAndBeta) {
  // A^T is (2, 3) from A (3, 2); B^T is (3, 2) from B (2, 3).
  std::vector<float> a = {1, 4, 2, 5, 3, 6};  // A^T = [[1, 2, 3], [4, 5, 6]]
  std::vector<float> b = {1, 0, 2, 0, 1, 1};  // B^T = [[1, 0], [0, 1], [2, 1]]
  auto out =
      RunNode("Gemm",
              {In("a", MakeTensor<float>({3, 2}, a)), Init("b", MakeTensor<float>({2, 3}, b)),
               Init("c", MakeTensor<float>({2}, {10, 20}))},
              {MakeIntAttr("transA", 1), MakeIntAttr("transB", 1), MakeFloatAttr("alpha", 2.0f),
               MakeFloatAttr("beta", 0.5f)});
  ASSERT_TRUE(out.ok()) << out.status();
  // A^T B^T = [[7, 5], [16, 11]]; * 2 + 0.5 * [10, 20].
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {19, 20, 37, 32})));
}

TEST(OnnxNNTest, GemmWithoutBias) {
  auto out = RunNode("Gemm", {In("a", MakeTensor<double>({1, 2}, {1, 2})),
                              In("b", MakeTensor<double>({2, 1}, {3, 4}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<double>({1, 1}, {11})));
}

TEST(OnnxNNTest, GemmRejectsThreeDimOperand) {
  auto imported = ImportNode("Gemm", {In("a", MakeTensor<float>({1, 1, 2}, {1, 2})),
                                      In("b", MakeTensor<float>({2, 1}, {3, 4}))});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("input 0 must have 2 dims, got 3"));
  EXPECT_THAT(imported.status().message(), HasSubstr("(Gemm, opset 17)"));
}

// ---- Conv ----

TEST(OnnxNNTest, ConvExplicitAsymmetricPadsStridesAndBias) {
  const std::vector<int64_t> xs = {1, 2, 5, 5}, ws = {3, 2, 3, 3};
  std::vector<float> x = Ramp(50), w = Ramp(54, 0.2f, 3);
  auto out = RunNode("Conv",
                     {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w)),
                      Init("b", MakeTensor<float>({3}, {1, -1, 0.5f}))},
                     {MakeIntsAttr("pads", {1, 0, 0, 2}), MakeIntsAttr("strides", {2, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  // OH = (5 + 1 - 3) / 2 + 1 = 2; OW = (5 + 2 - 3) / 1 + 1 = 5.
  std::vector<float> want = RefConv2d(x, xs, w, ws, {2, 1}, {1, 0}, {1, 1}, 1, 2, 5);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 10; ++i) want[o * 10 + i] += std::vector<float>{1, -1, 0.5f}[o];
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 3, 2, 5}, want)));
}

TEST(OnnxNNTest, ConvAutoPadSameUpperAndLowerDiffer) {
  // Kernel 2, stride 1 on 4x4: one pad row/column in total, at the end
  // (SAME_UPPER) or at the start (SAME_LOWER).
  const std::vector<int64_t> xs = {1, 1, 4, 4}, ws = {1, 1, 2, 2};
  std::vector<float> x = Ramp(16, 1.0f), w = {1, 2, 3, 4};
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    SCOPED_TRACE(mode);
    auto out =
        RunNode("Conv", {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
                {MakeStringAttr("auto_pad", mode)});
    ASSERT_TRUE(out.ok()) << out.status();
    const int64_t lo = std::string(mode) == "SAME_UPPER" ? 0 : 1;
    EXPECT_TRUE(TensorsNear(
        (*out)[0], MakeTensor<float>({1, 1, 4, 4},
                                     RefConv2d(x, xs, w, ws, {1, 1}, {lo, lo}, {1, 1}, 1, 4, 4))));
  }
}

TEST(OnnxNNTest, ConvValidIgnoresPadding) {
  const std::vector<int64_t> xs = {1, 1, 4, 4}, ws = {1, 1, 3, 3};
  std::vector<float> x = Ramp(16), w = Ramp(9, 0.5f);
  auto out =
      RunNode("Conv", {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
              {MakeStringAttr("auto_pad", "VALID")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(
      (*out)[0],
      MakeTensor<float>({1, 1, 2, 2}, RefConv2d(x, xs, w, ws, {1, 1}, {0, 0}, {1, 1}, 1, 2, 2))));
}

TEST(OnnxNNTest, Conv1dWithGroupsDilationAndBias) {
  // (N=1, C=4, L=6), group 2, dilation 2, kernel 2: the 2-D reference on a unit height.
  const std::vector<int64_t> xs = {1, 4, 1, 6}, ws = {2, 2, 1, 2};
  std::vector<float> x = Ramp(24), w = Ramp(8, 0.3f, 1);
  auto out = RunNode(
      "Conv",
      {In("x", MakeTensor<float>({1, 4, 6}, x)), Init("w", MakeTensor<float>({2, 2, 2}, w)),
       Init("b", MakeTensor<float>({2}, {0.25f, -0.25f}))},
      {MakeIntAttr("group", 2), MakeIntsAttr("dilations", {2}), MakeIntsAttr("pads", {1, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  // L_out = (6 + 2 - 2 - 1) / 1 + 1 = 6.
  std::vector<float> want = RefConv2d(x, xs, w, ws, {1, 1}, {0, 1}, {1, 2}, 2, 1, 6);
  for (int i = 0; i < 6; ++i) {
    want[i] += 0.25f;
    want[6 + i] -= 0.25f;
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 2, 6}, want)));
}

TEST(OnnxNNTest, ConvWithDynamicBatch) {
  const std::vector<int64_t> ws = {2, 1, 3, 3};
  std::vector<float> w = Ramp(18, 0.25f);
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "1", "4", "4"})
      .Initializer("w", MakeTensor<float>(ws, w))
      .Node("Conv", {"x", "w"}, {"y"}, {MakeIntsAttr("pads", {1, 1, 1, 1})})
      .Output("y");
  for (int64_t n : {1, 3}) {
    SCOPED_TRACE(n);
    std::vector<float> x = Ramp(16 * n, 0.5f);
    auto out = RunModel(b.model(), {MakeTensor<float>({n, 1, 4, 4}, x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsNear(
        (*out)[0], MakeTensor<float>({n, 2, 4, 4}, RefConv2d(x, {n, 1, 4, 4}, w, ws, {1, 1}, {1, 1},
                                                             {1, 1}, 1, 4, 4))));
  }
}

TEST(OnnxNNTest, ConvSamePaddingNeedsStaticSpatialDims) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"1", "1", "h", "4"})
      .Initializer("w", MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
      .Node("Conv", {"x", "w"}, {"y"}, {MakeStringAttr("auto_pad", "SAME_UPPER")}, "conv_0")
      .Output("y");
  auto imported = ImportOnnxBytes(b.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(imported.status().message(),
              HasSubstr("node 'conv_0' (Conv, opset 17): auto_pad SAME_UPPER with the symbolic "
                        "spatial dim h"));
}

TEST(OnnxNNTest, ConvRejectsBadAutoPadAndFourSpatialDims) {
  auto bad = ImportNode("Conv",
                        {In("x", MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4})),
                         Init("w", MakeTensor<float>({1, 1, 1, 1}, {1}))},
                        {MakeStringAttr("auto_pad", "SAME")});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("auto_pad 'SAME'"));
  auto conv4d = ImportNode("Conv", {In("x", MakeTensor<float>({1, 1, 1, 1, 1, 1}, {1})),
                                    Init("w", MakeTensor<float>({1, 1, 1, 1, 1, 1}, {1}))});
  ASSERT_FALSE(conv4d.ok());
  EXPECT_EQ(conv4d.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(conv4d.status().message(), HasSubstr("inputs of 6 dims"));
}

// ---- Pools ----

TEST(OnnxNNTest, MaxPoolCeilModeKeepsPartialWindow) {
  std::vector<float> x = Ramp(16, 1.0f);
  auto floor_out = RunNode("MaxPool", {In("x", MakeTensor<float>({1, 1, 4, 4}, x))},
                           {MakeIntsAttr("kernel_shape", {3, 3}), MakeIntsAttr("strides", {2, 2})});
  auto ceil_out = RunNode("MaxPool", {In("x", MakeTensor<float>({1, 1, 4, 4}, x))},
                          {MakeIntsAttr("kernel_shape", {3, 3}), MakeIntsAttr("strides", {2, 2}),
                           MakeIntAttr("ceil_mode", 1)});
  ASSERT_TRUE(floor_out.ok()) << floor_out.status();
  ASSERT_TRUE(ceil_out.ok()) << ceil_out.status();
  auto window_max = [&](int r0, int c0) {
    float m = -1e30f;
    for (int r = r0; r < std::min(r0 + 3, 4); ++r)
      for (int c = c0; c < std::min(c0 + 3, 4); ++c) m = std::max(m, x[r * 4 + c]);
    return m;
  };
  EXPECT_TRUE(TensorsNear((*floor_out)[0], MakeTensor<float>({1, 1, 1, 1}, {window_max(0, 0)})));
  EXPECT_TRUE(TensorsNear((*ceil_out)[0],
                          MakeTensor<float>({1, 1, 2, 2}, {window_max(0, 0), window_max(0, 2),
                                                           window_max(2, 0), window_max(2, 2)})));
}

// MaxPool's Indices on an all-negative 2 x 2 input padded by 1: a padding
// tap never wins (it would be 0 > -1), a tie goes to the first tap, and
// MaxUnpool puts the values back at those indices.
TEST(OnnxNNTest, MaxPoolIndicesSkipPaddingAndTakeTheFirstTie) {
  const Tensor x = MakeTensor<float>({1, 1, 2, 2}, {-1, -1, -3, -4});
  auto out =
      RunNode("MaxPool", {In("x", x)},
              {MakeIntsAttr("kernel_shape", {2, 2}), MakeIntsAttr("pads", {1, 1, 1, 1})}, 2, 12);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0],
                          MakeTensor<float>({1, 1, 3, 3}, {-1, -1, -1, -1, -1, -1, -3, -3, -4})));
  EXPECT_TRUE(
      TensorsNear((*out)[1], MakeTensor<int64_t>({1, 1, 3, 3}, {0, 0, 1, 0, 0, 1, 2, 2, 3})));
  auto column = RunNode("MaxPool", {In("x", x)},
                        {MakeIntsAttr("kernel_shape", {2, 2}), MakeIntsAttr("pads", {1, 1, 1, 1}),
                         MakeIntAttr("storage_order", 1)},
                        2, 12);
  ASSERT_TRUE(column.ok()) << column.status();
  // Column-major within the image: (h, w) is h + 2 w.
  EXPECT_TRUE(
      TensorsNear((*column)[1], MakeTensor<int64_t>({1, 1, 3, 3}, {0, 0, 2, 0, 0, 2, 1, 1, 3})));
  auto unpooled =
      RunNode("MaxUnpool",
              {In("v", MakeTensor<float>({1, 1, 1, 2}, {7, 8})),
               In("i", MakeTensor<int64_t>({1, 1, 1, 2}, {2, 1}))},
              {MakeIntsAttr("kernel_shape", {2, 2}), MakeIntsAttr("strides", {2, 2})}, 1, 11);
  ASSERT_TRUE(unpooled.ok()) << unpooled.status();
  EXPECT_TRUE(
      TensorsNear((*unpooled)[0], MakeTensor<float>({1, 1, 2, 4}, {0, 8, 7, 0, 0, 0, 0, 0})));
}

TEST(OnnxNNTest, AveragePoolCountIncludePad) {
  // 2x2 input of ones plus 10, kernel 2, pads 1: corner windows see one element.
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<onnx::AttributeProto> attrs = {MakeIntsAttr("kernel_shape", {2, 2}),
                                             MakeIntsAttr("pads", {1, 1, 1, 1})};
  auto excl = RunNode("AveragePool", {In("x", MakeTensor<float>({1, 1, 2, 2}, x))}, attrs);
  attrs.push_back(MakeIntAttr("count_include_pad", 1));
  auto incl = RunNode("AveragePool", {In("x", MakeTensor<float>({1, 1, 2, 2}, x))}, attrs);
  ASSERT_TRUE(excl.ok()) << excl.status();
  ASSERT_TRUE(incl.ok()) << incl.status();
  EXPECT_TRUE(TensorsNear((*excl)[0],
                          MakeTensor<float>({1, 1, 3, 3}, {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4})));
  EXPECT_TRUE(TensorsNear((*incl)[0], MakeTensor<float>({1, 1, 3, 3}, {0.25f, 0.75f, 0.5f, 1, 2.5f,
                                                                       1.5f, 0.75f, 1.75f, 1})));
}

TEST(OnnxNNTest, AveragePool1dSameUpper) {
  auto out = RunNode("AveragePool", {In("x", MakeTensor<float>({1, 1, 5}, {1, 2, 3, 4, 5}))},
                     {MakeIntsAttr("kernel_shape", {2}), MakeIntsAttr("strides", {2}),
                      MakeStringAttr("auto_pad", "SAME_UPPER")});
  ASSERT_TRUE(out.ok()) << out.status();
  // ceil(5 / 2) = 3 windows: [1, 2], [3, 4], [5, pad] (the pad not counted).
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 1, 3}, {1.5f, 3.5f, 5})));
}

TEST(OnnxNNTest, MaxPoolIndicesOfA3dPoolAreUnsupported) {
  auto imported =
      ImportNode("MaxPool", {In("x", MakeTensor<float>({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}))},
                 {MakeIntsAttr("kernel_shape", {2, 2, 2})}, /*num_outputs=*/2);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(imported.status().message(), HasSubstr("the Indices output of a MaxPool"));
}

TEST(OnnxNNTest, PoolWithoutKernelShapeIsInvalid) {
  auto imported = ImportNode("MaxPool", {In("x", MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}))});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("missing attribute kernel_shape"));
}

TEST(OnnxNNTest, GlobalPoolsReduceSpatialDims) {
  std::vector<float> x = {1, 2, 3, 4, -1, -2, -3, 8};
  auto avg = RunNode("GlobalAveragePool", {In("x", MakeTensor<float>({1, 2, 2, 2}, x))});
  auto max = RunNode("GlobalMaxPool", {In("x", MakeTensor<float>({1, 2, 2, 2}, x))});
  ASSERT_TRUE(avg.ok()) << avg.status();
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_TRUE(TensorsNear((*avg)[0], MakeTensor<float>({1, 2, 1, 1}, {2.5f, 0.5f})));
  EXPECT_TRUE(TensorsNear((*max)[0], MakeTensor<float>({1, 2, 1, 1}, {4, 8})));
}

// ---- Normalizations ----

TEST(OnnxNNTest, BatchNormalizationInference) {
  std::vector<float> x = Ramp(16, 1.0f);
  std::vector<float> gamma = {2, 0.5f}, beta = {1, -1}, mean = {0.5f, -0.5f}, var = {4, 0.25f};
  const float eps = 1e-3f;
  auto out =
      RunNode("BatchNormalization",
              {In("x", MakeTensor<float>({2, 2, 2, 2}, x)),
               Init("g", MakeTensor<float>({2}, gamma)), Init("b", MakeTensor<float>({2}, beta)),
               Init("m", MakeTensor<float>({2}, mean)), Init("v", MakeTensor<float>({2}, var))},
              {MakeFloatAttr("epsilon", eps)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want(16);
  for (int i = 0; i < 16; ++i) {
    const int c = (i / 4) % 2;
    want[i] = (x[i] - mean[c]) / std::sqrt(var[c] + eps) * gamma[c] + beta[c];
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2, 2, 2}, want)));
}

TEST(OnnxNNTest, BatchNormalizationTrainingModeIsUnsupported) {
  auto ones = MakeTensor<float>({1}, {1});
  auto imported = ImportNode("BatchNormalization",
                             {In("x", MakeTensor<float>({1, 1, 1, 1}, {1})), Init("g", ones),
                              Init("b", ones), Init("m", ones), Init("v", ones)},
                             {MakeIntAttr("training_mode", 1)});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(imported.status().message(), HasSubstr("training_mode=1"));
}

TEST(OnnxNNTest, LayerNormalizationWithStatisticsOutputs) {
  // (2, 3) normalized over the last axis; outputs Y, Mean, InvStdDev.
  std::vector<float> x = {1, 2, 6, -1, 0, 4};
  std::vector<float> scale = {1, 2, 0.5f}, bias = {0, 1, -1};
  const float eps = 1e-5f;
  auto out =
      RunNode("LayerNormalization",
              {In("x", MakeTensor<float>({2, 3}, x)), Init("s", MakeTensor<float>({3}, scale)),
               Init("b", MakeTensor<float>({3}, bias))},
              {}, /*num_outputs=*/3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  std::vector<float> y(6), mean(2), inv(2);
  for (int r = 0; r < 2; ++r) {
    float m = (x[r * 3] + x[r * 3 + 1] + x[r * 3 + 2]) / 3, v = 0;
    for (int k = 0; k < 3; ++k) v += (x[r * 3 + k] - m) * (x[r * 3 + k] - m) / 3;
    mean[r] = m;
    inv[r] = 1 / std::sqrt(v + eps);
    for (int k = 0; k < 3; ++k) y[r * 3 + k] = (x[r * 3 + k] - m) * inv[r] * scale[k] + bias[k];
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 3}, y), 1e-4, 1e-5));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2, 1}, mean), 1e-4, 1e-5));
  EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<float>({2, 1}, inv), 1e-4, 1e-5));
}

TEST(OnnxNNTest, LayerNormalizationOverTrailingAxesFromAxis) {
  // (2, 2, 2) with axis=1: each batch element normalized over 4 values, no bias.
  std::vector<float> x = {1, 2, 3, 4, 10, 0, 0, 10};
  auto out = RunNode("LayerNormalization",
                     {In("x", MakeTensor<float>({2, 2, 2}, x)),
                      Init("s", MakeTensor<float>({2, 2}, {1, 1, 1, 1}))},
                     {MakeIntAttr("axis", 1), MakeFloatAttr("epsilon", 0.0f)});
  ASSERT_TRUE(out.ok()) << out.status();
  const float a = 1 / std::sqrt(1.25f);
  EXPECT_TRUE(TensorsNear(
      (*out)[0],
      MakeTensor<float>({2, 2, 2}, {-1.5f * a, -0.5f * a, 0.5f * a, 1.5f * a, 1, -1, -1, 1}), 1e-4,
      1e-5));
}

// epsilon 0 also covers a fusion regression: x - mean feeds both the
// variance and the output, a diamond whose other user (the mean reduction)
// cannot join the group.
TEST(OnnxNNTest, InstanceNormalizationPerChannel) {
  std::vector<float> x = {1, 3, 10, 20, 0, 4, -2, 2};  // (1, 2, 2, 2)
  for (float eps : {1e-3f, 0.0f}) {
    auto out = RunNode(
        "InstanceNormalization",
        {In("x", MakeTensor<float>({1, 2, 2, 2}, x)), Init("s", MakeTensor<float>({2}, {1, 2})),
         Init("b", MakeTensor<float>({2}, {0, 1}))},
        {MakeFloatAttr("epsilon", eps)});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> want(8);
    for (int c = 0; c < 2; ++c) {
      float m = 0, v = 0;
      for (int k = 0; k < 4; ++k) m += x[c * 4 + k] / 4;
      for (int k = 0; k < 4; ++k) v += (x[c * 4 + k] - m) * (x[c * 4 + k] - m) / 4;
      for (int k = 0; k < 4; ++k) {
        want[c * 4 + k] = (x[c * 4 + k] - m) / std::sqrt(v + eps) * (c + 1) + c;
      }
    }
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 2, 2, 2}, want), 1e-4, 1e-5)) << eps;
  }
}

TEST(OnnxNNTest, LRNAcrossChannels) {
  // (1, 3, 1, 1), size 3: channel c sums squares of c-1..c+1.
  std::vector<float> x = {1, 2, 3};
  const float alpha = 0.3f, beta = 0.75f, bias = 2.0f;
  auto out = RunNode("LRN", {In("x", MakeTensor<float>({1, 3, 1, 1}, x))},
                     {MakeIntAttr("size", 3), MakeFloatAttr("alpha", alpha),
                      MakeFloatAttr("beta", beta), MakeFloatAttr("bias", bias)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> sums = {1 + 4, 1 + 4 + 9, 4 + 9};
  std::vector<float> want(3);
  for (int c = 0; c < 3; ++c) want[c] = x[c] / std::pow(bias + alpha / 3 * sums[c], beta);
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 3, 1, 1}, want), 1e-5, 1e-6));
}

// ---- Softmax family ----

TEST(OnnxNNTest, SoftmaxOpset11CoercesTo2dButOpset13UsesOneAxis) {
  std::vector<float> x = {0, 1, 2, 3, 1, 1, 0, 2};  // (2, 2, 2)
  auto v11 = RunNode("Softmax", {In("x", MakeTensor<float>({2, 2, 2}, x))},
                     {MakeIntAttr("axis", 1)}, 1, /*opset=*/11);
  auto v13 = RunNode("Softmax", {In("x", MakeTensor<float>({2, 2, 2}, x))},
                     {MakeIntAttr("axis", 1)}, 1, /*opset=*/13);
  ASSERT_TRUE(v11.ok()) << v11.status();
  ASSERT_TRUE(v13.ok()) << v13.status();
  std::vector<float> w11(8), w13(8);
  for (int b = 0; b < 2; ++b) {  // opset 11: softmax over the 4 trailing values
    float s = 0;
    for (int k = 0; k < 4; ++k) s += std::exp(x[b * 4 + k]);
    for (int k = 0; k < 4; ++k) w11[b * 4 + k] = std::exp(x[b * 4 + k]) / s;
  }
  for (int b = 0; b < 2; ++b)  // opset 13: over axis 1 only
    for (int j = 0; j < 2; ++j) {
      float s = std::exp(x[b * 4 + j]) + std::exp(x[b * 4 + 2 + j]);
      for (int i = 0; i < 2; ++i) w13[b * 4 + i * 2 + j] = std::exp(x[b * 4 + i * 2 + j]) / s;
    }
  EXPECT_TRUE(TensorsNear((*v11)[0], MakeTensor<float>({2, 2, 2}, w11)));
  EXPECT_TRUE(TensorsNear((*v13)[0], MakeTensor<float>({2, 2, 2}, w13)));
}

TEST(OnnxNNTest, LogSoftmaxDefaultAxisIsLast) {
  auto out = RunNode("LogSoftmax", {In("x", MakeTensor<float>({1, 3}, {1000, 1001, 1002}))});
  ASSERT_TRUE(out.ok()) << out.status();
  const float lse = std::log(std::exp(-2.0f) + std::exp(-1.0f) + 1.0f);
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 3}, {-2 - lse, -1 - lse, -lse})));
}

TEST(OnnxNNTest, HardmaxPicksFirstMaximum) {
  auto out = RunNode("Hardmax", {In("x", MakeTensor<float>({2, 3}, {1, 3, 3, -1, -2, -3}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 3}, {0, 1, 0, 1, 0, 0})));
}

TEST(OnnxNNTest, SoftmaxAxisOutOfRangeIsInvalid) {
  auto imported =
      ImportNode("Softmax", {In("x", MakeTensor<float>({2}, {1, 2}))}, {MakeIntAttr("axis", 3)});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(),
              HasSubstr("axis 3 is out of range for an input of 1 dims"));
}

// ---- ConvTranspose, Pad ----

// Naive 2-D transposed convolution: y[o] += x[i] * w[k] where
// o = i * stride + k * dilation - pad_begin; X (N, C, H, W), W (C, M/g, kh, kw).
std::vector<float> RefConvTranspose2d(const std::vector<float>& x, const std::vector<int64_t>& xs,
                                      const std::vector<float>& w, const std::vector<int64_t>& ws,
                                      std::vector<int64_t> stride, std::vector<int64_t> pad_begin,
                                      std::vector<int64_t> dil, int64_t groups, int64_t oh,
                                      int64_t ow) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t mg = ws[1], kh = ws[2], kw = ws[3], cg = c / groups, m = mg * groups;
  std::vector<float> y(n * m * oh * ow, 0.0f);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < wd; ++j)
          for (int64_t mo = 0; mo < mg; ++mo)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t r = i * stride[0] + a * dil[0] - pad_begin[0];
                const int64_t q = j * stride[1] + e * dil[1] - pad_begin[1];
                if (r < 0 || r >= oh || q < 0 || q >= ow) continue;
                const int64_t o = (ci / cg) * mg + mo;
                y[((b * m + o) * oh + r) * ow + q] +=
                    x[((b * c + ci) * h + i) * wd + j] * w[((ci * mg + mo) * kh + a) * kw + e];
              }
  return y;
}

TEST(OnnxNNTest, ConvTransposeStridesPadsAndOutputPadding) {
  const std::vector<int64_t> xs = {1, 2, 3, 3}, ws = {2, 2, 3, 3};
  std::vector<float> x = Ramp(18), w = Ramp(36, 0.2f, 5);
  auto out = RunNode("ConvTranspose",
                     {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
                     {MakeIntsAttr("strides", {3, 2}), MakeIntsAttr("pads", {1, 2, 1, 2}),
                      MakeIntsAttr("output_padding", {1, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  // OH = 3 * 2 + 1 + 3 - 2 = 8; OW = 2 * 2 + 0 + 3 - 4 = 3.
  EXPECT_TRUE(TensorsNear(
      (*out)[0],
      MakeTensor<float>({1, 2, 8, 3},
                        RefConvTranspose2d(x, xs, w, ws, {3, 2}, {1, 2}, {1, 1}, 1, 8, 3)),
      1e-5, 1e-5));
}

// Kernel == strides without padding (torch's ConvTranspose2d(k=2, s=2)):
// imported as a 1x1 product and a depth-to-space, no inserted zeros. Two
// images, rectangular kernels and strides, a bias, and a weight that is an
// input rather than an initializer (the product is not folded).
TEST(OnnxNNTest, ConvTransposeWithoutOverlapIsADepthToSpace) {
  const std::vector<int64_t> xs = {2, 3, 4, 5}, ws = {3, 6, 2, 3};
  std::vector<float> x = Ramp(120), w = Ramp(108, 0.2f, 5);
  for (bool weight_input : {false, true}) {
    auto out = RunNode(
        "ConvTranspose",
        {In("x", MakeTensor<float>(xs, x)),
         weight_input ? In("w", MakeTensor<float>(ws, w)) : Init("w", MakeTensor<float>(ws, w)),
         Init("b", MakeTensor<float>({6}, {1, -1, 2, -2, 3, -3}))},
        {MakeIntsAttr("strides", {2, 3}), MakeIntsAttr("kernel_shape", {2, 3})});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> want = RefConvTranspose2d(x, xs, w, ws, {2, 3}, {0, 0}, {1, 1}, 1, 8, 15);
    const float bias[] = {1, -1, 2, -2, 3, -3};
    for (size_t i = 0; i < want.size(); ++i) want[i] += bias[(i / (8 * 15)) % 6];
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 6, 8, 15}, want), 1e-4, 1e-4))
        << weight_input;
  }
}

TEST(OnnxNNTest, ConvTransposeGroupsDilationAndBias) {
  const std::vector<int64_t> xs = {1, 4, 2, 3}, ws = {4, 1, 2, 2};
  std::vector<float> x = Ramp(24), w = Ramp(16, 0.3f, 1);
  auto out = RunNode("ConvTranspose",
                     {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w)),
                      Init("b", MakeTensor<float>({2}, {1, -1}))},
                     {MakeIntAttr("group", 2), MakeIntsAttr("dilations", {2, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  // OH = 1 + 2 + 1 = 4; OW = 2 + 1 + 1 = 4; output channels 2 (1 per group).
  std::vector<float> want = RefConvTranspose2d(x, xs, w, ws, {1, 1}, {0, 0}, {2, 1}, 2, 4, 4);
  for (int i = 0; i < 16; ++i) {
    want[i] += 1;
    want[16 + i] -= 1;
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 2, 4, 4}, want), 1e-5, 1e-5));
}

TEST(OnnxNNTest, ConvTransposeOutputShapeAndSameUpper) {
  const std::vector<int64_t> xs = {1, 1, 3, 3}, ws = {1, 1, 3, 3};
  std::vector<float> x = Ramp(9, 1.0f), w = Ramp(9, 0.5f, 2);
  // output_shape (6, 6) with stride 2: total padding 2 * 2 + 3 - 6 = 1 each,
  // at the end under SAME_UPPER, at the start otherwise.
  auto upper = RunNode("ConvTranspose",
                       {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
                       {MakeIntsAttr("strides", {2, 2}), MakeStringAttr("auto_pad", "SAME_UPPER")});
  auto shaped = RunNode("ConvTranspose",
                        {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
                        {MakeIntsAttr("strides", {2, 2}), MakeIntsAttr("output_shape", {6, 6})});
  ASSERT_TRUE(upper.ok()) << upper.status();
  ASSERT_TRUE(shaped.ok()) << shaped.status();
  EXPECT_TRUE(TensorsNear(
      (*upper)[0], MakeTensor<float>({1, 1, 6, 6}, RefConvTranspose2d(x, xs, w, ws, {2, 2}, {0, 0},
                                                                      {1, 1}, 1, 6, 6))));
  // A larger output_shape (natural size 7, asked 8): the extra row and
  // column go at the end.
  auto grown = RunNode("ConvTranspose",
                       {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
                       {MakeIntsAttr("strides", {2, 2}), MakeIntsAttr("output_shape", {8, 8})});
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_TRUE(TensorsNear(
      (*grown)[0], MakeTensor<float>({1, 1, 8, 8}, RefConvTranspose2d(x, xs, w, ws, {2, 2}, {0, 0},
                                                                      {1, 1}, 1, 8, 8))));
  EXPECT_TRUE(TensorsNear(
      (*shaped)[0], MakeTensor<float>({1, 1, 6, 6}, RefConvTranspose2d(x, xs, w, ws, {2, 2}, {1, 1},
                                                                       {1, 1}, 1, 6, 6))));
}

TEST(OnnxNNTest, PadConstantEdgeAndReflect) {
  Tensor x = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor pads = MakeTensor<int64_t>({4}, {0, 2, 1, 0});  // 2 columns before, 1 row after
  auto constant =
      RunNode("Pad", {In("x", x), Init("pads", pads), Init("v", MakeTensor<float>({}, {9}))});
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_TRUE(TensorsNear(
      (*constant)[0], MakeTensor<float>({3, 5}, {9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9})));
  auto edge = RunNode("Pad", {In("x", x), Init("pads", pads)}, {MakeStringAttr("mode", "edge")});
  ASSERT_TRUE(edge.ok()) << edge.status();
  EXPECT_TRUE(TensorsNear(
      (*edge)[0], MakeTensor<float>({3, 5}, {1, 1, 1, 2, 3, 4, 4, 4, 5, 6, 4, 4, 4, 5, 6})));
  auto reflect =
      RunNode("Pad", {In("x", x), Init("pads", pads)}, {MakeStringAttr("mode", "reflect")});
  ASSERT_TRUE(reflect.ok()) << reflect.status();
  EXPECT_TRUE(TensorsNear(
      (*reflect)[0], MakeTensor<float>({3, 5}, {3, 2, 1, 2, 3, 6, 5, 4, 5, 6, 3, 2, 1, 2, 3})));
}

TEST(OnnxNNTest, PadAttributeFormBeforeOpset11) {
  auto out = RunNode("Pad", {In("x", MakeTensor<float>({2}, {1, 2}))},
                     {MakeIntsAttr("pads", {1, 2}), MakeFloatAttr("value", -1.0f)}, 1, /*opset=*/9);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({5}, {-1, 1, 2, -1, -1})));
}

TEST(OnnxNNTest, PadRejectsWrapModeAndBadPadsLength) {
  Tensor x = MakeTensor<float>({2}, {1, 2});
  auto wrap = ImportNode("Pad", {In("x", x), Init("pads", MakeTensor<int64_t>({2}, {1, 1}))},
                         {MakeStringAttr("mode", "wrap")});
  ASSERT_FALSE(wrap.ok());
  EXPECT_EQ(wrap.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(wrap.status().message(), HasSubstr("mode 'wrap'"));
  auto bad = ImportNode("Pad", {In("x", x), Init("pads", MakeTensor<int64_t>({1}, {1}))});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("pads [1] must have 2 values"));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
