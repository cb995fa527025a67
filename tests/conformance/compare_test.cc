// The conformance comparator: ONNX's allclose rule for floats (rtol 1e-3,
// atol 1e-7, NaN equal to NaN), exact integers and booleans, and exact
// shapes and dtypes, each mismatch described with its values.
#include "tests/conformance/compare.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::conformance {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor Make(std::vector<int64_t> shape, DataType dtype, const std::vector<T>& values) {
  auto t = Tensor::FromBytes(shape, dtype, values.data(), values.size() * sizeof(T));
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

Comparison Compare(const Tensor& want, const Tensor& got) {
  Comparison c;
  absl::Status s = CompareTensors(want, got, ToleranceFor(want->dtype()), &c);
  EXPECT_TRUE(s.ok()) << s;
  return c;
}

TEST(CompareTensorsTest, FloatWithinRelativeToleranceMatches) {
  Tensor want = Make<float>({2}, DataType::Float(32), {1000.0f, -2.0f});
  Tensor got = Make<float>({2}, DataType::Float(32), {1000.9f, -2.0015f});
  EXPECT_TRUE(Compare(want, got).match);
}

TEST(CompareTensorsTest, FloatOutsideToleranceNamesWorstElement) {
  Tensor want = Make<float>({2, 2}, DataType::Float(32), {1, 2, 3, 4});
  Tensor got = Make<float>({2, 2}, DataType::Float(32), {1, 2.5f, 3, 4.01f});
  Comparison c = Compare(want, got);
  EXPECT_FALSE(c.match);
  EXPECT_THAT(c.detail, HasSubstr("2 of 4 values differ"));
  EXPECT_THAT(c.detail, HasSubstr("worst at [0, 1]: got 2.5 expected 2"));
  EXPECT_NEAR(c.max_abs_error, 0.5, 1e-9);
}

TEST(CompareTensorsTest, NanEqualsNanButNotANumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor want = Make<float>({2}, DataType::Float(32), {nan, 1});
  EXPECT_TRUE(Compare(want, Make<float>({2}, DataType::Float(32), {nan, 1})).match);
  EXPECT_FALSE(Compare(want, Make<float>({2}, DataType::Float(32), {0, 1})).match);
}

TEST(CompareTensorsTest, InfinityMustMatchInSign) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor want = Make<double>({1}, DataType::Float(64), {inf});
  EXPECT_TRUE(Compare(want, Make<double>({1}, DataType::Float(64), {inf})).match);
  EXPECT_FALSE(Compare(want, Make<double>({1}, DataType::Float(64), {-inf})).match);
}

TEST(CompareTensorsTest, IntegersAreExactEvenPast2To53) {
  const int64_t big = (int64_t{1} << 60) + 1;
  Tensor want = Make<int64_t>({1}, DataType::Int(64), {big});
  EXPECT_TRUE(Compare(want, Make<int64_t>({1}, DataType::Int(64), {big})).match);
  Comparison c = Compare(want, Make<int64_t>({1}, DataType::Int(64), {big - 1}));
  EXPECT_FALSE(c.match);
  EXPECT_THAT(c.detail, HasSubstr("got 1152921504606846976 expected 1152921504606846977"));
}

TEST(CompareTensorsTest, ShapeAndDtypeMustMatchExactly) {
  Tensor want = Make<float>({2, 3}, DataType::Float(32), std::vector<float>(6, 0));
  Comparison shape =
      Compare(want, Make<float>({3, 2}, DataType::Float(32), std::vector<float>(6, 0)));
  EXPECT_FALSE(shape.match);
  EXPECT_EQ(shape.detail, "shape [3, 2] expected [2, 3]");
  Comparison dtype =
      Compare(want, Make<int32_t>({2, 3}, DataType::Int(32), std::vector<int32_t>(6, 0)));
  EXPECT_FALSE(dtype.match);
  EXPECT_EQ(dtype.detail, "dtype int32 expected float32");
}

TEST(CompareTensorsTest, Float16UsesLooserTolerance) {
  // 1.0 and 1.00390625 (the next half after 1 + 2^-10 rounding) differ by 0.4%.
  Tensor want = Make<uint16_t>({1}, DataType::Float(16), {0x3c00});
  Tensor got = Make<uint16_t>({1}, DataType::Float(16), {0x3c04});
  EXPECT_TRUE(Compare(want, got).match);
  EXPECT_FALSE(Compare(want, Make<uint16_t>({1}, DataType::Float(16), {0x3e00})).match);
}

TEST(CompareTensorsTest, BoolsAreExact) {
  Tensor want = Make<uint8_t>({3}, DataType::Bool(), {1, 0, 1});
  EXPECT_TRUE(Compare(want, Make<uint8_t>({3}, DataType::Bool(), {1, 0, 1})).match);
  EXPECT_FALSE(Compare(want, Make<uint8_t>({3}, DataType::Bool(), {1, 1, 1})).match);
}

TEST(CompareTensorsTest, ToleranceByDtype) {
  EXPECT_DOUBLE_EQ(ToleranceFor(DataType::Float(32)).rtol, 1e-3);
  EXPECT_DOUBLE_EQ(ToleranceFor(DataType::Float(32)).atol, 1e-7);
  EXPECT_DOUBLE_EQ(ToleranceFor(DataType::Float(16)).rtol, 1e-2);
  EXPECT_TRUE(ToleranceFor(DataType::Int(8)).exact());
  EXPECT_TRUE(ToleranceFor(DataType::Bool()).exact());
}

}  // namespace
}  // namespace tether::conformance
