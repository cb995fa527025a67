// GPU-mode lowering (LowerContext::gpu, LowerCallToKernel's `gpu`,
// PipelineOptions::target.gpu): every operator with a schedule, per-element
// operators and fused groups lower to bodies that device lowering
// (compiler/backend/cuda/device_split.h) accepts and that spread over GPU threads:
// after the leading lets, exactly one kParallel loop (or one kBlock loop:
// a block schedule), no kGlobal allocation, no assertion, no vectorized
// loop and no nested parallel loop, so SplitForDevice makes it one launch.
// The exceptions are split reductions and split-K products: loops in
// sequence inside kGlobal allocations, the launches and their scratch.
// GPU-mode kernels are ordinary kernel IR, so they are compiled for the CPU
// here and must compute what the CPU-mode kernels compute, on random inputs
// of awkward shapes; whole modules through RunPipeline(gpu) must compute
// what the normal pipeline computes. Block schedules run once more with the
// threads of every kThread and kWarp loop in reverse order: a thread that
// reads what another thread of the same loop writes (a race on a GPU, where
// only the loop's end is a barrier) gives a different result then.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/backend/cuda/device_split.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/backend/vm/vm_codegen.h"
#include "compiler/build.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/text/parser.h"
#include "compiler/text/printer.h"
#include "compiler/transform/pipeline.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cuda_kernel_library.h"
#include "runtime/vm/local_vm.h"
#include "tests/compiler/op_test_util.h"
#include "tests/testing/repo_root.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using optest::CompiledKernel;
using optest::HostTensor;
using optest::kF16;
using optest::kF32;
using optest::kI64;
using optest::Random;
using optest::Shape;

// What a body contains that a device launch cannot run or runs badly.
struct BodyCensus {
  int global_allocations = 0;
  int asserts = 0;
  int vectorized_loops = 0;
  int parallel_loops = 0;  // anywhere, the top-level one included
  int block_loops = 0;
  int thread_loops = 0;
  int warp_loops = 0;
  int warpgroup_loops = 0;
  int matrix_tiles = 0;  // tensor-core statements
  int async_copies = 0;  // cp.async copies (not fences)
};

void Census(const Stmt& s, BodyCensus* c) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* f = s.as<ForNode>();
      if (f->for_kind == ForKind::kParallel) ++c->parallel_loops;
      if (f->for_kind == ForKind::kVectorized) ++c->vectorized_loops;
      if (f->for_kind == ForKind::kBlock) ++c->block_loops;
      if (f->for_kind == ForKind::kThread) ++c->thread_loops;
      if (f->for_kind == ForKind::kWarp) ++c->warp_loops;
      if (f->for_kind == ForKind::kWarpgroup) ++c->warpgroup_loops;
      Census(f->body, c);
      return;
    }
    case StmtKind::kLet:
      Census(s.as<LetStmtNode>()->body, c);
      return;
    case StmtKind::kAllocate: {
      const auto* a = s.as<AllocateNode>();
      if (a->buffer->scope == BufferNode::Scope::kGlobal) ++c->global_allocations;
      Census(a->body, c);
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& x : s.as<SeqStmtNode>()->seq) Census(x, c);
      return;
    case StmtKind::kIf:
      Census(s.as<IfThenElseNode>()->then_case, c);
      Census(s.as<IfThenElseNode>()->else_case, c);
      return;
    case StmtKind::kAssert:
      ++c->asserts;
      Census(s.as<AssertStmtNode>()->body, c);
      return;
    case StmtKind::kMatrixTile:
      ++c->matrix_tiles;
      return;
    case StmtKind::kAsyncCopy:
      c->async_copies += s.as<AsyncCopyNode>()->op == AsyncOp::kCopy;
      return;
    case StmtKind::kStore:
    case StmtKind::kEvaluate:
      return;
  }
}

// `s` with the iterations of every kThread and kWarp loop run in reverse
// order (the var bound to extent - 1 - i). Only block-level statements are
// walked: those loops sit directly inside a kBlock body.
Stmt ReverseThreadOrder(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* f = s.as<ForNode>();
      if (f->for_kind == ForKind::kThread || f->for_kind == ForKind::kWarp) {
        Var i(f->var.name() + "_rev", f->var.dtype());
        return For(i, f->min, f->extent, f->for_kind,
                   LetStmt(f->var, f->min + f->extent - 1 - (i - f->min), f->body));
      }
      return For(f->var, f->min, f->extent, f->for_kind, ReverseThreadOrder(f->body));
    }
    case StmtKind::kSeq: {
      std::vector<Stmt> seq;
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) seq.push_back(ReverseThreadOrder(c));
      return Seq(std::move(seq));
    }
    case StmtKind::kLet: {
      const auto* l = s.as<LetStmtNode>();
      return LetStmt(l->var, l->value, ReverseThreadOrder(l->body));
    }
    case StmtKind::kAllocate: {
      const auto* a = s.as<AllocateNode>();
      return Allocate(a->buffer, ReverseThreadOrder(a->body));
    }
    case StmtKind::kIf: {
      const auto* i = s.as<IfThenElseNode>();
      return IfThenElse(i->cond, ReverseThreadOrder(i->then_case),
                        ReverseThreadOrder(i->else_case));
    }
    default:
      return s;
  }
}

// Expects `kernel` to be GPU-friendly (see the file comment). Returns whether
// it is a block schedule.
bool ExpectGpuFriendly(const KernelFunc& kernel) {
  SCOPED_TRACE(ToString(kernel));
  Stmt top = kernel->body;
  while (const auto* let = top.as<LetStmtNode>()) top = let->body;
  // Scratch (kGlobal buffers around the kernel's launches) comes with a
  // sequence of block loops, one launch each: a split reduction.
  int scratch = 0;
  while (const auto* a = top.as<AllocateNode>()) {
    if (a->buffer->scope != BufferNode::Scope::kGlobal) break;
    ++scratch;
    top = a->body;
  }
  std::vector<Stmt> loops = {top};
  if (const auto* seq = top.as<SeqStmtNode>(); seq != nullptr && scratch > 0) loops = seq->seq;
  int block_loops = 0, parallel_loops = 0;
  for (const Stmt& l : loops) {
    const auto* loop = l.as<ForNode>();
    EXPECT_NE(loop, nullptr) << "the body after its lets is not loops";
    if (loop == nullptr) return false;
    if (loop->for_kind == ForKind::kBlock) {
      ++block_loops;
    } else {
      EXPECT_EQ(loop->for_kind, ForKind::kParallel);
      ++parallel_loops;
    }
  }
  if (scratch > 0) {
    EXPECT_GE(block_loops, 1) << "scratch is for block loops";
  }
  BodyCensus c;
  Census(kernel->body, &c);
  EXPECT_EQ(c.global_allocations, scratch);
  EXPECT_EQ(c.asserts, 0);
  EXPECT_EQ(c.vectorized_loops, 0);
  EXPECT_EQ(c.parallel_loops, parallel_loops);  // none nested
  EXPECT_EQ(c.block_loops, block_loops);
  EXPECT_GE(c.thread_loops, 2 * block_loops);  // barriers inside each
  // Device lowering accepts it: one launch per loop, grid-stride over
  // threads or over blocks, the scratch passed to each.
  absl::StatusOr<DeviceKernel> split = SplitForDevice(kernel);
  EXPECT_TRUE(split.ok()) << split.status();
  if (!split.ok()) return false;
  EXPECT_EQ(split->launches.size(), loops.size());
  EXPECT_EQ(split->scratch.size(), static_cast<size_t>(scratch));
  for (size_t i = 0; i < loops.size() && i < split->launches.size(); ++i) {
    EXPECT_FALSE(split->launches[i].serial);
    EXPECT_EQ(split->launches[i].blocks, loops[i].as<ForNode>()->for_kind == ForKind::kBlock);
  }
  return block_loops > 0;
}

// Lowers `op` on tensor operands shaped like `inputs` for the CPU and for a
// GPU, checks the GPU kernel's form, runs both on `inputs` and expects the
// same outputs (within `tol`, relative; default: the dtype's tolerance).
// `gpu_arch` is LowerContext::gpu_arch (80: tensor cores for 16-bit floats).
void ExpectGpuMatchesCpu(const std::string& op, const std::vector<HostTensor>& inputs,
                         Attrs attrs = {}, double tol = -1, int gpu_arch = 0) {
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(optest::TensorVar(absl::StrCat("x", i), inputs[i]));
  }
  absl::StatusOr<Expr> call = optest::MakeOpCall(op, std::move(args), std::move(attrs));
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> cpu = LowerCallToKernel(*call->as<CallNode>(), "cpu_kernel");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<KernelFunc> gpu = LowerCallToKernel(
      *call->as<CallNode>(), "gpu_kernel", KernelTarget{.gpu = true, .gpu_arch = gpu_arch});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const bool blocks = ExpectGpuFriendly(*gpu);
  absl::StatusOr<CompiledKernel> cpu_k = CompiledKernel::Create(*cpu);
  ASSERT_TRUE(cpu_k.ok()) << cpu_k.status();
  absl::StatusOr<CompiledKernel> gpu_k = CompiledKernel::Create(*gpu);
  ASSERT_TRUE(gpu_k.ok()) << gpu_k.status();
  absl::StatusOr<std::vector<HostTensor>> want = cpu_k->Run(inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<HostTensor>> got = gpu_k->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t k = 0; k < want->size(); ++k) {
    SCOPED_TRACE(absl::StrCat(op, " output ", k));
    // Not all zero: a kernel that wrote nothing would otherwise pass
    // against another that wrote nothing.
    bool any_nonzero = false;
    for (double v : (*want)[k].data) any_nonzero = any_nonzero || v != 0;
    EXPECT_TRUE(any_nonzero || (*want)[k].data.empty());
    optest::ExpectClose((*got)[k], (*want)[k], tol);
  }
  // A block schedule computes the same with its threads in reverse order.
  if (!blocks) return;
  const KernelFunc& g = *gpu;
  absl::StatusOr<CompiledKernel> reversed = CompiledKernel::Create(
      MakeKernelFunc(g->name, g->params, ReverseThreadOrder(g->body), g->num_outputs));
  ASSERT_TRUE(reversed.ok()) << reversed.status();
  absl::StatusOr<std::vector<HostTensor>> again = reversed->Run(inputs);
  ASSERT_TRUE(again.ok()) << again.status();
  for (size_t k = 0; k < want->size(); ++k) {
    SCOPED_TRACE(absl::StrCat(op, " output ", k, ", threads in reverse order"));
    optest::ExpectClose((*again)[k], (*want)[k], tol);
  }
}

// The reversed order exposes what the serial order hides: here thread t
// reads s[t], which thread t - 1 stores in the same kThread loop (a race on
// a GPU). Serially the loop computes prefix sums; reversed, each thread
// reads the zero it started from.
TEST(GpuLoweringTest, ReversedThreadOrderExposesAReadOfAnotherThreadsStore) {
  Buffer x = MakeBuffer("x", kF32, {PrimExpr(8)});
  Buffer y = MakeBuffer("y", kF32, {PrimExpr(8)});
  Buffer s = MakeBuffer("s", kF32, {PrimExpr(9)}, BufferNode::Scope::kShared);
  Var b("b"), t("t"), u("u"), v("v");
  const PrimExpr zero = MakeConst(kF32, 0);
  Stmt clear = For(v, 0, PrimExpr(8), ForKind::kThread,
                   Seq({Store(s, {v + 1}, zero), IfThenElse(EQ(v, 0), Store(s, {v}, zero))}));
  Stmt racy =
      For(t, 0, PrimExpr(8), ForKind::kThread, Store(s, {t + 1}, Add(Load(s, {t}), Load(x, {t}))));
  Stmt out = For(u, 0, PrimExpr(8), ForKind::kThread, Store(y, {u}, Load(s, {u + 1})));
  Stmt body = For(b, 0, PrimExpr(1), ForKind::kBlock, Allocate(s, Seq({clear, racy, out})));
  const std::vector<KernelParam> params = {KernelParam::Tensor(x), KernelParam::Tensor(y)};
  HostTensor ones{{8}, kF32, std::vector<double>(8, 1.0)};
  absl::StatusOr<CompiledKernel> serial =
      CompiledKernel::Create(MakeKernelFunc("race", params, body));
  absl::StatusOr<CompiledKernel> reversed =
      CompiledKernel::Create(MakeKernelFunc("race", params, ReverseThreadOrder(body)));
  ASSERT_TRUE(serial.ok()) << serial.status();
  ASSERT_TRUE(reversed.ok()) << reversed.status();
  absl::StatusOr<std::vector<HostTensor>> a = serial->Run({ones}), r = reversed->Run({ones});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*a)[0].data, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ((*r)[0].data, std::vector<double>(8, 1.0));
}

// ---- matmul ----------------------------------------------------------------

TEST(GpuLoweringTest, MatmulMatchesCpuOnAwkwardShapes) {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{7, 13}, {13, 9}},         // odd sizes: the CPU packs B (N % 32 != 0)
      {{5, 8}, {8, 64}},          // the CPU reads B in place (N % 32 == 0)
      {{2, 3, 5, 4}, {4, 6}},     // batched A, shared B
      {{3, 1, 5, 4}, {2, 4, 6}},  // broadcast batch dims
      {{5}, {5, 7}},              // vector @ matrix
      {{3, 5}, {5}},              // matrix @ vector
      {{1, 33}, {2, 33, 17}},     // a single row against batched B
      // The block schedule: 128 x 128 tiles, k 8 at a time.
      {{40, 70}, {70, 33}},         // one partial tile, a partial last k step
      {{2, 130, 20}, {20, 257}},    // batched, 2 x 3 tiles, edge rows and columns
      {{3, 1, 64, 9}, {2, 9, 40}},  // broadcast batch dims, 6 tiles
      {{32, 5}, {5, 32}},           // the smallest, k below one step
      {{2, 128, 16}, {16, 256}},    // whole tiles: no masks, clamps or bounds checks
      // Split-K: few tiles and a long k, chunks summed by a second launch.
      {{32, 512}, {512, 128}},    // one tile, 8 chunks of 64
      {{2, 20, 192}, {192, 24}},  // two tiles, 3 chunks of 64, partial tiles
      // Tiles in groups of 8 tile rows: 9 x 3 tiles a batch, a group of 8 then 1.
      {{2, 1100, 8}, {8, 300}},
      // The skinny schedule (fewer than 16 rows): k split over 8 warps, 4
      // steps of them an iteration.
      {{1, 300}, {300, 70}},       // a partial column tile, k not a multiple of 32
      {{3, 2, 37}, {37, 45}},      // batched, two rows
      {{12, 50}, {50, 40}},        // two groups of 6 rows
      {{11, 9}, {2, 9, 33}},       // groups of 6 and 5 (row bounds), batched B
      {{1, 3}, {3, 1024}},         // k shorter than the warps
      {{2, 1, 2048}, {2048, 40}},  // split-K: 4 tiles, 32 chunks of 64 summed by a second launch
      // Few columns: the transposed product through the skinny schedule.
      {{40, 70}, {70, 3}},  // a lane a row of A
      {{2, 50, 33}, {33}},  // batched matrix times a vector
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(optest::NumElements(c.a), " x ", optest::NumElements(c.b)));
    ExpectGpuMatchesCpu("relax.matmul", {Random(c.a, kF32, seed), Random(c.b, kF32, seed + 1)});
    seed += 2;
  }
}

TEST(GpuLoweringTest, MatmulFloat16AccumulatesInFloat32) {
  // 64 terms of magnitude ~1: float16 accumulation would be visibly off.
  ExpectGpuMatchesCpu("relax.matmul", {Random({2, 9, 64}, kF16, 3), Random({64, 17}, kF16, 4)});
  // The same through the block schedule.
  ExpectGpuMatchesCpu("relax.matmul", {Random({2, 40, 64}, kF16, 5), Random({64, 48}, kF16, 6)});
}

// The census of `op` on `inputs` lowered for sm_<arch>.
BodyCensus GpuCensus(const std::string& op, const std::vector<HostTensor>& inputs, int arch,
                     Attrs attrs = {}) {
  BodyCensus c;
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(optest::TensorVar(absl::StrCat("x", i), inputs[i]));
  }
  absl::StatusOr<Expr> call = optest::MakeOpCall(op, std::move(args), std::move(attrs));
  EXPECT_TRUE(call.ok()) << call.status();
  if (!call.ok()) return c;
  absl::StatusOr<KernelFunc> gpu =
      LowerCallToKernel(*call->as<CallNode>(), "k", KernelTarget{.gpu = true, .gpu_arch = arch});
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (gpu.ok()) Census((*gpu)->body, &c);
  return c;
}

// Whether `op` on `inputs` lowers, for sm_<arch>, to tensor-core statements.
bool LowersToTensorCores(const std::string& op, const std::vector<HostTensor>& inputs, int arch,
                         Attrs attrs = {}) {
  BodyCensus c = GpuCensus(op, inputs, arch, std::move(attrs));
  EXPECT_EQ(c.warp_loops > 0, c.matrix_tiles > 0);
  return c.matrix_tiles > 0;
}

TEST(GpuLoweringTest, FewTilesWithALongKSplitK) {
  BodyCensus c =
      GpuCensus("relax.matmul", {Random({32, 512}, kF32, 7), Random({512, 128}, kF32, 8)}, 0);
  EXPECT_EQ(c.global_allocations, 1);  // the partials
  EXPECT_EQ(c.block_loops, 1);         // the chunks' products
  EXPECT_EQ(c.parallel_loops, 1);      // the sums
  // Enough tiles, or a short k: one product.
  c = GpuCensus("relax.matmul", {Random({512, 64}, kF32, 7), Random({64, 512}, kF32, 8)}, 0);
  EXPECT_EQ(c.global_allocations, 0);
  c = GpuCensus("relax.matmul", {Random({32, 96}, kF32, 7), Random({96, 32}, kF32, 8)}, 0);
  EXPECT_EQ(c.global_allocations, 0);
  // On tensor cores (k 32 at a time), 4 chunks of 256; float16 partials in
  // float32, summed before the one rounding.
  c = GpuCensus("relax.matmul", {Random({64, 1024}, kF16, 9), Random({1024, 64}, kF16, 10)}, 80);
  EXPECT_EQ(c.global_allocations, 1);
  EXPECT_GT(c.matrix_tiles, 0);
  ExpectGpuMatchesCpu("relax.matmul", {Random({64, 1024}, kF16, 9), Random({1024, 64}, kF16, 10)},
                      {}, -1, 80);
}

TEST(GpuLoweringTest, TensorCoreMatmulMatchesCpu) {
  const DataType kBF16 = DataType::BFloat16();
  struct Case {
    Shape a, b;
    int async;  // operands fetched by asynchronous copies at sm_80 (rows of 16-byte multiples)
  };
  const Case cases[] = {
      {{16, 16}, {16, 16}, 2},           // one fragment, one k step (half of it zero-filled)
      {{40, 70}, {70, 33}, 0},           // partial tile and k step
      {{2, 130, 20}, {20, 257}, 0},      // batched, 2 x 3 tiles of 128 x 128
      {{3, 1, 64, 9}, {2, 9, 40}, 1},    // broadcast batch dims, 64 x 64 tiles, B copied
      {{200, 96}, {96, 24}, 2},          // several k steps, a narrow n, partial rows
      {{2, 64, 64}, {64, 128}, 2},       // whole 64 x 128 tiles: no masks or bounds checks
      {{3, 72, 40}, {40, 56}, 2},        // a partial last k step and n tile, copied
      {{2, 1, 48, 32}, {3, 32, 64}, 2},  // broadcast batch dims, copied
      {{50, 64}, {64, 20}, 1},           // A copied, B (rows of 40 bytes) staged by threads
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    for (DataType t : {kF16, kBF16}) {
      SCOPED_TRACE(absl::StrCat(t.ToString(), " ", optest::NumElements(c.a), " x ",
                                optest::NumElements(c.b)));
      std::vector<HostTensor> in = {Random(c.a, t, seed), Random(c.b, t, seed + 1)};
      const BodyCensus census = GpuCensus("relax.matmul", in, 80);
      EXPECT_GT(census.matrix_tiles, 0);
      // One copy statement per operand and fetch (the first step and the next).
      EXPECT_EQ(census.async_copies, 2 * c.async);
      EXPECT_EQ(GpuCensus("relax.matmul", in, 75).async_copies, 0);  // cp.async is sm_80's
      ExpectGpuMatchesCpu("relax.matmul", in, {}, -1, /*gpu_arch=*/80);
      if (t == kF16 && c.async > 0) {
        // The same on sm_75, without them.
        ExpectGpuMatchesCpu("relax.matmul", in, {}, -1, /*gpu_arch=*/75);
      }
      seed += 2;
    }
  }
  // float16 has tensor cores from sm_70, bfloat16 from sm_80; float32 never.
  const Shape a = {64, 64}, b = {64, 64};
  EXPECT_TRUE(LowersToTensorCores("relax.matmul", {Random(a, kF16, 1), Random(b, kF16, 2)}, 75));
  EXPECT_FALSE(LowersToTensorCores("relax.matmul", {Random(a, kBF16, 1), Random(b, kBF16, 2)}, 75));
  EXPECT_FALSE(LowersToTensorCores("relax.matmul", {Random(a, kF16, 1), Random(b, kF16, 2)}, 0));
  EXPECT_FALSE(LowersToTensorCores("relax.matmul", {Random(a, kF32, 1), Random(b, kF32, 2)}, 90));
}

// On sm_90 a 16-bit product with plain operands and a constant k runs on
// the warpgroup MMA (block_gemm.h): four stages of swizzled tiles, two
// warpgroups. Simulated on the CPU it computes what the CPU's matmul does,
// whole tiles or partial, one k step or more than the stages hold, a last
// k step zero-filled.
TEST(GpuLoweringTest, WarpgroupMatmulMatchesCpu) {
  const DataType kBF16 = DataType::BFloat16();
  struct Case {
    Shape a, b;
    int steps;  // k steps of 64
  };
  const Case cases[] = {
      {{128, 64}, {64, 128}, 1},       // one 128 x 128 tile, one k step
      {{200, 104}, {104, 136}, 2},     // partial rows, columns and k step
      {{2, 128, 320}, {320, 256}, 5},  // batched, whole 128 x 256 tiles, 5 k steps over 4 stages
      {{3, 1, 136, 72}, {2, 72, 264}, 2},  // broadcast batch dims, 2 x 2 tiles
      {{1160, 64}, {64, 256}, 1},          // 10 tile rows: a group of 8, then 2
  };
  uint32_t seed = 90;
  for (const Case& c : cases) {
    for (DataType t : {kF16, kBF16}) {
      SCOPED_TRACE(absl::StrCat(t.ToString(), " ", optest::NumElements(c.a), " x ",
                                optest::NumElements(c.b)));
      std::vector<HostTensor> in = {Random(c.a, t, seed), Random(c.b, t, seed + 1)};
      const BodyCensus census = GpuCensus("relax.matmul", in, 90);
      EXPECT_GT(census.warpgroup_loops, 0);
      EXPECT_EQ(census.warp_loops, 0);
      // Up to two steps fetched ahead, then one per step: A's and B's copies each.
      EXPECT_EQ(census.async_copies, 2 * (std::min(c.steps, 2) + 1));
      ExpectGpuMatchesCpu("relax.matmul", in, {}, -1, /*gpu_arch=*/90);
      seed += 2;
    }
  }
  // Not for a symbolic k, operands that are not plain tensors, or a small n.
  const std::vector<HostTensor> narrow = {Random({256, 64}, kF16, 1), Random({64, 64}, kF16, 2)};
  EXPECT_EQ(GpuCensus("relax.matmul", narrow, 90).warpgroup_loops, 0);
  EXPECT_GT(GpuCensus("relax.matmul", narrow, 90).warp_loops, 0);  // the sm_80 schedule
  const std::vector<HostTensor> f32 = {Random({256, 64}, kF32, 1), Random({64, 256}, kF32, 2)};
  EXPECT_EQ(GpuCensus("relax.matmul", f32, 90).warpgroup_loops, 0);
}

// The warpgroup schedule's kernel prints (text-format.md) and parses back to
// the same text: swizzled buffers, the warpgroup accumulator and loops, and
// T.wgmma_async / T.wgmma_store / T.ptx_fence_proxy_async.
TEST(GpuLoweringTest, WarpgroupMatmulKernelRoundTripsThroughText) {
  absl::StatusOr<Expr> call =
      optest::MakeOpCall("relax.matmul",
                         {optest::TensorVar("x0", Random({200, 104}, kF16, 1)),
                          optest::TensorVar("x1", Random({104, 136}, kF16, 2))},
                         {});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> k =
      LowerCallToKernel(*call->as<CallNode>(), "k", KernelTarget{.gpu = true, .gpu_arch = 90});
  ASSERT_TRUE(k.ok()) << k.status();
  IRModule m;
  m.kernels["k"] = *k;
  const std::string printed = PrintModule(m);
  for (const char* s : {"layout=\"swizzle128\"", "scope=\"wgmma.accumulator\"", "T.warpgroups(2)",
                        "T.wgmma_async(", "T.wgmma_store(", "T.ptx_fence_proxy_async()"}) {
    EXPECT_NE(printed.find(s), std::string::npos) << s;
  }
  absl::StatusOr<IRModule> again = ParseModule(printed, "printed.rx");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintModule(*again), printed);
}

// The kernel is one kBlock loop of `blocks` iterations.
void ExpectBlockLaunch(const KernelFunc& gpu, int64_t blocks) {
  const auto* loop = gpu->body.as<ForNode>();
  ASSERT_NE(loop, nullptr) << ToString(gpu);
  EXPECT_EQ(loop->for_kind, ForKind::kBlock) << ToString(gpu);
  ASSERT_NE(loop->extent.as_int(), nullptr) << ToString(loop->extent);
  EXPECT_EQ(*loop->extent.as_int(), blocks);
}

TEST(GpuLoweringTest, CpuMatmulKeepsItsPackedScheduleGpuDoesNot) {
  Expr a = optest::TensorVar("a", {PrimExpr(7), PrimExpr(13)}, kF32);
  // N = 40: 32-column panels do not tile it, so the CPU packs B.
  Expr b = optest::TensorVar("b", {PrimExpr(13), PrimExpr(40)}, kF32);
  absl::StatusOr<Expr> call = optest::MakeOpCall("relax.matmul", {a, b});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> cpu = LowerCallToKernel(*call->as<CallNode>(), "mm");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  BodyCensus c;
  Census((*cpu)->body, &c);
  EXPECT_EQ(c.global_allocations, 1);  // the packed B panels
  EXPECT_EQ(c.parallel_loops, 2);      // packing, then the tiles
  absl::StatusOr<KernelFunc> gpu =
      LowerCallToKernel(*call->as<CallNode>(), "mm", KernelTarget{.gpu = true});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ExpectGpuFriendly(*gpu);
  // 7 rows: the skinny schedule, a block per 32 columns (not a thread per
  // output element, each walking all of k).
  ExpectBlockLaunch(*gpu, 2);
}

// A matrix times a vector (16 or more rows, one column) is the transposed
// product through the skinny schedule: a block per 32 rows.
TEST(GpuLoweringTest, MatrixVectorProductTakesTheTransposedSkinnySchedule) {
  Expr a = optest::TensorVar("a", {PrimExpr(40), PrimExpr(13)}, kF32);
  Expr b = optest::TensorVar("b", {PrimExpr(13)}, kF32);
  absl::StatusOr<Expr> call = optest::MakeOpCall("relax.matmul", {a, b});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> gpu =
      LowerCallToKernel(*call->as<CallNode>(), "mv", KernelTarget{.gpu = true});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ExpectBlockLaunch(*gpu, 2);
}

// A CUDA library's launches are optimized a module each, on threads, then
// linked in launch order: the same PTX whatever the thread count, with
// every entry once.
TEST(GpuLoweringTest, CudaLibraryIsTheSameBuiltOnOneThreadOrMany) {
  struct Op {
    const char* name;
    Shape a, b;
  };
  const Op ops[] = {{"relax.matmul", {1, 300}, {300, 70}},    // skinny, split-K
                    {"relax.matmul", {40, 70}, {70, 33}},     // block GEMM
                    {"relax.add", {64, 100}, {64, 100}},      // elementwise
                    {"relax.matmul", {2, 9, 64}, {64, 17}}};  // skinny, batched
  std::vector<KernelFunc> kernels;
  for (const Op& op : ops) {
    auto dims = [](const Shape& shape) {
      std::vector<PrimExpr> out;
      for (int64_t d : shape) out.push_back(PrimExpr(d));
      return out;
    };
    absl::StatusOr<Expr> call = optest::MakeOpCall(
        op.name,
        {optest::TensorVar("a", dims(op.a), kF32), optest::TensorVar("b", dims(op.b), kF32)});
    ASSERT_TRUE(call.ok()) << call.status();
    absl::StatusOr<KernelFunc> k =
        LowerCallToKernel(*call->as<CallNode>(), absl::StrCat("k", kernels.size()),
                          KernelTarget{.gpu = true, .gpu_arch = 80});
    ASSERT_TRUE(k.ok()) << k.status();
    kernels.push_back(*k);
  }
  absl::StatusOr<Target> target = Target::Parse("cuda -arch=sm_80,sm_90");
  ASSERT_TRUE(target.ok()) << target.status();
  CodegenOptions one, many;
  one.threads = 1;
  many.threads = 3;
  absl::StatusOr<vm::KernelLibraryBlob> a = BuildKernelLibrary(kernels, *target, one);
  absl::StatusOr<vm::KernelLibraryBlob> b = BuildKernelLibrary(kernels, *target, many);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(a->data == b->data);
  absl::StatusOr<CudaBlobContents> blob = ReadCudaBlob(b->data);
  ASSERT_TRUE(blob.ok()) << blob.status();
  ASSERT_EQ(blob->images.size(), 2u);
  for (const CudaImage& image : blob->images) {
    for (size_t i = 0; i < kernels.size(); ++i) {
      const std::string entry = absl::StrCat(".entry k", i, "_k0(");
      const size_t at = image.ptx.find(entry);
      EXPECT_NE(at, std::string::npos) << entry << " sm_" << image.sm;
      EXPECT_EQ(image.ptx.find(entry, at + 1), std::string::npos) << entry << " sm_" << image.sm;
    }
  }
}

TEST(GpuLoweringTest, SymbolicBatchMatmulLoopsOverEveryOutputElement) {
  Var n("n");
  Expr a = optest::TensorVar("a", {n, PrimExpr(6)}, kF32);
  Expr b = optest::TensorVar("b", {PrimExpr(6), PrimExpr(5)}, kF32);
  absl::StatusOr<Expr> call = optest::MakeOpCall("relax.matmul", {a, b});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> gpu =
      LowerCallToKernel(*call->as<CallNode>(), "mm", KernelTarget{.gpu = true});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ExpectGpuFriendly(*gpu);
  absl::StatusOr<CompiledKernel> k = CompiledKernel::Create(*gpu);
  ASSERT_TRUE(k.ok()) << k.status();
  for (int64_t rows : {1, 3, 11}) {
    HostTensor x = Random({rows, 6}, kF32, 7), w = Random({6, 5}, kF32, 8);
    absl::StatusOr<std::vector<HostTensor>> out = k->Run({x, w}, {{rows, 5}});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        double want = 0;
        for (int64_t p = 0; p < 6; ++p) {
          want += x.data[static_cast<size_t>(i * 6 + p)] * w.data[static_cast<size_t>(p * 5 + j)];
        }
        EXPECT_NEAR((*out)[0].data[static_cast<size_t>(i * 5 + j)], want, 1e-4)
            << "rows " << rows << " at " << i << ", " << j;
      }
    }
  }
}

// ---- conv2d ----------------------------------------------------------------

Attrs ConvAttrs(std::vector<int64_t> strides, std::vector<int64_t> padding,
                std::vector<int64_t> dilation, int64_t groups) {
  return {{"strides", strides}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

TEST(GpuLoweringTest, Conv2dMatchesCpuAcrossStridesPaddingDilationAndGroups) {
  struct Case {
    Shape x, w;
    Attrs attrs;
  };
  const Case cases[] = {
      // No padding (the CPU's unpadded rows schedule).
      {{1, 3, 9, 11}, {4, 3, 3, 3}, ConvAttrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 1)},
      // Same padding, odd sizes, a batch of 2.
      {{2, 3, 9, 11}, {5, 3, 3, 3}, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1)},
      // Wide (16 output channels per group: packed weights on the CPU).
      {{1, 8, 6, 7}, {16, 8, 3, 3}, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1)},
      // Strides and dilation, asymmetric padding.
      {{2, 2, 13, 12}, {3, 2, 3, 2}, ConvAttrs({2, 3}, {2, 0, 1, 3}, {2, 1}, 1)},
      // Groups.
      {{2, 4, 8, 8}, {6, 2, 3, 3}, ConvAttrs({1, 2}, {1, 1, 1, 1}, {1, 1}, 2)},
      // Depthwise with asymmetric padding.
      {{1, 4, 7, 7}, {4, 1, 3, 3}, ConvAttrs({1, 1}, {1, 2, 0, 1}, {1, 1}, 4)},
      // 1x1 with a column stride (the CPU's narrow schedule).
      {{1, 5, 5, 9}, {3, 5, 1, 1}, ConvAttrs({1, 2}, {0, 0, 0, 0}, {1, 1}, 1)},
      // The implicit GEMM (16+ channels per group, 16+ pixels): strides,
      // dilation and asymmetric padding; two groups of 20; k = 3 x 5 x 5
      // not a multiple of the k step; more than one 128-pixel tile.
      {{2, 3, 13, 12}, {17, 3, 3, 2}, ConvAttrs({2, 3}, {2, 0, 1, 3}, {2, 1}, 1)},
      {{1, 6, 9, 9}, {40, 3, 3, 3}, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 2)},
      {{1, 3, 14, 15}, {33, 3, 5, 5}, ConvAttrs({1, 1}, {2, 2, 2, 2}, {1, 1}, 1)},
      // One 16 x 16 tile and k = 64 x 3 x 3: split-K, 9 chunks of 64.
      {{1, 64, 4, 4}, {16, 64, 3, 3}, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1)},
      // Fewer than 16 pixels: the skinny schedule. A squeeze-excite 1x1 of a
      // 1x1 image; 9 pixels in two groups of 16 channels, padded, batch 2.
      {{1, 40, 1, 1}, {24, 40, 1, 1}, ConvAttrs({1, 1}, {0, 0, 0, 0}, {1, 1}, 1)},
      {{2, 8, 3, 3}, {32, 4, 3, 3}, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 2)},
  };
  uint32_t seed = 20;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("x ", optest::NumElements(c.x), " w ", optest::NumElements(c.w)));
    ExpectGpuMatchesCpu("relax.nn.conv2d", {Random(c.x, kF32, seed), Random(c.w, kF32, seed + 1)},
                        c.attrs);
    seed += 2;
  }
}

TEST(GpuLoweringTest, Conv2dFloat16MatchesCpu) {
  ExpectGpuMatchesCpu("relax.nn.conv2d",
                      {Random({1, 4, 6, 6}, kF16, 30), Random({8, 4, 3, 3}, kF16, 31)},
                      ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1));
  ExpectGpuMatchesCpu("relax.nn.conv2d",
                      {Random({1, 4, 6, 6}, kF16, 32), Random({24, 4, 3, 3}, kF16, 33)},
                      ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1));
}

TEST(GpuLoweringTest, TensorCoreConv2dMatchesCpu) {
  // The implicit GEMM on tensor cores: padding taps, strides, groups.
  const std::vector<HostTensor> in = {Random({2, 6, 9, 9}, kF16, 70),
                                      Random({40, 3, 3, 3}, kF16, 71)};
  const Attrs attrs = ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  EXPECT_TRUE(LowersToTensorCores("relax.nn.conv2d", in, 80, attrs));
  ExpectGpuMatchesCpu("relax.nn.conv2d", in, attrs, -1, 80);
  const std::vector<HostTensor> strided = {Random({1, 3, 14, 15}, kF16, 72),
                                           Random({33, 3, 5, 5}, kF16, 73)};
  const Attrs attrs2 = ConvAttrs({2, 1}, {2, 1, 0, 2}, {1, 2}, 1);
  ExpectGpuMatchesCpu("relax.nn.conv2d", strided, attrs2, -1, 80);
}

// ---- pooling -----------------------------------------------------------------

Attrs PoolAttrs(std::vector<int64_t> size, std::vector<int64_t> strides,
                std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode,
                bool count_include_pad) {
  return {{"pool_size", size},      {"strides", strides},
          {"padding", padding},     {"dilation", dilation},
          {"ceil_mode", ceil_mode}, {"count_include_pad", count_include_pad}};
}

TEST(GpuLoweringTest, PoolsMatchCpu) {
  const HostTensor x = Random({2, 3, 9, 10}, kF32, 40);
  const Attrs cases[] = {
      PoolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false),
      PoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false),
      PoolAttrs({3, 2}, {1, 2}, {1, 0, 1, 1}, {2, 1}, false, true),
  };
  for (const char* op : {"relax.nn.max_pool2d", "relax.nn.avg_pool2d"}) {
    for (const Attrs& a : cases) {
      SCOPED_TRACE(op);
      ExpectGpuMatchesCpu(op, {x}, a);
    }
  }
  ExpectGpuMatchesCpu("relax.nn.avg_pool2d", {Random({1, 2, 7, 7}, kF16, 41)},
                      PoolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false));
}

TEST(GpuLoweringTest, Conv3dAndPool3dMatchCpu) {
  // Padding on every side, strides, dilation and groups.
  ExpectGpuMatchesCpu("relax.nn.conv3d",
                      {Random({1, 4, 5, 6, 7}, kF32, 60), Random({6, 2, 2, 3, 2}, kF32, 61)},
                      {{"strides", std::vector<int64_t>{2, 1, 3}},
                       {"padding", std::vector<int64_t>{1, 0, 2, 0, 2, 1}},
                       {"dilation", std::vector<int64_t>{1, 2, 1}},
                       {"groups", int64_t{2}}});
  const HostTensor x = Random({1, 2, 5, 6, 7}, kF32, 62);
  const Attrs pool = {{"pool_size", std::vector<int64_t>{3, 2, 3}},
                      {"strides", std::vector<int64_t>{2, 2, 1}},
                      {"padding", std::vector<int64_t>{1, 0, 1, 1, 1, 1}},
                      {"ceil_mode", true},
                      {"count_include_pad", true}};
  ExpectGpuMatchesCpu("relax.nn.max_pool3d", {x}, pool);
  ExpectGpuMatchesCpu("relax.nn.avg_pool3d", {x}, pool);
}

TEST(GpuLoweringTest, AdaptiveAvgPoolMatchesCpu) {
  ExpectGpuMatchesCpu("relax.nn.adaptive_avg_pool2d", {Random({2, 3, 7, 5}, kF32, 50)},
                      {{"output_size", std::vector<int64_t>{3, 2}}});
  ExpectGpuMatchesCpu("relax.nn.adaptive_avg_pool2d", {Random({1, 4, 6, 6}, kF32, 51)},
                      {{"output_size", std::vector<int64_t>{1}}});
}

// ---- normalization ---------------------------------------------------------------

TEST(GpuLoweringTest, BatchNormMatchesCpuIncludingStatistics) {
  for (int64_t axis : {1, 2}) {
    const Shape xs = {2, 3, 4, 5};
    const int64_t ch = xs[static_cast<size_t>(axis)];
    SCOPED_TRACE(absl::StrCat("axis ", axis));
    ExpectGpuMatchesCpu("relax.nn.batch_norm",
                        {Random(xs, kF32, 60), Random({ch}, kF32, 61), Random({ch}, kF32, 62),
                         Random({ch}, kF32, 63), Random({ch}, kF32, 64, 0.1, 2.0)},
                        {{"axis", axis}, {"epsilon", 1e-3}});
  }
  // More channels than elements per channel: the statistics still cover them all.
  ExpectGpuMatchesCpu("relax.nn.batch_norm",
                      {Random({1, 7}, kF32, 65), Random({7}, kF32, 66), Random({7}, kF32, 67),
                       Random({7}, kF32, 68), Random({7}, kF32, 69, 0.1, 2.0)},
                      {{"axis", int64_t{1}}});
}

TEST(GpuLoweringTest, LayerNormMatchesCpu) {
  const HostTensor x = Random({3, 7, 10}, kF32, 70);
  ExpectGpuMatchesCpu("relax.nn.layer_norm", {x, Random({10}, kF32, 71), Random({10}, kF32, 72)},
                      {{"axes", std::vector<int64_t>{-1}}, {"epsilon", 1e-5}}, 1e-4);
  ExpectGpuMatchesCpu("relax.nn.layer_norm",
                      {x, Random({7, 10}, kF32, 73), Random({7, 10}, kF32, 74)},
                      {{"axes", std::vector<int64_t>{1, 2}}}, 1e-4);
  ExpectGpuMatchesCpu("relax.nn.layer_norm",
                      {Random({4, 33}, kF16, 75), Random({33}, kF16, 76), Random({33}, kF16, 77)},
                      {{"axes", std::vector<int64_t>{-1}}});
  // Rows of 64 and more: a block per row, reduced through shared memory.
  ExpectGpuMatchesCpu("relax.nn.layer_norm",
                      {Random({3, 64}, kF32, 78), Random({64}, kF32, 79), Random({64}, kF32, 80)},
                      {{"axes", std::vector<int64_t>{-1}}}, 1e-4);
  ExpectGpuMatchesCpu(
      "relax.nn.layer_norm",
      {Random({2, 9, 70}, kF32, 81), Random({9, 70}, kF32, 82), Random({9, 70}, kF32, 83)},
      {{"axes", std::vector<int64_t>{1, 2}}}, 1e-4);
  ExpectGpuMatchesCpu(
      "relax.nn.layer_norm",
      {Random({2, 300}, kF16, 84), Random({300}, kF16, 85), Random({300}, kF16, 86)},
      {{"axes", std::vector<int64_t>{-1}}});
  // Longer than a block's registers hold: the passes read the input again.
  ExpectGpuMatchesCpu(
      "relax.nn.layer_norm",
      {Random({2, 8300}, kF32, 87), Random({8300}, kF32, 88), Random({8300}, kF32, 89)},
      {{"axes", std::vector<int64_t>{-1}}}, 1e-4);
}

TEST(GpuLoweringTest, SoftmaxesMatchCpu) {
  for (const char* op : {"relax.nn.softmax", "relax.nn.log_softmax"}) {
    SCOPED_TRACE(op);
    ExpectGpuMatchesCpu(op, {Random({3, 5, 37}, kF32, 80)}, {{"axis", int64_t{-1}}}, 1e-5);
    ExpectGpuMatchesCpu(op, {Random({3, 5, 7}, kF32, 81)}, {{"axis", int64_t{1}}}, 1e-5);
    ExpectGpuMatchesCpu(op, {Random({2, 19}, kF16, 82)}, {{"axis", int64_t{-1}}});
    // A block per row: shorter and longer than the block, and not the last axis.
    ExpectGpuMatchesCpu(op, {Random({3, 64}, kF32, 83)}, {{"axis", int64_t{-1}}}, 1e-5);
    ExpectGpuMatchesCpu(op, {Random({2, 1000}, kF32, 84)}, {{"axis", int64_t{-1}}}, 1e-5);
    ExpectGpuMatchesCpu(op, {Random({2, 100, 3}, kF32, 85)}, {{"axis", int64_t{1}}}, 1e-5);
    ExpectGpuMatchesCpu(op, {Random({2, 513}, kF16, 86)}, {{"axis", int64_t{-1}}});
  }
  // Rows longer than a block's registers hold (8192 elements): the passes
  // read the input again.
  for (const char* op : {"relax.nn.softmax", "relax.nn.log_softmax"}) {
    SCOPED_TRACE(op);
    ExpectGpuMatchesCpu(op, {Random({2, 8300}, kF32, 88)}, {{"axis", int64_t{-1}}}, 1e-5);
  }
}

// The number of times `what` occurs in `text`.
int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

absl::StatusOr<std::string> GpuKernelText(const char* op, const HostTensor& x, const Attrs& attrs) {
  std::vector<Expr> args = {optest::TensorVar("x", x)};
  if (std::string(op) == "relax.nn.layer_norm") {
    const int64_t n = x.shape.back();
    args.push_back(optest::TensorVar("g", Random({n}, x.dtype, 1)));
    args.push_back(optest::TensorVar("b", Random({n}, x.dtype, 2)));
  }
  absl::StatusOr<Expr> call = optest::MakeOpCall(op, args, attrs);
  if (!call.ok()) return call.status();
  absl::StatusOr<KernelFunc> gpu =
      LowerCallToKernel(*call->as<CallNode>(), "k", KernelTarget{.gpu = true, .gpu_arch = 90});
  if (!gpu.ok()) return gpu.status();
  return ToString(*gpu);
}

TEST(GpuLoweringTest, RowsUpTo8192ElementsCrossMemoryOnce) {
  // A row a block's registers hold is read once (into a per-thread buffer)
  // and each exp computed once, whatever the type.
  for (DataType t : {kF32, kF16}) {
    absl::StatusOr<std::string> text =
        GpuKernelText("relax.nn.softmax", Random({2, 1000}, t, 87), {{"axis", int64_t{-1}}});
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(Occurrences(*text, "A0["), 1) << *text;
    EXPECT_EQ(Occurrences(*text, "T.exp("), 1) << *text;
    EXPECT_NE(text->find("\"per_thread\""), std::string::npos) << *text;
  }
  absl::StatusOr<std::string> ln = GpuKernelText("relax.nn.layer_norm", Random({2, 8192}, kF32, 89),
                                                 {{"axes", std::vector<int64_t>{-1}}});
  ASSERT_TRUE(ln.ok()) << ln.status();
  EXPECT_EQ(Occurrences(*ln, "A0["), 1) << *ln;
  // Longer rows: a float32 softmax keeps exp(x - max) in its output between
  // its passes; a float16 one (whose output would round it) computes it in
  // both.
  for (DataType t : {kF32, kF16}) {
    absl::StatusOr<std::string> text =
        GpuKernelText("relax.nn.softmax", Random({1, 9000}, t, 87), {{"axis", int64_t{-1}}});
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(Occurrences(*text, "per_thread"), 0) << *text;
    EXPECT_EQ(Occurrences(*text, "T.exp("), t == kF32 ? 1 : 2) << t.ToString();
  }
}

// ---- reductions and scans ----------------------------------------------------------

TEST(GpuLoweringTest, ReductionsMatchCpu) {
  const HostTensor x = Random({4, 9, 6}, kF32, 90);
  for (const char* op : {"relax.sum", "relax.mean", "relax.max", "relax.min", "relax.prod"}) {
    SCOPED_TRACE(op);
    ExpectGpuMatchesCpu(op, {x}, {{"axis", std::vector<int64_t>{1}}});
    ExpectGpuMatchesCpu(op, {x}, {{"axis", std::vector<int64_t>{0, 2}}, {"keepdims", true}});
  }
  // 64 or more reduced elements per output: a block each, through shared memory.
  const HostTensor wide = Random({3, 70, 5}, kF32, 91);
  for (const char* op : {"relax.sum", "relax.mean", "relax.max", "relax.min"}) {
    SCOPED_TRACE(op);
    ExpectGpuMatchesCpu(op, {wide}, {{"axis", std::vector<int64_t>{1}}}, 1e-5);
    ExpectGpuMatchesCpu(op, {wide}, {{"axis", std::vector<int64_t>{0, 1}}, {"keepdims", true}},
                        1e-5);
    ExpectGpuMatchesCpu(op, {wide}, {}, 1e-5);  // everything: one block
  }
  ExpectGpuMatchesCpu("relax.sum", {Random({2, 1000}, kF16, 92)},
                      {{"axis", std::vector<int64_t>{1}}});
  for (const char* op : {"relax.argmax", "relax.argmin"}) {
    SCOPED_TRACE(op);
    ExpectGpuMatchesCpu(op, {x}, {{"axis", int64_t{1}}});
    ExpectGpuMatchesCpu(op, {x}, {{"axis", int64_t{2}}, {"keepdims", true}});
    ExpectGpuMatchesCpu(op, {x});  // flattened: one output element, one thread
  }
  // Few outputs of many elements: chunks of each output reduced by blocks
  // into scratch, folded by a second launch.
  const HostTensor big = Random({2, 3, 9000}, kF32, 94);
  for (const char* op : {"relax.sum", "relax.mean", "relax.max", "relax.min"}) {
    SCOPED_TRACE(op);
    ExpectGpuMatchesCpu(op, {big}, {}, 1e-5);  // 54000 elements: 13 chunks
    ExpectGpuMatchesCpu(op, {big}, {{"axis", std::vector<int64_t>{1, 2}}}, 1e-5);  // 2 x 6
  }
  HostTensor near_one = Random({3, 5000}, kF32, 95);  // a product that stays finite
  for (double& v : near_one.data) v = static_cast<float>(1 + v / 256);
  ExpectGpuMatchesCpu("relax.prod", {near_one},
                      {{"axis", std::vector<int64_t>{0, 1}}, {"keepdims", true}}, 1e-4);
  ExpectGpuMatchesCpu("relax.sum", {Random({9000}, kF16, 96)}, {}, 2e-3);
  // Small outputs the CPU runs without a parallel loop, and a full reduction.
  ExpectGpuMatchesCpu("relax.sum", {Random({8, 300}, kF32, 91)},
                      {{"axis", std::vector<int64_t>{1}}}, 1e-5);
  ExpectGpuMatchesCpu("relax.sum", {Random({5, 7}, kF32, 92)});
  ExpectGpuMatchesCpu("relax.sum", {Random({6, 40}, kF16, 93)},
                      {{"axis", std::vector<int64_t>{1}}});
}

TEST(GpuLoweringTest, CumsumMatchesCpu) {
  const HostTensor x = Random({3, 7, 4}, kF32, 100);
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(absl::StrCat("exclusive ", exclusive, " reverse ", reverse));
      ExpectGpuMatchesCpu("relax.cumsum", {x},
                          {{"axis", int64_t{1}}, {"exclusive", exclusive}, {"reverse", reverse}});
    }
  }
  ExpectGpuMatchesCpu("relax.cumsum", {Random({11}, kF32, 101)}, {{"axis", int64_t{0}}});
}

// ---- split and scatter -----------------------------------------------------------

TEST(GpuLoweringTest, SplitMatchesCpuInOneLoop) {
  const HostTensor x = Random({3, 8, 2}, kF32, 110);
  ExpectGpuMatchesCpu("relax.split", {x},
                      {{"indices_or_sections", std::vector<int64_t>{2, 5}}, {"axis", int64_t{1}}});
  ExpectGpuMatchesCpu("relax.split", {x},
                      {{"indices_or_sections", int64_t{4}}, {"axis", int64_t{1}}});
  // An empty piece in the middle, and one past the end.
  ExpectGpuMatchesCpu("relax.split", {Random({9, 2}, kF32, 111)},
                      {{"indices_or_sections", std::vector<int64_t>{3, 3, 12}}});
}

TEST(GpuLoweringTest, ScatterElementsMatchesCpuWithRepeatedIndices) {
  const HostTensor x = Random({3, 4}, kF32, 120);
  // Repeated targets in every column, negative indices, and updates that
  // cover only part of the tensor.
  const HostTensor ind{{3, 4}, kI64, {0, 2, -1, 1, 0, 2, 1, -3, 0, 0, 2, 1}};
  const HostTensor upd = Random({3, 4}, kF32, 121);
  const HostTensor ind_part{{2, 3}, kI64, {1, 1, 0, 2, 1, 1}};
  const HostTensor upd_part = Random({2, 3}, kF32, 122);
  for (const std::string reduction : {"update", "add", "mul"}) {
    SCOPED_TRACE(reduction);
    ExpectGpuMatchesCpu("relax.scatter_elements", {x, ind, upd},
                        {{"axis", int64_t{0}}, {"reduction", reduction}});
    ExpectGpuMatchesCpu("relax.scatter_elements", {x, ind_part, upd_part},
                        {{"axis", int64_t{1}}, {"reduction", reduction}});
  }
}

// ---- per-element operators ---------------------------------------------------------

TEST(GpuLoweringTest, ElementwiseIsOneFlatLoopAtEverySize) {
  // (5,): the CPU's loop is serial; (100000,): chunked; (3, 70, 2): fused
  // outer dims with a vectorized inner one.
  for (const Shape& s : std::vector<Shape>{{5}, {100000}, {3, 70, 2}}) {
    SCOPED_TRACE(optest::NumElements(s));
    ExpectGpuMatchesCpu("relax.add", {Random(s, kF32, 130), Random(s, kF32, 131)});
  }
  ExpectGpuMatchesCpu("relax.permute_dims", {Random({2, 3, 5}, kF32, 132)},
                      {{"axes", std::vector<int64_t>{2, 0, 1}}});
}

// ---- whole modules ----------------------------------------------------------------

constexpr char kNet[] = R"(
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3, 9, 9), "float32"), w: R.Tensor((8, 3, 3, 3), "float32"),
             cb: R.Tensor((1, 8, 1, 1), "float32"), fw: R.Tensor((128, 10), "float32"),
             fb: R.Tensor((10,), "float32"), g: R.Tensor((10,), "float32"),
             be: R.Tensor((10,), "float32")) -> R.Tensor(("n", 10), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1])
            lv1 = R.add(lv0, cb)
            lv2 = R.nn.relu(lv1)
            lv3 = R.nn.max_pool2d(lv2, pool_size=[2, 2], strides=[2, 2])
            lv4 = R.reshape(lv3, (n, 128))
            lv5 = R.matmul(lv4, fw)
            lv6 = R.add(lv5, fb)
            lv7 = R.nn.relu(lv6)
            lv8 = R.nn.layer_norm(lv7, g, be, axes=[-1])
            lv9 = R.nn.softmax(lv8, axis=-1)
            gv = R.sum(lv9, axis=[0], keepdims=True)
            R.output(gv)
        return gv
)";

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  HostTensor t = Random({static_cast<int64_t>(n)}, kF32, seed, -1.0, 1.0);
  return std::vector<float>(t.data.begin(), t.data.end());
}

// Lowers `module` with `pipeline` and `gpu`, expects every kernel to be
// GPU-friendly when `gpu`, compiles the kernels for the CPU and runs main.
std::vector<float> LowerAndRun(const IRModule& module, const std::string& pipeline, bool gpu,
                               std::vector<Value> args, std::vector<std::string>* kernel_names) {
  PipelineOptions options;
  options.target.gpu = gpu;
  absl::StatusOr<IRModule> lowered = RunPipeline(module, pipeline, options);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  if (!lowered.ok()) return {};
  std::vector<KernelFunc> kernels;
  for (const auto& [name, k] : lowered->kernels) {
    kernels.push_back(k);
    if (kernel_names != nullptr) kernel_names->push_back(name);
    if (gpu) {
      SCOPED_TRACE(name);
      ExpectGpuFriendly(k);
    }
  }
  absl::StatusOr<vm::KernelLibraryBlob> lib = BuildKernelLibrary(kernels, Target::Host());
  EXPECT_TRUE(lib.ok()) << lib.status();
  if (!lib.ok()) return {};
  absl::StatusOr<Ref<vm::Executable>> exec = VMCodegen(*lowered, {*lib});
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return {};
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  EXPECT_TRUE(vm.ok()) << vm.status();
  if (!vm.ok()) return {};
  absl::StatusOr<Value> out = (*vm)->Invoke("main", ArgSpan(args.data(), args.size()));
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return tether::testing::ReadFloats(Tensor(out->AsRef<TensorObj>()));
}

TEST(GpuLoweringTest, PipelineInGpuModeComputesWhatTheCpuPipelineComputes) {
  absl::StatusOr<IRModule> module = ParseModule(kNet);
  ASSERT_TRUE(module.ok()) << module.status();
  for (int64_t n : {1, 3}) {
    auto args = [&] {
      return std::vector<Value>{
          tether::testing::MakeFloatTensor({n, 3, 9, 9},
                                           RandomFloats(static_cast<size_t>(n) * 243, 1)),
          tether::testing::MakeFloatTensor({8, 3, 3, 3}, RandomFloats(216, 2)),
          tether::testing::MakeFloatTensor({1, 8, 1, 1}, RandomFloats(8, 3)),
          tether::testing::MakeFloatTensor({128, 10}, RandomFloats(1280, 4)),
          tether::testing::MakeFloatTensor({10}, RandomFloats(10, 5)),
          tether::testing::MakeFloatTensor({10}, RandomFloats(10, 6)),
          tether::testing::MakeFloatTensor({10}, RandomFloats(10, 7))};
    };
    for (const char* pipeline : {"default", "zero"}) {
      SCOPED_TRACE(absl::StrCat(pipeline, " n=", n));
      std::vector<std::string> names;
      const std::vector<float> want = LowerAndRun(*module, pipeline, false, args(), nullptr);
      const std::vector<float> got = LowerAndRun(*module, pipeline, true, args(), &names);
      ASSERT_EQ(want.size(), 10u);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
      if (std::string(pipeline) == "default") {
        // The fused groups were lowered in GPU mode too.
        bool conv_group = false, matmul_group = false;
        for (const std::string& name : names) {
          conv_group = conv_group || name.rfind("fused_conv2d", 0) == 0;
          matmul_group = matmul_group || name.rfind("fused_matmul", 0) == 0;
        }
        EXPECT_TRUE(conv_group && matmul_group) << absl::StrJoin(names, ", ");
      }
    }
  }
}

// Every example model (examples/*.rx) lowers, in both pipelines, to
// kernels that are all GPU-friendly (its operators' kernels; those it
// writes as T.prim_func stay as written).
TEST(GpuLoweringTest, EveryExampleModelLowersToGpuFriendlyKernels) {
  const std::string root = tether::testing::RepoRoot();
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root + "examples")) {
    if (entry.path().extension() != ".rx") continue;
    ++models;
    SCOPED_TRACE(entry.path().string());
    absl::StatusOr<IRModule> module = ParseModuleFile(entry.path().string());
    ASSERT_TRUE(module.ok()) << module.status();
    for (const char* pipeline : {"default", "zero"}) {
      SCOPED_TRACE(pipeline);
      PipelineOptions options;
      options.target.gpu = true;
      absl::StatusOr<IRModule> lowered = RunPipeline(*module, pipeline, options);
      ASSERT_TRUE(lowered.ok()) << lowered.status();
      ASSERT_FALSE(lowered->kernels.empty());
      for (const auto& [name, k] : lowered->kernels) {
        // Kernels the model writes itself (T.prim_func) are as written.
        if (module->kernels.count(name)) continue;
        SCOPED_TRACE(name);
        ExpectGpuFriendly(k);
      }
    }
  }
  EXPECT_GE(models, 3);
}

}  // namespace
}  // namespace tether::compiler
