// End to end through the whole compiler: Relax text → ParseModule → Build
// (pipeline, LLVM kernels, bytecode) → the local VM, compared with plain C++
// references. Symbolic shapes run at several sizes from one executable, bad
// inputs name the parameter and its annotation, and a saved executable runs
// after loading.
#include <cmath>
#include <cstring>
#include <random>

#include "compiler/build.h"
#include "compiler/build_id.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/host_target.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/repo_root.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

constexpr char kMlp[] = R"(
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32"),
             b: R.Tensor((3,), "float32")) -> R.Tensor(("n", 3), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
)";

std::vector<float> Random(size_t n, uint32_t seed) {
  return tether::testing::RandomFloats(n, seed);
}

// relu(x @ w + b) for x (n, k), w (k, m), b (m).
std::vector<float> MlpReference(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& b, int64_t n, int64_t k, int64_t m) {
  std::vector<float> out(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double acc = b[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p)
        acc += double(x[static_cast<size_t>(i * k + p)]) * w[static_cast<size_t>(p * m + j)];
      out[static_cast<size_t>(i * m + j)] = acc > 0 ? static_cast<float>(acc) : 0.0f;
    }
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << "at " << i;
  }
}

class E2EBuildTest : public ::testing::TestWithParam<std::string> {
 protected:
  static Ref<vm::Executable> BuildText(const char* text, BuildOptions options = {}) {
    auto module = ParseModule(text);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return Ref<vm::Executable>();
    auto exec = Build(*module, options);
    EXPECT_TRUE(exec.ok()) << exec.status();
    return exec.ok() ? *exec : Ref<vm::Executable>();
  }
  static std::unique_ptr<vm::LocalVirtualMachine> Load(Ref<vm::Executable> exec) {
    auto vm = vm::LocalVirtualMachine::Create(exec, {Device::Cpu()});
    EXPECT_TRUE(vm.ok()) << vm.status();
    return vm.ok() ? std::move(*vm) : nullptr;
  }
};

TEST_P(E2EBuildTest, MlpMatchesReferenceAtTwoBatchSizes) {
  BuildOptions options;
  options.pipeline = GetParam();
  Ref<vm::Executable> exec = BuildText(kMlp, options);
  ASSERT_TRUE(exec);
  auto vm = Load(exec);
  ASSERT_TRUE(vm);
  std::vector<float> w = Random(12, 1), b = Random(3, 2);
  for (int64_t n : {1, 5}) {
    std::vector<float> x = Random(static_cast<size_t>(n * 4), 3 + static_cast<uint32_t>(n));
    Value args[] = {MakeFloatTensor({n, 4}, x), MakeFloatTensor({4, 3}, w),
                    MakeFloatTensor({3}, b)};
    auto out = vm->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    Tensor t(out->AsRef<TensorObj>());
    ASSERT_EQ(t->ndim(), 2);
    EXPECT_EQ(t->shape()[0], n);
    ExpectNear(ReadFloats(t), MlpReference(x, w, b, n, 4, 3));
  }
}

INSTANTIATE_TEST_SUITE_P(Pipelines, E2EBuildTest, ::testing::Values("default", "zero"));

class BuildTest : public E2EBuildTest {};

TEST_F(BuildTest, ShapeMismatchAtRunTimeNamesParameterAndAnnotation) {
  Ref<vm::Executable> exec = BuildText(kMlp);
  ASSERT_TRUE(exec);
  auto vm = Load(exec);
  ASSERT_TRUE(vm);
  Value args[] = {MakeFloatTensor({2, 5}, Random(10, 1)), MakeFloatTensor({4, 3}, Random(12, 2)),
                  MakeFloatTensor({3}, Random(3, 3))};
  auto out = vm->Invoke("main", args);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("main: parameter x (annotated R.Tensor((n, 4), \"float32\")): shape[1] "
                        "mismatch to specified constant: expected 4, got 5"));
}

// The same text builds to the same bytes, so the daemon's content hash of
// a rebuilt model is the one it already stores (only changed code or
// weights travel). Parallel loops make closures, whose layout must not
// follow the addresses of the IR's nodes.
TEST_F(BuildTest, TheSameModelBuildsToTheSameBytes) {
  const std::string path = tether::testing::RepoRoot() + "/examples/tir_matmul.rx";
  std::string first;
  for (int i = 0; i < 3; ++i) {
    auto module = ParseModuleFile(path);
    ASSERT_TRUE(module.ok()) << module.status();
    std::vector<std::unique_ptr<int>> shift_addresses(static_cast<size_t>(i * 97));
    for (auto& p : shift_addresses) p = std::make_unique<int>(i);
    auto exec = Build(*module, {});
    ASSERT_TRUE(exec.ok()) << exec.status();
    const std::string bytes = (*exec)->SaveToBytes();
    if (i == 0) {
      first = bytes;
    } else {
      EXPECT_TRUE(bytes == first) << "build " << i << " differs from the first";
    }
  }
}

TEST_F(BuildTest, SavedExecutableRunsAfterLoading) {
  Ref<vm::Executable> exec = BuildText(kMlp);
  ASSERT_TRUE(exec);
  auto loaded = vm::Executable::LoadFromBytes(exec->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->metadata.at("compiler_version"), kCompilerVersion);
  // Which build: this test binary's GNU build ID (Debian's linker writes a
  // 160-bit one), the key of the CLI's compile cache.
  EXPECT_THAT((*loaded)->metadata.at("compiler_build"), ::testing::MatchesRegex("[0-9a-f]{40}"));
  EXPECT_EQ((*loaded)->metadata.at("compiler_build"), CompilerBuildId());
  EXPECT_EQ((*loaded)->metadata.at("source_hash").size(), 16u);
  EXPECT_THAT((*loaded)->metadata.at("signature.main"), HasSubstr("x: R.Tensor((n, 4)"));
  auto vm = Load(*loaded);
  ASSERT_TRUE(vm);
  std::vector<float> x = Random(8, 4), w = Random(12, 5), b = Random(3, 6);
  Value args[] = {MakeFloatTensor({2, 4}, x), MakeFloatTensor({4, 3}, w), MakeFloatTensor({3}, b)};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(ReadFloats(Tensor(out->AsRef<TensorObj>())), MlpReference(x, w, b, 2, 4, 3));
}

TEST_F(BuildTest, BoundParamsBecomeConstants) {
  std::vector<float> w = Random(12, 7), b = Random(3, 8);
  BuildOptions options;
  options.params["w"] = MakeFloatTensor({4, 3}, w);
  options.params["b"] = MakeFloatTensor({3}, b);
  Ref<vm::Executable> exec = BuildText(kMlp, options);
  ASSERT_TRUE(exec);
  EXPECT_EQ(exec->functions[exec->function_map.at("main")].num_args, 1);
  auto vm = Load(exec);
  ASSERT_TRUE(vm);
  std::vector<float> x = Random(12, 9);
  Value args[] = {MakeFloatTensor({3, 4}, x)};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(ReadFloats(Tensor(out->AsRef<TensorObj>())), MlpReference(x, w, b, 3, 4, 3));
}

TEST_F(BuildTest, Aarch64TargetEmbedsAnAarch64SharedObject) {
  BuildOptions options;
  options.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  Ref<vm::Executable> exec = BuildText(kMlp, options);
  ASSERT_TRUE(exec);
  ASSERT_EQ(exec->kernel_libraries.size(), 1u);
  const std::string& so = exec->kernel_libraries[0].data;
  ASSERT_GE(so.size(), 20u);
  EXPECT_EQ(so.substr(0, 4),
            "\x7f"
            "ELF");
  uint16_t machine;
  std::memcpy(&machine, so.data() + 18, 2);
  EXPECT_EQ(machine, 183);  // EM_AARCH64
  EXPECT_THAT(exec->metadata.at("target"), HasSubstr("aarch64"));
  // The library records what it was built for; a machine of another kind
  // refuses it before any kernel runs, naming both.
  EXPECT_THAT(exec->kernel_libraries[0].target, HasSubstr("-mtriple=aarch64-linux-gnu"));
  EXPECT_THAT(exec->kernel_libraries[0].target, HasSubstr("-mcpu=cortex-a72"));
#if defined(__x86_64__)
  auto vm = vm::LocalVirtualMachine::Create(exec, {Device::Cpu()});
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kFailedPrecondition) << vm.status();
  EXPECT_THAT(vm.status().message(), HasSubstr("aarch64-linux-gnu, cortex-a72"));
  EXPECT_THAT(vm.status().message(), HasSubstr("x86_64-linux-gnu"));
#endif
}

TEST_F(BuildTest, AHostBuildRecordsTheFeaturesItUses) {
  Ref<vm::Executable> exec = BuildText(kMlp, BuildOptions());
  ASSERT_TRUE(exec);
  ASSERT_EQ(exec->kernel_libraries.size(), 1u);
  const std::string& target = exec->kernel_libraries[0].target;
  EXPECT_THAT(target, HasSubstr("-mtriple="));
  EXPECT_THAT(target, HasSubstr("-mcpu="));
  EXPECT_THAT(target, ::testing::Not(HasSubstr(",-")));  // only what it turns on
  EXPECT_TRUE(CheckRunsOn(target, ThisHostTarget()).ok()) << target;
}

TEST_F(BuildTest, RejectsBadOptions) {
  auto module = ParseModule(kMlp);
  ASSERT_TRUE(module.ok()) << module.status();
  BuildOptions compiled_for_a_gpu;
  compiled_for_a_gpu.exec_mode = "compiled";
  compiled_for_a_gpu.target = "cuda";
  EXPECT_EQ(Build(*module, compiled_for_a_gpu).status().code(), absl::StatusCode::kInvalidArgument);
  BuildOptions unknown_mode;
  unknown_mode.exec_mode = "jit";
  auto s = Build(*module, unknown_mode).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown exec_mode \"jit\""));
  BuildOptions pipeline;
  pipeline.pipeline = "fastest";
  EXPECT_EQ(Build(*module, pipeline).status().code(), absl::StatusCode::kInvalidArgument);
  BuildOptions unknown_param;
  unknown_param.params["nope"] = MakeFloatTensor({1}, {1.0f});
  EXPECT_EQ(Build(*module, unknown_param).status().code(), absl::StatusCode::kInvalidArgument);
  BuildOptions target;
  target.target = "cobol";
  EXPECT_EQ(Build(*module, target).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BuildTest, EmitHelpersShowEachStage) {
  auto module = ParseModule(kMlp);
  ASSERT_TRUE(module.ok()) << module.status();
  auto ir = EmitLoweredIR(*module, {});
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, HasSubstr("def main"));
  auto bytecode = EmitBytecode(*module, {});
  ASSERT_TRUE(bytecode.ok()) << bytecode.status();
  EXPECT_THAT(*bytecode, HasSubstr("vm.builtin.match_shape"));
  auto assembly = EmitKernelAssembly(*module, {});
  ASSERT_TRUE(assembly.ok()) << assembly.status();
  EXPECT_FALSE(assembly->empty());
}

}  // namespace
}  // namespace tether::compiler
