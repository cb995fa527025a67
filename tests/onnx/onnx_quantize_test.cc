// Quantization (convert_quantize.cc) and TopK (relax.topk): our own edge
// cases beyond the node suite's -- saturation, rounding of ties to even,
// per-axis scales and zero points, int8 against uint8, integer products past
// float32's exact range, and TopK's tie order, smallest, k equal to the
// axis length and k = 0. Expected values are computed here in C++.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend::testing {
namespace {

Tensor F32(std::vector<int64_t> shape, std::vector<float> v) { return MakeTensor<float>(shape, v); }

TEST(OnnxQuantizeTest, QuantizeRoundsTiesToEvenAndSaturates) {
  // x / 0.5: -300 saturates to -128, 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 1000 -> 127.
  auto out = RunNode("QuantizeLinear",
                     {In("x", F32({6}, {-150, 1.25, 1.75, -1.25, 500, 0.2})),
                      Init("s", F32({}, {0.5})), Init("z", MakeTensor<int8_t>({}, {0}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int8_t>({6}, {-128, 2, 4, -2, 127, 0})));
}

TEST(OnnxQuantizeTest, QuantizePerAxisWithUint8ZeroPoints) {
  // Scales and zero points per channel (axis 1 of a [2, 3] input).
  auto out = RunNode("QuantizeLinear",
                     {In("x", F32({2, 3}, {0, 1, 2, 3, 4, 5})), Init("s", F32({3}, {1, 0.5, 0.25})),
                      Init("z", MakeTensor<uint8_t>({3}, {10, 20, 250}))},
                     {MakeIntAttr("axis", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  // channel 2: 2 / 0.25 + 250 = 258 -> 255.
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<uint8_t>({2, 3}, {10, 22, 255, 13, 28, 255})));
}

TEST(OnnxQuantizeTest, DequantizePerAxisInt8) {
  auto out = RunNode("DequantizeLinear",
                     {In("x", MakeTensor<int8_t>({2, 2}, {-128, 5, 127, 0})),
                      Init("s", F32({2}, {0.5, 2})), Init("z", MakeTensor<int8_t>({2}, {-1, 3}))},
                     {MakeIntAttr("axis", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2, 2}, {-63.5, 3, 248, -6})));
}

TEST(OnnxQuantizeTest, RejectsAZeroPointOfAnotherTypeThanItsValue) {
  auto out = ImportNode("MatMulInteger", {In("a", MakeTensor<uint8_t>({2, 2}, {1, 2, 3, 4})),
                                          In("b", MakeTensor<uint8_t>({2, 2}, {1, 2, 3, 4})),
                                          Init("az", MakeTensor<int8_t>({}, {1}))});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("zero point"), std::string::npos) << out.status();
}

TEST(OnnxQuantizeTest, MatMulIntegerIsExactPastFloat32Range) {
  // K = 600 products of 255 * 255 sum to ~39M, past float32's 2^24: exact
  // in int32. Row zero points per row of A.
  const int64_t m = 2, k = 600, n = 3;
  std::vector<uint8_t> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(255 - i % 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(250 + i % 6);
  const std::vector<uint8_t> azp = {3, 1};
  const uint8_t bzp = 2;
  std::vector<int32_t> want(m * n, 0);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t t = 0; t < k; ++t) {
        want[r * n + c] += (a[r * k + t] - azp[r]) * (b[t * n + c] - bzp);
      }
    }
  }
  auto out = RunNode(
      "MatMulInteger",
      {In("a", MakeTensor<uint8_t>({m, k}, a)), In("b", MakeTensor<uint8_t>({k, n}, b)),
       Init("az", MakeTensor<uint8_t>({m}, azp)), Init("bz", MakeTensor<uint8_t>({}, {bzp}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({m, n}, want)));
}

TEST(OnnxQuantizeTest, QLinearMatMulWithPerColumnScales) {
  const std::vector<int8_t> a = {1, -2, 3, 4};       // [2, 2]
  const std::vector<int8_t> b = {5, 6, -7, 8};       // [2, 2]
  const std::vector<float> b_scale = {0.5f, 0.25f};  // per column
  const float a_scale = 0.1f, y_scale = 0.2f;
  std::vector<int8_t> want(4);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 2; ++c) {
      int acc = 0;
      for (int t = 0; t < 2; ++t) acc += a[r * 2 + t] * b[t * 2 + c];
      float y = std::nearbyint(static_cast<float>(acc) * (a_scale * b_scale[c] / y_scale));
      want[r * 2 + c] = static_cast<int8_t>(std::max(-128.0f, std::min(127.0f, y)));
    }
  }
  auto out =
      RunNode("QLinearMatMul",
              {In("a", MakeTensor<int8_t>({2, 2}, a)), Init("as", F32({}, {a_scale})),
               Init("az", MakeTensor<int8_t>({}, {0})), In("b", MakeTensor<int8_t>({2, 2}, b)),
               Init("bs", F32({2}, b_scale)), Init("bz", MakeTensor<int8_t>({2}, {0, 0})),
               Init("ys", F32({}, {y_scale})), Init("yz", MakeTensor<int8_t>({}, {0}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int8_t>({2, 2}, want)));
}

TEST(OnnxTopKTest, TiesGoToTheLowerIndexAndKCanBeTheWholeAxis) {
  auto out = RunNode("TopK",
                     {In("x", F32({2, 4}, {3, 1, 3, 2, -1, -1, -1, -1})),
                      Init("k", MakeTensor<int64_t>({1}, {4}))},
                     {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2, 4}, {3, 3, 2, 1, -1, -1, -1, -1})));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<int64_t>({2, 4}, {0, 2, 3, 1, 0, 1, 2, 3})));
}

TEST(OnnxTopKTest, SmallestAlongTheFirstAxis) {
  auto out = RunNode(
      "TopK", {In("x", F32({3, 2}, {5, 0, 4, 7, 6, -2})), Init("k", MakeTensor<int64_t>({1}, {2}))},
      {MakeIntAttr("axis", 0), MakeIntAttr("largest", 0)}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2, 2}, {4, -2, 5, 0})));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<int64_t>({2, 2}, {1, 2, 0, 0})));
}

TEST(OnnxTopKTest, KZeroGivesEmptyOutputsAndTooLargeKIsInvalid) {
  auto zero = RunNode(
      "TopK", {In("x", F32({2, 3}, {1, 2, 3, 4, 5, 6})), Init("k", MakeTensor<int64_t>({1}, {0}))},
      {}, 2);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(ShapeOf((*zero)[0]), (std::vector<int64_t>{2, 0}));
  auto big = ImportNode(
      "TopK", {In("x", F32({2, 3}, {1, 2, 3, 4, 5, 6})), Init("k", MakeTensor<int64_t>({1}, {4}))},
      {}, 2);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("exceeds the axis length 3"), std::string::npos)
      << big.status();
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
