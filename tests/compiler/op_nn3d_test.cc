// The 3-D relax.nn operators: conv3d (strides, padding, dilation, groups)
// and max/avg pool3d (ceil_mode, count_include_pad) -- inference (shapes
// and errors) and schedules run against plain C++ references on random
// inputs, with odd sizes, size 1 and rows wider than one column tile.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "gtest/gtest.h"
#include "tests/compiler/op_test_util.h"

namespace tether::compiler {
namespace {

using optest::HostTensor;
using optest::kF16;
using optest::kF32;
using optest::Random;
using optest::Shape;

int64_t Index5(const Shape& s, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  return (((a * s[1] + b) * s[2] + c) * s[3] + d) * s[4] + e;
}

struct Conv3 {
  std::vector<int64_t> strides{1, 1, 1}, padding{0, 0, 0, 0, 0, 0}, dilation{1, 1, 1};
  int64_t groups = 1;
  Attrs attrs() const {
    return {{"strides", strides}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
  }
};

HostTensor Conv3dRef(const HostTensor& x, const HostTensor& w, const Conv3& p) {
  const Shape& xs = x.shape;
  const Shape& ws = w.shape;
  Shape ys = {xs[0], ws[0]};
  for (int i = 0; i < 3; ++i) {
    ys.push_back(
        (xs[2 + i] + p.padding[i] + p.padding[3 + i] - p.dilation[i] * (ws[2 + i] - 1) - 1) /
            p.strides[i] +
        1);
  }
  const int64_t Cg = ws[1], Og = ws[0] / p.groups;
  HostTensor y{ys, x.dtype, std::vector<double>(static_cast<size_t>(optest::NumElements(ys)))};
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t o = 0; o < ys[1]; ++o)
      for (int64_t od = 0; od < ys[2]; ++od)
        for (int64_t oh = 0; oh < ys[3]; ++oh)
          for (int64_t ow = 0; ow < ys[4]; ++ow) {
            double s = 0;
            const int64_t g = o / Og;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t kd = 0; kd < ws[2]; ++kd)
                for (int64_t kh = 0; kh < ws[3]; ++kh)
                  for (int64_t kw = 0; kw < ws[4]; ++kw) {
                    int64_t id = od * p.strides[0] - p.padding[0] + kd * p.dilation[0];
                    int64_t ih = oh * p.strides[1] - p.padding[1] + kh * p.dilation[1];
                    int64_t iw = ow * p.strides[2] - p.padding[2] + kw * p.dilation[2];
                    if (id < 0 || id >= xs[2] || ih < 0 || ih >= xs[3] || iw < 0 || iw >= xs[4])
                      continue;
                    s += x.data[Index5(xs, n, g * Cg + c, id, ih, iw)] *
                         w.data[Index5(ws, o, c, kd, kh, kw)];
                  }
            y.data[Index5(ys, n, o, od, oh, ow)] = optest::RoundTo(x.dtype, s);
          }
  return y;
}

void ExpectConv3d(const Shape& xs, const Shape& ws, const Conv3& p, uint32_t seed,
                  DataType dtype = kF32) {
  HostTensor x = Random(xs, dtype, seed), w = Random(ws, dtype, seed + 1);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp("relax.nn.conv3d", {x, w}, p.attrs()));
  const double red = static_cast<double>(ws[1] * ws[2] * ws[3] * ws[4]);
  optest::ExpectClose(out[0], Conv3dRef(x, w, p), optest::Tolerance(dtype) * (1 + red / 8));
}

TEST(Conv3dInferTest, OutputShapeWithStridePaddingDilation) {
  Conv3 p;
  p.strides = {2, 1, 1};
  p.padding = {1, 0, 2, 1, 0, 0};
  p.dilation = {1, 1, 2};
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.conv3d",
      {optest::TensorVar("x", {2, 4, 7, 6, 10}, kF32),
       optest::TensorVar("w", {8, 2, 3, 3, 3}, kF32)},
      {{"strides", p.strides}, {"padding", p.padding}, {"dilation", p.dilation}, {"groups", 2}});
  ASSERT_TRUE(s.ok()) << s.status();
  // OD = (7 + 2 - 3) / 2 + 1 = 4; OH = 6 - 3 + 1 = 4; OW = (10 + 2 - 5) + 1 = 8.
  EXPECT_EQ(ToString(*s), "R.Tensor((2, 8, 4, 4, 8), \"float32\")");
}

TEST(Conv3dInferTest, RejectsBadRankChannelsAndAttrs) {
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.conv3d",
      {optest::TensorVar("x", {1, 4, 5, 5}, kF32), optest::TensorVar("w", {2, 4, 1, 1, 1}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.nn.conv3d: data must have 5 dims, got 4"),
            std::string::npos)
      << s.status();
  s = optest::InferOp("relax.nn.conv3d", {optest::TensorVar("x", {1, 4, 5, 5, 5}, kF32),
                                          optest::TensorVar("w", {2, 3, 1, 1, 1}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("data has 4 channels"), std::string::npos) << s.status();
  s = optest::InferOp("relax.nn.conv3d",
                      {optest::TensorVar("x", {1, 4, 5, 5, 5}, kF32),
                       optest::TensorVar("w", {2, 4, 1, 1, 1}, kF32)},
                      {{"strides", std::vector<int64_t>{1, 1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("strides must have 1 or 3 values, got 2"), std::string::npos)
      << s.status();
  s = optest::InferOp("relax.nn.conv3d", {optest::TensorVar("x", {1, 1, 2, 5, 5}, kF32),
                                          optest::TensorVar("w", {1, 1, 3, 1, 1}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("does not fit"), std::string::npos) << s.status();
}

TEST(Conv3dScheduleTest, Plain) {
  ExpectConv3d({1, 3, 4, 5, 6}, {4, 3, 2, 3, 3}, Conv3{}, 1);
  ExpectConv3d({1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, Conv3{}, 2);
}

TEST(Conv3dScheduleTest, PaddingStrideDilationTogether) {
  Conv3 p;
  p.strides = {2, 1, 3};
  p.padding = {1, 2, 0, 2, 1, 3};
  p.dilation = {2, 1, 2};
  ExpectConv3d({2, 3, 7, 6, 9}, {5, 3, 3, 2, 3}, p, 3);
}

TEST(Conv3dScheduleTest, GroupsAndDepthwise) {
  Conv3 p;
  p.groups = 2;
  p.padding = {1, 1, 1, 1, 1, 1};
  ExpectConv3d({1, 4, 3, 4, 5}, {6, 2, 3, 3, 3}, p, 5);
  Conv3 dw;
  dw.groups = 3;
  dw.strides = {1, 2, 2};
  dw.padding = {0, 1, 1, 0, 1, 1};
  ExpectConv3d({1, 3, 4, 8, 8}, {3, 1, 2, 3, 3}, dw, 7);
}

TEST(Conv3dScheduleTest, RowWiderThanOneTileAndFloat16) {
  Conv3 p;
  p.padding = {0, 0, 1, 0, 0, 1};
  ExpectConv3d({1, 2, 2, 2, 150}, {3, 2, 1, 2, 3}, p, 9);
  ExpectConv3d({1, 2, 3, 4, 5}, {2, 2, 2, 2, 2}, Conv3{}, 11, kF16);
}

// ---- pool3d ----

struct Pool3 {
  std::vector<int64_t> size{2, 2, 2}, strides{2, 2, 2}, padding{0, 0, 0, 0, 0, 0},
      dilation{1, 1, 1};
  bool ceil_mode = false, count_include_pad = false;
  Attrs attrs() const {
    return {{"pool_size", size},      {"strides", strides},
            {"padding", padding},     {"dilation", dilation},
            {"ceil_mode", ceil_mode}, {"count_include_pad", count_include_pad}};
  }
};

HostTensor Pool3dRef(const HostTensor& x, const Pool3& p, bool is_max) {
  const Shape& xs = x.shape;
  Shape ys = {xs[0], xs[1]};
  for (int i = 0; i < 3; ++i) {
    int64_t num = xs[2 + i] + p.padding[i] + p.padding[3 + i] - p.dilation[i] * (p.size[i] - 1) - 1;
    if (p.ceil_mode) num += p.strides[i] - 1;
    ys.push_back(num / p.strides[i] + 1);
  }
  HostTensor y{ys, x.dtype, std::vector<double>(static_cast<size_t>(optest::NumElements(ys)))};
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t c = 0; c < ys[1]; ++c)
      for (int64_t od = 0; od < ys[2]; ++od)
        for (int64_t oh = 0; oh < ys[3]; ++oh)
          for (int64_t ow = 0; ow < ys[4]; ++ow) {
            double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
            double count = 0;
            for (int64_t kd = 0; kd < p.size[0]; ++kd)
              for (int64_t kh = 0; kh < p.size[1]; ++kh)
                for (int64_t kw = 0; kw < p.size[2]; ++kw) {
                  int64_t id = od * p.strides[0] - p.padding[0] + kd * p.dilation[0];
                  int64_t ih = oh * p.strides[1] - p.padding[1] + kh * p.dilation[1];
                  int64_t iw = ow * p.strides[2] - p.padding[2] + kw * p.dilation[2];
                  bool inside =
                      id >= 0 && id < xs[2] && ih >= 0 && ih < xs[3] && iw >= 0 && iw < xs[4];
                  bool in_pad = id < xs[2] + p.padding[3] && ih < xs[3] + p.padding[4] &&
                                iw < xs[4] + p.padding[5];
                  if (inside) {
                    double v = x.data[Index5(xs, n, c, id, ih, iw)];
                    acc = is_max ? std::max(acc, v) : acc + v;
                  }
                  if (p.count_include_pad ? in_pad : inside) count += 1;
                }
            y.data[Index5(ys, n, c, od, oh, ow)] =
                optest::RoundTo(x.dtype, is_max ? acc : acc / std::max(count, 1.0));
          }
  return y;
}

void ExpectPool3d(const Shape& xs, const Pool3& p, bool is_max, uint32_t seed) {
  HostTensor x = Random(xs, kF32, seed);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, optest::RunOp(is_max ? "relax.nn.max_pool3d" : "relax.nn.avg_pool3d", {x}, p.attrs()));
  optest::ExpectClose(out[0], Pool3dRef(x, p, is_max));
}

TEST(Pool3dInferTest, OutputShapeFloorAndCeilMode) {
  Pool3 p;
  p.size = {3, 3, 3};
  p.strides = {2, 2, 2};
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.max_pool3d", {optest::TensorVar("x", {1, 2, 8, 9, 6}, kF32)}, p.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((1, 2, 3, 4, 2), \"float32\")");
  p.ceil_mode = true;
  s = optest::InferOp("relax.nn.max_pool3d", {optest::TensorVar("x", {1, 2, 8, 9, 6}, kF32)},
                      p.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((1, 2, 4, 4, 3), \"float32\")");
}

TEST(Pool3dInferTest, RejectsBadAttrsAndRank) {
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.avg_pool3d", {optest::TensorVar("x", {1, 2, 8, 9, 4}, kF32)},
                      {{"pool_size", std::vector<int64_t>{2, 2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.status().message().find("relax.nn.avg_pool3d: pool_size must have 1 or 3 values, got 2"),
      std::string::npos)
      << s.status();
  s = optest::InferOp("relax.nn.max_pool3d", {optest::TensorVar("x", {2, 8, 9, 3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("must have 5 dims"), std::string::npos);
  s = optest::InferOp("relax.nn.max_pool3d", {optest::TensorVar("x", {1, 1, 2, 2, 2}, kF32)},
                      {{"pool_size", std::vector<int64_t>{3, 1, 1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("does not fit"), std::string::npos);
}

TEST(Pool3dScheduleTest, MaxPoolVariants) {
  ExpectPool3d({2, 3, 4, 6, 6}, Pool3{}, true, 1);
  Pool3 p;
  p.size = {3, 3, 3};
  p.padding = {1, 1, 1, 1, 1, 1};
  p.ceil_mode = true;
  ExpectPool3d({1, 2, 5, 7, 6}, p, true, 2);
  Pool3 d;
  d.size = {2, 2, 3};
  d.strides = {1, 1, 2};
  d.dilation = {2, 1, 2};
  ExpectPool3d({1, 2, 5, 3, 140}, d, true, 3);  // wider than one column tile
  Pool3 one;
  one.size = {1, 1, 1};
  one.strides = {1, 1, 1};
  ExpectPool3d({1, 1, 1, 1, 1}, one, true, 4);
}

TEST(Pool3dScheduleTest, AvgPoolCountIncludePadAndCeilMode) {
  Pool3 p;
  p.size = {3, 3, 3};
  p.padding = {1, 1, 1, 1, 1, 1};
  ExpectPool3d({1, 3, 5, 7, 6}, p, false, 5);
  p.count_include_pad = true;
  ExpectPool3d({1, 3, 5, 7, 6}, p, false, 6);
  p.ceil_mode = true;
  p.padding = {0, 1, 0, 0, 1, 0};
  ExpectPool3d({2, 2, 6, 5, 5}, p, false, 7);
}

}  // namespace
}  // namespace tether::compiler
