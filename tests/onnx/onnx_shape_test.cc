// Tests of the ONNX shape and data-movement converters (convert_shape.cc,
// convert_index.cc): each operator through import, Build and a local VM,
// its attribute-vs-input opset forms, negative axes, bad attributes, and
// the import-time shape chains (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape) run at two batch sizes of a symbolic dim.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using testing::Absent;
using ::testing::HasSubstr;
using testing::In;
using testing::Init;
using testing::MakeIntAttr;
using testing::MakeIntsAttr;
using testing::MakeStringAttr;
using testing::MakeTensor;
using testing::ModelBuilder;
using testing::ReadTensor;
using testing::RunModel;
using testing::RunNode;
using testing::ShapeOf;
using testing::TensorsNear;

std::vector<float> Iota(int n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

Tensor I64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  return MakeTensor<int64_t>(std::move(shape), std::move(v));
}

// ---- Reshape ----

TEST(OnnxReshapeTest, CopiesZeroDimsAndInfersMinusOne) {
  auto out = RunNode("Reshape", {In("x", MakeTensor<float>({2, 3, 4}, Iota(24))),
                                 Init("shape", I64({2}, {0, -1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 12}, Iota(24))));
}

TEST(OnnxReshapeTest, AllowZeroKeepsZeroAsSize) {
  auto out =
      RunNode("Reshape", {In("x", MakeTensor<float>({0, 3}, {})), Init("shape", I64({2}, {3, 0}))},
              {MakeIntAttr("allowzero", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{3, 0}));
}

TEST(OnnxReshapeTest, RejectsTwoMinusOnes) {
  auto out = testing::ImportNode(
      "Reshape", {In("x", MakeTensor<float>({6}, Iota(6))), Init("shape", I64({2}, {-1, -1}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("more than one -1"));
  EXPECT_THAT(out.status().message(), HasSubstr("Reshape"));
}

TEST(OnnxReshapeTest, RuntimeShapeIsReadWhenTheModelRuns) {
  auto out =
      RunNode("Reshape", {In("x", MakeTensor<float>({6}, Iota(6))), In("shape", I64({2}, {3, 2}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 2}, Iota(6))));
}

TEST(OnnxReshapeTest, RuntimeShapeOfUnknownLengthIsUnimplemented) {
  ModelBuilder m;
  m.Input("x", DataType::Float(32), {"6"}).Input("shape", DataType::Int(64), {"n"});
  m.Node("Reshape", {"x", "shape"}, {"y"}).Output("y");
  auto out = ImportOnnxBytes(m.Bytes());
  ASSERT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("input 1 (shape) must be known at import time"));
}

// ---- Transpose, Flatten ----

TEST(OnnxTransposeTest, DefaultPermReversesDims) {
  auto out = RunNode("Transpose", {In("x", MakeTensor<float>({2, 3}, Iota(6)))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 2}, {0, 3, 1, 4, 2, 5})));
}

TEST(OnnxTransposeTest, PermReordersDims) {
  auto out = RunNode("Transpose", {In("x", MakeTensor<int32_t>({1, 2, 3}, {0, 1, 2, 3, 4, 5}))},
                     {MakeIntsAttr("perm", {1, 2, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({2, 3, 1}, {0, 1, 2, 3, 4, 5})));
}

TEST(OnnxTransposeTest, RejectsPermOfWrongLength) {
  auto out = testing::ImportNode("Transpose", {In("x", MakeTensor<float>({2, 3}, Iota(6)))},
                                 {MakeIntsAttr("perm", {0})});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("perm has 1 entries"));
}

TEST(OnnxFlattenTest, NegativeAxisCountsFromTheEnd) {
  auto out = RunNode("Flatten", {In("x", MakeTensor<float>({2, 3, 4}, Iota(24)))},
                     {MakeIntAttr("axis", -1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{6, 4}));
}

TEST(OnnxFlattenTest, AxisZeroGivesOneRow) {
  auto out =
      RunNode("Flatten", {In("x", MakeTensor<float>({2, 3}, Iota(6)))}, {MakeIntAttr("axis", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 6}, Iota(6))));
}

TEST(OnnxFlattenTest, RejectsAxisOutOfRange) {
  auto out = testing::ImportNode("Flatten", {In("x", MakeTensor<float>({2, 3}, Iota(6)))},
                                 {MakeIntAttr("axis", 3)});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("axis 3 is out of range"));
}

// ---- Squeeze, Unsqueeze ----

TEST(OnnxSqueezeTest, AttributeFormBeforeOpset13) {
  auto out = RunNode("Squeeze", {In("x", MakeTensor<float>({1, 3, 1}, Iota(3)))},
                     {MakeIntsAttr("axes", {-1})}, 1, /*opset=*/11);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{1, 3}));
}

TEST(OnnxSqueezeTest, InputFormFromOpset13) {
  auto out = RunNode("Squeeze",
                     {In("x", MakeTensor<float>({1, 3, 1}, Iota(3))), Init("axes", I64({1}, {0}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{3, 1}));
}

TEST(OnnxSqueezeTest, NoAxesSqueezesEverySizeOneDim) {
  auto out = RunNode("Squeeze", {In("x", MakeTensor<float>({1, 3, 1}, Iota(3)))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, Iota(3))));
}

TEST(OnnxSqueezeTest, RejectsAxisOfSizeAboveOne) {
  auto out = testing::ImportNode(
      "Squeeze", {In("x", MakeTensor<float>({1, 3}, Iota(3))), Init("axes", I64({1}, {1}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("cannot squeeze axis 1 of size 3"));
}

TEST(OnnxUnsqueezeTest, AttributeFormBeforeOpset13) {
  auto out = RunNode("Unsqueeze", {In("x", MakeTensor<float>({3}, Iota(3)))},
                     {MakeIntsAttr("axes", {0, 2})}, 1, /*opset=*/11);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{1, 3, 1}));
}

TEST(OnnxUnsqueezeTest, UnsortedNegativeAxesFromInput) {
  auto out = RunNode(
      "Unsqueeze", {In("x", MakeTensor<float>({2, 3}, Iota(6))), Init("axes", I64({2}, {-1, 0}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 2, 3, 1}, Iota(6))));
}

TEST(OnnxUnsqueezeTest, RejectsRepeatedAxis) {
  auto out = testing::ImportNode(
      "Unsqueeze", {In("x", MakeTensor<float>({3}, Iota(3))), Init("axes", I64({2}, {0, -3}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("repeats axis 0"));
}

// ---- Concat, Split ----

TEST(OnnxConcatTest, NegativeAxisJoinsLastDim) {
  auto out = RunNode("Concat",
                     {In("a", MakeTensor<int64_t>({2, 1}, {1, 2})),
                      In("b", MakeTensor<int64_t>({2, 2}, {3, 4, 5, 6}))},
                     {MakeIntAttr("axis", -1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], I64({2, 3}, {1, 3, 4, 2, 5, 6})));
}

TEST(OnnxConcatTest, RejectsAxisOutOfRange) {
  auto out = testing::ImportNode(
      "Concat", {In("a", MakeTensor<float>({2}, {1, 2})), In("b", MakeTensor<float>({2}, {3, 4}))},
      {MakeIntAttr("axis", 1)});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("axis 1 is out of range"));
}

TEST(OnnxSplitTest, EqualPartsByDefault) {
  auto out = RunNode("Split", {In("x", MakeTensor<float>({6}, Iota(6)))}, {}, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<float>({2}, {4, 5})));
}

TEST(OnnxSplitTest, SplitAttributeBeforeOpset13) {
  auto out = RunNode("Split", {In("x", MakeTensor<float>({2, 5}, Iota(10)))},
                     {MakeIntAttr("axis", 1), MakeIntsAttr("split", {2, 3})}, 2, /*opset=*/11);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {0, 1, 5, 6})));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2, 3}, {2, 3, 4, 7, 8, 9})));
}

TEST(OnnxSplitTest, SplitInputFromOpset13) {
  auto out =
      RunNode("Split", {In("x", MakeTensor<float>({5}, Iota(5))), Init("split", I64({2}, {4, 1}))},
              {MakeIntAttr("axis", -1)}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({4}, {0, 1, 2, 3})));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({1}, {4})));
}

TEST(OnnxSplitTest, RejectsSizesNotSummingToDim) {
  auto out = testing::ImportNode(
      "Split", {In("x", MakeTensor<float>({5}, Iota(5))), Init("split", I64({2}, {2, 2}))}, {}, 2);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("sum to 4, but axis 0 has size 5"));
}

// ---- Slice ----

TEST(OnnxSliceTest, AttributeFormBeforeOpset10) {
  auto out = RunNode(
      "Slice", {In("x", MakeTensor<float>({3, 4}, Iota(12)))},
      {MakeIntsAttr("starts", {1}), MakeIntsAttr("ends", {1000}), MakeIntsAttr("axes", {1})}, 1,
      /*opset=*/9);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 3}, {1, 2, 3, 5, 6, 7, 9, 10, 11})));
}

TEST(OnnxSliceTest, NegativeStepWithClampedEnds) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto out =
      RunNode("Slice", {In("x", MakeTensor<float>({2, 4}, Iota(8))),
                        Init("starts", I64({2}, {-1, 10})), Init("ends", I64({2}, {kMin, kMin})),
                        Init("axes", I64({2}, {-1, 0})), Init("steps", I64({2}, {-2, -1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {7, 5, 3, 1})));
}

TEST(OnnxSliceTest, DefaultAxesAndInt64MaxEnd) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  auto out = RunNode("Slice", {In("x", MakeTensor<float>({4}, Iota(4))),
                               Init("starts", I64({1}, {2})), Init("ends", I64({1}, {kMax}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {2, 3})));
}

TEST(OnnxSliceTest, RejectsZeroStep) {
  auto out = testing::ImportNode(
      "Slice", {In("x", MakeTensor<float>({4}, Iota(4))), Init("starts", I64({1}, {0})),
                Init("ends", I64({1}, {4})), Absent(), Init("steps", I64({1}, {0}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("a step is 0"));
}

// ---- Gather, GatherElements ----

TEST(OnnxGatherTest, NegativeIndicesAlongAxis) {
  auto out =
      RunNode("Gather", {In("x", MakeTensor<float>({2, 3}, Iota(6))), In("i", I64({2}, {-1, 0}))},
              {MakeIntAttr("axis", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {2, 0, 5, 3})));
}

TEST(OnnxGatherTest, ScalarIndexDropsTheAxis) {
  auto out =
      RunNode("Gather", {In("x", MakeTensor<float>({3, 2}, Iota(6))), Init("i", I64({}, {1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {2, 3})));
}

TEST(OnnxGatherElementsTest, PicksAlongAxisWithNegativeIndices) {
  auto out = RunNode(
      "GatherElements",
      {In("x", MakeTensor<float>({2, 2}, {1, 2, 3, 4})), In("i", I64({2, 2}, {0, 0, -1, 0}))},
      {MakeIntAttr("axis", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {1, 1, 4, 3})));
}

// ---- Expand, Tile ----

TEST(OnnxExpandTest, ShapeOfSmallerRankBroadcastsBothWays) {
  auto out = RunNode("Expand",
                     {In("x", MakeTensor<float>({3, 1}, {1, 2, 3})), Init("shape", I64({1}, {2}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 2}, {1, 1, 2, 2, 3, 3})));
}

TEST(OnnxExpandTest, ShapeOfLargerRankAddsDims) {
  auto out = RunNode(
      "Expand", {In("x", MakeTensor<int32_t>({2}, {7, 8})), Init("shape", I64({3}, {2, 1, 1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({2, 1, 2}, {7, 8, 7, 8})));
}

TEST(OnnxExpandTest, RejectsIncompatibleDims) {
  auto out = testing::ImportNode(
      "Expand", {In("x", MakeTensor<float>({3}, {1, 2, 3})), Init("shape", I64({1}, {4}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("cannot expand dim of size 3 to 4"));
}

TEST(OnnxTileTest, RepeatsEachDim) {
  auto out = RunNode(
      "Tile", {In("x", MakeTensor<float>({2, 2}, {1, 2, 3, 4})), Init("r", I64({2}, {2, 1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({4, 2}, {1, 2, 3, 4, 1, 2, 3, 4})));
}

TEST(OnnxTileTest, RejectsRepeatsOfWrongLength) {
  auto out = testing::ImportNode(
      "Tile", {In("x", MakeTensor<float>({2}, {1, 2})), Init("r", I64({2}, {2, 1}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("repeats has 2 entries"));
}

// ---- Trilu, CumSum, OneHot, DepthToSpace, SpaceToDepth ----

TEST(OnnxTriluTest, UpperWithPositiveK) {
  auto out =
      RunNode("Trilu", {In("x", MakeTensor<float>({3, 3}, Iota(9, 1))), Init("k", I64({}, {1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 3}, {0, 2, 3, 0, 0, 6, 0, 0, 0})));
}

TEST(OnnxTriluTest, LowerWithoutK) {
  auto out = RunNode("Trilu", {In("x", MakeTensor<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6}))},
                     {MakeIntAttr("upper", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], I64({2, 3}, {1, 0, 0, 4, 5, 0})));
}

TEST(OnnxCumSumTest, InclusiveAlongAxis) {
  auto out = RunNode("CumSum",
                     {In("x", MakeTensor<float>({2, 3}, Iota(6, 1))), Init("axis", I64({}, {1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 3}, {1, 3, 6, 4, 9, 15})));
}

TEST(OnnxCumSumTest, ExclusiveReverse) {
  auto out = RunNode(
      "CumSum",
      {In("x", MakeTensor<double>({4}, {1, 2, 3, 4})), Init("axis", MakeTensor<int32_t>({}, {0}))},
      {MakeIntAttr("exclusive", 1), MakeIntAttr("reverse", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<double>({4}, {9, 7, 4, 0})));
}

TEST(OnnxOneHotTest, NegativeIndicesAndAxis) {
  auto out = RunNode("OneHot",
                     {In("i", I64({2}, {1, -1})), Init("depth", I64({}, {3})),
                      Init("values", MakeTensor<float>({2}, {0, 5}))},
                     {MakeIntAttr("axis", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 2}, {0, 0, 5, 0, 0, 5})));
}

TEST(OnnxDepthToSpaceTest, DcrAndCrdModesDiffer) {
  Tensor x = MakeTensor<float>({1, 4, 1, 1}, {0, 1, 2, 3});
  auto dcr = RunNode("DepthToSpace", {In("x", x)}, {MakeIntAttr("blocksize", 2)});
  ASSERT_TRUE(dcr.ok()) << dcr.status();
  EXPECT_TRUE(TensorsNear((*dcr)[0], MakeTensor<float>({1, 1, 2, 2}, {0, 1, 2, 3})));
  Tensor x2 = MakeTensor<float>({1, 8, 1, 1}, Iota(8));
  auto crd = RunNode("DepthToSpace", {In("x", x2)},
                     {MakeIntAttr("blocksize", 2), MakeStringAttr("mode", "CRD")});
  ASSERT_TRUE(crd.ok()) << crd.status();
  EXPECT_TRUE(TensorsNear((*crd)[0], MakeTensor<float>({1, 2, 2, 2}, Iota(8))));
  auto dcr2 = RunNode("DepthToSpace", {In("x", x2)}, {MakeIntAttr("blocksize", 2)});
  ASSERT_TRUE(dcr2.ok()) << dcr2.status();
  EXPECT_TRUE(TensorsNear((*dcr2)[0], MakeTensor<float>({1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7})));
}

TEST(OnnxSpaceToDepthTest, InvertsDepthToSpace) {
  auto out = RunNode("SpaceToDepth", {In("x", MakeTensor<float>({1, 1, 2, 2}, {0, 1, 2, 3}))},
                     {MakeIntAttr("blocksize", 2)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 4, 1, 1}, {0, 1, 2, 3})));
}

// ---- ScatterElements, Scatter, GatherND ----

TEST(OnnxScatterElementsTest, AddReductionCombinesRepeatedIndices) {
  auto out = RunNode("ScatterElements",
                     {In("x", MakeTensor<float>({1, 5}, {1, 2, 3, 4, 5})),
                      In("i", I64({1, 2}, {1, 1})), In("u", MakeTensor<float>({1, 2}, {1.5, 2}))},
                     {MakeIntAttr("axis", 1), MakeStringAttr("reduction", "add")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 5}, {1, 5.5, 3, 4, 5})));
}

TEST(OnnxScatterElementsTest, NegativeIndicesOnAxisZero) {
  auto out = RunNode("ScatterElements",
                     {In("x", MakeTensor<int32_t>({3, 2}, {0, 0, 0, 0, 0, 0})),
                      In("i", I64({1, 2}, {-1, 0})), In("u", MakeTensor<int32_t>({1, 2}, {7, 8}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({3, 2}, {0, 8, 0, 0, 7, 0})));
}

TEST(OnnxScatterElementsTest, UnknownReductionIsUnimplemented) {
  auto out = testing::ImportNode("ScatterElements",
                                 {In("x", MakeTensor<float>({2}, {1, 2})), In("i", I64({1}, {0})),
                                  In("u", MakeTensor<float>({1}, {3}))},
                                 {MakeStringAttr("reduction", "max")});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kUnimplemented) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("reduction 'max'"));
}

TEST(OnnxScatterTest, OpsetTenScatterIsScatterElements) {
  auto out = RunNode("Scatter",
                     {In("x", MakeTensor<float>({2, 2}, {0, 0, 0, 0})),
                      In("i", I64({1, 2}, {1, 0})), In("u", MakeTensor<float>({1, 2}, {3, 4}))},
                     {}, 1, /*opset=*/10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {0, 4, 3, 0})));
}

TEST(OnnxGatherNDTest, IndexTuplesPickSubTensors) {
  auto out = RunNode("GatherND", {In("x", MakeTensor<float>({2, 2, 2}, Iota(8))),
                                  In("i", I64({2, 2}, {0, 1, -1, 0}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {2, 3, 4, 5})));
}

TEST(OnnxGatherNDTest, BatchDimsOffsetEachBatch) {
  auto out = RunNode("GatherND",
                     {In("x", MakeTensor<float>({2, 2, 2}, Iota(8))), In("i", I64({2, 1}, {1, 0}))},
                     {MakeIntAttr("batch_dims", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {2, 3, 4, 5})));
}

TEST(OnnxGatherNDTest, RejectsTooLongIndexTuples) {
  auto out = testing::ImportNode(
      "GatherND", {In("x", MakeTensor<float>({2, 2}, Iota(4))), In("i", I64({1, 3}, {0, 0, 0}))});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("index tuples of 3 entries"));
}

TEST(OnnxScatterNDTest, TuplesAddressRowsAndMulCombines) {
  auto out =
      RunNode("ScatterND",
              {In("x", MakeTensor<float>({3, 2}, {1, 1, 1, 1, 1, 1})),
               In("i", I64({2, 1}, {-1, 0})), In("u", MakeTensor<float>({2, 2}, {2, 3, 4, 5}))},
              {MakeStringAttr("reduction", "mul")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 2}, {4, 5, 1, 1, 2, 3})));
}

TEST(OnnxScatterNDTest, FullTuplesScatterScalars) {
  auto out = RunNode("ScatterND",
                     {In("x", MakeTensor<float>({2, 2}, {0, 0, 0, 0})),
                      In("i", I64({2, 2}, {1, 0, 0, 1})), In("u", MakeTensor<float>({2}, {7, 9}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 2}, {0, 9, 7, 0})));
}

// ---- Import-time shape chains with a symbolic batch dim ----

// PyTorch's x.view(x.size(0), -1): Shape -> Gather(0) -> Unsqueeze ->
// Concat([-1]) -> Reshape, on an input whose batch dim is a dim_param.
::onnx::ModelProto FlattenByShapeChain() {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"batch", "3", "4"})
      .Initializer("zero", I64({}, {0}))
      .Initializer("axes0", I64({1}, {0}))
      .Initializer("minus_one", I64({1}, {-1}))
      .Node("Shape", {"x"}, {"s"})
      .Node("Gather", {"s", "zero"}, {"n"})
      .Node("Unsqueeze", {"n", "axes0"}, {"n1"})
      .Node("Concat", {"n1", "minus_one"}, {"target"}, {MakeIntAttr("axis", 0)})
      .Node("Reshape", {"x", "target"}, {"y"})
      .Output("y");
  return b.model();
}

TEST(OnnxShapeChainTest, ReshapeBySymbolicShapeRunsAtTwoBatchSizes) {
  const ::onnx::ModelProto model = FlattenByShapeChain();
  for (int batch : {2, 5}) {
    Tensor x = MakeTensor<float>({batch, 3, 4}, Iota(batch * 12));
    auto out = RunModel(model, {x});
    ASSERT_TRUE(out.ok()) << "batch " << batch << ": " << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({batch, 12}, Iota(batch * 12))));
  }
}

// Shape -> Slice -> Squeeze -> Unsqueeze -> Concat -> Reshape:
// x.view(-1, x.shape[1], *x.shape[2:]) through every known-ints path.
TEST(OnnxShapeChainTest, SliceAndSqueezeOfShapeStayKnown) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"batch", "2", "3"})
      .Initializer("one", I64({1}, {1}))
      .Initializer("two", I64({1}, {2}))
      .Initializer("end", I64({1}, {std::numeric_limits<int64_t>::max()}))
      .Initializer("axes0", I64({1}, {0}))
      .Initializer("minus_one", I64({1}, {-1}))
      .Node("Shape", {"x"}, {"s"})
      .Node("Slice", {"s", "two", "end"}, {"tail"})  // [3]
      .Node("Slice", {"s", "one", "two"}, {"dim1"})  // [2]
      .Node("Squeeze", {"dim1", "axes0"}, {"d1"})
      .Node("Unsqueeze", {"d1", "axes0"}, {"d1v"})
      .Node("Concat", {"minus_one", "d1v", "tail"}, {"target"}, {MakeIntAttr("axis", 0)})
      .Node("Reshape", {"x", "target"}, {"y"})
      .Output("y");
  for (int batch : {1, 3}) {
    Tensor x = MakeTensor<float>({batch, 2, 3}, Iota(batch * 6));
    auto out = RunModel(b.model(), {x});
    ASSERT_TRUE(out.ok()) << "batch " << batch << ": " << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], x));
  }
}

TEST(OnnxShapeChainTest, GatherOfKnownShapeOutOfRangeIsInvalid) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"batch", "3"})
      .Initializer("five", I64({}, {5}))
      .Node("Shape", {"x"}, {"s"})
      .Node("Gather", {"s", "five"}, {"y"})
      .Output("y");
  auto out = ImportOnnxBytes(b.Bytes());
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("index 5 is out of range"));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
