// Tests of the device lowering (compiler/backend/cuda/device_split.h). The launch
// kernels are ordinary kernel IR, so they are compiled for the CPU and run
// thread by thread — tid 0..nthreads-1 of a simulated grid, in order — and
// must give exactly what the source kernel gives. This checks the split, the
// loop fusion and the grid-stride loop without a GPU; the NVPTX emission of
// the same launches is checked in cuda_codegen_test.cc.
#include "compiler/backend/cuda/device_split.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/backend/cuda/simulate_on_cpu.h"
#include "compiler/backend/llvm/jit.h"
#include "compiler/tir/arith.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_test_util.h"

namespace tether::compiler {
namespace {

using optest::HostTensor;
using optest::kF32;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs every launch of `kernel` on the CPU with `nthreads` simulated
// threads (serial launches with one), on `inputs` and zeroed outputs.
absl::StatusOr<std::vector<HostTensor>> RunAsDevice(const KernelFunc& kernel,
                                                    const std::vector<HostTensor>& inputs,
                                                    const std::vector<optest::Shape>& out_shapes,
                                                    int64_t nthreads) {
  TETHER_ASSIGN_OR_RETURN(DeviceKernel dk, SplitForDevice(kernel));
  std::vector<KernelFunc> launches;
  for (const DeviceLaunch& l : dk.launches) launches.push_back(l.kernel);
  TETHER_ASSIGN_OR_RETURN(Ref<Module> lib, BuildAndLoad(launches));
  std::vector<Value> args;
  std::vector<Tensor> outputs;
  for (const HostTensor& h : inputs) {
    TETHER_ASSIGN_OR_RETURN(Tensor t, optest::ToTensor(h));
    args.emplace_back(t);
  }
  for (size_t k = 0; k < out_shapes.size(); ++k) {
    const Buffer& b = kernel->params[inputs.size() + k].buffer;
    // Outputs start as NaN-like garbage so an element no thread writes shows.
    TETHER_ASSIGN_OR_RETURN(Tensor t,
                            optest::ToTensor(optest::Filled(out_shapes[k], b->dtype, 77)));
    outputs.push_back(t);
    args.emplace_back(t);
  }
  // Scratch as the launcher makes it: sized by the manifest's program over
  // the arguments, uninitialized (here: garbage).
  const CudaKernelInfo info = DescribeDeviceKernel(dk);
  CudaCountArgs counts;
  for (const Value& v : args) {
    const Tensor t(v.AsRef<TensorObj>());
    counts.dims.emplace_back(t->shape().begin(), t->shape().end());
    counts.scalars.push_back(0);
  }
  for (const CudaScratchInfo& s : info.scratch) {
    TETHER_ASSIGN_OR_RETURN(int64_t n, EvalCudaCount(s.count, counts));
    TETHER_ASSIGN_OR_RETURN(Tensor t, optest::ToTensor(optest::Filled({n}, s.dtype, 55)));
    args.emplace_back(t);
  }
  for (const DeviceLaunch& l : dk.launches) {
    TETHER_ASSIGN_OR_RETURN(Function fn, lib->GetFunction(l.kernel->name));
    // A block launch runs once per block, as its thread 0: its kThread
    // loops run the block's threads in turn (SimulateOnCpu does the same).
    const int64_t step = l.blocks ? l.block : 1;
    const int64_t threads =
        l.serial ? 1 : (l.blocks ? std::max<int64_t>(1, nthreads / l.block) * l.block : nthreads);
    for (int64_t tid = 0; tid < threads; tid += step) {
      std::vector<Value> call = args;
      call.emplace_back(tid);
      call.emplace_back(threads);
      TETHER_RETURN_IF_ERROR(fn(ArgSpan(call.data(), call.size())).status());
    }
  }
  std::vector<HostTensor> out;
  for (const Tensor& t : outputs) out.push_back(optest::FromTensor(t));
  return out;
}

// The source kernel on the CPU vs its launches at several grid sizes.
void ExpectDeviceMatchesCpu(const KernelFunc& kernel, const std::vector<HostTensor>& inputs,
                            const std::vector<optest::Shape>& out_shapes) {
  OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, optest::CompiledKernel::Create(kernel));
  OP_TEST_ASSERT_OK_AND_ASSIGN(expected, compiled.Run(inputs, out_shapes));
  for (int64_t nthreads : {1, 7, 64, 1000, 2560}) {
    absl::StatusOr<std::vector<HostTensor>> actual =
        RunAsDevice(kernel, inputs, out_shapes, nthreads);
    ASSERT_TRUE(actual.ok()) << actual.status() << "\n" << ToString(kernel);
    ASSERT_EQ(actual->size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("nthreads ", nthreads, ", output ", i));
      EXPECT_EQ((*actual)[i].data, expected[i].data) << ToString(kernel);
    }
  }
}

absl::StatusOr<KernelFunc> LowerOp(const std::string& op, const std::vector<HostTensor>& inputs,
                                   Attrs attrs = {}, bool gpu = false, int gpu_arch = 0) {
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(optest::TensorVar(absl::StrCat("x", i), inputs[i]));
  }
  TETHER_ASSIGN_OR_RETURN(Expr call, optest::MakeOpCall(op, std::move(args), std::move(attrs)));
  return LowerCallToKernel(*call.as<CallNode>(), "k",
                           KernelTarget{.gpu = gpu, .gpu_arch = gpu_arch});
}

TEST(DeviceSplitTest, BroadcastNestFusesIntoOneLaunchAndMatchesTheCpu) {
  HostTensor a = optest::Random({3, 5, 7}, kF32, 1);
  HostTensor b = optest::Random({7}, kF32, 2);
  absl::StatusOr<KernelFunc> k = LowerOp("relax.add", {a, b});
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(*k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 1u);
  EXPECT_FALSE(dk->launches[0].serial);
  EXPECT_EQ(dk->launches[0].block, kDeviceBlockThreads);
  // Every loop of the nest is fused: one iteration per element.
  EXPECT_EQ(AsConstInt(dk->launches[0].count), std::optional<int64_t>(105));
  EXPECT_EQ(dk->launches[0].kernel->name, "k_k0");
  ExpectDeviceMatchesCpu(*k, {a, b}, {{3, 5, 7}});
}

TEST(DeviceSplitTest, LongVectorChunksAndReductionsMatchTheCpu) {
  HostTensor x = optest::Random({10007}, kF32, 3);
  absl::StatusOr<KernelFunc> exp = LowerOp("relax.exp", {x});
  ASSERT_TRUE(exp.ok()) << exp.status();
  ExpectDeviceMatchesCpu(*exp, {x}, {{10007}});

  HostTensor m = optest::Random({6, 33}, kF32, 4);
  absl::StatusOr<KernelFunc> sum = LowerOp("relax.sum", {m}, {{"axis", std::vector<int64_t>{1}}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  ExpectDeviceMatchesCpu(*sum, {m}, {{6}});

  absl::StatusOr<KernelFunc> all = LowerOp("relax.sum", {m});
  ASSERT_TRUE(all.ok()) << all.status();
  ExpectDeviceMatchesCpu(*all, {m}, {{}});

  absl::StatusOr<KernelFunc> softmax = LowerOp("relax.nn.softmax", {m}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  ExpectDeviceMatchesCpu(*softmax, {m}, {{6, 33}});
}

// let n2 = n * 2; a parallel fill, a serial fix-up, a second parallel pass.
KernelFunc ThreeStageKernel() {
  Var n("n");
  Buffer x = MakeBuffer("x", kF32, {n, PrimExpr(3)});
  Buffer y = MakeBuffer("y", kF32, {n, PrimExpr(3)});
  Var n2("n2");
  Var i("i"), j("j"), s("s"), p("p");
  Stmt fill = For(i, 0, n, ForKind::kParallel,
                  For(j, 0, PrimExpr(3), ForKind::kVectorized,
                      Store(y, {i, j}, Mul(Load(x, {i, j}), MakeConst(kF32, 2)))));
  Stmt fixup =
      For(s, 0, PrimExpr(3), ForKind::kSerial,
          Store(y, {PrimExpr(0), s}, Add(Load(y, {PrimExpr(0), s}), MakeConst(kF32, 100))));
  Stmt second =
      For(p, 0, Sub(n2, n), ForKind::kParallel,
          Store(y, {p, PrimExpr(2)}, Add(Load(y, {p, PrimExpr(2)}), Load(x, {p, PrimExpr(0)}))));
  Stmt body = LetStmt(n2, Mul(n, PrimExpr(2)), Seq({fill, fixup, second}));
  return MakeKernelFunc("three", {KernelParam::Tensor(x), KernelParam::Tensor(y)}, body);
}

TEST(DeviceSplitTest, TopLevelSequenceSplitsIntoOrderedLaunches) {
  KernelFunc k = ThreeStageKernel();
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 3u);
  EXPECT_FALSE(dk->launches[0].serial);
  EXPECT_TRUE(dk->launches[1].serial);
  EXPECT_EQ(dk->launches[1].block, 1);
  EXPECT_FALSE(dk->launches[2].serial);
  ExpectDeviceMatchesCpu(k, {optest::Random({5, 3}, kF32, 5)}, {{5, 3}});
  ExpectDeviceMatchesCpu(k, {optest::Random({1, 3}, kF32, 6)}, {{1, 3}});

  // The manifest: dims checked on the host, counts over the arguments (the
  // leading let substituted), and both survive the text format.
  CudaKernelInfo info = DescribeDeviceKernel(*dk);
  ASSERT_EQ(info.params.size(), 2u);
  EXPECT_EQ(info.params[0].dims, (std::vector<std::string>{"*", "3"}));
  EXPECT_EQ(info.params[1].dims, (std::vector<std::string>{"=d0.0", "3"}));
  ASSERT_EQ(info.launches.size(), 3u);
  EXPECT_EQ(info.launches[1].entry, "three_k1");
  CudaCountArgs args;
  args.dims = {{9, 3}, {9, 3}};
  args.scalars = {0, 0};
  for (size_t l = 0; l < 3; ++l) {
    ASSERT_FALSE(info.launches[l].count.empty()) << l;
    absl::StatusOr<int64_t> count = EvalCudaCount(info.launches[l].count, args);
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(*count, std::vector<int64_t>({27, 1, 9})[l]) << l;
  }
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed =
      ParseCudaManifest(FormatCudaManifest({info}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0].launches[2].count, info.launches[2].count);
}

// A kernel that needs scratch between its launches: launch 0 doubles x
// into ws, launch 1 reverses ws into out (+ 1), so every element crosses
// threads. A second scratch of 2n + 3 elements is written and read back.
KernelFunc ScratchKernel() {
  Var n("n");
  Buffer x = MakeBuffer("x", kF32, {n});
  Buffer out = MakeBuffer("out", kF32, {n});
  Buffer ws = MakeBuffer("ws", kF32, {n});
  Buffer ws2 = MakeBuffer("ws2", kF32, {n * 2 + 3});
  Var i("i"), j("j");
  Stmt fill = For(i, 0, n, ForKind::kParallel,
                  Seq({Store(ws, {i}, Load(x, {i}) * MakeConst(kF32, 2)),
                       Store(ws2, {i * 2 + 3}, MakeConst(kF32, 1))}));
  Stmt use = For(j, 0, n, ForKind::kParallel,
                 Store(out, {j}, Load(ws, {n - 1 - j}) + Load(ws2, {j * 2 + 3})));
  return MakeKernelFunc("reverse", {KernelParam::Tensor(x), KernelParam::Tensor(out)},
                        Allocate(ws, Allocate(ws2, Seq({fill, use}))));
}

TEST(DeviceSplitTest, TopLevelWorkspacesBecomeScratchPassedToEveryLaunch) {
  KernelFunc k = ScratchKernel();
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->scratch.size(), 2u);
  ASSERT_EQ(dk->launches.size(), 2u);
  for (const DeviceLaunch& l : dk->launches) {
    // x, out, ws, ws2, tid, nthreads.
    ASSERT_EQ(l.kernel->params.size(), 6u);
    EXPECT_TRUE(l.kernel->params[2].buffer.get() == dk->scratch[0].get());
    EXPECT_TRUE(l.kernel->params[3].buffer.get() == dk->scratch[1].get());
  }
  CudaKernelInfo info = DescribeDeviceKernel(*dk);
  ASSERT_EQ(info.scratch.size(), 2u);
  CudaCountArgs args;
  args.dims = {{10}, {10}};
  args.scalars = {0, 0};
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(info.scratch[b].dtype, kF32);
    absl::StatusOr<int64_t> size = EvalCudaCount(info.scratch[b].count, args);
    ASSERT_TRUE(size.ok()) << size.status();
    EXPECT_EQ(*size, b == 0 ? 10 : 23);
  }
  const std::string text = FormatCudaManifest({info});
  EXPECT_THAT(text, HasSubstr("kernel reverse 2 2 2\n"));
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  ASSERT_EQ((*parsed)[0].scratch.size(), 2u);
  EXPECT_EQ((*parsed)[0].scratch[1].count, info.scratch[1].count);

  for (int64_t n : {1, 10, 1000}) {
    SCOPED_TRACE(n);
    ExpectDeviceMatchesCpu(k, {optest::Random({n}, kF32, 8)}, {{n}});
  }
  // Simulated as one kernel, the scratch is allocated around the launches.
  absl::StatusOr<std::vector<HostTensor>> sim = [&]() -> absl::StatusOr<std::vector<HostTensor>> {
    TETHER_ASSIGN_OR_RETURN(optest::CompiledKernel c,
                            optest::CompiledKernel::Create(SimulateOnCpu(*dk, 64)));
    return c.Run({optest::Random({300}, kF32, 9)}, {{300}});
  }();
  ASSERT_TRUE(sim.ok()) << sim.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(source, optest::CompiledKernel::Create(k));
  OP_TEST_ASSERT_OK_AND_ASSIGN(expected, source.Run({optest::Random({300}, kF32, 9)}, {{300}}));
  EXPECT_EQ((*sim)[0].data, expected[0].data);
}

TEST(DeviceSplitTest, ReductionToFewOutputsSplitsIntoChunksAndAFold) {
  // sum over 54000 elements: 13 chunks of 4154 in blocks, partials in
  // scratch, then one block folds them. The chunks do not depend on the grid,
  // so every grid size gives exactly the kernel's result.
  const HostTensor x = optest::Random({2, 3, 9000}, kF32, 10);
  absl::StatusOr<KernelFunc> k = LowerOp("relax.sum", {x}, {}, /*gpu=*/true);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(*k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 2u);
  ASSERT_EQ(dk->scratch.size(), 1u);
  EXPECT_TRUE(dk->launches[0].blocks && dk->launches[1].blocks);
  CudaKernelInfo info = DescribeDeviceKernel(*dk);
  CudaCountArgs args;
  args.dims = {{2, 3, 9000}, {}};
  args.scalars = {0, 0};
  absl::StatusOr<int64_t> blocks = EvalCudaCount(info.launches[0].count, args);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(*blocks, 13 * 256);
  EXPECT_EQ(info.scratch[0].count, (std::vector<std::string>{"13"}));
  ExpectDeviceMatchesCpu(*k, {x}, {{}});

  // Two outputs, a symbolic count: 256 chunks each (most of them empty for
  // this small n), sized and counted over the argument's dims.
  Var n("n");
  Buffer in = MakeBuffer("in", kF32, {PrimExpr(2), n});
  absl::StatusOr<KernelFunc> sym = [&]() -> absl::StatusOr<KernelFunc> {
    TETHER_ASSIGN_OR_RETURN(
        Expr call, optest::MakeOpCall("relax.mean", {optest::TensorVar("x", in->shape, kF32)},
                                      {{"axis", std::vector<int64_t>{1}}}));
    return LowerCallToKernel(*call.as<CallNode>(), "k", KernelTarget{.gpu = true});
  }();
  ASSERT_TRUE(sym.ok()) << sym.status();
  dk = SplitForDevice(*sym);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->scratch.size(), 1u);
  info = DescribeDeviceKernel(*dk);
  args.dims = {{2, 77}, {2}};
  absl::StatusOr<int64_t> size = EvalCudaCount(info.scratch[0].count, args);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, 2 * 256);
  for (int64_t len : {1, 77, 5000}) {
    SCOPED_TRACE(len);
    ExpectDeviceMatchesCpu(*sym, {optest::Random({2, len}, kF32, 11)}, {{2}});
  }
}

TEST(DeviceSplitTest, SplitKProductIsABlockLaunchAndASumLaunchOverScratch) {
  // 32 x 512 x 128: one tile, so 4 chunks of k (8 steps of 16 each) in
  // blocks, then a thread per element sums its 4 partials in order: the same
  // at every grid size.
  const HostTensor a = optest::Random({32, 512}, kF32, 12),
                   b = optest::Random({512, 128}, kF32, 13);
  absl::StatusOr<KernelFunc> k = LowerOp("relax.matmul", {a, b}, {}, /*gpu=*/true);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(*k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 2u);
  EXPECT_TRUE(dk->launches[0].blocks);
  EXPECT_FALSE(dk->launches[1].blocks || dk->launches[1].serial);
  CudaKernelInfo info = DescribeDeviceKernel(*dk);
  ASSERT_EQ(info.scratch.size(), 1u);
  EXPECT_EQ(info.scratch[0].count, (std::vector<std::string>{"16384"}));  // 4 x 32 x 128
  ExpectDeviceMatchesCpu(*k, {a, b}, {{32, 128}});
}

TEST(DeviceSplitTest, WorkspacesThatCannotBeScratchAndAssertionsAreRejected) {
  Var n("n");
  Buffer out = MakeBuffer("out", kF32, {n});
  Var i("i");
  auto rejected = [](const KernelFunc& k) {
    absl::StatusOr<DeviceKernel> r = SplitForDevice(k);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return r.status().ToString();
  };
  // Inside a loop: per-iteration scratch has no launch to belong to.
  Buffer ws = MakeBuffer("inner", kF32, {PrimExpr(4)});
  EXPECT_THAT(rejected(MakeKernelFunc(
                  "nested", {KernelParam::Tensor(out)},
                  For(i, 0, n, ForKind::kParallel, Allocate(ws, Store(out, {i}, Load(ws, {0})))))),
              HasSubstr("kernel nested: the workspace allocation inner below the top level"));
  // 2-D, or sized by something the launcher cannot compute.
  Buffer flat2 = MakeBuffer("square", kF32, {n, n});
  EXPECT_THAT(rejected(MakeKernelFunc("two_d", {KernelParam::Tensor(out)},
                                      Allocate(flat2, For(i, 0, n, ForKind::kParallel,
                                                          Store(out, {i}, Load(flat2, {i, i})))))),
              HasSubstr("kernel two_d: the workspace allocation square (scratch must be 1-D"));
  Var m("m");
  Buffer by_let = MakeBuffer("by_let", kF32, {m});
  EXPECT_THAT(
      rejected(MakeKernelFunc("let_sized", {KernelParam::Tensor(out)},
                              LetStmt(m, n + 1,
                                      Allocate(by_let, For(i, 0, n, ForKind::kParallel,
                                                           Store(out, {i}, Load(by_let, {i}))))))),
      HasSubstr("the workspace allocation by_let (scratch must be 1-D, its size an "
                "expression of the arguments"));

  Buffer four = MakeBuffer("four", kF32, {PrimExpr(4)});
  EXPECT_THAT(rejected(MakeKernelFunc("checks", {KernelParam::Tensor(four)},
                                      AssertStmt(BoolImm(true), "never",
                                                 Store(four, {PrimExpr(0)}, MakeConst(kF32, 1))))),
              HasSubstr("cannot run on a gpu"));
}

// ---- Block launches --------------------------------------------------------

TEST(DeviceSplitTest, BlockScheduleMatmulIsOneBlockLaunchAndMatchesTheCpu) {
  // 2 batches x 2 x 3 tiles of 128 x 128; edge rows, columns and k steps.
  HostTensor a = optest::Random({2, 130, 20}, kF32, 7);
  HostTensor b = optest::Random({20, 257}, kF32, 8);
  absl::StatusOr<KernelFunc> k = LowerOp("relax.matmul", {a, b}, {}, /*gpu=*/true);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(*k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 1u);
  EXPECT_TRUE(dk->launches[0].blocks);
  EXPECT_FALSE(dk->launches[0].serial);
  EXPECT_EQ(dk->launches[0].block, kDeviceBlockThreads);
  // One block per tile: the runtime launches ceil(count / block) blocks.
  EXPECT_EQ(AsConstInt(dk->launches[0].count), std::optional<int64_t>(12 * kDeviceBlockThreads));
  ExpectDeviceMatchesCpu(*k, {a, b}, {{2, 130, 257}});
}

TEST(DeviceSplitTest, TensorCoreMatmulIsOneBlockLaunchAndMatchesTheCpu) {
  // float16 for sm_80: 8 warps, 128 x 128 tiles (2 batches x 2 x 3 of
  // them), k 32 at a time; edge rows, columns and a partial k step. A (rows
  // of 80 bytes) is fetched by asynchronous copies, B (514) by the threads.
  HostTensor a = optest::Random({2, 130, 40}, optest::kF16, 11);
  HostTensor b = optest::Random({40, 257}, optest::kF16, 12);
  absl::StatusOr<KernelFunc> k = LowerOp("relax.matmul", {a, b}, {}, /*gpu=*/true, 80);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(ToString(*k), HasSubstr("T.mma_sync(gemm_acc["));
  EXPECT_THAT(ToString(*k), HasSubstr("T.ptx_cp_async(gemm_a_tile["));
  EXPECT_THAT(ToString(*k), HasSubstr("T.ptx_wait_group(1)"));
  EXPECT_THAT(ToString(*k), Not(HasSubstr("T.ptx_cp_async(gemm_b_tile[")));
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(*k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 1u);
  EXPECT_TRUE(dk->launches[0].blocks);
  EXPECT_EQ(dk->launches[0].block, kDeviceBlockThreads);
  EXPECT_EQ(AsConstInt(dk->launches[0].count), std::optional<int64_t>(12 * kDeviceBlockThreads));
  ExpectDeviceMatchesCpu(*k, {a, b}, {{2, 130, 257}});
}

// Block b reverses x[b*8 .. b*8+7] through shared memory: the second kThread
// loop reads what other threads stored in the first. A per-thread value
// (x doubled) lives across the barrier.
KernelFunc ReverseKernel(int threads) {
  Var n("n");
  Buffer x = MakeBuffer("x", kF32, {n, PrimExpr(8)});
  Buffer y = MakeBuffer("y", kF32, {n, PrimExpr(8)});
  Buffer s = MakeBuffer("s", kF32, {PrimExpr(8)}, BufferNode::Scope::kShared);
  Buffer keep = MakeBuffer("keep", kF32, {PrimExpr(8), PrimExpr(1)}, BufferNode::Scope::kPerThread);
  Var b("b"), t("t"), u("u");
  Stmt load = For(t, 0, PrimExpr(threads), ForKind::kThread,
                  Seq({Store(s, {t}, Load(x, {b, t})),
                       Store(keep, {t, PrimExpr(0)}, Mul(Load(x, {b, t}), MakeConst(kF32, 2)))}));
  Stmt store =
      For(u, 0, PrimExpr(threads), ForKind::kThread,
          Store(y, {b, u}, Add(Load(s, {Sub(PrimExpr(7), u)}), Load(keep, {u, PrimExpr(0)}))));
  Stmt body = For(b, 0, n, ForKind::kBlock, Allocate(s, Allocate(keep, Seq({load, store}))));
  return MakeKernelFunc("rev", {KernelParam::Tensor(x), KernelParam::Tensor(y)}, body);
}

TEST(DeviceSplitTest, SharedAndPerThreadBuffersCarryValuesAcrossTheBarrier) {
  KernelFunc k = ReverseKernel(8);
  HostTensor x = optest::Random({5, 8}, kF32, 9);
  absl::StatusOr<DeviceKernel> dk = SplitForDevice(k);
  ASSERT_TRUE(dk.ok()) << dk.status();
  ASSERT_EQ(dk->launches.size(), 1u);
  EXPECT_EQ(dk->launches[0].block, 8);
  CudaKernelInfo info = DescribeDeviceKernel(*dk);
  CudaCountArgs args;
  args.dims = {{5, 8}, {5, 8}};
  args.scalars = {0, 0};
  absl::StatusOr<int64_t> count = EvalCudaCount(info.launches[0].count, args);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 5 * 8);
  EXPECT_EQ(info.launches[0].block, 8);
  ExpectDeviceMatchesCpu(k, {x}, {{5, 8}});
  // And the values themselves: y[b, t] = x[b, 7 - t] + 2 x[b, t].
  absl::StatusOr<std::vector<HostTensor>> y = RunAsDevice(k, {x}, {{5, 8}}, 16);
  ASSERT_TRUE(y.ok()) << y.status();
  for (size_t r = 0; r < 5; ++r) {
    for (size_t c = 0; c < 8; ++c) {
      EXPECT_FLOAT_EQ((*y)[0].data[r * 8 + c], x.data[r * 8 + 7 - c] + 2 * x.data[r * 8 + c]);
    }
  }
}

TEST(DeviceSplitTest, BlockSchedulesThatBreakTheRulesAreRejected) {
  Buffer out = MakeBuffer("out", kF32, {PrimExpr(8)});
  Buffer s = MakeBuffer("s", kF32, {PrimExpr(8)}, BufferNode::Scope::kShared);
  Buffer keep = MakeBuffer("keep", kF32, {PrimExpr(8)}, BufferNode::Scope::kPerThread);
  Var b("b"), t("t"), u("u"), i("i");
  auto reject = [&](const Stmt& body, const std::string& why) {
    SCOPED_TRACE(why);
    absl::StatusOr<DeviceKernel> r =
        SplitForDevice(MakeKernelFunc("bad", {KernelParam::Tensor(out)}, body));
    ASSERT_FALSE(r.ok()) << ToString(body);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  };
  Stmt write = Store(out, {t}, MakeConst(kF32, 1));
  auto threads = [&](int n, Stmt body) { return For(t, 0, PrimExpr(n), ForKind::kThread, body); };
  reject(threads(8, write), "the kThread loop over t");
  reject(For(i, 0, PrimExpr(2), ForKind::kSerial,
             For(b, 0, PrimExpr(1), ForKind::kBlock, threads(8, write))),
         "the kBlock loop over b, not a top-level statement");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Seq({threads(8, write),
                  For(u, 0, PrimExpr(4), ForKind::kThread, Store(out, {u}, MakeConst(kF32, 2)))})),
         "the kThread loop over u");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Seq({threads(8, write), Store(out, {PrimExpr(0)}, MakeConst(kF32, 3))})),
         "the store to out in a kBlock body outside its kThread loops");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock, threads(8, Allocate(s, write))),
         "the block buffer s outside a kBlock body or inside a kThread or kWarp loop");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Allocate(keep, threads(8, Store(keep, {PrimExpr(0)}, MakeConst(kF32, 1))))),
         "a write of the per-thread buffer keep not indexed by its kThread loop's var");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Allocate(keep, threads(8, Store(out, {t}, Load(keep, {Sub(PrimExpr(7), t)}))))),
         "a read of the per-thread buffer keep");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock, Store(out, {b}, MakeConst(kF32, 1))),
         "the kBlock loop over b with 0 threads");
  // A local buffer at block level: thread t's value, read where every thread
  // must agree (a barrier's condition), would be t's own on a GPU.
  Buffer flag = MakeBuffer("flag", kF32, {PrimExpr(1)}, BufferNode::Scope::kLocal);
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Allocate(flag, Seq({threads(8, Store(flag, {PrimExpr(0)}, Cast(kF32, t))),
                                 IfThenElse(LT(Load(flag, {PrimExpr(0)}), MakeConst(kF32, 4)),
                                            threads(8, write))}))),
         "the local buffer flag at block level");
  // A shared value read by every thread (outside kThread loops) and then
  // stored again with no barrier between: a slow thread would read the new
  // value. With a kThread loop between, the same is fine.
  Var v("v", kF32);
  auto read_then_store = [&](bool barrier_between) {
    std::vector<Stmt> after;
    if (barrier_between) after.push_back(threads(8, Store(out, {t}, v)));
    after.push_back(
        For(u, 0, PrimExpr(8), ForKind::kThread, Store(s, {u}, Mul(v, MakeConst(kF32, 2)))));
    after.push_back(For(i, 0, PrimExpr(8), ForKind::kThread, Store(out, {i}, Load(s, {i}))));
    return For(b, 0, PrimExpr(3), ForKind::kBlock,
               Allocate(s, Seq({threads(8, Store(s, {t}, MakeConst(kF32, 1))),
                                LetStmt(v, Load(s, {PrimExpr(0)}), Seq(after))})));
  };
  reject(read_then_store(false),
         "the store to the shared buffer s while threads may still read it outside a kThread "
         "loop");
  EXPECT_TRUE(
      SplitForDevice(MakeKernelFunc("fine", {KernelParam::Tensor(out)}, read_then_store(true)))
          .ok());
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock, threads(512, write)),
         "the kBlock loop over b with 512 threads");
}

// Expects SplitForDevice to refuse `k` with INVALID_ARGUMENT saying `why`.
void ExpectRejected(const KernelFunc& k, const std::string& why) {
  SCOPED_TRACE(why);
  absl::StatusOr<DeviceKernel> r = SplitForDevice(k);
  ASSERT_FALSE(r.ok()) << ToString(k);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(why));
}

TEST(DeviceSplitTest, TensorCoreStatementsThatBreakTheRulesAreRejected) {
  using Scope = BufferNode::Scope;
  const DataType f16 = DataType::Float(16);
  const PrimExpr s16(16);
  Buffer out = MakeBuffer("out", kF32, {PrimExpr(64)});
  Buffer tile = MakeBuffer("tile", f16, {s16, PrimExpr(24)}, Scope::kShared);
  Buffer ctile = MakeBuffer("ctile", kF32, {s16, s16}, Scope::kShared);
  Buffer af = MakeBuffer("af", f16, {PrimExpr(2), s16, s16}, Scope::kMatrixA);
  Buffer bf = MakeBuffer("bf", f16, {PrimExpr(2), s16, s16}, Scope::kMatrixB);
  Buffer acc = MakeBuffer("acc", kF32, {PrimExpr(2), s16, s16}, Scope::kAccumulator);
  Var b("b"), t("t"), w("w");
  // A block of 64 threads (2 warps): a kThread loop, then `warp_body` in a
  // kWarp loop over w.
  auto block = [&](const Stmt& warp_body, int warps = 2) {
    Stmt threads = For(t, 0, PrimExpr(64), ForKind::kThread, Store(out, {t}, Load(ctile, {0, 0})));
    Stmt body = Seq({threads, For(w, 0, PrimExpr(warps), ForKind::kWarp, warp_body)});
    return For(b, 0, PrimExpr(1), ForKind::kBlock,
               Allocate(tile, Allocate(ctile, Allocate(af, Allocate(bf, Allocate(acc, body))))));
  };
  const std::vector<KernelParam> params = {KernelParam::Tensor(out)};
  auto split = [&](const Stmt& body) { return SplitForDevice(MakeKernelFunc("tc", params, body)); };
  auto reject = [&](const Stmt& body, const std::string& why) {
    ExpectRejected(MakeKernelFunc("tc", params, body), why);
  };
  const Stmt good =
      Seq({MatrixFill({acc, {w}}, MakeConst(kF32, 0)), MatrixLoad({af, {w}}, {tile, {0, 0}}),
           MatrixLoad({bf, {w}}, {tile, {0, 0}}), MatrixMma({acc, {w}}, {af, {w}}, {bf, {w}}),
           MatrixStore({ctile, {0, 0}}, {acc, {w}})});
  EXPECT_TRUE(split(block(good)).ok()) << split(block(good)).status();
  // Rows of 24 float16 values are 48 bytes; column 8 starts 16 bytes in.
  reject(block(MatrixLoad({af, {w}}, {tile, {0, 8}})), "the tile of tile not known to be aligned");
  reject(block(MatrixLoad({acc, {w}}, {tile, {0, 0}})), "the fragment acc (of the wrong scope");
  reject(block(MatrixMma({acc, {w}}, {bf, {w}}, {af, {w}})), "the fragment bf (of the wrong scope");
  reject(block(MatrixFill({acc, {PrimExpr(0)}}, MakeConst(kF32, 0))),
         "not indexed by its kWarp var");
  reject(block(MatrixStore({tile, {0, 0}}, {acc, {w}})), "the tile of tile (a float32 shared");
  reject(block(Store(out, {w}, MakeConst(kF32, 1))),
         "the store to out in a kBlock body outside its kThread loops");
  reject(block(good, 3), "the kWarp loop over w");
  // A fragment of symbolic shape, and one used with too few indices.
  Var n("n");
  Buffer wide = MakeBuffer("wide", kF32, {PrimExpr(2), n, s16, s16}, Scope::kAccumulator);
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Allocate(wide, Seq({For(t, 0, PrimExpr(64), ForKind::kThread,
                                     Store(out, {t}, MakeConst(kF32, 0))),
                                 For(w, 0, PrimExpr(2), ForKind::kWarp,
                                     MatrixFill({wide, {w, 0}}, MakeConst(kF32, 0)))}))),
         "the fragment wide (a constant shape");
  Buffer flat = MakeBuffer("flat", kF32, {s16, s16}, Scope::kAccumulator);
  reject(block(MatrixFill({flat, {}}, MakeConst(kF32, 0))),
         "the fragment flat (of the wrong scope");
  // Fragments are opaque: no element reads, and no statement outside a warp.
  Stmt peek = For(b, 0, PrimExpr(1), ForKind::kBlock,
                  Allocate(acc, For(t, 0, PrimExpr(64), ForKind::kThread,
                                    Store(out, {t}, Load(acc, {0, 0, 0})))));
  reject(peek, "an element read of the fragment acc");
  Stmt outside = For(b, 0, PrimExpr(1), ForKind::kBlock,
                     Allocate(acc, For(t, 0, PrimExpr(64), ForKind::kThread,
                                       MatrixFill({acc, {0}}, MakeConst(kF32, 0)))));
  reject(outside, "the tensor-core statement on acc outside a kWarp loop");
}

// Asynchronous copies: 16 bytes from a tensor to a shared buffer of its
// dtype, both ends provably 16-byte aligned, inside a kThread loop whose
// copies are all followed by a fence.
TEST(DeviceSplitTest, AsynchronousCopiesThatBreakTheRulesAreRejected) {
  using Scope = BufferNode::Scope;
  const DataType f16 = DataType::Float(16);
  Var n("n");
  Buffer src = MakeBuffer("src", f16, {n, PrimExpr(64)});
  Buffer odd = MakeBuffer("odd", f16, {n, PrimExpr(60)});  // rows of 120 bytes
  Buffer out = MakeBuffer("out", f16, {PrimExpr(64)});
  Buffer tile = MakeBuffer("tile", f16, {PrimExpr(2), PrimExpr(8), PrimExpr(40)}, Scope::kShared);
  Buffer wide = MakeBuffer("wide", kF32, {PrimExpr(8), PrimExpr(40)}, Scope::kShared);
  Var b("b"), t("t");
  // A block of 64 threads: `copies` in one kThread loop, then a read.
  auto block = [&](const Stmt& copies) {
    Stmt use = For(t, 0, PrimExpr(64), ForKind::kThread,
                   Store(out, {t}, Load(tile, {1, FloorDiv(t, 8), FloorMod(t, 8)})));
    return For(
        b, 0, PrimExpr(1), ForKind::kBlock,
        Allocate(tile,
                 Allocate(wide, Seq({For(t, 0, PrimExpr(64), ForKind::kThread, copies), use}))));
  };
  const std::vector<KernelParam> params = {KernelParam::Tensor(src), KernelParam::Tensor(odd),
                                           KernelParam::Tensor(out)};
  auto split = [&](const Stmt& body) { return SplitForDevice(MakeKernelFunc("cp", params, body)); };
  auto reject = [&](const Stmt& body, const std::string& why) {
    ExpectRejected(MakeKernelFunc("cp", params, body), why);
  };
  // Thread t copies 8 values of row t / 8 (the stage and column multiples of 8).
  const PrimExpr row = FloorDiv(t, 8), col = FloorMod(t, 8) * 8;
  auto copy = [&](const Buffer& from, const PrimExpr& c, const PrimExpr& valid = PrimExpr()) {
    return AsyncCopy({tile, {1, row, col}}, {from, {Min(row + b * 8, n - 1), c}}, 8, valid);
  };
  const Stmt good = Seq({copy(src, col, LT(row, n)), AsyncFence(1)});
  EXPECT_TRUE(split(block(good)).ok()) << split(block(good)).status();
  // A fenced copy inside a loop, or under a condition with the fence after.
  EXPECT_TRUE(split(block(Seq({IfThenElse(LT(row, n), copy(src, col)), AsyncFence(0)}))).ok());
  EXPECT_TRUE(split(block(For(Var("i"), 0, PrimExpr(2), ForKind::kSerial,
                              Seq({copy(src, col), AsyncFence(0)}))))
                  .ok());
  reject(block(copy(src, col)), "the kThread loop over t whose asynchronous copies are not all");
  reject(block(Seq({AsyncFence(1), copy(src, col)})), "not all followed by a fence");
  reject(block(Seq({IfThenElse(LT(row, n), AsyncFence(0)), copy(src, col), AsyncFence(0),
                    IfThenElse(LT(row, n), copy(src, col))})),
         "not all followed by a fence");
  reject(block(For(Var("i"), 0, PrimExpr(2), ForKind::kSerial, copy(src, col))),
         "not all followed by a fence");
  // Column 4 is 8 bytes into a row; rows of 60 values are not 16-byte multiples.
  reject(block(Seq({copy(src, col + 4), AsyncFence(0)})),
         "whose source is not known to be 16-byte aligned");
  reject(block(Seq({copy(odd, col), AsyncFence(0)})),
         "the asynchronous copy from odd to tile, whose source is not known");
  reject(block(Seq({AsyncCopy({tile, {1, row, col + 4}}, {src, {row, col}}, 8), AsyncFence(0)})),
         "whose destination is not known to be 16-byte aligned");
  // 8 bytes; float32 into a float16 tile; shared to shared; global to global.
  reject(block(Seq({AsyncCopy({tile, {1, row, col}}, {src, {row, col}}, 4), AsyncFence(0)})),
         "the asynchronous copy from src to tile (16 bytes from a tensor");
  reject(block(Seq({AsyncCopy({wide, {row, col}}, {src, {row, col}}, 8), AsyncFence(0)})),
         "the asynchronous copy from src to wide (16 bytes");
  reject(block(Seq({AsyncCopy({tile, {1, row, col}}, {tile, {0, row, col}}, 8), AsyncFence(0)})),
         "the asynchronous copy from tile to tile (16 bytes");
  reject(block(Seq({AsyncCopy({out, {col}}, {src, {row, col}}, 8), AsyncFence(0)})),
         "the asynchronous copy from src to out (16 bytes");
  reject(block(Seq({copy(src, col), AsyncFence(8)})),
         "the asynchronous-copy fence leaving 8 groups in flight (0 to 7)");
  // Only threads copy: not at block level, not in a warp.
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Allocate(tile, Seq({copy(src, col), For(t, 0, PrimExpr(64), ForKind::kThread,
                                                     Store(out, {t}, MakeConst(f16, 0)))}))),
         "the asynchronous copy to tile outside a kThread loop");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Seq({For(t, 0, PrimExpr(64), ForKind::kThread, Store(out, {t}, MakeConst(f16, 0))),
                  For(Var("w"), 0, PrimExpr(2), ForKind::kWarp, AsyncFence(0))})),
         "the asynchronous-copy fence outside a kThread loop");
  // A copy counts as a store for the shared-read rule: the tile read at
  // block level (by every thread) is overwritten with no barrier between.
  Var v("v");
  reject(For(b, 0, PrimExpr(1), ForKind::kBlock,
             Allocate(
                 tile,
                 LetStmt(v, Cast(DataType::Int(64), Load(tile, {0, 0, 0})),
                         For(t, 0, PrimExpr(64), ForKind::kThread,
                             Seq({AsyncCopy({tile, {0, row, col}}, {src, {Min(v, n - 1), col}}, 8),
                                  AsyncFence(0)}))))),
         "the store to the shared buffer tile while threads may still read it");
}

}  // namespace
}  // namespace tether::compiler
