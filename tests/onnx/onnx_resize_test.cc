// Tests of the ONNX Resize and Upsample converters (convert_resize.cc): scales
// vs sizes, the legacy forms, ranks other than 4, symbolic batch dims, the
// errors, and every Resize/Upsample case of the ONNX node test suite run with
// its scales/sizes/roi inputs fixed at import time (frozen_inputs) and
// compared with the suite's expected output.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/frontend/onnx/tensor_proto.h"
#include "gmock/gmock.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;

using testing::Absent;
using testing::In;
using testing::Init;
using testing::MakeFloatAttr;
using testing::MakeFloatsAttr;
using testing::MakeIntAttr;
using testing::MakeStringAttr;
using testing::MakeTensor;
using testing::ReadTensor;
using testing::RunNode;
using testing::ShapeOf;
using testing::TensorsNear;

Tensor Iota(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return MakeTensor<float>(shape, v);
}

TEST(OnnxResizeTest, NearestUpsampleByScalesInitializer) {
  auto out = RunNode(
      "Resize",
      {In("x", Iota({1, 1, 2, 2})), Absent(), Init("scales", MakeTensor<float>({4}, {1, 1, 2, 3}))},
      {MakeStringAttr("mode", "nearest")}, 1, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 1, 4, 6}, {1, 1, 1, 2, 2, 2,  //
                                                                      1, 1, 1, 2, 2, 2,  //
                                                                      3, 3, 3, 4, 4, 4,  //
                                                                      3, 3, 3, 4, 4, 4})));
}

// Scale 0.6 on a 4-wide axis gives 2 outputs, but the coordinates are
// transformed with 0.6 (ONNX), not with 2 / 4: x_in = (x + 0.5) / 0.6 - 0.5.
TEST(OnnxResizeTest, DownsampleTransformsWithTheGivenScaleNotTheSizeRatio) {
  const Tensor x = Iota({1, 1, 2, 4});
  auto by_scales = RunNode(
      "Resize", {In("x", x), Absent(), Init("scales", MakeTensor<float>({4}, {1, 1, 0.6f, 0.6f}))},
      {MakeStringAttr("mode", "linear")}, 1, 13);
  ASSERT_TRUE(by_scales.ok()) << by_scales.status();
  // The ONNX test suite's expected values for this input.
  EXPECT_TRUE(TensorsNear((*by_scales)[0],
                          MakeTensor<float>({1, 1, 1, 2}, {2.6666665f, 4.3333331f}), 1e-5));
  auto by_sizes = RunNode(
      "Resize",
      {In("x", x), Absent(), Absent(), Init("sizes", MakeTensor<int64_t>({4}, {1, 1, 1, 2}))},
      {MakeStringAttr("mode", "linear")}, 1, 13);
  ASSERT_TRUE(by_sizes.ok()) << by_sizes.status();
  // Sizes: the scale is 1/2 on both axes: x_in = 2x + 0.5, y_in = 0.5, so the
  // row means [3, 4, 5, 6] are read at 0.5 and 2.5.
  EXPECT_TRUE(TensorsNear((*by_sizes)[0], MakeTensor<float>({1, 1, 1, 2}, {3.5f, 5.5f})));
}

TEST(OnnxResizeTest, LinearAlignCornersUpsample) {
  auto out = RunNode("Resize",
                     {In("x", Iota({1, 1, 2, 2})), Absent(), Absent(),
                      Init("sizes", MakeTensor<int64_t>({4}, {1, 1, 3, 3}))},
                     {MakeStringAttr("mode", "linear"),
                      MakeStringAttr("coordinate_transformation_mode", "align_corners")},
                     1, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(
      TensorsNear((*out)[0], MakeTensor<float>({1, 1, 3, 3}, {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4})));
}

TEST(OnnxResizeTest, UpsampleAttributeAndInputForms) {
  const Tensor x = Iota({1, 1, 2, 2});
  const Tensor want = MakeTensor<float>({1, 1, 2, 4}, {1, 1, 2, 2, 3, 3, 4, 4});
  auto v7 =
      RunNode("Upsample", {In("x", x)},
              {MakeStringAttr("mode", "nearest"), MakeFloatsAttr("scales", {1, 1, 1, 2})}, 1, 7);
  ASSERT_TRUE(v7.ok()) << v7.status();
  EXPECT_TRUE(TensorsNear((*v7)[0], want));
  auto v9 = RunNode("Upsample", {In("x", x), Init("scales", MakeTensor<float>({4}, {1, 1, 1, 2}))},
                    {MakeStringAttr("mode", "nearest")}, 1, 9);
  ASSERT_TRUE(v9.ok()) << v9.status();
  EXPECT_TRUE(TensorsNear((*v9)[0], want));
  // Resize-10 is Upsample-9 under a new name: asymmetric linear.
  auto v10 = RunNode("Resize", {In("x", x), Init("scales", MakeTensor<float>({4}, {1, 1, 1, 2}))},
                     {MakeStringAttr("mode", "linear")}, 1, 10);
  ASSERT_TRUE(v10.ok()) << v10.status();
  EXPECT_TRUE(
      TensorsNear((*v10)[0], MakeTensor<float>({1, 1, 2, 4}, {1, 1.5, 2, 2, 3, 3.5, 4, 4})));
}

// Resize-10 nearest rounds the asymmetric coordinate up when downsampling
// (x = 1 reads 1 / 0.6 = 1.67 -> 2) and cannot round two axes differently.
TEST(OnnxResizeTest, LegacyNearestRoundsUpWhenDownsampling) {
  auto down = RunNode(
      "Resize",
      {In("x", Iota({1, 1, 1, 4})), Init("scales", MakeTensor<float>({4}, {1, 1, 1, 0.6f}))},
      {MakeStringAttr("mode", "nearest")}, 1, 10);
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_TRUE(TensorsNear((*down)[0], MakeTensor<float>({1, 1, 1, 2}, {1, 3})));
  auto mixed = testing::ImportNode(
      "Resize",
      {In("x", Iota({1, 1, 2, 4})), Init("scales", MakeTensor<float>({4}, {1, 1, 2, 0.5f}))},
      {MakeStringAttr("mode", "nearest")}, 1, 10);
  ASSERT_EQ(mixed.status().code(), absl::StatusCode::kUnimplemented) << mixed.status();
  EXPECT_NE(mixed.status().message().find("one spatial axis scaled up and the other down"),
            std::string::npos)
      << mixed.status();
}

TEST(OnnxResizeTest, RanksOtherThanFourResizeTheLastTwoDims) {
  auto r3 = RunNode(
      "Resize",
      {In("x", Iota({2, 1, 2})), Absent(), Init("scales", MakeTensor<float>({3}, {1, 2, 1}))},
      {MakeStringAttr("mode", "nearest")}, 1, 13);
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_TRUE(TensorsNear((*r3)[0], MakeTensor<float>({2, 2, 2}, {1, 2, 1, 2, 3, 4, 3, 4})));
  auto r1 = RunNode(
      "Resize",
      {In("x", Iota({3})), Absent(), Absent(), Init("sizes", MakeTensor<int64_t>({1}, {6}))},
      {MakeStringAttr("mode", "nearest"),
       MakeStringAttr("coordinate_transformation_mode", "asymmetric"),
       MakeStringAttr("nearest_mode", "floor")},
      1, 13);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_TRUE(TensorsNear((*r1)[0], MakeTensor<float>({6}, {1, 1, 2, 2, 3, 3})));
}

TEST(OnnxResizeTest, IntegerScaleKeepsSymbolicDimsSymbolic) {
  testing::ModelBuilder b(13);
  b.Input("x", DataType::Float(32), {"n", "1", "h", "2"})
      .Initializer("scales", MakeTensor<float>({4}, {1, 1, 2, 2}))
      .Node("Resize", {"x", "", "scales"}, {"y"}, {MakeStringAttr("mode", "nearest")}, "node")
      .Output("y");
  auto out = testing::RunModel(b.model(), {Iota({2, 1, 1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{2, 1, 2, 4}));
  EXPECT_EQ(ReadTensor<float>((*out)[0]),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

// PyTorch's interpolate(size=...) export: sizes = Concat(Shape(x)[0:2],
// [4, 4]), symbolic in the batch; the spatial input dims are symbolic too.
TEST(OnnxResizeTest, ShapeDerivedSizesWithSymbolicDims) {
  testing::ModelBuilder b(13);
  b.Input("x", DataType::Float(32), {"n", "1", "h", "w"})
      .Initializer("starts", MakeTensor<int64_t>({1}, {0}))
      .Initializer("ends", MakeTensor<int64_t>({1}, {2}))
      .Initializer("hw", MakeTensor<int64_t>({2}, {4, 4}))
      .Node("Shape", {"x"}, {"s"})
      .Node("Slice", {"s", "starts", "ends"}, {"nc"})
      .Node("Concat", {"nc", "hw"}, {"sizes"}, {MakeIntAttr("axis", 0)})
      .Node("Resize", {"x", "", "", "sizes"}, {"y"}, {MakeStringAttr("mode", "nearest")}, "resize")
      .Output("y");
  auto out = testing::RunModel(b.model(), {Iota({2, 1, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{2, 1, 4, 4}));
  std::vector<float> want;
  for (float base : {0.0f, 4.0f}) {
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) want.push_back(base + 1 + (r / 2) * 2 + c / 2);
    }
  }
  EXPECT_EQ(ReadTensor<float>((*out)[0]), want);
}

// Relu -> Resize -> Add: the resize fuses with an inlined producer and an
// elementwise consumer.
TEST(OnnxResizeTest, FusesBetweenElementwiseOps) {
  testing::ModelBuilder b(13);
  b.Input("x", DataType::Float(32), {"1", "1", "2", "2"})
      .Initializer("sizes", MakeTensor<int64_t>({4}, {1, 1, 3, 3}))
      .Initializer("one", MakeTensor<float>({1}, {1}))
      .Node("Relu", {"x"}, {"r"})
      .Node("Resize", {"r", "", "", "sizes"}, {"z"},
            {MakeStringAttr("mode", "linear"),
             MakeStringAttr("coordinate_transformation_mode", "align_corners")},
            "resize")
      .Node("Add", {"z", "one"}, {"y"})
      .Output("y");
  auto out = testing::RunModel(b.model(), {MakeTensor<float>({1, 1, 2, 2}, {-4, 2, 4, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 1, 3, 3}, {1, 2, 3, 3, 4, 5, 5, 6, 7})));
}

TEST(OnnxResizeTest, RunTimeScalesOrSizesAreReadWhenTheModelRuns) {
  // Scales and sizes fed at run time give what the same values as
  // initializers give.
  const Tensor scales = MakeTensor<float>({4}, {1, 1, 2, 1.5f});
  const Tensor sizes = MakeTensor<int64_t>({4}, {1, 1, 4, 3});
  auto run_scales =
      RunNode("Resize", {In("x", Iota({1, 1, 2, 2})), Absent(), In("scales", scales)}, {}, 1, 13);
  auto init_scales =
      RunNode("Resize", {In("x", Iota({1, 1, 2, 2})), Absent(), Init("scales", scales)}, {}, 1, 13);
  ASSERT_TRUE(run_scales.ok()) << run_scales.status();
  ASSERT_TRUE(init_scales.ok()) << init_scales.status();
  EXPECT_TRUE(TensorsNear((*run_scales)[0], (*init_scales)[0]));
  auto run_sizes = RunNode(
      "Resize", {In("x", Iota({1, 1, 2, 2})), Absent(), Absent(), In("sizes", sizes)}, {}, 1, 13);
  auto init_sizes = RunNode(
      "Resize", {In("x", Iota({1, 1, 2, 2})), Absent(), Absent(), Init("sizes", sizes)}, {}, 1, 13);
  ASSERT_TRUE(run_sizes.ok()) << run_sizes.status();
  ASSERT_TRUE(init_sizes.ok()) << init_sizes.status();
  EXPECT_TRUE(TensorsNear((*run_sizes)[0], (*init_sizes)[0]));
  // A run-time size that changes a leading dim is refused when it runs.
  auto leading = RunNode("Resize",
                         {In("x", Iota({1, 1, 2, 2})), Absent(), Absent(),
                          In("sizes", MakeTensor<int64_t>({4}, {1, 2, 4, 4}))},
                         {}, 1, 13);
  ASSERT_FALSE(leading.ok());
  EXPECT_EQ(leading.status().code(), absl::StatusCode::kInvalidArgument) << leading.status();
  // roi matters only to tf_crop_and_resize: a run-time roi is fine otherwise.
  auto ok = RunNode(
      "Resize",
      {In("x", Iota({1, 1, 2, 2})), In("roi", MakeTensor<float>({8}, {0, 0, 0, 0, 1, 1, 1, 1})),
       Init("scales", MakeTensor<float>({4}, {1, 1, 1, 1}))},
      {}, 1, 13);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(TensorsNear((*ok)[0], Iota({1, 1, 2, 2})));
}

TEST(OnnxResizeTest, RejectsResizingLeadingDimsAndBadInputs) {
  const Tensor x = Iota({1, 2, 2, 2});
  auto s = testing::ImportNode(
      "Resize", {In("x", x), Absent(), Init("scales", MakeTensor<float>({4}, {1, 2, 1, 1}))}, {}, 1,
      13);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kUnimplemented) << s.status();
  EXPECT_NE(s.status().message().find("resizing dim 1 of 4"), std::string::npos) << s.status();

  s = testing::ImportNode(
      "Resize",
      {In("x", x), Absent(), Init("scales", MakeTensor<float>({4}, {1, 1, 2, 2})),
       Init("sizes", MakeTensor<int64_t>({4}, {1, 2, 4, 4}))},
      {}, 1, 13);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find("scales and sizes are both given"), std::string::npos);

  s = testing::ImportNode("Resize",
                          {In("x", x), Absent(), Init("scales", MakeTensor<float>({3}, {1, 2, 2}))},
                          {}, 1, 13);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find("scales has 3 values for an input of 4 dims"),
            std::string::npos);

  s = testing::ImportNode(
      "Resize", {In("x", x), Absent(), Init("scales", MakeTensor<float>({4}, {1, 1, 0, 2}))}, {}, 1,
      13);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find("must be positive"), std::string::npos);

  s = testing::ImportNode(
      "Resize", {In("x", x), Absent(), Init("scales", MakeTensor<float>({4}, {1, 1, 2, 2}))},
      {MakeStringAttr("mode", "area")}, 1, 13);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find("mode 'area'"), std::string::npos);

  s = testing::ImportNode("Resize", {In("x", x), Absent()}, {}, 1, 13);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find("neither scales nor sizes"), std::string::npos);

  // Resize-10 has no cubic.
  s = testing::ImportNode("Resize",
                          {In("x", x), Init("scales", MakeTensor<float>({4}, {1, 1, 2, 2}))},
                          {MakeStringAttr("mode", "cubic")}, 1, 10);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
}

// ---- The ONNX node test suite, with scales/sizes/roi fixed at import ----

constexpr char kNodeSuite[] = "/usr/share/libonnx-testdata/data/node";

class OnnxResizeSuiteTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxResizeSuiteTest, MatchesExpectedOutput) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(kNodeSuite) / GetParam();
  if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << "no " << dir;
  ::onnx::ModelProto model;
  {
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    ASSERT_TRUE(in && model.ParseFromIstream(&in));
  }
  const fs::path set = dir / "test_data_set_0";
  OnnxImportOptions options;
  std::vector<Tensor> runtime;
  for (int i = 0; i < model.graph().input_size(); ++i) {
    absl::StatusOr<Tensor> t =
        ReadTensorProtoFile((set / absl::StrCat("input_", i, ".pb")).string());
    ASSERT_TRUE(t.ok()) << t.status();
    if (i == 0) {
      runtime.push_back(*t);
    } else {
      options.frozen_inputs[model.graph().input(i).name()] = *t;
    }
  }
  absl::StatusOr<Tensor> want = ReadTensorProtoFile((set / "output_0.pb").string());
  ASSERT_TRUE(want.ok()) << want.status();
  auto out = testing::RunModel(model, runtime, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], *want, 1e-4, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(
    NodeSuite, OnnxResizeSuiteTest,
    ::testing::Values(
        "test_resize_downsample_scales_cubic",
        "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_scales_linear",
        "test_resize_downsample_scales_linear_align_corners",
        "test_resize_downsample_scales_nearest", "test_resize_downsample_sizes_cubic",
        "test_resize_downsample_sizes_linear_pytorch_half_pixel",
        "test_resize_downsample_sizes_nearest",
        "test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn",
        "test_resize_tf_crop_and_resize", "test_resize_upsample_scales_cubic",
        "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_upsample_scales_cubic_align_corners",
        "test_resize_upsample_scales_cubic_asymmetric", "test_resize_upsample_scales_linear",
        "test_resize_upsample_scales_linear_align_corners", "test_resize_upsample_scales_nearest",
        "test_resize_upsample_sizes_cubic", "test_resize_upsample_sizes_nearest",
        "test_resize_upsample_sizes_nearest_ceil_half_pixel",
        "test_resize_upsample_sizes_nearest_floor_align_corners",
        "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
        "test_upsample_nearest"));

// GridSample on a 1 x 4 row [0, 1, 2, 3] at points whose values follow by
// hand (PyTorch's rules, which ONNX follows): nearest rounds half to even,
// reflection folds at the border (at -0.5 and 3.5 without align_corners, at
// 0 and 3 with it), border clamps, zeros reads 0 past the edge. The grid's
// x values are exact in binary, and y maps to row 0.
TEST(OnnxGridSampleTest, ModesAndPaddingAtHandComputedPoints) {
  struct Case {
    const char* mode;
    const char* padding;
    int64_t align;
    std::vector<float> x;
    std::vector<float> want;
  };
  const Case cases[] = {
      {"nearest", "zeros", 0, {-0.5f, 0.0f, 0.5f}, {0, 2, 2}},  // 0.5, 1.5, 2.5 unnormalized
      {"bilinear", "reflection", 0, {1.5f, -1.5f}, {2.5f, 0.5f}},
      {"bilinear", "border", 0, {1.75f}, {3}},
      {"bilinear", "zeros", 0, {1.0f}, {1.5f}},
      {"bilinear", "reflection", 1, {1.5f}, {2.25f}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.mode, " ", c.padding, " align_corners=", c.align));
    const int64_t n = static_cast<int64_t>(c.x.size());
    std::vector<float> grid;
    for (float x : c.x) grid.insert(grid.end(), {x, 0.0f});
    auto out = RunNode("GridSample",
                       {In("X", MakeTensor<float>({1, 1, 1, 4}, {0, 1, 2, 3})),
                        In("grid", MakeTensor<float>({1, 1, n, 2}, grid))},
                       {MakeStringAttr("mode", c.mode), MakeStringAttr("padding_mode", c.padding),
                        MakeIntAttr("align_corners", c.align)},
                       1, 16);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 1, 1, n}, c.want), 1e-6, 1e-6));
  }
  auto empty = testing::ImportNode("GridSample",
                                   {In("X", MakeTensor<float>({1, 1, 0, 4}, {})),
                                    In("grid", MakeTensor<float>({1, 1, 1, 2}, {0, 0}))},
                                   {}, 1, 16);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
  auto bad = testing::ImportNode("GridSample",
                                 {In("X", MakeTensor<float>({1, 1, 1, 4}, {0, 1, 2, 3})),
                                  In("grid", MakeTensor<float>({1, 1, 1, 3}, {0, 0, 0}))},
                                 {}, 1, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

// RoiAlign on [[1, 2], [3, 4]] with the whole image as one roi (no
// half-pixel shift), 2 x 2 samples at 0.5 and 1.5: 2.5, 3, 3.5 and 4 (the
// last row and column clamp), so avg 3.25; max mode takes each sample's
// largest weighted corner, then the largest sample: 4. A roi outside the
// image samples nothing (0).
TEST(OnnxRoiAlignTest, AverageMaxAndOutsideAtHandComputedValues) {
  const Tensor x = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor rois = MakeTensor<float>({2, 4}, {0, 0, 2, 2, 10, 10, 12, 12});
  const Tensor batch = MakeTensor<int64_t>({2}, {0, 0});
  for (const char* mode : {"avg", "max"}) {
    SCOPED_TRACE(mode);
    auto out = RunNode("RoiAlign", {In("X", x), In("rois", rois), In("batch_indices", batch)},
                       {MakeStringAttr("mode", mode), MakeIntAttr("sampling_ratio", 2),
                        MakeStringAttr("coordinate_transformation_mode", "output_half_pixel")},
                       1, 16);
    ASSERT_TRUE(out.ok()) << out.status();
    const float first = std::string(mode) == "avg" ? 3.25f : 4.0f;
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 1, 1, 1}, {first, 0}), 1e-6, 1e-6));
  }
}

// sampling_ratio 0 takes ceil(roi / bins) samples per bin side, per roi (on
// the host): each roi's row must equal the fixed-ratio operator's with that
// roi's count -- here 1, 2 and 3 -- in both modes and both coordinate modes.
TEST(OnnxRoiAlignTest, AdaptiveSamplingMatchesTheFixedRatioOfEachRoi) {
  std::vector<float> xv;
  for (int i = 0; i < 2 * 3 * 7 * 8; ++i) xv.push_back(static_cast<float>((i * 37) % 23) - 11.f);
  const Tensor x = MakeTensor<float>({2, 3, 7, 8}, xv);
  // Output 2 x 2: rois of about 2, 4 and 6 pixels per side give counts 1, 2 and 3.
  const std::vector<std::vector<float>> boxes = {
      {1.2f, 0.7f, 3.1f, 2.6f}, {0.5f, 1.0f, 4.4f, 4.9f}, {0.3f, 0.1f, 6.2f, 5.9f}};
  const std::vector<int64_t> counts = {1, 2, 3};
  std::vector<float> rv;
  for (const auto& b : boxes) rv.insert(rv.end(), b.begin(), b.end());
  const Tensor rois = MakeTensor<float>({3, 4}, rv);
  const Tensor batch = MakeTensor<int64_t>({3}, {1, 0, 1});
  for (const char* mode : {"avg", "max"}) {
    for (const char* ctm : {"half_pixel", "output_half_pixel"}) {
      SCOPED_TRACE(absl::StrCat(mode, " ", ctm));
      auto attrs = [&](int64_t ratio) {
        return std::vector<::onnx::AttributeProto>{
            MakeStringAttr("mode", mode),
            MakeIntAttr("sampling_ratio", ratio),
            MakeIntAttr("output_height", 2),
            MakeIntAttr("output_width", 2),
            MakeFloatAttr("spatial_scale", 1.0f),
            MakeStringAttr("coordinate_transformation_mode", ctm)};
      };
      auto adaptive = RunNode(
          "RoiAlign", {In("X", x), In("rois", rois), In("batch_indices", batch)}, attrs(0), 1, 16);
      ASSERT_TRUE(adaptive.ok()) << adaptive.status();
      ASSERT_EQ(ShapeOf((*adaptive)[0]), (std::vector<int64_t>{3, 3, 2, 2}));
      const std::vector<float> got = ReadTensor<float>((*adaptive)[0]);
      for (size_t r = 0; r < boxes.size(); ++r) {
        const Tensor one_roi = MakeTensor<float>({1, 4}, boxes[r]);
        const Tensor one_batch = MakeTensor<int64_t>({1}, {ReadTensor<int64_t>(batch)[r]});
        auto fixed =
            RunNode("RoiAlign", {In("X", x), In("rois", one_roi), In("batch_indices", one_batch)},
                    attrs(counts[r]), 1, 16);
        ASSERT_TRUE(fixed.ok()) << fixed.status();
        const std::vector<float> row(got.begin() + static_cast<int64_t>(r * 12),
                                     got.begin() + static_cast<int64_t>((r + 1) * 12));
        EXPECT_TRUE(TensorsNear(MakeTensor<float>({1, 3, 2, 2}, row), (*fixed)[0], 1e-5, 1e-5))
            << "roi " << r;
      }
    }
  }
  // A batch index out of range is refused when it runs.
  auto bad = RunNode(
      "RoiAlign",
      {In("X", x), In("rois", rois), In("batch_indices", MakeTensor<int64_t>({3}, {0, 2, 0}))}, {},
      1, 16);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("batch index 2 of roi 1 is out of range for 2"));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
