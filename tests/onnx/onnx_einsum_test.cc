// Einsum (convert_einsum.cc, relax.einsum) beyond the node suite: the
// attention forms that become relax.matmul, implicit outputs, ellipses that
// broadcast, a three-operand contraction, and malformed equations; and the
// Hann window against its formula. Expected values are computed here.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend::testing {
namespace {

std::vector<float> Seq(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i % 7 - 3);
  return v;
}

absl::StatusOr<std::vector<Tensor>> Einsum(const std::string& eq, std::vector<NodeInput> in) {
  return RunNode("Einsum", in, {MakeStringAttr("equation", eq)}, 1, 12);
}

TEST(OnnxEinsumTest, AttentionScoresWithATransposedOperand) {
  // "bqd,bkd->bqk": a batched matmul by the transpose of the second operand.
  const int64_t b = 2, q = 3, k = 4, d = 5;
  std::vector<float> x = Seq(b * q * d, 0.5f), y = Seq(b * k * d, 0.25f);
  std::vector<float> want(static_cast<size_t>(b * q * k), 0.0f);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t t = 0; t < d; ++t)
          want[(n * q + i) * k + j] += x[(n * q + i) * d + t] * y[(n * k + j) * d + t];
  auto out = Einsum("bqd,bkd->bqk", {In("x", MakeTensor<float>({b, q, d}, x)),
                                     In("y", MakeTensor<float>({b, k, d}, y))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({b, q, k}, want)));
}

TEST(OnnxEinsumTest, ImplicitOutputSortsTheLabelsSeenOnce) {
  // "ba,ac" has output "bc" (a is summed; b, c sorted).
  auto out = Einsum("ba,ac", {In("x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})),
                              In("y", MakeTensor<float>({3, 2}, {1, 0, 0, 1, 1, 1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {4, 5, 10, 11})));
}

TEST(OnnxEinsumTest, EllipsisBroadcastsAndThreeOperands) {
  // "...i,i,i->..." over x [2, 1, 3] and two vectors: x . (u * v) per row.
  auto out = Einsum("...i,i,i->...", {In("x", MakeTensor<float>({2, 1, 3}, {1, 2, 3, 4, 5, 6})),
                                      In("u", MakeTensor<float>({3}, {1, 1, 2})),
                                      In("v", MakeTensor<float>({3}, {2, 1, 1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 1}, {2 + 2 + 6, 8 + 5 + 12})));
}

TEST(OnnxEinsumTest, RejectsAnEquationForTheWrongNumberOfOperands) {
  auto out = ImportNode("Einsum", {In("x", MakeTensor<float>({2, 2}, {1, 2, 3, 4}))},
                        {MakeStringAttr("equation", "ij,jk->ik")}, 1, 12);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("has 2 operands, the node 1 inputs"), std::string::npos)
      << out.status();
}

TEST(OnnxWindowTest, HannWindowOfARunTimeSize) {
  for (int32_t size : {1, 8}) {
    auto out = RunNode("HannWindow", {In("n", MakeTensor<int32_t>({}, {size}))},
                       {MakeIntAttr("periodic", 1)}, 1, 17);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> want(static_cast<size_t>(size));
    for (int32_t i = 0; i < size; ++i) {
      want[static_cast<size_t>(i)] =
          static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * i / static_cast<double>(size)));
    }
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({size}, want), 1e-5, 1e-6));
  }
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
