// The 3-D forms of Conv, ConvTranspose, MaxPool and AveragePool (5-d NCDHW
// inputs) through the whole stack (a one-node ONNX model imported, built and
// run on the local VM), compared with references computed here. The 1-D and
// 2-D forms are in onnx_nn_test.cc.
#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

using Dims3 = std::array<int64_t, 3>;

// Deterministic, non-trivial values: i -> a small float with mixed signs.
std::vector<float> Ramp(int64_t n, float scale = 0.1f, int64_t offset = 0) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(scale * static_cast<float>((i * 7 + offset) % 11 - 5));
  return v;
}

int64_t At(const std::vector<int64_t>& s, int64_t a, int64_t b, const Dims3& p) {
  return (((a * s[1] + b) * s[2] + p[0]) * s[3] + p[1]) * s[4] + p[2];
}

// Calls f(o) for every position o of the 3-d box `extent`.
template <typename F>
void ForEach3(const Dims3& extent, F f) {
  for (int64_t i = 0; i < extent[0]; ++i)
    for (int64_t j = 0; j < extent[1]; ++j)
      for (int64_t k = 0; k < extent[2]; ++k) f(Dims3{i, j, k});
}

// Naive NCDHW / OIDHW convolution, plus an optional per-channel bias.
std::vector<float> RefConv3d(const std::vector<float>& x, const std::vector<int64_t>& xs,
                             const std::vector<float>& w, const std::vector<int64_t>& ws,
                             const std::vector<float>& bias, Dims3 stride, Dims3 pad_begin,
                             Dims3 dil, int64_t groups, const std::vector<int64_t>& ys) {
  const int64_t cg = ws[1], og = ws[0] / groups;
  std::vector<float> y(ys[0] * ys[1] * ys[2] * ys[3] * ys[4], 0.0f);
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t o = 0; o < ys[1]; ++o)
      ForEach3({ys[2], ys[3], ys[4]}, [&](const Dims3& out) {
        double acc = bias.empty() ? 0 : bias[o];
        for (int64_t c = 0; c < cg; ++c)
          ForEach3({ws[2], ws[3], ws[4]}, [&](const Dims3& k) {
            Dims3 in;
            for (int i = 0; i < 3; ++i) {
              in[i] = out[i] * stride[i] - pad_begin[i] + k[i] * dil[i];
              if (in[i] < 0 || in[i] >= xs[2 + i]) return;
            }
            acc += x[At(xs, n, (o / og) * cg + c, in)] * w[At(ws, o, c, k)];
          });
        y[At(ys, n, o, out)] = static_cast<float>(acc);
      });
  return y;
}

TEST(OnnxConv3dTest, ConvPadsStridesDilationsGroupAndBias) {
  const std::vector<int64_t> xs = {1, 4, 5, 6, 7}, ws = {6, 2, 2, 3, 2};
  std::vector<float> x = Ramp(4 * 5 * 6 * 7), w = Ramp(6 * 2 * 12, 0.2f, 3);
  std::vector<float> b = {0.5f, -1, 2, 0, 1, -0.25f};
  auto out = RunNode("Conv",
                     {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w)),
                      Init("b", MakeTensor<float>({6}, b))},
                     {MakeIntsAttr("strides", {2, 1, 3}), MakeIntsAttr("pads", {1, 0, 2, 0, 2, 1}),
                      MakeIntsAttr("dilations", {1, 2, 1}), MakeIntAttr("group", 2)});
  ASSERT_TRUE(out.ok()) << out.status();
  // OD = (5 + 1 - 2) / 2 + 1 = 3; OH = (6 + 2 - 5) + 1 = 4; OW = (7 + 3 - 2) / 3 + 1 = 3.
  const std::vector<int64_t> ys = {1, 6, 3, 4, 3};
  EXPECT_TRUE(TensorsNear(
      (*out)[0],
      MakeTensor<float>(ys, RefConv3d(x, xs, w, ws, b, {2, 1, 3}, {1, 0, 2}, {1, 2, 1}, 2, ys)),
      1e-5, 1e-5));
}

TEST(OnnxConv3dTest, ConvAutoPadSameLower) {
  const std::vector<int64_t> xs = {2, 1, 3, 4, 5}, ws = {2, 1, 2, 2, 3};
  std::vector<float> x = Ramp(2 * 60), w = Ramp(24, 0.3f, 1);
  auto out =
      RunNode("Conv", {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w))},
              {MakeStringAttr("auto_pad", "SAME_LOWER"), MakeIntsAttr("strides", {1, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Outputs ceil(in / stride) = (3, 2, 3); totals 1, 0, 2: SAME_LOWER puts the odd one first.
  const std::vector<int64_t> ys = {2, 2, 3, 2, 3};
  EXPECT_TRUE(TensorsNear(
      (*out)[0],
      MakeTensor<float>(ys, RefConv3d(x, xs, w, ws, {}, {1, 2, 2}, {1, 0, 1}, {1, 1, 1}, 1, ys)),
      1e-5, 1e-5));
}

// Naive 3-d pool: max, or average counting the taps inside the input (or,
// with count_include_pad, inside the padded input).
std::vector<float> RefPool3d(const std::vector<float>& x, const std::vector<int64_t>& xs,
                             bool is_max, Dims3 kernel, Dims3 stride, Dims3 pad_begin,
                             Dims3 pad_end, bool count_include_pad,
                             const std::vector<int64_t>& ys) {
  std::vector<float> y(ys[0] * ys[1] * ys[2] * ys[3] * ys[4]);
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t c = 0; c < ys[1]; ++c)
      ForEach3({ys[2], ys[3], ys[4]}, [&](const Dims3& out) {
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0, count = 0;
        ForEach3(kernel, [&](const Dims3& k) {
          Dims3 in;
          bool inside = true, in_pad = true;
          for (int i = 0; i < 3; ++i) {
            in[i] = out[i] * stride[i] - pad_begin[i] + k[i];
            inside = inside && in[i] >= 0 && in[i] < xs[2 + i];
            in_pad = in_pad && in[i] < xs[2 + i] + pad_end[i];
          }
          if (inside) {
            double v = x[At(xs, n, c, in)];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
          if (count_include_pad ? in_pad : inside) count += 1;
        });
        y[At(ys, n, c, out)] = static_cast<float>(is_max ? acc : acc / std::max(count, 1.0));
      });
  return y;
}

TEST(OnnxConv3dTest, MaxPoolCeilModeKeepsPartialWindows) {
  const std::vector<int64_t> xs = {1, 2, 5, 4, 5};
  std::vector<float> x = Ramp(200, 1.0f);
  auto out = RunNode("MaxPool", {In("x", MakeTensor<float>(xs, x))},
                     {MakeIntsAttr("kernel_shape", {2, 2, 2}), MakeIntsAttr("strides", {2, 2, 2}),
                      MakeIntAttr("ceil_mode", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  // ceil((5 - 2) / 2) + 1 = 3 along depth and width, 2 along height.
  const std::vector<int64_t> ys = {1, 2, 3, 2, 3};
  EXPECT_TRUE(
      TensorsNear((*out)[0], MakeTensor<float>(ys, RefPool3d(x, xs, true, {2, 2, 2}, {2, 2, 2},
                                                             {0, 0, 0}, {0, 0, 0}, false, ys))));
}

TEST(OnnxConv3dTest, AveragePoolPadsWithAndWithoutCountIncludePad) {
  const std::vector<int64_t> xs = {1, 1, 3, 4, 4};
  std::vector<float> x = Ramp(48, 0.5f);
  std::vector<onnx::AttributeProto> attrs = {MakeIntsAttr("kernel_shape", {3, 3, 2}),
                                             MakeIntsAttr("strides", {2, 1, 2}),
                                             MakeIntsAttr("pads", {1, 1, 0, 1, 1, 1})};
  auto excl = RunNode("AveragePool", {In("x", MakeTensor<float>(xs, x))}, attrs);
  attrs.push_back(MakeIntAttr("count_include_pad", 1));
  auto incl = RunNode("AveragePool", {In("x", MakeTensor<float>(xs, x))}, attrs);
  ASSERT_TRUE(excl.ok()) << excl.status();
  ASSERT_TRUE(incl.ok()) << incl.status();
  // OD = (3 + 2 - 3) / 2 + 1 = 2; OH = 4 + 2 - 3 + 1 = 4; OW = (4 + 1 - 2) / 2 + 1 = 2.
  const std::vector<int64_t> ys = {1, 1, 2, 4, 2};
  for (bool include : {false, true}) {
    EXPECT_TRUE(TensorsNear((include ? *incl : *excl)[0],
                            MakeTensor<float>(ys, RefPool3d(x, xs, false, {3, 3, 2}, {2, 1, 2},
                                                            {1, 1, 0}, {1, 1, 1}, include, ys))))
        << "count_include_pad " << include;
  }
}

// Naive 3-d transposed convolution: y[o] += x[i] * w[k] where
// o = i * stride + k * dilation - pad_begin; X (N, C, D, H, W), W (C, M/g, kd, kh, kw).
std::vector<float> RefConvTranspose3d(const std::vector<float>& x, const std::vector<int64_t>& xs,
                                      const std::vector<float>& w, const std::vector<int64_t>& ws,
                                      const std::vector<float>& bias, Dims3 stride, Dims3 pad_begin,
                                      Dims3 dil, int64_t groups, const std::vector<int64_t>& ys) {
  const int64_t mg = ws[1], cg = xs[1] / groups;
  std::vector<float> y(ys[0] * ys[1] * ys[2] * ys[3] * ys[4], 0.0f);
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t o = 0; o < ys[1]; ++o)
      ForEach3({ys[2], ys[3], ys[4]},
               [&](const Dims3& out) { y[At(ys, n, o, out)] = bias.empty() ? 0.0f : bias[o]; });
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      ForEach3({xs[2], xs[3], xs[4]}, [&](const Dims3& in) {
        for (int64_t m = 0; m < mg; ++m)
          ForEach3({ws[2], ws[3], ws[4]}, [&](const Dims3& k) {
            Dims3 out;
            for (int i = 0; i < 3; ++i) {
              out[i] = in[i] * stride[i] + k[i] * dil[i] - pad_begin[i];
              if (out[i] < 0 || out[i] >= ys[2 + i]) return;
            }
            y[At(ys, n, (c / cg) * mg + m, out)] += x[At(xs, n, c, in)] * w[At(ws, c, m, k)];
          });
      });
  return y;
}

TEST(OnnxConv3dTest, ConvTransposeStridesPadsOutputPaddingGroupAndBias) {
  const std::vector<int64_t> xs = {1, 4, 2, 3, 2}, ws = {4, 1, 2, 3, 2};
  std::vector<float> x = Ramp(48), w = Ramp(48, 0.2f, 5);
  std::vector<float> b = {1, -0.5f};
  auto out = RunNode("ConvTranspose",
                     {In("x", MakeTensor<float>(xs, x)), Init("w", MakeTensor<float>(ws, w)),
                      Init("b", MakeTensor<float>({2}, b))},
                     {MakeIntsAttr("strides", {2, 1, 3}), MakeIntsAttr("pads", {0, 1, 1, 1, 0, 0}),
                      MakeIntsAttr("output_padding", {1, 0, 2}),
                      MakeIntsAttr("dilations", {1, 2, 1}), MakeIntAttr("group", 2)});
  ASSERT_TRUE(out.ok()) << out.status();
  // OD = 2 * 1 + 1 + 1 + 1 - 1 = 4; OH = 2 + 0 + 4 + 1 - 1 = 6; OW = 3 + 2 + 1 + 1 - 1 = 6.
  const std::vector<int64_t> ys = {1, 2, 4, 6, 6};
  EXPECT_TRUE(TensorsNear((*out)[0],
                          MakeTensor<float>(ys, RefConvTranspose3d(x, xs, w, ws, b, {2, 1, 3},
                                                                   {0, 1, 1}, {1, 2, 1}, 2, ys)),
                          1e-5, 1e-5));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
