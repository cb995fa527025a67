// Tests of relax.image.resize2d (compiler/op/image.cc): struct-info
// inference and attribute errors, and the kernel against a reference
// written here after ONNX's reference implementation (the taps of a
// coordinate are the n input indices nearest to it in an edge-padded axis,
// ties to the lower index; weights by method), for every method and
// coordinate transformation mode, up- and downsampling.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/relax/structural_equal.h"
#include "compiler/text/parser.h"
#include "compiler/text/printer.h"
#include "tests/compiler/op_test_util.h"

namespace tether::compiler {
namespace {

using optest::HostTensor;
using optest::kF32;
using optest::Random;
using optest::Shape;

constexpr char kOp[] = "relax.image.resize2d";

struct Resize {
  int64_t out_h = 1, out_w = 1;
  std::string method = "linear";
  std::string mode = "half_pixel";
  std::string rounding = "round_prefer_floor";
  double alpha = -0.75;
  bool exclude = false;
  double extrapolation = 0.0;
  std::vector<double> roi = {0, 0, 1, 1};
  std::vector<double> scale;  // empty: out / in

  Attrs attrs() const {
    Attrs a = {{"size", std::vector<int64_t>{out_h, out_w}},
               {"method", method},
               {"coordinate_transformation_mode", mode},
               {"rounding_method", rounding},
               {"cubic_alpha", alpha},
               {"cubic_exclude", static_cast<int64_t>(exclude)},
               {"extrapolation_value", extrapolation}};
    std::vector<PrimExpr> r;
    for (double v : roi) r.push_back(FloatImm(DataType::Float(64), v));
    a["roi"] = r;
    if (!scale.empty()) {
      std::vector<PrimExpr> s;
      for (double v : scale) s.push_back(FloatImm(DataType::Float(64), v));
      a["scale"] = s;
    }
    return a;
  }
};

// ---- the reference (after onnx/reference/ops/op_resize.py) ----

std::vector<double> NearestCoeffs(double ratio, const std::string& rounding) {
  if (ratio == std::floor(ratio)) return {0, 1};
  if (rounding == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
  if (rounding == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
  if (rounding == "floor") return {1, 0};
  return {0, 1};  // ceil
}

std::vector<double> CubicCoeffs(double r, double A) {
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
          ((A + 2) * r - (A + 3)) * r * r + 1,
          ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
          ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A};
}

// Interpolates `data` (one axis) at output index x; nullopt-like NaN flags
// tf_crop_and_resize's extrapolation.
double Interpolate1d(const std::vector<double>& data, double scale, int64_t out, int64_t x,
                     const Resize& p, double roi_start, double roi_end, bool* extrapolate) {
  const int64_t in = static_cast<int64_t>(data.size());
  const double out_real = scale * static_cast<double>(in);
  double xo = 0;
  if (p.mode == "align_corners") {
    xo = out_real == 1 ? 0 : x * (in - 1) / (out_real - 1);
  } else if (p.mode == "asymmetric") {
    xo = x / scale;
  } else if (p.mode == "tf_crop_and_resize") {
    xo = out == 1 ? (roi_end - roi_start) * (in - 1) / 2.0
                  : x * (roi_end - roi_start) * (in - 1) / static_cast<double>(out - 1);
    xo += roi_start * (in - 1);
    if (xo < 0 || xo > in - 1) *extrapolate = true;
  } else if (p.mode == "pytorch_half_pixel") {
    xo = out_real == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  } else if (p.mode == "tf_half_pixel_for_nearest") {
    xo = (x + 0.5) / scale;
  } else {
    xo = (x + 0.5) / scale - 0.5;
  }
  const double xi = std::floor(xo);
  const double ratio = xo == xi ? 1.0 : xo - xi;
  std::vector<double> coeffs;
  if (p.method == "nearest_neighbor") {
    coeffs = NearestCoeffs(ratio, p.rounding);
  } else if (p.method == "linear") {
    coeffs = {1 - ratio, ratio};
  } else {
    coeffs = CubicCoeffs(ratio, p.alpha);
  }
  const int64_t n = static_cast<int64_t>(coeffs.size());
  const int64_t pad = (n + 1) / 2;
  const int64_t padded = in + 2 * pad;
  const double xp = xo + static_cast<double>(pad);
  std::vector<int64_t> idx(static_cast<size_t>(padded));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const double da = std::fabs(xp - a), db = std::fabs(xp - b);
    return da != db ? da < db : a < b;
  });
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  if (p.exclude) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = idx[static_cast<size_t>(k)] - pad;
      if (i < 0 || i >= in) coeffs[static_cast<size_t>(k)] = 0;
      sum += coeffs[static_cast<size_t>(k)];
    }
    for (double& c : coeffs) c /= sum;
  }
  double v = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = std::clamp<int64_t>(idx[static_cast<size_t>(k)] - pad, 0, in - 1);
    v += coeffs[static_cast<size_t>(k)] * data[static_cast<size_t>(i)];
  }
  return v;
}

HostTensor ResizeRef(const HostTensor& x, const Resize& p) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const double sh = p.scale.empty() ? static_cast<double>(p.out_h) / H : p.scale[0];
  const double sw = p.scale.empty() ? static_cast<double>(p.out_w) / W : p.scale[1];
  HostTensor y{{N, C, p.out_h, p.out_w}, x.dtype, {}};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < p.out_h; ++oh)
        for (int64_t ow = 0; ow < p.out_w; ++ow) {
          // Separable: interpolate every row along w, then the column along h.
          bool extrapolate = false;
          std::vector<double> column(static_cast<size_t>(H));
          for (int64_t h = 0; h < H; ++h) {
            std::vector<double> row(static_cast<size_t>(W));
            for (int64_t w = 0; w < W; ++w) {
              row[static_cast<size_t>(w)] =
                  x.data[static_cast<size_t>(((n * C + c) * H + h) * W + w)];
            }
            column[static_cast<size_t>(h)] =
                Interpolate1d(row, sw, p.out_w, ow, p, p.roi[1], p.roi[3], &extrapolate);
          }
          double v = Interpolate1d(column, sh, p.out_h, oh, p, p.roi[0], p.roi[2], &extrapolate);
          if (extrapolate) v = p.extrapolation;
          y.data.push_back(optest::RoundTo(x.dtype, v));
        }
  return y;
}

void ExpectResize(const Shape& xs, const Resize& p, uint32_t seed) {
  HostTensor x = Random(xs, kF32, seed);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp(kOp, {x}, p.attrs()));
  optest::ExpectClose(out[0], ResizeRef(x, p), 1e-5);
}

// ---- inference ----

TEST(Resize2dInferTest, OutputShapeKeepsBatchAndChannels) {
  Var n("n");
  Resize p;
  p.out_h = 7;
  p.out_w = 3;
  absl::StatusOr<StructInfo> s =
      optest::InferOp(kOp, {optest::TensorVar("x", {n, 3, 4, 4}, kF32)}, p.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((n, 3, 7, 3), \"float32\")");
  Attrs a = p.attrs();
  a["out_dtype"] = std::string("float64");
  s = optest::InferOp(kOp, {optest::TensorVar("x", {n, 3, 4, 4}, kF32)}, a);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((n, 3, 7, 3), \"float64\")");
}

TEST(Resize2dInferTest, RejectsBadRankAndAttributes) {
  const Expr x4 = optest::TensorVar("x", {1, 1, 4, 4}, kF32);
  auto expect_error = [&](const Expr& x, Attrs attrs, const std::string& fragment) {
    absl::StatusOr<StructInfo> s = optest::InferOp(kOp, {x}, std::move(attrs));
    ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(s.status().message().find(fragment), std::string::npos) << s.status();
  };
  Resize p;
  expect_error(optest::TensorVar("x", {4, 4}, kF32), p.attrs(),
               "relax.image.resize2d: data must have 4 dims (NCHW), got 2");
  Attrs a = p.attrs();
  a["method"] = std::string("area");
  expect_error(x4, a, "method 'area' is not one of nearest_neighbor, linear, cubic");
  a = p.attrs();
  a["coordinate_transformation_mode"] = std::string("centered");
  expect_error(x4, a, "coordinate_transformation_mode 'centered'");
  a = p.attrs();
  a["rounding_method"] = std::string("nearest");
  expect_error(x4, a, "rounding_method 'nearest'");
  a = p.attrs();
  a["layout"] = std::string("NHWC");
  expect_error(x4, a, "layout 'NHWC' is not supported");
  a = p.attrs();
  a["size"] = std::vector<int64_t>{0, 2};
  expect_error(x4, a, "size must be positive");
  a.erase("size");
  expect_error(x4, a, "the size attribute is required");
  a = p.attrs();
  a["roi"] = std::vector<int64_t>{0, 1};
  expect_error(x4, a, "roi must have 4 values");
  a = p.attrs();
  a["scale"] = std::vector<PrimExpr>{FloatImm(DataType::Float(64), -2.0)};
  expect_error(x4, a, "scale must be 1 or 2 positive values");
}

// (The float lists roi and scale have no text form yet: the parser reads
// list attributes as int dims.)
TEST(Resize2dInferTest, TextFormRoundTrips) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main(x: R.Tensor(("n", 3, 4, 4), "float32")):
    n = T.int64()
    R.func_attr({"num_input": 1, "global_symbol": "main"})
    y = R.image.resize2d(x, size=[8, 6], method="cubic",
                         coordinate_transformation_mode="align_corners", cubic_alpha=-0.5,
                         cubic_exclude=True)
    return y
)");
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string printed = PrintModule(*m);
  EXPECT_NE(printed.find("R.Tensor((n, 3, 8, 6), dtype=\"float32\")"), std::string::npos)
      << printed;
  absl::StatusOr<IRModule> again = ParseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
  EXPECT_TRUE(StructuralEqual(*m, *again)) << printed;
}

// ---- kernels against the reference ----

TEST(Resize2dTest, NearestRoundingMethodsUpAndDown) {
  for (const char* rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    for (const char* mode : {"half_pixel", "asymmetric", "align_corners"}) {
      SCOPED_TRACE(std::string(rounding) + " " + mode);
      Resize p;
      p.method = "nearest_neighbor";
      p.rounding = rounding;
      p.mode = mode;
      p.out_h = 8;
      p.out_w = 7;
      ExpectResize({1, 2, 4, 3}, p, 1);
      p.out_h = 3;
      p.out_w = 2;
      ExpectResize({2, 1, 7, 5}, p, 2);
    }
  }
}

TEST(Resize2dTest, LinearEveryCoordinateMode) {
  for (const char* mode : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
    SCOPED_TRACE(mode);
    Resize p;
    p.mode = mode;
    p.out_h = 9;
    p.out_w = 5;
    ExpectResize({1, 3, 4, 4}, p, 3);
    p.out_h = 1;  // pytorch_half_pixel's and align_corners' single-output case
    p.out_w = 3;
    ExpectResize({1, 1, 5, 6}, p, 4);
  }
}

TEST(Resize2dTest, CubicWithAndWithoutExcludeOutside) {
  for (bool exclude : {false, true}) {
    for (const char* mode : {"half_pixel", "align_corners", "asymmetric"}) {
      SCOPED_TRACE(std::string(mode) + (exclude ? " exclude" : ""));
      Resize p;
      p.method = "cubic";
      p.mode = mode;
      p.exclude = exclude;
      p.alpha = exclude ? -0.5 : -0.75;
      p.out_h = 8;
      p.out_w = 8;
      ExpectResize({1, 1, 4, 4}, p, 5);
      p.out_h = 3;
      p.out_w = 2;
      ExpectResize({1, 2, 6, 5}, p, 6);
    }
  }
}

// ONNX's scales: 0.6 on a 4-wide axis gives 2 outputs read at (x + 0.5) / 0.6
// - 0.5, not at (x + 0.5) * 2 - 0.5.
// torch's F.interpolate(scale_factor=k, mode="nearest"): whole factors take
// integer indices (image.cc, WholeUpscale); the same result as the float
// coordinates, which a size that is not in * k still takes.
TEST(Resize2dTest, NearestWholeUpscaleTakesIntegerIndices) {
  Resize p;
  p.method = "nearest_neighbor";
  p.rounding = "floor";
  p.mode = "asymmetric";
  p.scale = {2.0, 3.0};
  p.out_h = 10;
  p.out_w = 21;
  ExpectResize({2, 3, 5, 7}, p, 11);
  p.out_w = 20;  // not 7 * 3: the float path
  ExpectResize({1, 2, 5, 7}, p, 12);
}

TEST(Resize2dTest, GivenScaleDrivesTheCoordinates) {
  Resize p;
  p.out_h = 1;
  p.out_w = 2;
  p.scale = {0.6, 0.6};
  HostTensor x{{1, 1, 2, 4}, kF32, {1, 2, 3, 4, 5, 6, 7, 8}};
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp(kOp, {x}, p.attrs()));
  HostTensor want{{1, 1, 1, 2}, kF32, {2.6666666, 4.3333333}};
  optest::ExpectClose(out[0], want, 1e-5);
  for (const char* mode : {"half_pixel", "align_corners", "pytorch_half_pixel"}) {
    SCOPED_TRACE(mode);
    p.mode = mode;
    p.method = "cubic";
    p.out_h = 3;
    p.out_w = 3;
    p.scale = {0.8, 0.8};
    ExpectResize({1, 1, 4, 4}, p, 7);
  }
}

TEST(Resize2dTest, TfCropAndResizeExtrapolates) {
  for (const char* method : {"linear", "nearest_neighbor", "cubic"}) {
    SCOPED_TRACE(method);
    Resize p;
    p.method = method;
    p.mode = "tf_crop_and_resize";
    p.roi = {0.4, 0.6, 1.2, 1.7};
    p.extrapolation = 10.0;
    p.out_h = 3;
    p.out_w = 3;
    ExpectResize({1, 1, 4, 4}, p, 8);
    p.out_h = 1;
    p.out_w = 4;
    ExpectResize({1, 2, 5, 4}, p, 9);
  }
}

TEST(Resize2dTest, TfHalfPixelForNearest) {
  Resize p;
  p.method = "nearest_neighbor";
  p.mode = "tf_half_pixel_for_nearest";
  p.out_h = 3;
  p.out_w = 2;
  ExpectResize({1, 1, 4, 4}, p, 10);
}

TEST(Resize2dTest, Uint8NearestAndFloat16Linear) {
  Resize p;
  p.method = "nearest_neighbor";
  p.out_h = 5;
  p.out_w = 3;
  HostTensor u8 = Random({1, 2, 3, 4}, DataType::UInt(8), 11, 0, 256);
  OP_TEST_ASSERT_OK_AND_ASSIGN(nearest, optest::RunOp(kOp, {u8}, p.attrs()));
  EXPECT_EQ(nearest[0].dtype, DataType::UInt(8));
  optest::ExpectClose(nearest[0], ResizeRef(u8, p));

  p.method = "linear";
  p.out_h = 6;
  p.out_w = 7;
  HostTensor f16 = Random({1, 1, 3, 4}, optest::kF16, 12);
  OP_TEST_ASSERT_OK_AND_ASSIGN(linear, optest::RunOp(kOp, {f16}, p.attrs()));
  EXPECT_EQ(linear[0].dtype, optest::kF16);
  optest::ExpectClose(linear[0], ResizeRef(f16, p));
}

TEST(Resize2dTest, OutDtypeCastsTheResult) {
  Resize p;
  p.out_h = 4;
  p.out_w = 4;
  Attrs a = p.attrs();
  a["out_dtype"] = std::string("float64");
  HostTensor x = Random({1, 1, 2, 2}, kF32, 13);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp(kOp, {x}, a));
  EXPECT_EQ(out[0].dtype, DataType::Float(64));
  HostTensor want = ResizeRef(x, p);
  want.dtype = DataType::Float(64);
  optest::ExpectClose(out[0], want, 1e-6);
}

}  // namespace
}  // namespace tether::compiler
