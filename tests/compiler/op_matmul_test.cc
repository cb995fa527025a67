// relax.matmul: struct info inference (1-D promotion, batch broadcasting,
// symbolic dims, errors) and the packed schedule against a plain C++
// reference, including sizes that are not multiples of the tile, batched
// and broadcast operands, 1-D operands and a fused epilogue.
#include <cmath>

#include "compiler/lower/lower.h"
#include "compiler/op/cpu_gemm.h"
#include "gtest/gtest.h"
#include "tests/compiler/op_test_util.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using optest::HostTensor;
using optest::kF16;
using optest::kF32;
using optest::Random;
using optest::Shape;

constexpr char kOp[] = "relax.matmul";

// numpy.matmul in double, rounded to `dtype`.
HostTensor MatmulRef(const HostTensor& a, const HostTensor& b, DataType dtype) {
  Shape as = a.shape, bs = b.shape;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = optest::BroadcastShape({ab, bb});
  Shape out_shape = batch;
  if (!a_vec) out_shape.push_back(M);
  if (!b_vec) out_shape.push_back(N);
  HostTensor out{out_shape, dtype, {}};
  const int64_t nb = optest::NumElements(batch);
  const Shape a_strides = optest::Strides(ab), b_strides = optest::Strides(bb);
  for (int64_t t = 0; t < nb; ++t) {
    Shape idx = optest::Unravel(t, batch);
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < ab.size(); ++d) {
      ao += (ab[d] == 1 ? 0 : idx[idx.size() - ab.size() + d]) * a_strides[d];
    }
    for (size_t d = 0; d < bb.size(); ++d) {
      bo += (bb[d] == 1 ? 0 : idx[idx.size() - bb.size() + d]) * b_strides[d];
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          s += a.data[static_cast<size_t>((ao * M + i) * K + k)] *
               b.data[static_cast<size_t>((bo * K + k) * N + j)];
        }
        out.data.push_back(optest::RoundTo(dtype, s));
      }
    }
  }
  return out;
}

void ExpectMatmul(const Shape& as, const Shape& bs, uint32_t seed, DataType dtype = kF32) {
  HostTensor a = Random(as, dtype, seed), b = Random(bs, dtype, seed + 1);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp(kOp, {a, b}));
  ASSERT_EQ(out.size(), 1u);
  // Accumulation order differs from the reference: scale the tolerance with K.
  const double k = static_cast<double>(as.back());
  optest::ExpectClose(out[0], MatmulRef(a, b, dtype), optest::Tolerance(dtype) * (1 + k / 8));
}

// The lowered kernel of a float32 matmul of these shapes, as text (or the
// error's message).
std::string LoweredText(const Shape& as, const Shape& bs, const KernelTarget& target = {}) {
  absl::StatusOr<Expr> call =
      optest::MakeOpCall(kOp, {optest::TensorVar("a", optest::Dims(as), kF32),
                               optest::TensorVar("b", optest::Dims(bs), kF32)});
  if (!call.ok()) return std::string(call.status().message());
  absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "mm", target);
  return kernel.ok() ? ToString(*kernel) : std::string(kernel.status().message());
}

TEST(MatmulInferTest, Shapes2dBatchedAndVectors) {
  auto check = [](Shape a, Shape b, const std::string& expected) {
    absl::StatusOr<StructInfo> s =
        optest::InferOp(kOp, {optest::TensorVar("a", optest::Dims(a), kF32),
                              optest::TensorVar("b", optest::Dims(b), kF32)});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(ToString(*s), expected);
  };
  check({3, 4}, {4, 5}, "R.Tensor((3, 5), \"float32\")");
  check({2, 1, 3, 4}, {6, 4, 5}, "R.Tensor((2, 6, 3, 5), \"float32\")");
  check({4}, {2, 4, 5}, "R.Tensor((2, 5), \"float32\")");
  check({2, 3, 4}, {4}, "R.Tensor((2, 3), \"float32\")");
  check({4}, {4}, "R.Tensor((), \"float32\")");
}

TEST(MatmulInferTest, KeepsSymbolicDimsAndOutDtype) {
  Var n("n"), k("k");
  absl::StatusOr<StructInfo> s = optest::InferOp(
      kOp, {optest::TensorVar("a", {n, k}, kF16), optest::TensorVar("b", {k, 8}, kF16)},
      {{"out_dtype", DataType::Float(32)}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((n, 8), \"float32\")");
}

TEST(MatmulInferTest, RejectsMismatchedReductionDims) {
  absl::StatusOr<StructInfo> s = optest::InferOp(
      kOp, {optest::TensorVar("a", {3, 4}, kF32), optest::TensorVar("b", {5, 6}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.matmul: reduction dims differ: 4"), std::string::npos)
      << s.status();
}

TEST(MatmulInferTest, RejectsUnbroadcastableBatchAndScalars) {
  absl::StatusOr<StructInfo> s = optest::InferOp(
      kOp, {optest::TensorVar("a", {2, 3, 4}, kF32), optest::TensorVar("b", {3, 4, 5}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("cannot broadcast batch dims 2 and 3"), std::string::npos)
      << s.status();
  s = optest::InferOp(kOp, {optest::TensorVar("a", {}, kF32), optest::TensorVar("b", {3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("at least 1 dimension"), std::string::npos) << s.status();
}

TEST(MatmulInferTest, RejectsMixedDtypesWithoutOutDtype) {
  absl::StatusOr<StructInfo> s = optest::InferOp(
      kOp, {optest::TensorVar("a", {3, 4}, kF32), optest::TensorVar("b", {4, 5}, kF16)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("float32 and float16"), std::string::npos) << s.status();
}

// relax.matmul_packed: the packed operand must be the panels of an [k, n]
// matrix (PackConstantWeights makes it; a hand-written call can be wrong).
TEST(MatmulPackedInferTest, ShapesAndRejections) {
  auto infer = [](Shape a, Shape bp, int64_t n) {
    return optest::InferOp("relax.matmul_packed",
                           {optest::TensorVar("a", optest::Dims(a), kF32),
                            optest::TensorVar("bp", optest::Dims(bp), kF32)},
                           {{"n", n}});
  };
  absl::StatusOr<StructInfo> s = infer({2, 3, 40}, {2, 40, 32}, 50);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((2, 3, 50), \"float32\")");
  s = infer({40}, {1, 40, 7}, 7);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((7,), \"float32\")");
  s = infer({3, 40}, {1, 40, 32}, 50);  // 50 columns need two panels
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("PackGemmPanels"), std::string::npos) << s.status();
  s = optest::InferOp("relax.matmul_packed",
                      {optest::TensorVar("a", {Var("m"), Var("k")}, kF32),
                       optest::TensorVar("bp", optest::Dims({2, 40, 32}), kF32)},
                      {{"n", int64_t{50}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);  // k unknown until run time
  s = infer({3, 41}, {2, 40, 32}, 50);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("reduction dims differ: 41 and 40"), std::string::npos)
      << s.status();
}

// PackGemmPanels: column panels of NR = min(32, n), k rows each, zero past n.
TEST(MatmulPackedInferTest, PackGemmPanelsLayout) {
  const int64_t k = 3, n = 35;
  std::vector<float> w(k * n);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  absl::StatusOr<Tensor> p = PackGemmPanels(tether::testing::MakeFloatTensor({k, n}, w));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(std::vector<int64_t>((*p)->shape().begin(), (*p)->shape().end()),
            (std::vector<int64_t>{2, k, 32}));
  std::vector<float> got = tether::testing::ReadFloats(*p);
  for (int64_t jo = 0; jo < 2; ++jo)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t jj = 0; jj < 32; ++jj) {
        const int64_t col = jo * 32 + jj;
        EXPECT_EQ(got[(jo * k + kk) * 32 + jj], col < n ? w[kk * n + col] : 0.0f)
            << jo << "," << kk << "," << jj;
      }
  EXPECT_FALSE(PackGemmPanels(tether::testing::MakeFloatTensor({4}, {1, 2, 3, 4})).ok());
}

// Which operand streams: the row blocks run innermost unless B is the one
// that stays in cache (it fits, A does not; or both fit and B is smaller).
TEST(MatmulScheduleTest, RowBlocksInnerUnlessBStaysInCache) {
  auto inner = [](PrimExpr m, PrimExpr k, PrimExpr n) {
    CpuGemm g;
    g.m = m;
    g.k = k;
    g.n = n;
    g.acc_t = kF32;
    return CpuGemmRowBlocksInner(g);
  };
  EXPECT_TRUE(inner(1024, 1024, 1024));   // neither fits: A is re-read 4x less often
  EXPECT_FALSE(inner(512, 512, 512));     // both fit, B not larger
  EXPECT_TRUE(inner(64, 1024, 4096));     // a weight against a few rows
  EXPECT_TRUE(inner(64, 256, 12544));     // an image against a 1x1 convolution's weight
  EXPECT_FALSE(inner(4096, 256, 512));    // B (512 KiB) stays, A (4 MiB) streams once
  EXPECT_TRUE(inner(128, 3072, 768));     // A fits, B does not
  EXPECT_FALSE(inner(Var("m"), 64, 64));  // symbolic rows: B not known larger
}

// The last column panel of an N that leaves it at most half used runs a
// micro-kernel half as wide (N = 196: 6 panels of 32, then 16 columns
// computed for 4, not 32); 17 or more remaining columns keep the full one.
TEST(MatmulScheduleTest, NarrowTailPanel) {
  EXPECT_NE(LoweredText({24, 40}, {40, 196}).find("gemm_acc_tail"), std::string::npos);
  EXPECT_NE(LoweredText({24, 40}, {40, 48}).find("gemm_acc_tail"), std::string::npos);
  EXPECT_EQ(LoweredText({24, 40}, {40, 49}).find("gemm_acc_tail"), std::string::npos);  // 17 left
  EXPECT_EQ(LoweredText({24, 40}, {40, 64}).find("gemm_acc_tail"), std::string::npos);  // no tail
  EXPECT_EQ(LoweredText({24, 40}, {40, 20}).find("gemm_acc_tail"), std::string::npos);  // one panel
  ExpectMatmul({24, 40}, {40, 196}, 14);
  ExpectMatmul({9, 31}, {31, 48}, 15);
  ExpectMatmul({2, 17, 40}, {40, 100}, 16);
}

// A partial last panel of a B read in place (its row blocks inner) is the
// only one packed, into gemm_tail_b: a 1x1 convolution on 28 x 28 pixels
// packed all of its image per call. With the panels inner (B re-read for
// every row block) all of B is packed, a contiguous stream. Each against
// the reference: a narrow tail (N = 196), a full-width one (N = 50), a
// batched B (each operand's tail packed), and the panels-inner case.
TEST(MatmulScheduleTest, OnlyTheLastPanelIsPackedWithRowBlocksInner) {
  auto text = [](const Shape& as, const Shape& bs) {
    std::string t = LoweredText(as, bs);
    return std::pair<bool, bool>(t.find("gemm_tail_b") != std::string::npos,
                                 t.find("gemm_packed_b") != std::string::npos);
  };
  using Packs = std::pair<bool, bool>;  // (tail alone, all of B)
  EXPECT_EQ(text({24, 40}, {40, 196}), Packs(true, false));
  EXPECT_EQ(text({24, 40}, {40, 50}), Packs(true, false));
  EXPECT_EQ(text({2, 24, 40}, {2, 40, 100}), Packs(true, false));
  EXPECT_EQ(text({400, 40}, {40, 196}), Packs(false, true));  // panels inner
  EXPECT_EQ(text({24, 40}, {40, 64}), Packs(false, false));   // no partial panel
  EXPECT_NE(LoweredText({24, 40}, {40, 50}).find("gemm_acc_last"), std::string::npos);
  ExpectMatmul({24, 40}, {40, 196}, 25);
  ExpectMatmul({24, 40}, {40, 50}, 26);
  ExpectMatmul({2, 19, 40}, {2, 40, 100}, 27);
  ExpectMatmul({400, 40}, {40, 196}, 28);
}

// A B whose rows are a multiple of 1 KiB apart (N = 256, 1024, ...) maps
// them onto a few cache sets: past 4 row blocks it is packed, not read in
// place; 32 rows, or rows 1 KiB + 32 floats apart, read it in place.
TEST(MatmulScheduleTest, PacksBWhoseRowsAliasInTheCache) {
  auto packs = [](const Shape& as, const Shape& bs) {
    return LoweredText(as, bs).find("gemm_packed_b") != std::string::npos;
  };
  EXPECT_TRUE(packs({40, 64}, {64, 256}));
  EXPECT_TRUE(packs({2, 40, 64}, {64, 1024}));
  EXPECT_FALSE(packs({32, 64}, {64, 256}));
  EXPECT_FALSE(packs({40, 64}, {64, 288}));
  ExpectMatmul({40, 64}, {64, 256}, 21);
  ExpectMatmul({2, 45, 48}, {48, 512}, 22);
}

// Row blocks whose A exceeds the cache budget (1 MiB) go in groups that
// fit half of it (the parallel loop's order is group, panel group, row
// block): 20 row blocks of 2048 floats' reduction (64 KiB each, 8 to a
// group) make 3 groups of 7, the last short by one. An A within the budget
// stays ungrouped. Every row and column is computed once.
TEST(MatmulScheduleTest, RowGroupsKeepARowsInCache) {
  // 3 groups x 7 row blocks x 19 panels; ungrouped it would be 20 x 19 = 380.
  EXPECT_NE(LoweredText({160, 2048}, {2048, 600}).find(" 399"), std::string::npos);
  EXPECT_EQ(LoweredText({160, 2048}, {2048, 600}).find(" 380"), std::string::npos);
  // 100 rows (800 KiB of A): 13 x 19 = 247 tasks, no groups.
  EXPECT_NE(LoweredText({100, 2048}, {2048, 600}).find(" 247"), std::string::npos);
  ExpectMatmul({160, 2048}, {2048, 600}, 23);
  ExpectMatmul({2, 40, 8192}, {8192, 64}, 24);  // batched: 3 groups of 2 row blocks, 5 used
}

// The budget is the target's L2 where it gives one (CpuGemmCacheBudget):
// with a 2 MiB L2 the 1.25 MiB A of 160 rows fits and stays ungrouped (20
// row blocks x 19 panels); with 512 KiB (Zen 2/3) even 100 rows (800 KiB,
// 13 row blocks) go in groups of 4 (half the budget): 16 x 19 = 304 tasks.
TEST(MatmulScheduleTest, CacheBudgetIsTheTargetsL2) {
  KernelTarget l2_2m, l2_512k;
  l2_2m.l2_cache_bytes = 2 << 20;
  l2_512k.l2_cache_bytes = 512 << 10;
  EXPECT_NE(LoweredText({160, 2048}, {2048, 600}, l2_2m).find(" 380"), std::string::npos);
  EXPECT_NE(LoweredText({100, 2048}, {2048, 600}, l2_512k).find(" 304"), std::string::npos);
  EXPECT_EQ(CpuGemmCacheBudget(l2_512k), 512 << 10);
  EXPECT_EQ(CpuGemmCacheBudget(KernelTarget()), 1 << 20);  // unknown: 1 MiB
}

TEST(MatmulScheduleTest, SquareMultipleOfTile) { ExpectMatmul({96, 64}, {64, 64}, 1); }

TEST(MatmulScheduleTest, OddSizesNotMultipleOfTile) {
  ExpectMatmul({7, 13}, {13, 37}, 2);
  ExpectMatmul({13, 1}, {1, 33}, 3);
  ExpectMatmul({65, 129}, {129, 71}, 4);
}

TEST(MatmulScheduleTest, SizeOne) {
  ExpectMatmul({1, 1}, {1, 1}, 5);
  ExpectMatmul({1, 9}, {9, 1}, 6);
}

TEST(MatmulScheduleTest, BatchedWithBroadcasting) {
  ExpectMatmul({3, 5, 7}, {3, 7, 9}, 7);
  ExpectMatmul({2, 1, 5, 7}, {3, 7, 40}, 8);
  ExpectMatmul({4, 6, 7}, {7, 33}, 9);
}

TEST(MatmulScheduleTest, VectorOperands) {
  ExpectMatmul({17}, {17, 35}, 10);
  ExpectMatmul({2, 35, 17}, {17}, 11);
  ExpectMatmul({17}, {17}, 12);
}

TEST(MatmulScheduleTest, Float16ComputesInFloat32) { ExpectMatmul({9, 20}, {20, 18}, 13, kF16); }

TEST(MatmulScheduleTest, SymbolicRows) {
  Var n("n");
  HostTensor a = Random({11, 24}, kF32, 14), b = Random({24, 19}, kF32, 15);
  absl::StatusOr<Expr> call = optest::MakeOpCall(
      kOp, {optest::TensorVar("a", {n, 24}, kF32), optest::TensorVar("b", {24, 19}, kF32)});
  ASSERT_TRUE(call.ok()) << call.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunCall(*call, {a, b}, {{11, 19}}));
  optest::ExpectClose(out[0], MatmulRef(a, b, kF32), 1e-4);
}

TEST(MatmulScheduleTest, AppliesEpilogueAtTheFinalStore) {
  HostTensor a = Random({10, 21}, kF32, 16), b = Random({21, 35}, kF32, 17);
  absl::StatusOr<Expr> call =
      optest::MakeOpCall(kOp, {optest::TensorVar("a", a), optest::TensorVar("b", b)});
  ASSERT_TRUE(call.ok()) << call.status();
  const CallNode& c = *call->as<CallNode>();
  Buffer A = MakeBuffer("A", kF32, optest::Dims(a.shape));
  Buffer B = MakeBuffer("B", kF32, optest::Dims(b.shape));
  absl::StatusOr<Buffer> C = BufferForStructInfo(call->struct_info(), "C");
  ASSERT_TRUE(C.ok()) << C.status();
  LowerContext ctx;
  ctx.call = &c;
  ctx.input_buffers = {A, B};
  ctx.inputs = {[A](const std::vector<PrimExpr>& i) { return Load(A, i); },
                [B](const std::vector<PrimExpr>& i) { return Load(B, i); }};
  ctx.out_sinfo = call->struct_info();
  absl::StatusOr<Stmt> body =
      FindOp(kOp)->schedule(ctx, {*C}, [](const PrimExpr& v, const std::vector<PrimExpr>&) {
        return Max(v + FloatImm(kF32, 1), FloatImm(kF32, 0));
      });
  ASSERT_TRUE(body.ok()) << body.status();
  KernelFunc k = MakeKernelFunc(
      "matmul_epilogue", {KernelParam::Tensor(A), KernelParam::Tensor(B), KernelParam::Tensor(*C)},
      *body);
  OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, optest::CompiledKernel::Create(k));
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, compiled.Run({a, b}));
  HostTensor expected = MatmulRef(a, b, kF32);
  for (double& v : expected.data) v = std::max(v + 1, 0.0);
  optest::ExpectClose(out[0], expected, 1e-4);
}

TEST(MatmulScheduleTest, RequiresParameterBuffers) {
  absl::StatusOr<Expr> call = optest::MakeOpCall(
      kOp, {optest::TensorVar("a", {2, 3}, kF32), optest::TensorVar("b", {3, 4}, kF32)});
  ASSERT_TRUE(call.ok()) << call.status();
  LowerContext ctx;
  ctx.call = call->as<CallNode>();
  ctx.input_buffers = {nullptr, nullptr};
  absl::StatusOr<Stmt> body =
      FindOp(kOp)->schedule(ctx, {MakeBuffer("C", kF32, {2, 4})}, Epilogue());
  ASSERT_EQ(body.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(body.status().message().find("must be a kernel parameter buffer"), std::string::npos);
}

}  // namespace
}  // namespace tether::compiler
