// Exported libraries (TVM's export_library / load_module): an executable
// written as its own CPU kernel library, a shared object that any program
// can dlopen, which loads back as the executable that was exported, locally
// and uploaded to a real tetherd on 127.0.0.1; refused with both targets
// named where its kernels cannot run; hostile images fail cleanly. Also the
// ELF section surgery underneath, on 64- and 32-bit images.
#include <dlfcn.h>
#include <elf.h>

#include <cstring>

#include "absl/strings/match.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/build.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/file.h"
#include "runtime/kernel/elf_section.h"
#include "runtime/vm/local_vm.h"
#include "server/daemon.h"
#include "tests/compiler/build_example.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::RandomFloats;
using tether::testing::ReadFloats;

std::vector<Value> MlpInputs() {
  return {MakeFloatTensor({3, 784}, RandomFloats(3 * 784, 1)),
          MakeFloatTensor({784, 128}, RandomFloats(784 * 128, 2)),
          MakeFloatTensor({128}, RandomFloats(128, 3)),
          MakeFloatTensor({128, 10}, RandomFloats(128 * 10, 4)),
          MakeFloatTensor({10}, RandomFloats(10, 5))};
}

std::vector<float> RunLocally(Ref<vm::Executable> exec, const std::vector<Value>& args) {
  auto vm = vm::LocalVirtualMachine::Create(exec, {Device::Cpu()});
  EXPECT_TRUE(vm.ok()) << vm.status();
  if (!vm.ok()) return {};
  auto out = (*vm)->Invoke("main", args);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? ReadFloats(Tensor(out->AsRef<TensorObj>())) : std::vector<float>{};
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(ExportLibraryTest, LoadsBackAsTheExecutableThatWasExported) {
  Ref<vm::Executable> exec = BuildMlp();
  ASSERT_TRUE(exec);
  const std::string bytes = exec->SaveToBytes();
  absl::StatusOr<std::string> library = exec->ExportLibraryBytes();
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_TRUE(IsElfImage(*library));
  // The kernels are in it once: the library is the executable plus a copy
  // of the section tables (about 1 KB), not plus another copy of the kernels.
  const size_t kernels = exec->kernel_libraries.at(0).data.size();
  ASSERT_GT(kernels, 8192u);
  EXPECT_LT(library->size(), bytes.size() + 2048);
  auto loaded = vm::Executable::LoadFromBytes(*library);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->SaveToBytes(), bytes);

  const std::string path = TempPath("mlp_exported.so");
  ASSERT_TRUE(exec->ExportLibrary(path).ok());
  auto from_file = vm::Executable::LoadFromFile(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ((*from_file)->SaveToBytes(), bytes);
}

TEST(ExportLibraryTest, AnyProgramCanDlopenItsKernels) {
  Ref<vm::Executable> exec = BuildMlp();
  ASSERT_TRUE(exec);
  const std::string path = TempPath("mlp_dlopen.so");
  ASSERT_TRUE(exec->ExportLibrary(path).ok());
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  const auto* manifest = static_cast<const char*>(dlsym(handle, "tether_kernel_manifest"));
  ASSERT_NE(manifest, nullptr);
  EXPECT_THAT(manifest, HasSubstr("kernel fused_matmul_add_relu "));
  EXPECT_NE(dlsym(handle, "fused_matmul_add_relu"), nullptr);
  EXPECT_NE(dlsym(handle, "fused_matmul_add"), nullptr);
  dlclose(handle);
}

TEST(ExportLibraryTest, ModuleLoaderRunsItAsTheExecutable) {
  Ref<vm::Executable> exec = BuildMlp();
  ASSERT_TRUE(exec);
  const std::string path = TempPath("mlp_module.so");
  ASSERT_TRUE(exec->ExportLibrary(path).ok());
  vm::RegisterExecutableLoader();
  auto module = Module::LoadFromFile(path);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_EQ((*module)->type_key(), "vm.Executable");
  Ref<vm::Executable> loaded(static_cast<vm::Executable*>(module->get()));
  const std::vector<Value> args = MlpInputs();
  const std::vector<float> want = RunLocally(exec, args);
  ASSERT_EQ(want.size(), 30u);
  EXPECT_EQ(RunLocally(loaded, args), want);
}

TEST(ExportLibraryTest, AKernelLibraryWithoutAnExecutableLoadsAsItsKernels) {
  Ref<vm::Executable> exec = BuildMlp();
  ASSERT_TRUE(exec);
  const std::string& kernels = exec->kernel_libraries.at(0).data;
  vm::RegisterExecutableLoader();
  auto module = Module::LoadFromBinary(kernels);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->type_key(), "library.so");
  EXPECT_TRUE((*module)->GetFunction("fused_matmul_add").ok());
  absl::Status not_an_executable = vm::Executable::LoadFromBytes(kernels).status();
  EXPECT_EQ(not_an_executable.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_an_executable.message(), HasSubstr("shared library without an executable"));
}

#if defined(__x86_64__)
TEST(ExportLibraryTest, ALibraryForAnotherMachineIsRefusedWithBothTargetsNamed) {
  BuildOptions options;
  options.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  Ref<vm::Executable> exec = BuildMlp(options);
  ASSERT_TRUE(exec);
  absl::StatusOr<std::string> library = exec->ExportLibraryBytes();
  ASSERT_TRUE(library.ok()) << library.status();
  // It reads (a workstation uploads it to the board) ...
  ASSERT_TRUE(vm::Executable::LoadFromBytes(*library).ok());
  // ... but does not load to run here.
  vm::RegisterExecutableLoader();
  absl::Status refused = Module::LoadFromBinary(*library).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("aarch64-linux-gnu, cortex-a72"));
  EXPECT_THAT(refused.message(), HasSubstr("x86_64"));
  // Its kernel library alone is refused for its ELF machine.
  absl::Status kernels = Module::LoadFromBinary(exec->kernel_libraries.at(0).data).status();
  EXPECT_THAT(kernels.message(), HasSubstr("built for aarch64, but this runtime runs on x86_64"));
}
#endif

TEST(ExportLibraryTest, ExecutablesWithoutCpuKernelsGetAnEmptyLibraryToCarryThem) {
  auto module = ParseModule(R"(
from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((6,), "float32"):
        y = R.reshape(x, R.shape([6]))
        return y
)",
                            "reshape.rx");
  ASSERT_TRUE(module.ok()) << module.status();
  auto exec = Build(*module, {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->kernel_libraries.empty());
  absl::Status bare = (*exec)->ExportLibraryBytes().status();
  EXPECT_EQ(bare.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bare.message(), HasSubstr("no CPU kernel library"));

  const std::string path = TempPath("reshape.so");
  ASSERT_TRUE(ExportLibrary(exec->get(), path).ok());
  auto loaded = vm::Executable::LoadFromFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ((*loaded)->kernel_libraries.size(), 1u);
  EXPECT_EQ((*loaded)->kernel_libraries[0].format, "so");
  std::vector<float> x = RandomFloats(6, 7);
  EXPECT_EQ(RunLocally(*loaded, {MakeFloatTensor({2, 3}, x)}), x);

  // GPU kernels: the empty CPU library carries them too.
  BuildOptions cuda;
  cuda.target = "cuda -arch=sm_90";
  Ref<vm::Executable> gpu = BuildMlp(cuda);
  ASSERT_TRUE(gpu);
  ASSERT_TRUE(ExportLibrary(gpu.get(), TempPath("mlp_cuda.so")).ok());
  auto gpu_loaded = vm::Executable::LoadFromFile(TempPath("mlp_cuda.so"));
  ASSERT_TRUE(gpu_loaded.ok()) << gpu_loaded.status();
  EXPECT_EQ((*gpu_loaded)->SaveToBytes(), gpu->SaveToBytes());
}

TEST(ExportLibraryTest, ASystemLibraryExecutableIsNotExported) {
  BuildOptions options;
  options.system_lib = true;
  options.system_lib_prefix = "mlp";
  Ref<vm::Executable> exec = BuildMlp(options);
  ASSERT_TRUE(exec);
  absl::Status refused = ExportLibrary(exec.get(), TempPath("static.so"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("--system-lib"));
}

TEST(ExportLibraryTest, CorruptLibrariesFailCleanly) {
  Ref<vm::Executable> exec = BuildMlp();
  ASSERT_TRUE(exec);
  absl::StatusOr<std::string> library = exec->ExportLibraryBytes();
  ASSERT_TRUE(library.ok()) << library.status();
  // Every cut loses the section header table at the end.
  const size_t size = library->size();
  for (size_t cut = 0; cut < size; cut += (cut + 200 < size ? 97 : 1)) {
    absl::Status s = vm::Executable::LoadFromBytes(library->substr(0, cut)).status();
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut << ": " << s;
  }
  // Flipped bytes in the ELF header and the section tables: an error or,
  // where the byte does not matter, the executable; never a crash.
  const size_t tables = size - 20 * sizeof(Elf64_Shdr);
  for (size_t at = 0; at < size; at = at + 1 == 64 ? tables : at + 1) {
    std::string flipped = *library;
    flipped[at] = static_cast<char>(flipped[at] ^ 0xa5);
    (void)vm::Executable::LoadFromBytes(flipped);
  }
  // A library that carries a library (nesting) is refused, not recursed.
  absl::StatusOr<std::string> nested =
      AppendElfSection(exec->kernel_libraries.at(0).data, ".tether_executable", *library);
  ASSERT_TRUE(nested.ok()) << nested.status();
  absl::Status s = vm::Executable::LoadFromBytes(*nested).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("carries another library"));
  EXPECT_EQ(AppendElfSection(*library, ".tether_executable", "x").status().code(),
            absl::StatusCode::kAlreadyExists);
}

// The surgery on the two ELF classes: append, find, and cut back to the
// original bytes.
TEST(ElfSectionTest, AppendsFindsAndRemovesOn64And32BitImages) {
  for (const char* target_text : {"llvm", "llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7",
                                  "llvm -mtriple=aarch64-linux-gnu"}) {
    SCOPED_TRACE(target_text);
    auto target = Target::Parse(target_text);
    ASSERT_TRUE(target.ok()) << target.status();
    auto blob = BuildKernelLibrary({}, *target);
    ASSERT_TRUE(blob.ok()) << blob.status();
    const std::string& image = blob->data;
    const bool is32 = image[EI_CLASS] == ELFCLASS32;
    EXPECT_EQ(is32, absl::StrContains(target_text, "armv7a"));
    auto machine = ElfMachineOf(image);
    ASSERT_TRUE(machine.ok());
    EXPECT_EQ(ElfMachineName(*machine), is32 ? "arm" : ElfMachineName(*machine));
    EXPECT_EQ(FindElfSection(image, ".extra").status().code(), absl::StatusCode::kNotFound);
    auto with = AppendElfSection(image, ".extra", "a payload");
    ASSERT_TRUE(with.ok()) << with.status();
    auto found = FindElfSection(*with, ".extra");
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, "a payload");
    auto without = RemoveAppendedElfSection(*with, ".extra");
    ASSERT_TRUE(without.ok()) << without.status();
    EXPECT_EQ(*without, image);
    // Only the section appended last can be cut off.
    EXPECT_EQ(RemoveAppendedElfSection(image, ".shstrtab").status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// The same library uploaded to a real tetherd: the daemon stores it by
// hash and runs it; a corrupt one is refused and the daemon serves on.
TEST(ExportLibraryTest, ADaemonRunsAnUploadedLibrary) {
  Ref<vm::Executable> exec = BuildMlp();
  ASSERT_TRUE(exec);
  absl::StatusOr<std::string> library = exec->ExportLibraryBytes();
  ASSERT_TRUE(library.ok()) << library.status();
  server::DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  auto daemon = server::Daemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto session = client::RemoteSession::Connect((*daemon)->target());
  ASSERT_TRUE(session.ok()) << session.status();

  std::string corrupt = *library;
  corrupt.resize(corrupt.size() - 10);
  absl::StatusOr<std::string> bad = (*session)->UploadModule(corrupt);
  absl::Status refused =
      bad.ok() ? client::RemoteVM::Create(session->get(), *bad, {Device::Cpu()}).status()
               : bad.status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;

  auto sha = (*session)->UploadModule(*library);
  ASSERT_TRUE(sha.ok()) << sha.status();
  auto vm = client::RemoteVM::Create(session->get(), *sha, {Device::Cpu()});
  ASSERT_TRUE(vm.ok()) << vm.status();
  const std::vector<Value> args = MlpInputs();
  auto out = (*vm)->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ReadFloats(Tensor(out->AsRef<TensorObj>())), RunLocally(exec, args));
  vm->reset();
  session->reset();
  (*daemon)->Shutdown();
}

}  // namespace
}  // namespace tether::compiler
