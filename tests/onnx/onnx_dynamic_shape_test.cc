// One executable, many shapes: models whose inputs have dynamic dims are
// imported and built once, with the dims symbolic, and run at several input
// sizes. Each result is compared with a build of the same model whose dims
// are fixed to that input's shape (input_shapes), the path the node suite
// checks against the ONNX references. Kernels whose shapes hold only
// expressions of a dim ((h + 2 - 3) // 2 + 1 after a strided conv) take the
// dim as a scalar argument (compiler/lower/lower.h).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/build.h"
#include "compiler/frontend/onnx/importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend::testing {
namespace {

using ::testing::HasSubstr;

const DataType kF32 = DataType::Float(32);

Tensor Random(std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return MakeTensor<float>(shape, v);
}

// Runs "main" of an already built executable.
absl::StatusOr<std::vector<Tensor>> RunBuilt(const Ref<vm::Executable>& exec,
                                             const std::vector<Tensor>& inputs) {
  absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> vm =
      vm::LocalVirtualMachine::Create(exec, {Device::Cpu()});
  if (!vm.ok()) return vm.status();
  std::vector<Value> args(inputs.begin(), inputs.end());
  absl::StatusOr<Value> out = (*vm)->Invoke("main", args);
  if (!out.ok()) return out.status();
  return OutputTensors(*out);
}

// Builds `model` once with its dims symbolic and runs it on each input; the
// same input through a build with the dims fixed must give the same output.
// `build` may lower for a GPU whose launches are simulated on this CPU.
void ExpectOneBuildServesEveryShape(const ::onnx::ModelProto& model, const std::string& input,
                                    const std::vector<std::vector<int64_t>>& shapes,
                                    const BuildOptions& build = {}) {
  absl::StatusOr<ImportedModel> imported = ImportOnnxBytes(model.SerializeAsString());
  ASSERT_TRUE(imported.ok()) << imported.status();
  absl::StatusOr<Ref<vm::Executable>> exec = Build(imported->module, build);
  ASSERT_TRUE(exec.ok()) << exec.status();
  uint32_t seed = 1;
  for (const std::vector<int64_t>& shape : shapes) {
    SCOPED_TRACE(absl::StrJoin(shape, "x"));
    Tensor x = Random(shape, seed++);
    absl::StatusOr<std::vector<Tensor>> got = RunBuilt(*exec, {x});
    ASSERT_TRUE(got.ok()) << got.status();
    OnnxImportOptions fixed;
    fixed.input_shapes[input] = shape;
    absl::StatusOr<std::vector<Tensor>> want = RunModel(model, {x}, fixed);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_TRUE(TensorsNear((*got)[i], (*want)[i], 1e-5, 1e-5)) << "output " << i;
    }
  }
}

// A strided conv, pooling, resize, concat, a 1x1 conv and a global mean:
// every spatial extent after the first conv is an expression of H and W.
::onnx::ModelProto ImageModel() {
  ModelBuilder m(13);
  m.Input("x", kF32, {"N", "3", "H", "W"});
  m.Initializer("w1", Random({8, 3, 3, 3}, 7)).Initializer("w2", Random({4, 16, 1, 1}, 8));
  m.Initializer("scales", MakeTensor<float>({4}, {1, 1, 2, 2}));
  m.Node("Conv", {"x", "w1"}, {"c1"},
         {MakeIntsAttr("pads", {1, 1, 1, 1}), MakeIntsAttr("strides", {2, 2})});
  m.Node("Relu", {"c1"}, {"r1"});
  m.Node("MaxPool", {"r1"}, {"p1"},
         {MakeIntsAttr("kernel_shape", {2, 2}), MakeIntsAttr("strides", {2, 2})});
  m.Node("Resize", {"p1", "", "scales"}, {"u1"}, {MakeStringAttr("mode", "nearest")});
  m.Node("Concat", {"u1", "u1"}, {"cat"}, {MakeIntAttr("axis", 1)});
  m.Node("Conv", {"cat", "w2"}, {"c2"});
  m.Node("Sigmoid", {"c2"}, {"s2"});
  m.Node("ReduceMean", {"s2"}, {"y"}, {MakeIntsAttr("axes", {2, 3}), MakeIntAttr("keepdims", 0)});
  m.Output("y").Output("u1");
  return m.model();
}

TEST(OnnxDynamicShapeTest, ImageModelRunsAtAnyHeightAndWidth) {
  ExpectOneBuildServesEveryShape(ImageModel(), "x",
                                 {{1, 3, 32, 48}, {2, 3, 64, 40}, {1, 3, 17, 23}});
}

TEST(OnnxDynamicShapeTest, ImageModelLoweredForAGpuRunsAtAnySize) {
  // The GPU lowering (device split, launches over symbolic extents), its
  // launches simulated on this CPU (BuildOptions::simulate_gpu_threads).
  BuildOptions gpu;
  gpu.target = "cuda";
  gpu.simulate_gpu_threads = 256;
  ExpectOneBuildServesEveryShape(ImageModel(), "x", {{1, 3, 20, 28}, {2, 3, 33, 18}}, gpu);
}

TEST(OnnxDynamicShapeTest, TextModelRunsAtAnySequenceLength) {
  // Self-attention scores over a symbolic sequence length, layer norm and a
  // projection: matmul, transpose, softmax and reductions over `seq`.
  ModelBuilder m(17);
  m.Input("x", kF32, {"seq", "16"});
  m.Initializer("wq", Random({16, 16}, 3)).Initializer("wk", Random({16, 16}, 4));
  m.Initializer("scale", MakeTensor<float>({16}, std::vector<float>(16, 1.0f)));
  m.Node("MatMul", {"x", "wq"}, {"q"}).Node("MatMul", {"x", "wk"}, {"k"});
  m.Node("Transpose", {"k"}, {"kt"}, {MakeIntsAttr("perm", {1, 0})});
  m.Node("MatMul", {"q", "kt"}, {"s"});
  m.Node("Softmax", {"s"}, {"a"}, {MakeIntAttr("axis", -1)});
  m.Node("MatMul", {"a", "x"}, {"h"});
  m.Node("LayerNormalization", {"h", "scale"}, {"y"}, {MakeIntAttr("axis", -1)});
  m.Output("y");
  ExpectOneBuildServesEveryShape(m.model(), "x", {{5, 16}, {64, 16}, {1, 16}});
}

// Shapes, sizes and bounds fed as graph inputs are read when the model runs
// (into symbolic vars), so one build serves every value. Each run is
// compared with an import where that input is frozen to the same value
// (OnnxImportOptions::frozen_inputs: the import-time path): the integer
// inputs, or with `data_inputs` >= 0 every input after the first
// `data_inputs` (float scales and bounds).
void ExpectRunTimeValuesMatchFrozen(const ::onnx::ModelProto& model,
                                    const std::vector<std::string>& names,
                                    const std::vector<std::vector<Tensor>>& runs,
                                    int data_inputs = -1) {
  absl::StatusOr<ImportedModel> imported = ImportOnnxBytes(model.SerializeAsString());
  ASSERT_TRUE(imported.ok()) << imported.status();
  absl::StatusOr<Ref<vm::Executable>> exec = Build(imported->module, {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (size_t r = 0; r < runs.size(); ++r) {
    SCOPED_TRACE(absl::StrCat("run ", r));
    absl::StatusOr<std::vector<Tensor>> got = RunBuilt(*exec, runs[r]);
    ASSERT_TRUE(got.ok()) << got.status();
    OnnxImportOptions frozen;
    std::vector<Tensor> rest;
    for (size_t i = 0; i < names.size(); ++i) {
      const bool freeze =
          data_inputs >= 0 ? static_cast<int>(i) >= data_inputs : runs[r][i]->dtype().is_int();
      if (freeze) {
        frozen.frozen_inputs[names[i]] = runs[r][i];
      } else {
        rest.push_back(runs[r][i]);
      }
    }
    absl::StatusOr<std::vector<Tensor>> want = RunModel(model, rest, frozen);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) EXPECT_TRUE(TensorsNear((*got)[i], (*want)[i]));
  }
}

Tensor Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeTensor<int64_t>({n}, std::move(v));
}

TEST(OnnxRunTimeValuesTest, ReshapeToAShapeGivenAtRunTime) {
  ModelBuilder m(14);
  m.Input("x", kF32, {"2", "3", "4"}).Input("shape", DataType::Int(64), {"3"});
  m.Node("Reshape", {"x", "shape"}, {"r"}).Node("Relu", {"r"}, {"y"}).Output("y");
  const Tensor x = Random({2, 3, 4}, 11);
  // Plain dims, a -1 to infer, a 0 that copies the input's dim.
  ExpectRunTimeValuesMatchFrozen(
      m.model(), {"x", "shape"},
      {{x, Ints({4, 3, 2})}, {x, Ints({2, -1, 3})}, {x, Ints({0, 4, 3})}});
}

TEST(OnnxRunTimeValuesTest, AWrongElementCountIsAClearRunTimeError) {
  ModelBuilder m(14);
  m.Input("x", kF32, {"2", "3"}).Input("shape", DataType::Int(64), {"2"});
  m.Node("Reshape", {"x", "shape"}, {"y"}).Output("y");
  absl::StatusOr<std::vector<Tensor>> out = RunModel(m.model(), {Random({2, 3}, 1), Ints({4, 2})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

TEST(OnnxRunTimeValuesTest, ExpandAndConstantOfShapeToRunTimeShapes) {
  ModelBuilder m(14);
  m.Input("x", kF32, {"3", "1"}).Input("to", DataType::Int(64), {"2"});
  m.Input("fill", DataType::Int(64), {"2"});
  m.Node("Expand", {"x", "to"}, {"e"});
  m.Node("ConstantOfShape", {"fill"}, {"c"},
         {MakeTensorAttr("value", MakeTensor<float>({1}, {2}))});
  m.Output("e").Output("c");
  const Tensor x = Random({3, 1}, 5);
  // A 1 in the target keeps the input's dim (3 x 1 expanded by (1, 4) is 3 x 4).
  ExpectRunTimeValuesMatchFrozen(m.model(), {"x", "to", "fill"},
                                 {{x, Ints({3, 4}), Ints({2, 5})},
                                  {x, Ints({1, 6}), Ints({1, 1})},
                                  {x, Ints({3, 1}), Ints({0, 3})}});
}

TEST(OnnxRunTimeValuesTest, IntegerRangeWithRunTimeBounds) {
  ModelBuilder m(14);
  const DataType i32 = DataType::Int(32);
  m.Input("start", i32, {}).Input("limit", i32, {}).Input("delta", i32, {});
  m.Node("Range", {"start", "limit", "delta"}, {"y"}).Output("y");
  auto s = [](int32_t v) { return MakeTensor<int32_t>({}, {v}); };
  ExpectRunTimeValuesMatchFrozen(m.model(), {"start", "limit", "delta"},
                                 {{s(0), s(5), s(1)}, {s(10), s(-3), s(-4)}, {s(3), s(3), s(2)}});
}

TEST(OnnxRunTimeValuesTest, RangeOverASymbolicLengthInADynamicBuild) {
  // Position ids as torch exports them: Range(0, Shape(x)[1], 1).
  ModelBuilder m(14);
  m.Input("x", kF32, {"batch", "seq"});
  m.Initializer("zero", MakeTensor<int64_t>({}, {0}))
      .Initializer("one", MakeTensor<int64_t>({}, {1}));
  m.Node("Shape", {"x"}, {"s"}).Node("Gather", {"s", "one"}, {"n"}, {MakeIntAttr("axis", 0)});
  m.Node("Range", {"zero", "n", "one"}, {"pos"});
  m.Node("Cast", {"pos"}, {"posf"}, {MakeIntAttr("to", 1)});
  m.Node("Add", {"x", "posf"}, {"y"}).Output("y");
  ExpectOneBuildServesEveryShape(m.model(), "x", {{2, 7}, {1, 1}, {3, 40}});
}

TEST(OnnxRunTimeValuesTest, SliceWithEveryInputReadAtRunTime) {
  ModelBuilder m(13);
  const DataType i64 = DataType::Int(64);
  m.Input("x", kF32, {"3", "4", "5"}).Input("starts", i64, {"2"}).Input("ends", i64, {"2"});
  m.Input("axes", i64, {"2"}).Input("steps", i64, {"2"});
  m.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}).Output("y");
  const Tensor x = Random({3, 4, 5}, 21);
  // Forward and backward steps, negative axes and indices, bounds past the
  // ends (clamped), and a slice that selects nothing.
  ExpectRunTimeValuesMatchFrozen(
      m.model(), {"x", "starts", "ends", "axes", "steps"},
      {{x, Ints({0, 1}), Ints({2, 5}), Ints({0, 2}), Ints({1, 2})},
       {x, Ints({-1, 4}), Ints({-100, 0}), Ints({-1, 1}), Ints({-2, -1})},
       {x, Ints({1, -1000}), Ints({1000, 1000}), Ints({1, 0}), Ints({1, 1})},
       {x, Ints({2, 0}), Ints({2, 5}), Ints({2, 1}), Ints({1, 3})}});
}

TEST(OnnxRunTimeValuesTest, SqueezeUnsqueezeTileAndSplitWithRunTimeValues) {
  ModelBuilder m(13);
  const DataType i64 = DataType::Int(64);
  m.Input("x", kF32, {"2", "1", "3"}).Input("sq", i64, {"1"}).Input("unsq", i64, {"2"});
  m.Input("reps", i64, {"3"}).Input("parts", i64, {"2"});
  m.Node("Squeeze", {"x", "sq"}, {"a"}).Node("Unsqueeze", {"a", "unsq"}, {"b"});
  m.Node("Tile", {"x", "reps"}, {"c"});
  m.Node("Split", {"x", "parts"}, {"d0", "d1"}, {MakeIntAttr("axis", 2)});
  m.Output("b").Output("c").Output("d0").Output("d1");
  const Tensor x = Random({2, 1, 3}, 22);
  ExpectRunTimeValuesMatchFrozen(m.model(), {"x", "sq", "unsq", "reps", "parts"},
                                 {{x, Ints({1}), Ints({0, 3}), Ints({1, 2, 1}), Ints({1, 2})},
                                  {x, Ints({-2}), Ints({-1, 1}), Ints({3, 1, 2}), Ints({3, 0})},
                                  {x, Ints({1}), Ints({2, 0}), Ints({1, 1, 1}), Ints({0, 3})}});
}

TEST(OnnxRunTimeValuesTest, ReductionsTopKAndCumSumOverRunTimeAxes) {
  ModelBuilder m(13);
  const DataType i64 = DataType::Int(64);
  m.Input("x", kF32, {"2", "3", "4"}).Input("axes", i64, {"2"}).Input("k", i64, {"1"});
  m.Input("axis", i64, {});
  m.Node("ReduceSum", {"x", "axes"}, {"keep"}, {MakeIntAttr("keepdims", 1)});
  m.Node("ReduceSum", {"x", "axes"}, {"drop"}, {MakeIntAttr("keepdims", 0)});
  m.Node("TopK", {"x", "k"}, {"values", "indices"}, {MakeIntAttr("axis", 1)});
  m.Node("CumSum", {"x", "axis"}, {"cum"}, {MakeIntAttr("reverse", 1)});
  m.Output("keep").Output("drop").Output("values").Output("indices").Output("cum");
  const Tensor x = Random({2, 3, 4}, 23);
  auto one = [](int64_t v) { return MakeTensor<int64_t>({}, {v}); };
  ExpectRunTimeValuesMatchFrozen(m.model(), {"x", "axes", "k", "axis"},
                                 {{x, Ints({0, 2}), Ints({2}), one(1)},
                                  {x, Ints({-1, 1}), Ints({3}), one(-3)},
                                  {x, Ints({2, 0}), Ints({0}), one(2)}});
}

TEST(OnnxRunTimeValuesTest, ResizeWithRunTimeScalesOrSizes) {
  const DataType i64 = DataType::Int(64);
  ModelBuilder scaled(13);
  scaled.Input("x", kF32, {"1", "2", "4", "6"}).Input("scales", kF32, {"4"});
  scaled.Initializer("roi", MakeTensor<float>({0}, {}));
  scaled.Node("Resize", {"x", "roi", "scales"}, {"y"},
              {MakeStringAttr("mode", "linear"),
               MakeStringAttr("coordinate_transformation_mode", "half_pixel")});
  scaled.Output("y");
  const Tensor x = Random({1, 2, 4, 6}, 24);
  auto f4 = [](float a, float b, float c, float d) { return MakeTensor<float>({4}, {a, b, c, d}); };
  // A scale of 0.6 on a 6-wide axis gives 3 columns but maps coordinates by
  // 0.6, not 3/6: the kernel reads the scales themselves.
  ExpectRunTimeValuesMatchFrozen(scaled.model(), {"x", "scales"},
                                 {{x, f4(1, 1, 2, 0.6f)}, {x, f4(1, 1, 0.5f, 1.5f)}}, 1);
  ModelBuilder sized(13);
  sized.Input("x", kF32, {"1", "2", "4", "6"}).Input("sizes", i64, {"4"});
  sized.Initializer("roi", MakeTensor<float>({0}, {}))
      .Initializer("sc", MakeTensor<float>({0}, {}));
  sized.Node("Resize", {"x", "roi", "sc", "sizes"}, {"y"}, {MakeStringAttr("mode", "cubic")});
  sized.Output("y");
  ExpectRunTimeValuesMatchFrozen(sized.model(), {"x", "sizes"},
                                 {{x, Ints({1, 2, 3, 9})}, {x, Ints({1, 2, 8, 2})}});
}

TEST(OnnxRunTimeValuesTest, TriluOneHotAndFloatRangeWithRunTimeValues) {
  ModelBuilder m(14);
  const DataType i64 = DataType::Int(64);
  m.Input("x", kF32, {"3", "5"}).Input("k", i64, {}).Input("idx", i64, {"3"});
  m.Input("depth", kF32, {}).Input("start", kF32, {}).Input("limit", kF32, {});
  m.Input("delta", kF32, {});
  m.Initializer("onoff", MakeTensor<float>({2}, {-1, 7}));
  m.Node("Trilu", {"x", "k"}, {"upper"})
      .Node("Trilu", {"x", "k"}, {"lower"}, {MakeIntAttr("upper", 0)});
  m.Node("OneHot", {"idx", "depth", "onoff"}, {"hot"}, {MakeIntAttr("axis", 0)});
  m.Node("Range", {"start", "limit", "delta"}, {"range"});
  m.Output("upper").Output("lower").Output("hot").Output("range");
  const Tensor x = Random({3, 5}, 25);
  auto i = [](int64_t v) { return MakeTensor<int64_t>({}, {v}); };
  auto f = [](float v) { return MakeTensor<float>({}, {v}); };
  ExpectRunTimeValuesMatchFrozen(m.model(), {"x", "k", "idx", "depth", "start", "limit", "delta"},
                                 {{x, i(1), Ints({0, 2, -1}), f(4), f(0), f(2.5f), f(0.5f)},
                                  {x, i(-2), Ints({5, -4, 3}), f(6), f(3), f(-1), f(-0.75f)},
                                  {x, i(9), Ints({1, 1, 1}), f(2), f(1), f(1), f(1)}},
                                 1);
}

TEST(OnnxRunTimeValuesTest, PadWithRunTimePadsAndValue) {
  ModelBuilder m(13);
  m.Input("x", kF32, {"3", "4"}).Input("pads", DataType::Int(64), {"4"});
  m.Input("value", kF32, {});
  m.Node("Pad", {"x", "pads", "value"}, {"c"});
  m.Node("Pad", {"x", "pads"}, {"e"}, {MakeStringAttr("mode", "edge")});
  m.Node("Pad", {"x", "pads"}, {"r"}, {MakeStringAttr("mode", "reflect")});
  m.Output("c").Output("e").Output("r");
  const Tensor x = Random({3, 4}, 27);
  auto v = [](float f) { return MakeTensor<float>({}, {f}); };
  // Widths on both sides, none, and a negative one that crops.
  ExpectRunTimeValuesMatchFrozen(m.model(), {"x", "pads", "value"},
                                 {{x, Ints({1, 2, 2, 1}), v(-3)},
                                  {x, Ints({0, 0, 0, 0}), v(5)},
                                  {x, Ints({2, -1, 0, 3}), v(0.5f)}},
                                 1);
}

TEST(OnnxRunTimeValuesTest, StftWithRunTimeStepAndLength) {
  ModelBuilder m(17);
  const DataType i64 = DataType::Int(64);
  m.Input("x", kF32, {"1", "40", "1"}).Input("step", i64, {}).Input("len", i64, {});
  m.Node("STFT", {"x", "step", "", "len"}, {"y"}).Output("y");
  const Tensor x = Random({1, 40, 1}, 28);
  auto i = [](int64_t v) { return MakeTensor<int64_t>({}, {v}); };
  ExpectRunTimeValuesMatchFrozen(m.model(), {"x", "step", "len"},
                                 {{x, i(8), i(16)}, {x, i(5), i(7)}, {x, i(40), i(40)}});
}

// A run-time value an operator cannot take is an INVALID_ARGUMENT when the
// model runs, never a wrong shape or a read outside the input.
TEST(OnnxRunTimeValuesTest, InvalidRunTimeValuesAreClearErrors) {
  const DataType i64 = DataType::Int(64);
  struct Case {
    const char* what;
    ::onnx::ModelProto model;
    std::vector<Tensor> inputs;
  };
  const Tensor x = Random({2, 3}, 26);
  std::vector<Case> cases;
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("a", i64, {"1"});
    m.Node("Unsqueeze", {"x", "a"}, {"y"}).Output("y");
    cases.push_back({"unsqueeze axis out of range", m.model(), {x, Ints({5})}});
    cases.push_back({"unsqueeze axis out of range", m.model(), {x, Ints({-4})}});
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("a", i64, {"1"});
    m.Node("Squeeze", {"x", "a"}, {"y"}).Output("y");
    cases.push_back({"squeeze a dim that is not 1", m.model(), {x, Ints({1})}});
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("s", i64, {"1"}).Input("e", i64, {"1"});
    m.Input("a", i64, {"1"}).Input("st", i64, {"1"});
    m.Node("Slice", {"x", "s", "e", "a", "st"}, {"y"}).Output("y");
    cases.push_back({"slice step 0", m.model(), {x, Ints({0}), Ints({2}), Ints({1}), Ints({0})}});
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("p", i64, {"2"});
    m.Node("Split", {"x", "p"}, {"y0", "y1"}, {MakeIntAttr("axis", 1)}).Output("y0").Output("y1");
    cases.push_back({"split sizes that do not sum", m.model(), {x, Ints({1, 1})}});
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("k", i64, {"1"});
    m.Node("TopK", {"x", "k"}, {"v", "i"}).Output("v").Output("i");
    cases.push_back({"topk k past the axis", m.model(), {x, Ints({4})}});
  }
  {
    ModelBuilder m(14);
    m.Input("x", kF32, {"2", "3"}).Input("a", i64, {});
    m.Node("CumSum", {"x", "a"}, {"y"}).Output("y");
    cases.push_back({"cumsum axis out of range", m.model(), {x, MakeTensor<int64_t>({}, {2})}});
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("a", i64, {"1"});
    m.Node("ReduceSum", {"x", "a"}, {"y"}, {MakeIntAttr("keepdims", 0)}).Output("y");
    cases.push_back({"reduce axis out of range", m.model(), {x, Ints({3})}});
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("p", i64, {"4"});
    m.Node("Pad", {"x", "p"}, {"y"}).Output("y");
    cases.push_back({"pads that crop more than a dim", m.model(), {x, Ints({0, -2, 0, -2})}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::vector<Tensor>> out = RunModel(c.model, c.inputs);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  }
}

// Values no view catches -- a reduction keeping its dims over axes out of
// range or repeated, a negative split size the others make up for -- are
// refused by name when the model runs.
TEST(OnnxRunTimeValuesTest, RequiredConditionsNameTheNode) {
  const DataType i64 = DataType::Int(64);
  const Tensor x = Random({2, 3}, 27);
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("a", i64, {"2"});
    m.Node("ReduceSum", {"x", "a"}, {"y"}, {MakeIntAttr("keepdims", 1)}, "sum").Output("y");
    for (const Tensor& axes : {Ints({0, 2}), Ints({1, -1})}) {
      absl::StatusOr<std::vector<Tensor>> out = RunModel(m.model(), {x, axes});
      ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
      EXPECT_THAT(out.status().message(),
                  HasSubstr("node 'sum' (ReduceSum, opset 13): axes out of range or repeated (2 "
                            "axes for a tensor of 2 dims)"));
    }
    absl::StatusOr<std::vector<Tensor>> ok = RunModel(m.model(), {x, Ints({1, -2})});
    ASSERT_TRUE(ok.ok()) << ok.status();
  }
  {
    ModelBuilder m(13);
    m.Input("x", kF32, {"2", "3"}).Input("p", i64, {"3"});
    m.Node("Split", {"x", "p"}, {"y0", "y1", "y2"}, {MakeIntAttr("axis", 1)}, "split");
    m.Output("y0").Output("y1").Output("y2");
    absl::StatusOr<std::vector<Tensor>> out = RunModel(m.model(), {x, Ints({-1, 1, 2})});
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("node 'split' (Split, opset 13): a split size "
                                                  "is negative"));
  }
}

// Output shapes that only the run time knows: the VM's host builtins, their
// results cast to fresh symbolic dims that later operators compute over.
TEST(OnnxDataDependentTest, NonZeroFeedsLaterOperatorsIncludingWhenEmpty) {
  ModelBuilder m(13);
  m.Input("x", kF32, {"2", "3"});
  m.Node("NonZero", {"x"}, {"nz"}).Node("Transpose", {"nz"}, {"y"}).Output("y");
  auto out = RunModel(m.model(), {MakeTensor<float>({2, 3}, {0, 1.5, 0, -2, 0, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2, 2}, {0, 1, 1, 0})));
  auto none = RunModel(m.model(), {MakeTensor<float>({2, 3}, std::vector<float>(6, 0.0f))});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(ShapeOf((*none)[0]), (std::vector<int64_t>{0, 2}));
}

TEST(OnnxDataDependentTest, UniqueSortedOrNotFeedsLaterOperators) {
  for (int64_t sorted : {1, 0}) {
    SCOPED_TRACE(absl::StrCat("sorted=", sorted));
    ModelBuilder m(13);
    m.Input("x", kF32, {"5"});
    m.Node("Unique", {"x"}, {"u", "first", "inverse", "counts"}, {MakeIntAttr("sorted", sorted)});
    m.Node("Add", {"u", "u"}, {"twice"});
    m.Output("twice").Output("first").Output("inverse").Output("counts");
    auto out = RunModel(m.model(), {MakeTensor<float>({5}, {2, 1, 1, 3, 2})});
    ASSERT_TRUE(out.ok()) << out.status();
    if (sorted != 0) {
      EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, {2, 4, 6})));
      EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<int64_t>({3}, {1, 0, 3})));
      EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<int64_t>({5}, {1, 0, 0, 2, 1})));
    } else {
      EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, {4, 2, 6})));
      EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<int64_t>({3}, {0, 1, 3})));
      EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<int64_t>({5}, {0, 1, 1, 2, 0})));
    }
    EXPECT_TRUE(TensorsNear((*out)[3], MakeTensor<int64_t>({3}, {2, 2, 1})));
  }
  // An empty input has no distinct values.
  ModelBuilder e(13);
  e.Input("x", kF32, {"0"});
  e.Node("Unique", {"x"}, {"u", "first", "inverse", "counts"});
  e.Output("u").Output("counts");
  auto empty = RunModel(e.model(), {MakeTensor<float>({0}, {})});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(ShapeOf((*empty)[0]), (std::vector<int64_t>{0}));
  EXPECT_EQ(ShapeOf((*empty)[1]), (std::vector<int64_t>{0}));
}

// Det on the host: a swap of rows flips the sign (pivoting), a singular
// matrix is 0, and a batch keeps its leading dims.
TEST(OnnxDataDependentTest, DetPivotsAndHandlesSingularMatrices) {
  ModelBuilder m(13);
  m.Input("x", kF32, {"3", "3", "3"});
  m.Node("Det", {"x"}, {"d"}).Output("d");
  auto out = RunModel(m.model(), {MakeTensor<float>({3, 3, 3}, {0, 1, 0, 1, 0, 0, 0, 0, 1,  //
                                                                1, 2, 3, 2, 4, 6, 1, 1, 1,  //
                                                                2, 0, 1, 1, 3, 2, 1, 1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, {-1, 0, 6}), 1e-5, 1e-5));
}

TEST(OnnxDataDependentTest, CompressWithAShortConditionAndAWrongOneIsAnError) {
  ModelBuilder m(13);
  m.Input("x", kF32, {"3", "2"}).Input("c", DataType::Bool(), {"?"});
  m.Node("Compress", {"x", "c"}, {"y"}, {MakeIntAttr("axis", 0)}).Output("y");
  const Tensor x = MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto out = RunModel(m.model(), {x, MakeBoolTensor({2}, {false, true})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({1, 2}, {3, 4})));
  auto bad = RunModel(m.model(), {x, MakeBoolTensor({4}, {true, true, true, true})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

TEST(OnnxDataDependentTest, NonMaxSuppressionSelectsNothingWithoutAMaximum) {
  ModelBuilder m(13);
  m.Input("boxes", kF32, {"1", "2", "4"}).Input("scores", kF32, {"1", "1", "2"});
  m.Node("NonMaxSuppression", {"boxes", "scores"}, {"sel"}).Output("sel");
  auto out = RunModel(m.model(), {MakeTensor<float>({1, 2, 4}, {0, 0, 1, 1, 0, 0, 2, 2}),
                                  MakeTensor<float>({1, 1, 2}, {0.9f, 0.8f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ShapeOf((*out)[0]), (std::vector<int64_t>{0, 3}));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
