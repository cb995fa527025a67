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
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend::testing {
namespace {

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

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
