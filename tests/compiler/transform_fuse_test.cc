// FuseOps: which calls fuse (observable as kernels and call_tir bindings),
// what ends a group, and that a fused kernel computes what the unfused
// operators compute (compiled and run through the host JIT).
#include <cmath>

#include "compiler/backend/llvm/jit.h"
#include "compiler/transform/fuse.h"
#include "compiler/transform/legalize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/transform_test_util.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using testing::BindingsCalling;
using ::testing::ElementsAre;
using testing::F32;
using testing::NormalizedModule;
using testing::Op;
using testing::RawFunction;
using ::testing::UnorderedElementsAre;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

IRModule Fused(Expr main) {
  auto m = NormalizedModule(std::move(main));
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto out = FuseOps(*m);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  absl::Status wf = CheckWellFormed(out->Lookup("main"), "main", &*out);
  EXPECT_TRUE(wf.ok()) << wf;
  return *out;
}

std::vector<std::string> KernelNames(const IRModule& m) {
  std::vector<std::string> names;
  for (const auto& [name, k] : m.kernels) names.push_back(name);
  return names;
}

std::vector<std::string> RemainingOps(const IRModule& m) {
  std::vector<std::string> ops;
  for (const Binding& b : testing::Bindings(m)) {
    absl::string_view op = CalledOpName(b.value);
    if (!op.empty()) ops.emplace_back(op);
  }
  return ops;
}

TEST(FuseOpsTest, MlpFusesIntoOneKernelPerLayer) {
  IRModule m = Fused(testing::MlpFunction());
  EXPECT_THAT(KernelNames(m), UnorderedElementsAre("fused_matmul_add_relu", "fused_matmul_add"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.call_tir", "relax.call_tir"));
  // Layer 1 reads x, w1, b1; the output is written last.
  const KernelFunc& k = m.kernels.at("fused_matmul_add_relu");
  EXPECT_EQ(k->params.size(), 4u);
  auto calls = BindingsCalling(m, "relax.call_tir");
  EXPECT_EQ(calls[1].var.as<VarNode>()->name_hint, "gv");
}

TEST(FuseOpsTest, ElementwiseChainFusesIntoOneLoop) {
  RawFunction f;
  Expr x = f.Param("x", F32({16, 33}));
  Expr y = f.Param("y", F32({33}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr b = f.Bind("b", Op("relax.add", {a, y}));
  Expr c = f.Bind("c", Op("relax.negative", {b}));
  Expr gv = f.Output("gv", Op("relax.multiply", {c, y}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_exp_add_negative_multiply"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.call_tir"));
}

// A value used twice inside what becomes one group (b * b) is a diamond:
// the group takes both uses.
TEST(FuseOpsTest, DiamondOfElementwiseOpsFusesIntoOneLoop) {
  RawFunction f;
  Expr x = f.Param("x", F32({16, 33}));
  Expr y = f.Param("y", F32({33}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr b = f.Bind("b", Op("relax.add", {a, y}));
  Expr gv = f.Output("gv", Op("relax.multiply", {b, b}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_exp_add_multiply"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.call_tir"));
}

// PyTorch's GELU after a linear layer, x * 0.5 * (1 + erf(x / sqrt 2)) with x
// = matmul + bias: x has two users, and the whole diamond becomes the
// matmul's epilogue.
TEST(FuseOpsTest, ErfGeluDiamondJoinsTheMatmulEpilogue) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr w = f.Param("w", F32({8, 16}));
  Expr bias = f.Param("bias", F32({16}));
  Expr k = f.Param("k", F32({}));
  Expr mm = f.Bind("mm", Op("relax.matmul", {x, w}));
  Expr h = f.Bind("h", Op("relax.add", {mm, bias}));
  Expr d = f.Bind("d", Op("relax.divide", {h, k}));
  Expr e = f.Bind("e", Op("relax.erf", {d}));
  Expr p = f.Bind("p", Op("relax.add", {e, k}));
  Expr gv = f.Output("gv", Op("relax.multiply", {h, p}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_matmul_add_divide_erf_add_multiply"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.call_tir"));
}

// Softmax written out (ONNX's *_expanded tests): exp(x - max) feeds both the
// sum and the division. The division cannot take the sum as an anchor (other
// shape), so exp's second use stays outside and exp must stay a group output.
TEST(FuseOpsTest, SharedValueWhoseOtherUserCannotJoinStaysAnOutput) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 10}));
  Attrs keep = {{"axis", std::vector<int64_t>{1}}, {"keepdims", true}};
  Expr mx = f.Bind("mx", Op("relax.max", {x}, keep));
  Expr d = f.Bind("d", Op("relax.subtract", {x, mx}));
  Expr e = f.Bind("e", Op("relax.exp", {d}));
  Expr sum = f.Bind("sum", Op("relax.sum", {e}, keep));
  Expr gv = f.Output("gv", Op("relax.divide", {e, sum}));
  IRModule m = Fused(f.Finish(gv));  // checks well-formedness
  EXPECT_THAT(RemainingOps(m),
              ElementsAre("relax.max", "relax.call_tir", "relax.sum", "relax.divide"));
}

// When one use of a shared value is outside the group (here a reduction,
// which cannot take an elementwise producer with two users), the value ends
// its group.
TEST(FuseOpsTest, SharedValueWithAUseOutsideTheGroupEndsIt) {
  RawFunction f;
  Expr x = f.Param("x", F32({16, 33}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr b = f.Bind("b", Op("relax.multiply", {a, a}));
  Expr s = f.Bind("s", Op("relax.sum", {a}));
  Expr gv = f.Output("gv", MakeTuple({b, s}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.exp", "relax.multiply", "relax.sum"));
}

TEST(FuseOpsTest, BlockOutputEndsAGroup) {
  RawFunction f;
  Expr x = f.Param("x", F32({8}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr g1 = f.Output("g1", Op("relax.nn.relu", {a}));  // escapes the block
  Expr g2 = f.Output("g2", Op("relax.negative", {g1}));
  IRModule m = Fused(f.Finish(MakeTuple({g1, g2})));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_exp_relu"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.call_tir", "relax.negative"));
}

TEST(FuseOpsTest, ReductionTakesInjectivePrologueAndElementwiseEpilogue) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 10}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr s = f.Bind("s", Op("relax.sum", {a}, {{"axis", std::vector<int64_t>{1}}}));
  Expr gv = f.Output("gv", Op("relax.sqrt", {s}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_exp_sum_sqrt"));
}

TEST(FuseOpsTest, MatmulNeverInlinesItsProducers) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr w = f.Param("w", F32({8, 8}));
  Expr a = f.Bind("a", Op("relax.nn.relu", {x}));
  Expr b = f.Bind("b", Op("relax.matmul", {a, w}));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {b}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_matmul_relu"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.nn.relu", "relax.call_tir"));
}

TEST(FuseOpsTest, BroadcastPastTheAnchorShapeIsNotAnEpilogue) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr w = f.Param("w", F32({8, 8}));
  Expr y = f.Param("y", F32({3, 4, 8}));
  Expr b = f.Bind("b", Op("relax.matmul", {x, w}));
  Expr gv = f.Output("gv", Op("relax.add", {b, y}));  // (3, 4, 8): not the anchor's shape
  IRModule m = Fused(f.Finish(gv));
  EXPECT_TRUE(m.kernels.empty());
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.matmul", "relax.add"));
}

TEST(FuseOpsTest, IdenticalGroupsShareAKernel) {
  RawFunction f;
  Expr x = f.Param("x", F32({8}));
  Expr y = f.Param("y", F32({8}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr g1 = f.Output("g1", Op("relax.nn.relu", {a}));
  Expr b = f.Bind("b", Op("relax.exp", {y}));
  Expr g2 = f.Output("g2", Op("relax.nn.relu", {b}));
  IRModule m = Fused(f.Finish(MakeTuple({g1, g2})));
  EXPECT_THAT(KernelNames(m), ElementsAre("fused_exp_relu"));
  EXPECT_EQ(BindingsCalling(m, "relax.call_tir").size(), 2u);
}

// Runs kernel `name` of `m` on `inputs`, returning the output of `out_shape`.
std::vector<float> RunKernel(const IRModule& m, const std::string& name, std::vector<Tensor> inputs,
                             std::vector<int64_t> out_shape) {
  auto lib = BuildAndLoad({m.kernels.at(name)});
  EXPECT_TRUE(lib.ok()) << lib.status();
  if (!lib.ok()) return {};
  auto fn = (*lib)->GetFunction(name);
  EXPECT_TRUE(fn.ok()) << fn.status();
  auto out = Tensor::Empty(out_shape, DataType::Float(32), Device::Cpu());
  std::vector<Value> args(inputs.begin(), inputs.end());
  args.push_back(*out);
  auto r = (*fn)(ArgSpan(args.data(), args.size()));
  EXPECT_TRUE(r.ok()) << r.status();
  return ReadFloats(*out);
}

TEST(FuseOpsTest, FusedDenseBiasReluComputesTheComposedValues) {
  IRModule m = Fused(testing::MlpFunction(/*in=*/5, /*hidden=*/7, /*out=*/3));
  const int64_t n = 3, in = 5, hidden = 7;
  std::vector<float> x(n * in), w(in * hidden), b(hidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.3f * i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * i - 1.0f;
  std::vector<float> got = RunKernel(
      m, "fused_matmul_add_relu",
      {MakeFloatTensor({n, in}, x), MakeFloatTensor({in, hidden}, w), MakeFloatTensor({hidden}, b)},
      {n, hidden});
  ASSERT_EQ(got.size(), static_cast<size_t>(n * hidden));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < hidden; ++j) {
      float acc = b[j];
      for (int64_t k = 0; k < in; ++k) acc += x[i * in + k] * w[k * hidden + j];
      EXPECT_NEAR(got[i * hidden + j], std::max(acc, 0.0f), 1e-5) << i << "," << j;
    }
  }
}

// A residual add of two products (ResNet's first block of a stage: the
// main path's last convolution plus the projection) joins the one computed
// last as its epilogue, the other's output read as an input: two kernels,
// not three. The fused kernel computes relu(x * w2 + x * w1), and the
// first product stays a kernel of its own.
TEST(FuseOpsTest, AddOfTwoProductsJoinsTheLastOne) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr w1 = f.Param("w1", F32({8, 6}));
  Expr w2 = f.Param("w2", F32({8, 6}));
  Expr a = f.Bind("a", Op("relax.matmul", {x, w1}));
  Expr ra = f.Bind("ra", Op("relax.nn.relu", {a}));
  Expr b = f.Bind("b", Op("relax.matmul", {x, w2}));
  Expr s = f.Bind("s", Op("relax.add", {ra, b}));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {s}));
  IRModule m = Fused(f.Finish(gv));
  EXPECT_THAT(KernelNames(m), UnorderedElementsAre("fused_matmul_relu", "fused_matmul_add_relu"));
  EXPECT_THAT(RemainingOps(m), ElementsAre("relax.call_tir", "relax.call_tir"));
  std::vector<float> xs(4 * 8), w(8 * 6), r(4 * 6);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.7f * i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.3f * i);
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.5f - 0.1f * i;  // relu(x * w1), as an input
  // The fused kernel's inputs in order of use: x, w2 (the anchor's), then ra.
  std::vector<float> got = RunKernel(
      m, "fused_matmul_add_relu",
      {MakeFloatTensor({4, 8}, xs), MakeFloatTensor({8, 6}, w), MakeFloatTensor({4, 6}, r)},
      {4, 6});
  ASSERT_EQ(got.size(), r.size());
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      float acc = r[i * 6 + j];
      for (int64_t k = 0; k < 8; ++k) acc += xs[i * 8 + k] * w[k * 6 + j];
      EXPECT_NEAR(got[i * 6 + j], std::max(acc, 0.0f), 1e-5) << i << "," << j;
    }
  }
}

TEST(FuseOpsTest, FusedReductionComputesTheComposedValues) {
  RawFunction f;
  Expr x = f.Param("x", F32({3, 5}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr s = f.Bind("s", Op("relax.sum", {a}, {{"axis", std::vector<int64_t>{1}}}));
  Expr gv = f.Output("gv", Op("relax.sqrt", {s}));
  IRModule m = Fused(f.Finish(gv));
  std::vector<float> xs(15);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.1f * i - 0.5f;
  std::vector<float> got = RunKernel(m, "fused_exp_sum_sqrt", {MakeFloatTensor({3, 5}, xs)}, {3});
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    float acc = 0;
    for (int k = 0; k < 5; ++k) acc += std::exp(xs[i * 5 + k]);
    EXPECT_NEAR(got[i], std::sqrt(acc), 1e-5);
  }
}

// A decomposed LayerNorm's variance, mean((x - m) ** 2.0) + eps: the 0-d
// constants are immediates of the kernel, not parameters, and x ** 2.0 is
// x * x (no pow call); the values are the composed ones.
TEST(FuseOpsTest, ScalarConstantsAreImmediatesAndSquaringIsAProduct) {
  RawFunction f;
  Expr x = f.Param("x", F32({3, 5}));
  Expr p = f.Bind("p", Op("relax.power", {x, testing::ConstF32({}, {2.0f})}));
  Expr s = f.Bind("s", Op("relax.mean", {p}, {{"axis", std::vector<int64_t>{1}}}));
  Expr gv = f.Output("gv", Op("relax.add", {s, testing::ConstF32({}, {0.25f})}));
  IRModule m = Fused(f.Finish(gv));
  ASSERT_THAT(KernelNames(m), ElementsAre("fused_power_mean_add"));
  const KernelFunc& k = m.kernels.at("fused_power_mean_add");
  EXPECT_EQ(k->params.size(), 2u);  // x and the output
  const std::string text = ToString(k);
  EXPECT_EQ(text.find("T.pow"), std::string::npos) << text;
  std::vector<float> xs(15);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.3f * i - 2.0f;
  std::vector<float> got = RunKernel(m, "fused_power_mean_add", {MakeFloatTensor({3, 5}, xs)}, {3});
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    float acc = 0;
    for (int j = 0; j < 5; ++j) acc += xs[i * 5 + j] * xs[i * 5 + j];
    EXPECT_NEAR(got[i], acc / 5 + 0.25f, 1e-5);
  }
}

TEST(FuseOpsTest, LegalizeAfterFusionLowersWhatIsLeft) {
  RawFunction f;
  Expr x = f.Param("x", F32({4, 8}));
  Expr w = f.Param("w", F32({8, 8}));
  Expr a = f.Bind("a", Op("relax.nn.relu", {x}));
  Expr b = f.Bind("b", Op("relax.matmul", {a, w}));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {b}));
  IRModule m = Fused(f.Finish(gv));
  auto legal = LegalizeOps(m);
  ASSERT_TRUE(legal.ok()) << legal.status();
  EXPECT_THAT(KernelNames(*legal), UnorderedElementsAre("fused_matmul_relu", "relu"));
  EXPECT_THAT(RemainingOps(*legal), ElementsAre("relax.call_tir", "relax.call_tir"));
}

}  // namespace
}  // namespace tether::compiler
