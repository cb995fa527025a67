// The pipelines end to end: modules built with "zero" (one kernel per
// operator, planned storage reuse) and "default" (fused, folded) run on the
// local VM and compute the same numbers as a plain C++ reference.
#include <cmath>

#include "compiler/build.h"
#include "compiler/transform/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/vm/local_vm.h"
#include "tests/compiler/transform_test_util.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using testing::F32;
using testing::Op;
using testing::RawFunction;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

IRModule ModuleOf(Expr main) {
  IRModule m;
  m.functions["main"] = std::move(main);
  return m;
}

// Builds `module` with `pipeline` and runs main on `args`.
std::vector<float> BuildAndRun(IRModule module, const std::string& pipeline,
                               std::vector<Value> args) {
  BuildOptions options;
  options.pipeline = pipeline;
  auto exec = Build(std::move(module), options);
  EXPECT_TRUE(exec.ok()) << pipeline << ": " << exec.status();
  if (!exec.ok()) return {};
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  EXPECT_TRUE(vm.ok()) << vm.status();
  if (!vm.ok()) return {};
  auto out = (*vm)->Invoke("main", ArgSpan(args.data(), args.size()));
  EXPECT_TRUE(out.ok()) << pipeline << ": " << out.status();
  if (!out.ok()) return {};
  return ReadFloats(Tensor(out->AsRef<TensorObj>()));
}

std::vector<float> Iota(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(scale * static_cast<float>(i)) + offset;
  return v;
}

TEST(PipelineEndToEndTest, MlpComputesTheSameWithEveryPipeline) {
  const int64_t in = 12, hidden = 9, out = 5;
  for (int64_t n : {1, 3}) {
    std::vector<float> x = Iota(n * in, 0.37f, 0), w1 = Iota(in * hidden, 0.11f, 0),
                       b1 = Iota(hidden, 0.5f, -0.2f), w2 = Iota(hidden * out, 0.23f, 0),
                       b2 = Iota(out, 0.9f, 0.1f);
    std::vector<float> want(n * out);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> h(hidden);
      for (int64_t j = 0; j < hidden; ++j) {
        float acc = b1[j];
        for (int64_t k = 0; k < in; ++k) acc += x[i * in + k] * w1[k * hidden + j];
        h[j] = std::max(acc, 0.0f);
      }
      for (int64_t j = 0; j < out; ++j) {
        float acc = b2[j];
        for (int64_t k = 0; k < hidden; ++k) acc += h[k] * w2[k * out + j];
        want[i * out + j] = acc;
      }
    }
    for (const char* pipeline : {"zero", "default"}) {
      std::vector<Value> args = {MakeFloatTensor({n, in}, x), MakeFloatTensor({in, hidden}, w1),
                                 MakeFloatTensor({hidden}, b1), MakeFloatTensor({hidden, out}, w2),
                                 MakeFloatTensor({out}, b2)};
      std::vector<float> got =
          BuildAndRun(ModuleOf(testing::MlpFunction(in, hidden, out)), pipeline, args);
      ASSERT_EQ(got.size(), want.size()) << pipeline;
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << pipeline;
    }
  }
}

// A constant weight is packed at compile time (PackConstantWeights) into
// the GEMM's panels: the product reads relax.matmul_packed's panels, partial
// last panel included, and computes what the unpacked product computes.
TEST(PipelineEndToEndTest, ConstantWeightsArePackedAtCompileTime) {
  const int64_t batch = 2, rows = 3, k = 40;
  for (int64_t n : {50, 64, 7}) {
    std::vector<float> x = Iota(batch * rows * k, 0.37f, 0), w = Iota(k * n, 0.11f, 0.1f),
                       bias = Iota(n, 0.5f, -0.2f);
    RawFunction f;
    Expr xv = f.Param("x", F32({batch, rows, k}));
    Expr mm = f.Bind("mm", Op("relax.matmul", {xv, testing::ConstF32({k, n}, w)}));
    Expr gv = f.Output("gv", Op("relax.add", {mm, testing::ConstF32({n}, bias)}));
    IRModule module = ModuleOf(f.Finish(gv));
    absl::StatusOr<std::string> lowered = EmitLoweredIR(module, BuildOptions());
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_THAT(*lowered, ::testing::HasSubstr("fused_matmul_packed_add")) << *lowered;
    std::vector<float> want(batch * rows * n);
    for (int64_t r = 0; r < batch * rows; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = bias[j];
        for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w[i * n + j];
        want[r * n + j] = acc;
      }
    }
    for (const char* pipeline : {"zero", "default"}) {
      std::vector<float> got =
          BuildAndRun(module, pipeline, {MakeFloatTensor({batch, rows, k}, x)});
      ASSERT_EQ(got.size(), want.size()) << pipeline << " n=" << n;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-3) << pipeline << " n=" << n << " at " << i;
      }
    }
  }
}

// A packed weight against more than one row block: the micro-kernel
// prefetches the next column panel as it computes one (a constant weight
// comes from memory on its first pass), with a full last panel or a narrow
// tail; one row block (8 rows) has nothing to hide behind and does not.
// Results match the plain product either way.
TEST(PipelineEndToEndTest, PackedWeightsPrefetchTheNextPanel) {
  const int64_t k = 48;
  struct Case {
    int64_t rows, n;
    bool prefetch;
  };
  for (const Case& c : {Case{40, 96, true}, Case{19, 100, true}, Case{8, 96, false}}) {
    std::vector<float> x = Iota(c.rows * k, 0.37f, 0), w = Iota(k * c.n, 0.11f, 0.1f);
    RawFunction f;
    Expr xv = f.Param("x", F32({c.rows, k}));
    Expr gv = f.Output("gv", Op("relax.matmul", {xv, testing::ConstF32({k, c.n}, w)}));
    IRModule module = ModuleOf(f.Finish(gv));
    absl::StatusOr<std::string> lowered = EmitLoweredIR(module, BuildOptions());
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_THAT(*lowered, ::testing::HasSubstr("matmul_packed")) << *lowered;
    EXPECT_EQ(lowered->find("T.prefetch(") != std::string::npos, c.prefetch)
        << c.rows << "x" << c.n << "\n"
        << *lowered;
    std::vector<float> got = BuildAndRun(module, "default", {MakeFloatTensor({c.rows, k}, x)});
    ASSERT_EQ(got.size(), static_cast<size_t>(c.rows * c.n));
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.n; ++j) {
        float want = 0;
        for (int64_t i = 0; i < k; ++i) want += x[r * k + i] * w[i * c.n + j];
        EXPECT_NEAR(got[r * c.n + j], want, 1e-3 * (1 + std::abs(want))) << r << "," << j;
      }
    }
  }
}

// A recurrent layer's weight, [1, K, N], is packed too when A has as many
// dims; the rows of all of A's batches are then one product (a [seq, 1, K]
// input projection runs as a [seq, K] GEMM, not seq vector products), and
// a vector product covers several column panels a task. Results match the
// unpacked product everywhere, partial panel groups included.
TEST(PipelineEndToEndTest, UnitBatchWeightsArePackedAndBatchRowsAreOneProduct) {
  const int64_t k = 40;
  struct Case {
    std::vector<int64_t> x, w;
    bool packed;
    const char* parallel;  // the product's parallel loop (or its accumulators)
  };
  // n = 200: 7 panels of 32 columns, the last of 8.
  const Case cases[] = {
      {{5, 1, k}, {1, k, 200}, true, "T.parallel(7)"},  // 5 rows x 7 panels, not 5 x 7 tasks
      {{1, k}, {k, 200}, true, "T.parallel(2)"},        // 1 row: 4 panels a task, 4 + 3
      {{3, k}, {1, k, 200}, false, nullptr},            // output [1, 3, n]: not a 2-D product
      {{1, k}, {k, 7}, true, "(1, 1, 7)"},              // one narrow panel: no group of copies
  };
  for (const Case& c : cases) {
    const int64_t n = c.w.back();
    std::vector<float> w = Iota(k * n, 0.11f, 0.1f);
    const int64_t rows = c.x[0] * (c.x.size() == 3 ? c.x[1] : 1);
    std::vector<float> x = Iota(rows * k, 0.37f, 0);
    RawFunction f;
    std::vector<PrimExpr> dims(c.x.begin(), c.x.end());
    Expr xv = f.Param("x", F32(dims));
    Expr gv = f.Output("gv", Op("relax.matmul", {xv, testing::ConstF32(c.w, w)}));
    IRModule module = ModuleOf(f.Finish(gv));
    absl::StatusOr<std::string> lowered = EmitLoweredIR(module, BuildOptions());
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_EQ(lowered->find("matmul_packed") != std::string::npos, c.packed) << *lowered;
    if (c.parallel != nullptr) {
      EXPECT_THAT(*lowered, ::testing::HasSubstr(c.parallel)) << *lowered;
    }
    std::vector<float> want(rows * n);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w[i * n + j];
        want[r * n + j] = acc;
      }
    }
    std::vector<float> got = BuildAndRun(module, "default", {MakeFloatTensor(c.x, x)});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i;
  }
}

// A 1x1 convolution of a constant weight on 1x1 images (squeeze-excite) is
// the packed product of w^T between two views; a padded one is not.
TEST(PipelineEndToEndTest, PointwiseConvolutionsOnOnePixelBecomePackedProducts) {
  const int64_t n = 2, c = 24, o = 37;
  std::vector<float> x = Iota(n * c, 0.37f, 0), w = Iota(o * c, 0.11f, 0.1f);
  for (bool padded : {false, true}) {
    RawFunction f;
    Expr xv = f.Param("x", F32({n, c, 1, 1}));
    Attrs attrs;
    if (padded) attrs["padding"] = std::vector<int64_t>{1, 1, 1, 1};
    Expr conv =
        f.Bind("conv", Op("relax.nn.conv2d", {xv, testing::ConstF32({o, c, 1, 1}, w)}, attrs));
    Expr gv = f.Output("gv", Op("relax.nn.relu", {conv}));
    IRModule module = ModuleOf(f.Finish(gv));
    absl::StatusOr<std::string> lowered = EmitLoweredIR(module, BuildOptions());
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_EQ(lowered->find("matmul_packed") != std::string::npos, !padded) << *lowered;
    if (padded) continue;  // 3x3 outputs; the unpadded product is the point here
    std::vector<float> want(n * o);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < o; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < c; ++k) acc += x[i * c + k] * w[j * c + k];
        want[i * o + j] = std::max(acc, 0.0f);
      }
    }
    std::vector<float> got = BuildAndRun(module, "default", {MakeFloatTensor({n, c, 1, 1}, x)});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i;
  }
}

// A convolution that runs the wide schedule gets its constant weight packed
// at compile time into that schedule's blocks (relax.nn.conv2d_packed): two
// groups of 40, 48 or 64 output channels (a block of 48 with 8 lanes empty,
// a full block of 48, two blocks of 32), padding, a row of 40 columns. It
// computes what the "zero" pipeline's unpacked convolution computes.
class WidePackedConvolution : public ::testing::TestWithParam<int64_t> {};

TEST_P(WidePackedConvolution, WeightsArePackedAtCompileTime) {
  const int64_t c = 16, o = GetParam(), h = 5, wd = 40;
  std::vector<float> x = Iota(c * h * wd, 0.37f, 0), w = Iota(o * (c / 2) * 9, 0.11f, 0.1f);
  RawFunction f;
  Expr xv = f.Param("x", F32({1, c, h, wd}));
  Attrs attrs = {{"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{2}}};
  Expr conv =
      f.Bind("conv", Op("relax.nn.conv2d", {xv, testing::ConstF32({o, c / 2, 3, 3}, w)}, attrs));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {conv}));
  IRModule module = ModuleOf(f.Finish(gv));
  absl::StatusOr<std::string> lowered = EmitLoweredIR(module, BuildOptions());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_THAT(*lowered, ::testing::HasSubstr("conv2d_packed")) << *lowered;
  std::vector<float> want = BuildAndRun(module, "zero", {MakeFloatTensor({1, c, h, wd}, x)});
  std::vector<float> got = BuildAndRun(module, "default", {MakeFloatTensor({1, c, h, wd}, x)});
  ASSERT_EQ(want.size(), static_cast<size_t>(o * h * wd));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i;
}

INSTANTIATE_TEST_SUITE_P(PipelineEndToEndTest, WidePackedConvolution,
                         ::testing::Values(80, 96, 128));

// On a GPU the weights stay as they are: the block GEMM reads plain rows.
TEST(PipelineEndToEndTest, GpuPipelinesDoNotPackWeights) {
  PipelineOptions gpu;
  gpu.target.gpu = true;
  absl::StatusOr<Pipeline> p = GetPipeline("default", gpu);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->PassNames(), ::testing::Not(::testing::Contains("PackConstantWeights")));
  absl::StatusOr<Pipeline> cpu = GetPipeline("default", PipelineOptions());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_THAT(cpu->PassNames(), ::testing::Contains("PackConstantWeights"));
}

TEST(PipelineEndToEndTest, ReusedStorageNeverClobbersALiveTensor) {
  // a = exp(x); b = relu(a); c = a + b; d = sqrt(c): a is still read when b
  // is written, so b must not take a's storage; c may take it afterwards.
  RawFunction f;
  Expr x = f.Param("x", F32({64, 64}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr b = f.Bind("b", Op("relax.nn.relu", {a}));
  Expr c = f.Bind("c", Op("relax.add", {a, b}));
  Expr gv = f.Output("gv", Op("relax.sqrt", {c}));
  std::vector<float> xs = Iota(64 * 64, 0.01f, 0);
  for (const char* pipeline : {"zero", "default"}) {
    std::vector<float> got =
        BuildAndRun(ModuleOf(f.Finish(gv)), pipeline, {MakeFloatTensor({64, 64}, xs)});
    ASSERT_EQ(got.size(), xs.size()) << pipeline;
    for (size_t i = 0; i < xs.size(); ++i) {
      float e = std::exp(xs[i]);
      EXPECT_NEAR(got[i], std::sqrt(e + std::max(e, 0.0f)), 1e-4) << pipeline << " at " << i;
    }
  }
}

TEST(PipelineEndToEndTest, FoldedConstantsAndReshapeViewsRun) {
  // (x + (k1 * k2)) reshaped to (6,) then relu: the constant product folds,
  // the reshape is a view.
  RawFunction f;
  Expr x = f.Param("x", F32({2, 3}));
  Expr k = f.Bind("k", Op("relax.multiply", {testing::ConstF32({3}, {1, 2, 3}),
                                             testing::ConstF32({3}, {-1, 0.5f, 2})}));
  Expr s = f.Bind("s", Op("relax.add", {x, k}));
  Expr r = f.Bind("r", Op("relax.reshape", {s, MakeShapeExpr({6})}));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {r}));
  std::vector<float> xs = {0.5f, -1, 0, 2, 3, -7};
  const float kk[3] = {-1, 1, 6};
  for (const char* pipeline : {"zero", "default"}) {
    std::vector<float> got =
        BuildAndRun(ModuleOf(f.Finish(gv)), pipeline, {MakeFloatTensor({2, 3}, xs)});
    ASSERT_EQ(got.size(), 6u) << pipeline;
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(got[i], std::max(xs[i] + kk[i % 3], 0.0f), 1e-6) << pipeline << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tether::compiler
