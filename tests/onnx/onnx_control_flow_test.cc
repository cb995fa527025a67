// If, Loop and Scan (compiler/frontend/onnx/control_flow.cc): run-time and
// import-time conditions, outer-scope captures, loop-carried values whose
// shape changes, scan outputs (zero-trip included), while loops, reverse
// scans and output axes, nesting (If inside Loop, Loop inside Loop), a loop
// long enough that only the VM's tail-call jump lets it finish, and the
// errors malformed control flow gets. Expected values are computed here in
// C++, independently of the importer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/transform/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend::testing {
namespace {

::onnx::AttributeProto GraphAttr(const std::string& name, const ModelBuilder& body) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::GRAPH);
  *a.mutable_g() = body.model().graph();
  return a;
}

const DataType kF32 = DataType::Float(32);
const DataType kI64 = DataType::Int(64);
const DataType kBool = DataType::Bool();

Tensor F32(std::vector<int64_t> shape, std::vector<float> v) { return MakeTensor<float>(shape, v); }
Tensor I64(int64_t v) { return MakeTensor<int64_t>({}, {v}); }

// A branch computing `op`(x, y) of the outer x and y as "out".
ModelBuilder Branch(const std::string& op) {
  ModelBuilder b;
  b.Node(op, {"x", "y"}, {"out"}).Output("out");
  return b;
}

// if c: x + y  else: x * y, with c a graph input.
::onnx::ModelProto IfModel() {
  ModelBuilder m;
  m.Input("c", kBool, {}).Input("x", kF32, {"3"}).Input("y", kF32, {"3"});
  m.Node("If", {"c"}, {"z"},
         {GraphAttr("then_branch", Branch("Add")), GraphAttr("else_branch", Branch("Mul"))});
  m.Node("Neg", {"z"}, {"w"}).Output("w");
  return m.model();
}

TEST(OnnxIfTest, RunTimeConditionPicksTheBranch) {
  const Tensor x = F32({3}, {1, 2, 3}), y = F32({3}, {4, 5, 6});
  auto t = RunModel(IfModel(), {MakeBoolTensor({}, {true}), x, y});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(TensorsNear((*t)[0], F32({3}, {-5, -7, -9})));
  auto f = RunModel(IfModel(), {MakeBoolTensor({}, {false}), x, y});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], F32({3}, {-4, -10, -18})));
}

TEST(OnnxIfTest, ImportTimeConditionInlinesOneBranch) {
  ModelBuilder m;
  m.Input("x", kF32, {"3"}).Input("y", kF32, {"3"});
  m.Initializer("c", MakeBoolTensor({1}, {false}));
  m.Node("If", {"c"}, {"z"},
         {GraphAttr("then_branch", Branch("Add")), GraphAttr("else_branch", Branch("Sub"))});
  m.Output("z");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->module.functions.size(), 1u);
  auto out = RunModel(m.model(), {F32({3}, {1, 2, 3}), F32({3}, {1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({3}, {0, 1, 2})));
}

TEST(OnnxIfTest, SeveralOutputsAndBranchInitializers) {
  ModelBuilder then_b, else_b;
  then_b.Initializer("k", F32({1}, {10}));
  then_b.Node("Add", {"x", "k"}, {"a"}).Node("Mul", {"x", "k"}, {"b"}).Output("a").Output("b");
  else_b.Node("Neg", {"x"}, {"a2"}).Node("Identity", {"x"}, {"b2"}).Output("a2").Output("b2");
  ModelBuilder m;
  m.Input("c", kBool, {"1"}).Input("x", kF32, {"2"});
  m.Node("If", {"c"}, {"p", "q"},
         {GraphAttr("then_branch", then_b), GraphAttr("else_branch", else_b)});
  m.Output("p").Output("q");
  auto t = RunModel(m.model(), {MakeBoolTensor({1}, {true}), F32({2}, {1, 2})});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(TensorsNear((*t)[0], F32({2}, {11, 12})));
  EXPECT_TRUE(TensorsNear((*t)[1], F32({2}, {10, 20})));
  auto f = RunModel(m.model(), {MakeBoolTensor({1}, {false}), F32({2}, {1, 2})});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], F32({2}, {-1, -2})));
  EXPECT_TRUE(TensorsNear((*f)[1], F32({2}, {1, 2})));
}

TEST(OnnxIfTest, ValuesComputedBeforeTheIfStayUsableAfterIt) {
  // s is computed in the run of nodes before the If and read both inside a
  // branch and after the If.
  ModelBuilder then_b, else_b;
  then_b.Node("Add", {"s", "x"}, {"o1"}).Output("o1");
  else_b.Node("Identity", {"s"}, {"o2"}).Output("o2");
  ModelBuilder m;
  m.Input("c", kBool, {}).Input("x", kF32, {"2"});
  m.Node("Mul", {"x", "x"}, {"s"});
  m.Node("If", {"c"}, {"z"}, {GraphAttr("then_branch", then_b), GraphAttr("else_branch", else_b)});
  m.Node("Sub", {"z", "s"}, {"w"}).Output("w").Output("s");
  auto t = RunModel(m.model(), {MakeBoolTensor({}, {true}), F32({2}, {2, 3})});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(TensorsNear((*t)[0], F32({2}, {2, 3})));
  EXPECT_TRUE(TensorsNear((*t)[1], F32({2}, {4, 9})));
}

TEST(OnnxIfTest, BranchBodiesAndLoopBodiesAreFused) {
  // Each branch is a chain of elementwise operators, which FuseOps makes one
  // kernel, as it does at the top of a function.
  ModelBuilder then_b, else_b;
  then_b.Node("Exp", {"x"}, {"t1"}).Node("Neg", {"t1"}, {"t2"}).Node("Mul", {"t2", "y"}, {"t3"});
  then_b.Output("t3");
  else_b.Node("Sqrt", {"x"}, {"e1"}).Node("Add", {"e1", "y"}, {"e2"}).Output("e2");
  ModelBuilder m;
  m.Input("c", kBool, {}).Input("x", kF32, {"3"}).Input("y", kF32, {"3"});
  m.Node("If", {"c"}, {"z"}, {GraphAttr("then_branch", then_b), GraphAttr("else_branch", else_b)});
  m.Output("z");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_TRUE(imported.ok()) << imported.status();
  auto lowered = RunPipeline(imported->module, "default");
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  std::vector<std::string> kernels;
  for (const auto& [name, k] : lowered->kernels) kernels.push_back(name);
  EXPECT_THAT(kernels, ::testing::IsSupersetOf({"fused_exp_negative_multiply", "fused_sqrt_add"}));
  auto out =
      RunModel(m.model(), {MakeBoolTensor({}, {true}), F32({3}, {0, 1, 2}), F32({3}, {2, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({3}, {-2, -2 * std::exp(1.0f), -2 * std::exp(2.0f)})));
}

TEST(OnnxIfTest, RejectsBranchesWithTheWrongNumberOfOutputs) {
  ModelBuilder two;
  two.Node("Add", {"x", "y"}, {"a"}).Node("Mul", {"x", "y"}, {"b"}).Output("a").Output("b");
  ModelBuilder m;
  m.Input("c", kBool, {}).Input("x", kF32, {"3"}).Input("y", kF32, {"3"});
  m.Node("If", {"c"}, {"z"},
         {GraphAttr("then_branch", two), GraphAttr("else_branch", Branch("Mul"))}, "if0");
  m.Output("z");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(imported.status().message(),
                                "node 'if0' (If, opset 17): the then branch has 2 outputs"))
      << imported.status();
}

TEST(OnnxIfTest, RejectsAMissingBranch) {
  ModelBuilder m;
  m.Input("c", kBool, {}).Input("x", kF32, {"3"}).Input("y", kF32, {"3"});
  m.Node("If", {"c"}, {"z"}, {GraphAttr("then_branch", Branch("Add"))});
  m.Output("z");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(imported.status().message(), "missing attribute 'else_branch'"))
      << imported.status();
}

// Loop body: acc' = acc + x * iter; scan output: acc' (per iteration).
ModelBuilder AccumulateBody() {
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("cond_in", kBool, {}).Input("acc", kF32, {"2"});
  b.Node("Cast", {"i"}, {"fi"}, {MakeIntAttr("to", 1)});
  b.Node("Mul", {"x", "fi"}, {"xi"});
  b.Node("Add", {"acc", "xi"}, {"acc_out"});
  b.Node("Identity", {"cond_in"}, {"cond_out"});
  b.Node("Identity", {"acc_out"}, {"scan"});
  b.Output("cond_out").Output("acc_out").Output("scan");
  return b;
}

::onnx::ModelProto AccumulateModel() {
  ModelBuilder m;
  m.Input("m", kI64, {}).Input("x", kF32, {"2"}).Input("acc0", kF32, {"2"});
  m.Node("Loop", {"m", "", "acc0"}, {"acc", "scans"}, {GraphAttr("body", AccumulateBody())});
  m.Output("acc").Output("scans");
  return m.model();
}

TEST(OnnxLoopTest, CarriesValuesAndStacksScanOutputs) {
  auto out = RunModel(AccumulateModel(), {I64(4), F32({2}, {1, 10}), F32({2}, {0.5, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  // acc after i = 0..3: 0.5 + (0+1+2+3) * x.
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2}, {6.5, 60})));
  EXPECT_TRUE(TensorsNear((*out)[1], F32({4, 2}, {0.5, 0, 1.5, 10, 3.5, 30, 6.5, 60})));
}

TEST(OnnxLoopTest, ZeroTripCountGivesTheInitialValuesAndEmptyScans) {
  auto out = RunModel(AccumulateModel(), {I64(0), F32({2}, {1, 10}), F32({2}, {0.5, 7})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2}, {0.5, 7})));
  EXPECT_EQ(ShapeOf((*out)[1]), (std::vector<int64_t>{0, 2}));
}

TEST(OnnxLoopTest, AWhileLoopStopsOnTheBodysCondition) {
  // while v < limit: v = v * 2 (no trip count), counting the iterations.
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("c", kBool, {}).Input("v", kF32, {}).Input("n", kI64, {});
  b.Initializer("two", F32({}, {2})).Initializer("one", MakeTensor<int64_t>({}, {1}));
  b.Node("Mul", {"v", "two"}, {"v2"});
  b.Node("Add", {"n", "one"}, {"n2"});
  b.Node("Less", {"v2", "limit"}, {"c2"});
  b.Output("c2").Output("v2").Output("n2");
  ModelBuilder m;
  m.Input("limit", kF32, {}).Input("v0", kF32, {});
  m.Initializer("n0", MakeTensor<int64_t>({}, {0}));
  m.Node("Less", {"v0", "limit"}, {"c0"});
  m.Node("Loop", {"", "c0", "v0", "n0"}, {"v", "n"}, {GraphAttr("body", b)});
  m.Output("v").Output("n");
  auto out = RunModel(m.model(), {F32({}, {100}), F32({}, {3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({}, {192})));  // 3 -> 6 -> ... -> 192
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<int64_t>({}, {6})));
  // A false condition on entry: no iteration at all.
  auto none = RunModel(m.model(), {F32({}, {1}), F32({}, {3})});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(TensorsNear((*none)[0], F32({}, {3})));
  EXPECT_TRUE(TensorsNear((*none)[1], MakeTensor<int64_t>({}, {0})));
}

TEST(OnnxLoopTest, TripCountAndConditionTogether) {
  // The trip count (5) ends the loop before the condition (v < 1000) would.
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("c", kBool, {}).Input("v", kF32, {});
  b.Initializer("two", F32({}, {2})).Initializer("limit", F32({}, {1000}));
  b.Node("Mul", {"v", "two"}, {"v2"}).Node("Less", {"v2", "limit"}, {"c2"});
  b.Output("c2").Output("v2");
  ModelBuilder m;
  m.Input("m", kI64, {"1"}).Input("c0", kBool, {"1"}).Input("v0", kF32, {});
  m.Node("Loop", {"m", "c0", "v0"}, {"v"}, {GraphAttr("body", b)});
  m.Output("v");
  auto out = RunModel(m.model(),
                      {MakeTensor<int64_t>({1}, {5}), MakeBoolTensor({1}, {true}), F32({}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({}, {32})));
  auto stopped = RunModel(
      m.model(), {MakeTensor<int64_t>({1}, {50}), MakeBoolTensor({1}, {true}), F32({}, {1})});
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(TensorsNear((*stopped)[0], F32({}, {1024})));
}

TEST(OnnxLoopTest, ACarriedValueThatGrowsGetsASymbolicShape) {
  // v = concat(v, [iter]) each iteration: [0] grows to [0, 0, 1, 2].
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("c", kBool, {}).Input("v", kI64, {"?"});
  b.Initializer("axes", MakeTensor<int64_t>({1}, {0}));
  b.Node("Unsqueeze", {"i", "axes"}, {"i1"});
  b.Node("Concat", {"v", "i1"}, {"v2"}, {MakeIntAttr("axis", 0)});
  b.Node("Identity", {"c"}, {"c2"});
  b.Output("c2").Output("v2");
  ModelBuilder m;
  m.Input("m", kI64, {}).Input("v0", kI64, {"1"});
  m.Node("Loop", {"m", "", "v0"}, {"v"}, {GraphAttr("body", b)});
  m.Node("Neg", {"v"}, {"w"}).Output("w");
  auto out = RunModel(m.model(), {I64(3), MakeTensor<int64_t>({1}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({4}, {0, 0, -1, -2})));
}

TEST(OnnxLoopTest, IfInsideALoopAndALoopInsideALoop) {
  // for i in range(m): acc += (i odd ? x : -x) + sum_{j < i} 1
  ModelBuilder odd, even;
  odd.Node("Identity", {"x"}, {"t"}).Output("t");
  even.Node("Neg", {"x"}, {"e"}).Output("e");
  ModelBuilder inner;
  inner.Input("j", kI64, {}).Input("ci", kBool, {}).Input("k", kF32, {"2"});
  inner.Initializer("onef", F32({}, {1}));
  inner.Node("Add", {"k", "onef"}, {"k2"}).Node("Identity", {"ci"}, {"ci2"});
  inner.Output("ci2").Output("k2");
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("c", kBool, {}).Input("acc", kF32, {"2"});
  b.Initializer("two", MakeTensor<int64_t>({}, {2}))
      .Initializer("one", MakeTensor<int64_t>({}, {1}));
  b.Initializer("zeros", F32({2}, {0, 0}));
  b.Node("Mod", {"i", "two"}, {"r"}).Node("Equal", {"r", "one"}, {"is_odd"});
  b.Node("If", {"is_odd"}, {"pm"}, {GraphAttr("then_branch", odd), GraphAttr("else_branch", even)});
  b.Node("Loop", {"i", "", "zeros"}, {"count"}, {GraphAttr("body", inner)});
  b.Node("Add", {"acc", "pm"}, {"acc1"}).Node("Add", {"acc1", "count"}, {"acc2"});
  b.Node("Identity", {"c"}, {"c2"});
  b.Output("c2").Output("acc2");
  ModelBuilder m;
  m.Input("m", kI64, {}).Input("x", kF32, {"2"}).Input("acc0", kF32, {"2"});
  m.Node("Loop", {"m", "", "acc0"}, {"acc"}, {GraphAttr("body", b)});
  m.Output("acc");
  const std::vector<float> x = {1, 5};
  std::vector<float> want = {0, 0};
  for (int i = 0; i < 5; ++i) {
    for (int d = 0; d < 2; ++d) want[d] += (i % 2 == 1 ? x[d] : -x[d]) + static_cast<float>(i);
  }
  auto out = RunModel(m.model(), {I64(5), F32({2}, x), F32({2}, {0, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2}, want)));
}

TEST(OnnxLoopTest, ALongLoopRunsInOneFrame) {
  // 200,000 iterations: more than the VM's 65,536 frames, so this passes
  // only because the recursive call of the loop function is a jump.
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("c", kBool, {}).Input("n", kI64, {});
  b.Initializer("one", MakeTensor<int64_t>({}, {1}));
  b.Node("Add", {"n", "one"}, {"n2"}).Node("Identity", {"c"}, {"c2"});
  b.Output("c2").Output("n2");
  ModelBuilder m;
  m.Input("m", kI64, {}).Input("n0", kI64, {});
  m.Node("Loop", {"m", "", "n0"}, {"n"}, {GraphAttr("body", b)});
  m.Output("n");
  auto out = RunModel(m.model(), {I64(200000), I64(7)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], I64(200007)));
}

TEST(OnnxLoopTest, RejectsALoopThatNeverEnds) {
  ModelBuilder m;
  m.Input("v0", kF32, {"2"});
  m.Node("Loop", {"", "", "v0"}, {"v"}, {GraphAttr("body", AccumulateBody())}, "forever");
  m.Output("v");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(
      absl::StrContains(imported.status().message(), "neither a trip count nor a condition"))
      << imported.status();
}

TEST(OnnxLoopTest, RejectsABodyWithTheWrongInputs) {
  ModelBuilder m;
  m.Input("m", kI64, {}).Input("a", kF32, {"2"}).Input("b", kF32, {"2"});
  m.Node("Loop", {"m", "", "a", "b"}, {"v", "w"}, {GraphAttr("body", AccumulateBody())}, "bad");
  m.Output("v");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(imported.status().message(), "the body declares 3 inputs"))
      << imported.status();
}

TEST(OnnxLoopTest, RejectsACarriedValueThatChangesDtype) {
  ModelBuilder b;
  b.Input("i", kI64, {}).Input("c", kBool, {}).Input("v", kF32, {});
  b.Node("Cast", {"v"}, {"v2"}, {MakeIntAttr("to", 7)}).Node("Identity", {"c"}, {"c2"});
  b.Output("c2").Output("v2");
  ModelBuilder m;
  m.Input("m", kI64, {}).Input("v0", kF32, {});
  m.Node("Loop", {"m", "", "v0"}, {"v"}, {GraphAttr("body", b)}, "cast_loop");
  m.Output("v");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(imported.status().message(),
                        "loop-carried value 0 enters as float32 and leaves the body as int64"))
      << imported.status();
}

// Scan body: sum' = sum + x_t; out_t = sum' * 2.
ModelBuilder ScanBody() {
  ModelBuilder b;
  b.Input("sum", kF32, {"2"}).Input("xt", kF32, {"2"});
  b.Initializer("two", F32({}, {2}));
  b.Node("Add", {"sum", "xt"}, {"sum2"}).Node("Mul", {"sum2", "two"}, {"o"});
  b.Output("sum2").Output("o");
  return b;
}

TEST(OnnxScanTest, ForwardScanWithDefaults) {
  ModelBuilder m;
  m.Input("s0", kF32, {"2"}).Input("x", kF32, {"3", "2"});
  m.Node("Scan", {"s0", "x"}, {"s", "ys"},
         {GraphAttr("body", ScanBody()), MakeIntAttr("num_scan_inputs", 1)});
  m.Output("s").Output("ys");
  auto out = RunModel(m.model(), {F32({2}, {0, 0}), F32({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2}, {9, 12})));
  EXPECT_TRUE(TensorsNear((*out)[1], F32({3, 2}, {2, 4, 8, 12, 18, 24})));
}

TEST(OnnxScanTest, ReverseInputAxisOneAndOutputAxisOne) {
  // x is [2, 3] scanned along axis 1 from the back; outputs stacked along
  // axis 1 and written back to front.
  ModelBuilder m;
  m.Input("s0", kF32, {"2"}).Input("x", kF32, {"2", "3"});
  m.Node("Scan", {"s0", "x"}, {"s", "ys"},
         {GraphAttr("body", ScanBody()), MakeIntAttr("num_scan_inputs", 1),
          MakeIntsAttr("scan_input_axes", {1}), MakeIntsAttr("scan_input_directions", {1}),
          MakeIntsAttr("scan_output_axes", {-1}), MakeIntsAttr("scan_output_directions", {1})});
  m.Output("s").Output("ys");
  // Columns from the back: (3,6), (2,5), (1,4); running sums (3,6) (5,11) (6,15).
  // Outputs x2: (6,12) (10,22) (12,30), prepended: column order reversed.
  auto out = RunModel(m.model(), {F32({2}, {0, 0}), F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], F32({2}, {6, 15})));
  EXPECT_TRUE(TensorsNear((*out)[1], F32({2, 3}, {12, 10, 6, 30, 22, 12})));
}

TEST(OnnxScanTest, SymbolicScanLengthIsUnimplemented) {
  ModelBuilder m;
  m.Input("s0", kF32, {"2"}).Input("x", kF32, {"seq", "2"});
  m.Node("Scan", {"s0", "x"}, {"s", "ys"},
         {GraphAttr("body", ScanBody()), MakeIntAttr("num_scan_inputs", 1)}, "scan0");
  m.Output("s");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(imported.status().message(), "is 'seq', not a constant"))
      << imported.status();
}

TEST(OnnxScanTest, Opset8ScanSaysWhereSupportStarts) {
  ModelBuilder m(8);
  m.Input("s0", kF32, {"1", "2"}).Input("x", kF32, {"1", "3", "2"});
  m.Node("Scan", {"", "s0", "x"}, {"s", "ys"},
         {GraphAttr("body", ScanBody()), MakeIntAttr("num_scan_inputs", 1)});
  m.Output("s");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(imported.status().message(), "supported from opset 9"))
      << imported.status();
}

TEST(OnnxControlFlowTest, SupportedOpsListsThem) {
  std::vector<std::string> ops = SupportedOnnxOps();
  for (const char* op : {"If", "Loop", "Scan"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
