// The cuda target without a GPU: target strings, PTX produced and embedded
// for every example model (and, where the CUDA toolkit's ptxas is installed,
// assembled by it), and the whole GPU lowering of each example model checked
// numerically by running its device launches on the CPU.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "compiler/backend/cuda/device_split.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "compiler/tir/arith.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cuda_kernel_library.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/repo_root.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

using tether::testing::RepoRoot;

std::vector<std::string> ExampleModels() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(RepoRoot() + "examples")) {
    if (entry.path().extension() == ".rx") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The example model at `path` built for `target`.
absl::StatusOr<Ref<vm::Executable>> BuildExample(const std::string& path,
                                                 const std::string& target) {
  TETHER_ASSIGN_OR_RETURN(IRModule m, ParseModuleFile(path));
  BuildOptions options;
  options.target = target;
  return Build(m, options);
}

TEST(CudaTargetTest, ParsesArchitecturesSortedAndDistinct) {
  absl::StatusOr<Target> t = Target::Parse("cuda -arch=sm_90,sm_80,sm_90");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->is_cuda());
  EXPECT_EQ(t->archs, (std::vector<int>{80, 90}));
  EXPECT_EQ(t->ToString(), "cuda -arch=sm_80,sm_90");
  absl::StatusOr<Target> plain = Target::Parse("cuda");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->ToString(), "cuda -arch=sm_75");
  EXPECT_FALSE(Target::Parse("llvm")->is_cuda());
}

TEST(CudaTargetTest, RejectsBadArchitecturesAndFlags) {
  for (const char* bad : {"cuda -arch=sm_9x", "cuda -arch=sm_20", "cuda -arch=compute_90",
                          "cuda -arch=", "cuda -mcpu=sm_90", "rocm", "cuda -arch=sm_77",
                          "cuda -arch=sm_100", "cuda -arch=sm_80,sm_120"}) {
    absl::StatusOr<Target> t = Target::Parse(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(Target::Parse("cuda -arch=sm_20").status().message(),
              HasSubstr("expected one of sm_50, sm_52, sm_53, sm_60"));
  // LLVM 19 knows no sm_100: it would write PTX no driver loads.
  EXPECT_THAT(Target::Parse("cuda -arch=sm_100").status().message(),
              HasSubstr("for a newer GPU compile for sm_90, which its driver runs"));
}

// A device's compute capability names its target (the CLI, the conformance
// runner and the benchmarks compile for the GPU they run on).
TEST(CudaTargetTest, ComesFromAComputeCapability) {
  EXPECT_EQ(CudaTargetFor("9.0").value_or(""), "cuda -arch=sm_90");
  EXPECT_EQ(CudaTargetFor("8.6").value_or(""), "cuda -arch=sm_86");
  EXPECT_EQ(CudaTargetFor("8.9").value_or(""), "cuda -arch=sm_89");
  // Blackwell and newer run sm_90 PTX; 8.8 (no such GPU) the nearest below.
  EXPECT_EQ(CudaTargetFor("10.0").value_or(""), "cuda -arch=sm_90");
  EXPECT_EQ(CudaTargetFor("12.0").value_or(""), "cuda -arch=sm_90");
  EXPECT_EQ(CudaTargetFor("8.8").value_or(""), "cuda -arch=sm_87");
  EXPECT_EQ(CudaTargetFor("3.5").status().code(), absl::StatusCode::kFailedPrecondition);
  for (const char* bad : {"", "9", "9.", "x.0", "9.0.1", "9.10", "-1.0"}) {
    absl::StatusOr<std::string> t = CudaTargetFor(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(CudaTargetFor("9.x").status().message(),
              HasSubstr("\"9.x\" is not a compute capability (major.minor)"));
  // What it returns parses.
  EXPECT_TRUE(Target::Parse(*CudaTargetFor("8.0")).ok());
  // A device of this process: a CPU is not one; a GPU where there is one.
  EXPECT_EQ(CudaTargetForDevice(Device::Cpu()).status().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<std::string> gpu = CudaTargetForDevice(Device::Cuda());
  if (DeviceExists(Device::Cuda())) {
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_TRUE(Target::Parse(*gpu).ok()) << *gpu;
  } else {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(gpu.status().message(), HasSubstr("no CUDA device cuda:0"));
  }
}

// Every example model compiles for two architectures: one "ptx" library,
// one image per architecture, an entry for every launch of the manifest.
TEST(CudaCodegenTest, ExampleModelsEmbedPtxForEveryArchitecture) {
  std::vector<std::string> models = ExampleModels();
  ASSERT_GE(models.size(), 3u);
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    absl::StatusOr<Ref<vm::Executable>> exec = BuildExample(path, "cuda -arch=sm_90,sm_75");
    ASSERT_TRUE(exec.ok()) << exec.status();
    EXPECT_EQ((*exec)->metadata["target"], "cuda -arch=sm_75,sm_90");
    ASSERT_EQ((*exec)->kernel_libraries.size(), 1u);
    const vm::KernelLibraryBlob& lib = (*exec)->kernel_libraries[0];
    EXPECT_EQ(lib.format, "ptx");
    absl::StatusOr<CudaBlobContents> blob = ReadCudaBlob(lib.data);
    ASSERT_TRUE(blob.ok()) << blob.status();
    ASSERT_EQ(blob->images.size(), 2u);
    absl::StatusOr<std::vector<CudaKernelInfo>> kernels = ParseCudaManifest(blob->manifest);
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    EXPECT_FALSE(kernels->empty());
    for (const CudaImage& image : blob->images) {
      EXPECT_THAT(image.ptx, HasSubstr(absl::StrCat(".target sm_", image.sm)));
      for (const CudaKernelInfo& k : *kernels) {
        for (const CudaLaunchInfo& l : k.launches) {
          EXPECT_THAT(image.ptx, HasSubstr(absl::StrCat(".entry ", l.entry, "(")));
        }
      }
    }
    // The executable keeps the library through its file format.
    absl::StatusOr<Ref<vm::Executable>> loaded =
        vm::Executable::LoadFromBytes((*exec)->SaveToBytes());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ((*loaded)->kernel_libraries[0].data, lib.data);
  }
}

#ifdef TETHER_PTXAS
// Runs ptxas (with `flags`) on `ptx` for sm_`sm`: its exit status and output.
std::pair<int, std::string> Ptxas(const std::string& ptx, int sm, const std::string& flags = "") {
  // Named by process and call: CTest runs these tests in parallel processes.
  static int calls = 0;
  std::string file =
      ::testing::TempDir() + absl::StrCat("tether_ptxas_", getpid(), "_", ++calls, "_", sm, ".ptx");
  std::ofstream(file) << ptx;
  std::string log = file + ".log";
  // PTX for sm_90a (warpgroup MMA) assembles only for exactly that.
  const bool arch_specific = absl::StrContains(ptx, absl::StrCat(".target sm_", sm, "a"));
  std::string cmd =
      absl::StrCat(TETHER_PTXAS, " ", flags, " -arch=sm_", sm, arch_specific ? "a " : " ", file,
                   " -o /dev/null > ", log, " 2>&1");
  int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(file.c_str());
  std::remove(log.c_str());
  return {rc, text};
}

// NVIDIA's assembler accepts every image of every example model.
TEST(CudaCodegenTest, PtxasAssemblesEveryExampleModel) {
  for (const std::string& path : ExampleModels()) {
    SCOPED_TRACE(path);
    absl::StatusOr<Ref<vm::Executable>> exec = BuildExample(path, "cuda -arch=sm_75,sm_90");
    ASSERT_TRUE(exec.ok()) << exec.status();
    absl::StatusOr<CudaBlobContents> blob = ReadCudaBlob((*exec)->kernel_libraries[0].data);
    ASSERT_TRUE(blob.ok()) << blob.status();
    for (const CudaImage& image : blob->images) {
      auto [rc, text] = Ptxas(image.ptx, image.sm);
      EXPECT_EQ(rc, 0) << "ptxas sm_" << image.sm << ": " << text;
    }
  }
}
#endif

// Deterministic inputs for main's parameters, symbolic dims = 3.
std::vector<Value> InputsFor(const IRModule& m) {
  std::vector<Value> args;
  const auto* f = m.Lookup("main").as<FunctionNode>();
  for (size_t p = 0; p < f->params.size(); ++p) {
    const auto* t = f->params[p].struct_info().as<TensorStructInfoNode>();
    std::vector<int64_t> shape;
    for (const PrimExpr& d : *t->shape) shape.push_back(AsConstInt(d).value_or(3));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      values[i] = 0.5f + 0.4f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(p));
    }
    args.push_back(tether::testing::MakeFloatTensor(shape, values));
  }
  return args;
}

absl::StatusOr<std::vector<float>> RunOnCpu(Ref<vm::Executable> exec, std::vector<Value> args) {
  TETHER_ASSIGN_OR_RETURN(auto vm, vm::LocalVirtualMachine::Create(exec, {Device::Cpu()}));
  TETHER_ASSIGN_OR_RETURN(Value out, vm->Invoke("main", ArgSpan(args.data(), args.size())));
  if (out.AsRef<TensorObj>() == nullptr) return absl::InternalError("main returned no tensor");
  return tether::testing::ReadFloats(Tensor(out.AsRef<TensorObj>()));
}

// Every example model lowered for the GPU (operators' gpu schedules, then
// the device split) computes what the CPU build computes.
TEST(CudaCodegenTest, GpuLoweringOfEveryExampleModelMatchesTheCpuBuild) {
  for (const std::string& path : ExampleModels()) {
    SCOPED_TRACE(path);
    absl::StatusOr<IRModule> m = ParseModuleFile(path);
    ASSERT_TRUE(m.ok()) << m.status();
    std::vector<Value> args = InputsFor(*m);
    absl::StatusOr<Ref<vm::Executable>> cpu = Build(*m, BuildOptions());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    absl::StatusOr<std::vector<float>> expected = RunOnCpu(*cpu, args);
    ASSERT_TRUE(expected.ok()) << expected.status();

    BuildOptions gpu;
    gpu.target = "cuda";
    gpu.simulate_gpu_threads = 13;
    absl::StatusOr<Ref<vm::Executable>> exec = Build(*m, gpu);
    ASSERT_TRUE(exec.ok()) << exec.status();
    EXPECT_EQ((*exec)->metadata["simulated_target"], "cuda -arch=sm_75 (13 threads)");
    absl::StatusOr<std::vector<float>> actual = RunOnCpu(*exec, args);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t i = 0; i < expected->size(); ++i) {
      EXPECT_NEAR((*actual)[i], (*expected)[i], 1e-4 + 1e-4 * std::abs((*expected)[i])) << i;
    }
  }
}

TEST(CudaCodegenTest, SimulationNeedsACudaTarget) {
  absl::StatusOr<IRModule> m = ParseModuleFile(RepoRoot() + "examples/mlp.rx");
  ASSERT_TRUE(m.ok()) << m.status();
  BuildOptions options;
  options.simulate_gpu_threads = 4;
  absl::StatusOr<Ref<vm::Executable>> exec = Build(*m, options);
  ASSERT_FALSE(exec.ok());
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(exec.status().message(), HasSubstr("needs a cuda target"));
}

TEST(CudaCodegenTest, EmittedAssemblyIsPtxPerArchitecture) {
  absl::StatusOr<IRModule> m = ParseModuleFile(RepoRoot() + "examples/mlp.rx");
  ASSERT_TRUE(m.ok()) << m.status();
  BuildOptions options;
  options.target = "cuda -arch=sm_80,sm_90";
  absl::StatusOr<std::string> ptx = EmitKernelAssembly(*m, options);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(*ptx, HasSubstr("// ---- sm_80 ----"));
  EXPECT_THAT(*ptx, HasSubstr(".target sm_90"));
  EXPECT_THAT(*ptx, HasSubstr("%ctaid.x"));
}

// The PTX of the module `text` for `target`.
absl::StatusOr<std::string> ModulePtx(const std::string& text, const std::string& target) {
  TETHER_ASSIGN_OR_RETURN(IRModule m, ParseModule(text));
  BuildOptions options;
  options.target = target;
  return EmitKernelAssembly(m, options);
}

// main(a, b) = a @ b for (512, 256) x (256, 384) tensors of `dtype`.
std::string MatmulModule(const std::string& dtype) {
  std::string text = R"(
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((512, 256), "DT"), b: R.Tensor((256, 384), "DT")):
        with R.dataflow():
            c = R.matmul(a, b)
            R.output(c)
        return c
)";
  absl::StrReplaceAll({{"DT", dtype}}, &text);
  return text;
}

// A block's shared buffers are static and live together: their sum is held
// to the 48 KiB every architecture gives a block, naming the kernel.
TEST(CudaCodegenTest, SharedBuffersOverTheBlockLimitAreRefused) {
  Buffer out = MakeBuffer("out", DataType::Float(32), {PrimExpr(256)});
  auto shared = [](const char* name) {
    return MakeBuffer(name, DataType::Float(32), {PrimExpr(8192)}, BufferNode::Scope::kShared);
  };
  Buffer s1 = shared("first"), s2 = shared("second");
  Var b("b"), t("t");
  auto kernel = [&](bool both) {
    Stmt use =
        For(t, 0, PrimExpr(256), ForKind::kThread,
            Store(out, {t},
                  Add(Load(s1, {t}), both ? Load(s2, {t}) : MakeConst(DataType::Float(32), 0))));
    Stmt body = both ? Allocate(s1, Allocate(s2, use)) : Allocate(s1, use);
    return MakeKernelFunc("big", {KernelParam::Tensor(out)},
                          For(b, 0, PrimExpr(1), ForKind::kBlock, body));
  };
  absl::StatusOr<Target> target = Target::Parse("cuda -arch=sm_80");
  ASSERT_TRUE(target.ok());
  // 32 KiB fits.
  EXPECT_TRUE(BuildKernelLibrary({kernel(false)}, *target).ok());
  absl::StatusOr<vm::KernelLibraryBlob> lib = BuildKernelLibrary({kernel(true)}, *target);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lib.status().message(),
              HasSubstr("kernel big_k0: shared buffers of 65536 bytes (with second) exceed the "
                        "49152 a block may have"));
}

// cp.async exists from sm_80: a kernel that copies asynchronously is
// refused for older architectures, naming the kernel, and assembles for
// sm_80 to the copy with zero fill, the commit and the wait.
TEST(CudaCodegenTest, AsynchronousCopiesNeedSm80) {
  const DataType f16 = DataType::Float(16);
  Var n("n");
  Buffer x = MakeBuffer("x", f16, {n, PrimExpr(64)});
  Buffer out = MakeBuffer("out", f16, {n, PrimExpr(64)});
  Buffer tile = MakeBuffer("tile", f16, {PrimExpr(8), PrimExpr(64)}, BufferNode::Scope::kShared);
  Var b("b"), t("t"), u("u");
  const PrimExpr row = b * 8 + FloorDiv(t, 8), col = FloorMod(t, 8) * 8;
  Stmt fetch =
      For(t, 0, PrimExpr(64), ForKind::kThread,
          Seq({AsyncCopy({tile, {FloorDiv(t, 8), col}}, {x, {Min(row, n - 1), col}}, 8, LT(row, n)),
               AsyncFence(0)}));
  // Thread u then stores column u of the block's 8 rows.
  Var i("i");
  Stmt store =
      For(u, 0, PrimExpr(64), ForKind::kThread,
          For(i, 0, PrimExpr(8), ForKind::kSerial,
              IfThenElse(LT(b * 8 + i, n), Store(out, {b * 8 + i, u}, Load(tile, {i, u})))));
  KernelFunc k = MakeKernelFunc(
      "copy", {KernelParam::Tensor(x), KernelParam::Tensor(out)},
      For(b, 0, FloorDiv(n + 7, 8), ForKind::kBlock, Allocate(tile, Seq({fetch, store}))));
  absl::StatusOr<Target> old = Target::Parse("cuda -arch=sm_75");
  ASSERT_TRUE(old.ok());
  absl::StatusOr<vm::KernelLibraryBlob> lib = BuildKernelLibrary({k}, *old);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lib.status().message(),
              HasSubstr("kernel copy_k0: unsupported asynchronous copy on sm_75 (cp.async needs "
                        "sm_80)"));
  absl::StatusOr<Target> sm80 = Target::Parse("cuda -arch=sm_80");
  ASSERT_TRUE(sm80.ok());
  absl::StatusOr<std::string> ptx = EmitAssembly({k}, *sm80);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  for (const char* want : {"cp.async.cg.shared.global", "cp.async.commit_group;",
                           "cp.async.wait_group 0;", "bar.sync"}) {
    EXPECT_TRUE(absl::StrContains(*ptx, want)) << want;
  }
  // The zero fill: a source size of 16 or 0 bytes, chosen per thread.
  const size_t copy = ptx->find("cp.async.cg.shared.global");
  ASSERT_NE(copy, std::string::npos);
  EXPECT_THAT(ptx->substr(copy, ptx->find('\n', copy) - copy), HasSubstr("], 16, %r"));
#ifdef TETHER_PTXAS
  auto [rc, out_text] = Ptxas(ptx->substr(ptx->find('\n') + 1), 80, "-v");
  EXPECT_EQ(rc, 0) << out_text;
#endif
}

// A large matmul takes the block schedule: shared-memory tiles, barriers,
// and its 64 accumulators per thread in registers, not in local memory.
TEST(CudaCodegenTest, BlockScheduledMatmulUsesSharedMemoryBarriersAndRegisters) {
  absl::StatusOr<std::string> ptx = ModulePtx(MatmulModule("float32"), "cuda -arch=sm_80");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  // (Not EXPECT_THAT: a failure would print all the PTX.)
  // Whole tiles: 16-byte global loads (tensor data is 16-byte aligned),
  // shared reads of B and stores of C as 16-byte vectors.
  for (const char* want :
       {".shared .align 128 .b8 gemm_a_tile", "bar.sync", "ld.shared.f32", ".maxntid 256",
        "ld.global.nc.v4.f32", "ld.shared.v4.f32", "st.global.v4.f32"}) {
    EXPECT_TRUE(absl::StrContains(*ptx, want)) << want;
  }
  EXPECT_FALSE(absl::StrContains(*ptx, ".local"));
#ifdef TETHER_PTXAS
  // After the "// ---- sm_80 ----" line.
  auto [rc, text] = Ptxas(ptx->substr(ptx->find('\n') + 1), 80, "-v");
  EXPECT_EQ(rc, 0) << text;
  EXPECT_THAT(text, HasSubstr("0 bytes spill stores")) << text;
#endif
}

// An add and relu of (4096, 1000) tensors: the grid-stride index splits
// into (row, column) by floor division and is flattened again per access.
// With the index known non-negative LLVM folds that back to the index
// itself: no multiply-high (a division by 1000) and no sign fix-ups.
TEST(CudaCodegenTest, ElementwiseIndexMathFoldsBackToTheThreadIndex) {
  absl::StatusOr<std::string> ptx = ModulePtx(R"(
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((4096, 1000), "float32"), b: R.Tensor((4096, 1000), "float32")):
        with R.dataflow():
            c = R.add(a, b)
            d = R.nn.relu(c)
            R.output(d)
        return d
)",
                                              "cuda -arch=sm_90");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_FALSE(absl::StrContains(*ptx, "mul.hi")) << *ptx;
  EXPECT_FALSE(absl::StrContains(*ptx, "rem.")) << *ptx;
}

// float16 and bfloat16 products run on tensor cores where the architecture
// has them: WMMA loads from shared memory and mma.sync with float32
// accumulators, kept in registers; bfloat16 for sm_75 keeps the SIMT tiles.
// From sm_80 the tiles are fetched with cp.async.
TEST(CudaCodegenTest, SixteenBitMatmulsUseTensorCoresWhereTheArchitectureHasThem) {
  struct Case {
    const char* dtype;
    int sm;
    const char* mma;  // empty: no tensor cores
  };
  const Case cases[] = {
      {"float16", 80, "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32"},
      {"float16", 75, "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32"},
      {"bfloat16", 80, "wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32"},
      {"bfloat16", 75, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.dtype, " sm_", c.sm));
    absl::StatusOr<std::string> ptx =
        ModulePtx(MatmulModule(c.dtype), absl::StrCat("cuda -arch=sm_", c.sm));
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    const bool tensor_cores = *c.mma != 0;
    EXPECT_EQ(absl::StrContains(*ptx, "wmma.mma.sync"), tensor_cores);
    if (tensor_cores) {
      EXPECT_TRUE(absl::StrContains(*ptx, c.mma));
      EXPECT_TRUE(absl::StrContains(*ptx, "wmma.load.a.sync.aligned.row.m16n16k16.shared."));
      EXPECT_TRUE(absl::StrContains(*ptx, "wmma.load.b.sync.aligned.row.m16n16k16.shared."));
      EXPECT_TRUE(absl::StrContains(*ptx, "wmma.store.d.sync.aligned.row.m16n16k16.shared.f32"));
      // Staging whole tiles: from sm_80 with 16-byte asynchronous copies,
      // double buffered (each thread's fence waits for all but its newest
      // group); before, 16-byte loads and shared stores.
      const bool async = c.sm >= 80;
      EXPECT_EQ(absl::StrContains(*ptx, "cp.async.cg.shared.global"), async);
      EXPECT_EQ(absl::StrContains(*ptx, "cp.async.commit_group;"), async);
      EXPECT_EQ(absl::StrContains(*ptx, "cp.async.wait_group 1;"), async);
      EXPECT_EQ(absl::StrContains(*ptx, "ld.global.nc.v4.u32"), !async);
      EXPECT_EQ(absl::StrContains(*ptx, "st.shared.v4.b32"), !async);
      // The staging copies 16-bit values as they are: no conversion to
      // float and back (the only cvt.f32.f16 would be in the epilogue).
      EXPECT_FALSE(absl::StrContains(*ptx, "cvt.f32.f16")) << "staging converts";
    }
    EXPECT_FALSE(absl::StrContains(*ptx, ".local"));
#ifdef TETHER_PTXAS
    auto [rc, out] = Ptxas(ptx->substr(ptx->find('\n') + 1), c.sm, "-v");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_THAT(out, HasSubstr("0 bytes spill stores")) << out;
#endif
  }
}

// On sm_90 the same products run on the warpgroup MMA: PTX for sm_90a with
// wgmma fed by asynchronous copies (their writes fenced for the async
// proxy) in dynamic shared memory, the accumulators in registers.
TEST(CudaCodegenTest, SixteenBitMatmulsOnSm90UseWarpgroupMma) {
  for (const char* dtype : {"float16", "bfloat16"}) {
    SCOPED_TRACE(dtype);
    absl::StatusOr<std::string> ptx = ModulePtx(MatmulModule(dtype), "cuda -arch=sm_90");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    const std::string t = std::string(dtype) == "float16" ? "f16" : "bf16";
    // n = 384: tiles of 128 x 256, k steps of 16 per instruction.
    EXPECT_TRUE(absl::StrContains(*ptx, ".target sm_90a"));
    EXPECT_TRUE(absl::StrContains(
        *ptx, absl::StrCat("wgmma.mma_async.sync.aligned.m64n256k16.f32.", t, ".", t)));
    EXPECT_FALSE(absl::StrContains(*ptx, "wmma.mma.sync"));
    for (const char* s : {"wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;",
                          "wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 0;",
                          "fence.proxy.async.shared::cta;", "cp.async.cg.shared.global",
                          "cp.async.wait_group 2;", ".extern .shared"}) {
      EXPECT_TRUE(absl::StrContains(*ptx, s)) << s;
    }
    EXPECT_FALSE(absl::StrContains(*ptx, ".local"));
#ifdef TETHER_PTXAS
    auto [rc, out] = Ptxas(ptx->substr(ptx->find('\n') + 1), 90, "-v");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_THAT(out, HasSubstr("0 bytes spill stores")) << out;
    // ptxas keeps the products asynchronous (no C7515 serialization warning).
    EXPECT_THAT(out, ::testing::Not(HasSubstr("C7515"))) << out;
#endif
  }
  // Older architectures keep their schedules, and a float32 product never
  // takes the tensor cores.
  absl::StatusOr<std::string> f32 = ModulePtx(MatmulModule("float32"), "cuda -arch=sm_90");
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_FALSE(absl::StrContains(*f32, "wgmma"));
  EXPECT_TRUE(absl::StrContains(*f32, ".target sm_90\n"));
}

}  // namespace
}  // namespace tether::compiler
