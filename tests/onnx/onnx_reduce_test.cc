// The reduction converters (convert_reduce.cc): Reduce* with the axes as an
// attribute or an input (by opset), keepdims and noop_with_empty_axes, the
// composite reductions, and ArgMax/ArgMin with select_last_index, run
// through the whole stack on the local VM.
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

// (2, 3): [[1, -2, 3], [4, 5, -6]].
Tensor Matrix() { return MakeTensor<float>({2, 3}, {1, -2, 3, 4, 5, -6}); }

TEST(OnnxReduceTest, ReduceSumAxesAttributeBeforeOpset13) {
  auto out = RunNode("ReduceSum", {In("x", Matrix())},
                     {MakeIntsAttr("axes", {1}), MakeIntAttr("keepdims", 0)}, 1, /*opset=*/11);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {2, 3})));
}

TEST(OnnxReduceTest, ReduceSumAxesInputFromOpset13) {
  auto out =
      RunNode("ReduceSum", {In("x", Matrix()), Init("axes", MakeTensor<int64_t>({1}, {-2}))}, {}, 1,
              /*opset=*/13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 3}, {5, 3, -3})));
}

TEST(OnnxReduceTest, ReduceSumWithoutAxesReducesEverything) {
  auto out = RunNode("ReduceSum", {In("x", Matrix())}, {MakeIntAttr("keepdims", 0)}, 1, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({}, {5})));
}

TEST(OnnxReduceTest, ReduceSumNoopWithEmptyAxesIsIdentity) {
  auto out = RunNode("ReduceSum", {In("x", Matrix()), Init("axes", MakeTensor<int64_t>({0}, {}))},
                     {MakeIntAttr("noop_with_empty_axes", 1)}, 1, 13);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Matrix()));
}

TEST(OnnxReduceTest, ReduceSumAxesReadAtRunTime) {
  auto run_time = RunNode(
      "ReduceSum", {In("x", Matrix()), In("axes", MakeTensor<int64_t>({1}, {0}))}, {}, 1, 13);
  ASSERT_TRUE(run_time.ok()) << run_time.status();
  auto constant = RunNode(
      "ReduceSum", {In("x", Matrix()), Init("axes", MakeTensor<int64_t>({1}, {0}))}, {}, 1, 13);
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_TRUE(TensorsNear((*run_time)[0], (*constant)[0]));
}

TEST(OnnxReduceTest, RepeatedAxesAreInvalid) {
  auto imported = ImportNode("ReduceMax", {In("x", Matrix())}, {MakeIntsAttr("axes", {1, -1})});
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("repeat axis -1"));
}

TEST(OnnxReduceTest, SimpleReductionsKeepDims) {
  struct Case {
    const char* op;
    std::vector<float> want;  // over axis 0, keepdims: (1, 3)
  };
  for (const Case& c : {Case{"ReduceMean", {2.5f, 1.5f, -1.5f}}, Case{"ReduceMax", {4, 5, 3}},
                        Case{"ReduceMin", {1, -2, -6}}, Case{"ReduceProd", {4, -10, -18}},
                        Case{"ReduceL1", {5, 7, 9}}, Case{"ReduceSumSquare", {17, 29, 45}}}) {
    SCOPED_TRACE(c.op);
    auto out = RunNode(c.op, {In("x", Matrix())}, {MakeIntsAttr("axes", {0})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 3}, c.want)));
  }
}

TEST(OnnxReduceTest, CompositeReductions) {
  auto l2 = RunNode("ReduceL2", {In("x", Matrix())},
                    {MakeIntsAttr("axes", {1}), MakeIntAttr("keepdims", 0)});
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_TRUE(TensorsNear((*l2)[0], MakeTensor<float>({2}, {std::sqrt(14.0f), std::sqrt(77.0f)})));
  auto log_sum = RunNode("ReduceLogSum", {In("x", MakeTensor<float>({2, 2}, {1, 2, 3, 4}))},
                         {MakeIntsAttr("axes", {0})});
  ASSERT_TRUE(log_sum.ok()) << log_sum.status();
  EXPECT_TRUE(
      TensorsNear((*log_sum)[0], MakeTensor<float>({1, 2}, {std::log(4.0f), std::log(6.0f)})));
}

TEST(OnnxReduceTest, ReduceLogSumExpDoesNotOverflow) {
  // exp(1000) overflows float; the max-shifted form does not.
  auto out = RunNode("ReduceLogSumExp", {In("x", MakeTensor<float>({2, 2}, {1000, 1000, 0, 1}))},
                     {MakeIntsAttr("axes", {1}), MakeIntAttr("keepdims", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {1000 + std::log(2.0f),
                                                             1 + std::log(1 + std::exp(-1.0f))})));
}

TEST(OnnxReduceTest, IntegerReductions) {
  auto out = RunNode("ReduceMax", {In("x", MakeTensor<int32_t>({2, 2}, {3, -7, 9, 2}))},
                     {MakeIntsAttr("axes", {1}), MakeIntAttr("keepdims", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({2}, {3, 9})));
}

TEST(OnnxReduceTest, ArgMaxKeepDimsAndFirstIndexOnTies) {
  auto out = RunNode("ArgMax", {In("x", MakeTensor<float>({2, 3}, {1, 5, 5, 7, 2, 7}))},
                     {MakeIntAttr("axis", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2, 1}, {1, 0})));
}

TEST(OnnxReduceTest, ArgMaxSelectLastIndex) {
  auto out = RunNode(
      "ArgMax", {In("x", MakeTensor<float>({2, 3}, {1, 5, 5, 7, 2, 7}))},
      {MakeIntAttr("axis", 1), MakeIntAttr("keepdims", 0), MakeIntAttr("select_last_index", 1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2}, {2, 2})));
}

TEST(OnnxReduceTest, ArgMinOverNegativeAxis) {
  auto out = RunNode("ArgMin", {In("x", MakeTensor<int64_t>({2, 2}, {4, -1, 3, 8}))},
                     {MakeIntAttr("axis", -2), MakeIntAttr("keepdims", 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2}, {1, 0})));
}

TEST(OnnxReduceTest, ArgMaxSelectLastIndexNeedsStaticAxis) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"2", "n"})
      .Node("ArgMax", {"x"}, {"y"}, {MakeIntAttr("axis", 1), MakeIntAttr("select_last_index", 1)})
      .Output("y");
  auto imported = ImportOnnxBytes(b.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(imported.status().message(), HasSubstr("select_last_index over the symbolic dim n"));
}

TEST(OnnxReduceTest, ReduceMeanWithDynamicBatch) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "2"})
      .Node("ReduceMean", {"x"}, {"y"}, {MakeIntsAttr("axes", {1})})
      .Output("y");
  auto out = RunModel(b.model(), {MakeTensor<float>({3, 2}, {1, 3, 5, 7, -1, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 1}, {2, 6, -0.5f})));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
