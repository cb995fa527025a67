// load_static_library (runtime/kernel/static_library.h): the system library
// archive of examples/mlp.rx read without linking it — its prefix, machine and
// kernels agree with the executable's; func_names are checked; a kernel is a
// Function only where the archive's kernels are linked into the process (here
// simulated by registering the kernels of the same model's dlopen'ed library
// in the system library), and is refused with what to do otherwise; an
// aarch64 archive names its machine; damaged archives fail cleanly.
#include "runtime/kernel/static_library.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "compiler/build.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/file.h"
#include "runtime/kernel/ar_archive.h"
#include "runtime/kernel/elf_section.h"
#include "runtime/kernel/kernel_library.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/module/system_lib.h"
#include "runtime/vm/executable.h"
#include "tests/compiler/build_example.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::RandomFloats;
using tether::testing::ReadFloats;

BuildOptions SystemLib(const std::string& prefix, const std::string& target = "llvm") {
  BuildOptions options;
  options.target = target;
  options.system_lib = true;
  options.system_lib_prefix = prefix;
  return options;
}

// The one kernel library of `exec`, which must have format `format`.
std::string KernelsOf(const Ref<vm::Executable>& exec, absl::string_view format) {
  EXPECT_EQ(exec->kernel_libraries.size(), 1u);
  if (exec->kernel_libraries.size() != 1) return "";
  EXPECT_EQ(exec->kernel_libraries[0].format, format);
  return exec->kernel_libraries[0].data;
}

// The mlp built twice, once as system library "slt_mlp" and once as usual
// (its kernels a shared object), shared by the tests: a build takes seconds.
class StaticLibraryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static_exec_ = BuildMlp(SystemLib("slt_mlp"));
    shared_exec_ = BuildMlp(BuildOptions());
  }
  static void TearDownTestSuite() {
    static_exec_ = nullptr;
    shared_exec_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(static_exec_);
    ASSERT_TRUE(shared_exec_);
    archive_ = KernelsOf(static_exec_, "static");
    ASSERT_FALSE(archive_.empty());
  }

  inline static Ref<vm::Executable> static_exec_;
  inline static Ref<vm::Executable> shared_exec_;
  std::string archive_;
};

std::vector<std::string> NamesOf(const std::vector<KernelInfo>& kernels) {
  std::vector<std::string> names;
  for (const KernelInfo& k : kernels) names.push_back(k.name);
  return names;
}

TEST_F(StaticLibraryTest, ReadsThePrefixMachineAndKernelsOfTheExecutable) {
  auto library = LoadStaticLibrary(archive_);
  ASSERT_TRUE(library.ok()) << library.status();
  const StaticLibraryModule& lib = **library;
  EXPECT_EQ(lib.type_key(), "static_library");
  EXPECT_EQ(lib.format(), "a");
  EXPECT_EQ(lib.prefix(), "slt_mlp");
  EXPECT_EQ(lib.object_name(), "kernels.o");
  EXPECT_EQ(lib.machine(), HostElfMachine());
#if defined(__x86_64__)
  EXPECT_EQ(lib.machine_name(), "x86_64");
#endif
  // The kernels are those the same model's shared-object library lists,
  // with the same parameters.
  auto shared = LoadKernelLibrary(shared_exec_->kernel_libraries.at(0));
  ASSERT_TRUE(shared.ok()) << shared.status();
  std::vector<KernelSignature> want = static_cast<KernelLibraryModule*>(shared->get())->Kernels();
  ASSERT_EQ(lib.kernels().size(), want.size());
  ASSERT_EQ(want.size(), 2u);
  for (size_t i = 0; i < want.size(); ++i) {
    const KernelInfo& got = lib.kernels()[i];
    EXPECT_EQ(got.name, want[i].name);
    ASSERT_EQ(got.params.size(), want[i].params.size()) << got.name;
    for (size_t p = 0; p < got.params.size(); ++p) {
      EXPECT_EQ(got.params[p].is_tensor, want[i].params[p].is_tensor);
      EXPECT_EQ(got.params[p].dtype, want[i].params[p].dtype);
      EXPECT_EQ(got.params[p].ndim, want[i].params[p].ndim);
    }
  }
  // Every kernel the executable calls is one the library lists.
  const std::string text = static_exec_->AsText();
  for (const KernelInfo& k : lib.kernels()) EXPECT_THAT(text, HasSubstr("call  " + k.name + " "));
  EXPECT_EQ(lib.functions(), NamesOf(lib.kernels()));
  EXPECT_TRUE(lib.ImplementsFunction("fused_matmul_add_relu"));
  EXPECT_FALSE(lib.ImplementsFunction("main"));

  // The file reads the same.
  const std::string path = ::testing::TempDir() + "/slt_mlp.a";
  ASSERT_TRUE(WriteStringToFileAtomic(path, archive_).ok());
  auto from_file = LoadStaticLibraryFile(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(NamesOf((*from_file)->kernels()), NamesOf(lib.kernels()));
  absl::Status missing = LoadStaticLibraryFile(path + ".missing").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
}

TEST_F(StaticLibraryTest, FuncNamesMustBeKernelsOfTheLibrary) {
  auto one = LoadStaticLibrary(archive_, {"fused_matmul_add"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT((*one)->functions(), ElementsAre("fused_matmul_add"));
  EXPECT_TRUE((*one)->ImplementsFunction("fused_matmul_add"));
  EXPECT_FALSE((*one)->ImplementsFunction("fused_matmul_add_relu"));
  EXPECT_EQ((*one)->kernels().size(), 2u);  // the library still lists them all
  absl::Status other = (*one)->GetFunction("fused_matmul_add_relu").status();
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound) << other;

  absl::Status absent = LoadStaticLibrary(archive_, {"fused_matmul_add", "conv2d"}).status();
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound) << absent;
  EXPECT_THAT(absent.message(), HasSubstr("has no kernel conv2d"));
  EXPECT_THAT(absent.message(), HasSubstr("it has fused_matmul_add, fused_matmul_add_relu"));
}

TEST_F(StaticLibraryTest, GetFunctionSaysAStaticLibraryIsLinkedNotLoaded) {
  auto library = LoadStaticLibrary(archive_);
  ASSERT_TRUE(library.ok()) << library.status();
  absl::Status refused = (*library)->GetFunction("fused_matmul_add").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("a static library is linked, not loaded"));
  EXPECT_THAT(refused.message(), HasSubstr("system library \"slt_mlp\" is not linked"));
  EXPECT_THAT(refused.message(), HasSubstr("tether_add_daemon in cmake/TetherSystemLib.cmake"));
  EXPECT_EQ((*library)->GetFunction("main").status().code(), absl::StatusCode::kNotFound);
}

// What linking the archive whole does at start-up — its kernels and manifest
// registered in the system library under its prefix — done by hand with the
// kernels of the same model dlopen'ed from its exported library.
TEST_F(StaticLibraryTest, GetFunctionGivesTheKernelsLinkedIntoTheProcess) {
  const std::string so_path = ::testing::TempDir() + "/slt_mlp_kernels.so";
  ASSERT_TRUE(shared_exec_->ExportLibrary(so_path).ok());
  void* handle = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto library = LoadStaticLibrary(archive_);
  ASSERT_TRUE(library.ok()) << library.status();
  const std::string prefix = (*library)->prefix();
  for (const KernelInfo& k : (*library)->kernels()) {
    void* fn = dlsym(handle, k.name.c_str());
    ASSERT_NE(fn, nullptr) << k.name;
    RegisterSystemLibSymbol(prefix, k.name, fn);
  }
  // A manifest of another library under that prefix is refused ...
  static const char kOtherManifest[] = "tether-kernel-manifest 1\nkernel other 0\nend\n";
  RegisterSystemLibSymbol(prefix, "__tether_kernel_manifest", const_cast<char*>(kOtherManifest));
  absl::Status foreign = (*library)->GetFunction("fused_matmul_add_relu").status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kFailedPrecondition) << foreign;
  EXPECT_THAT(foreign.message(), HasSubstr("are another library's"));
  // ... and the same library's gives its kernels.
  RegisterSystemLibSymbol(prefix, "__tether_kernel_manifest",
                          dlsym(handle, "tether_kernel_manifest"));
  auto kernel = (*library)->GetFunction("fused_matmul_add_relu");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Tensor x = MakeFloatTensor({3, 784}, RandomFloats(3 * 784, 1));
  Tensor w = MakeFloatTensor({784, 128}, RandomFloats(784 * 128, 2));
  Tensor b = MakeFloatTensor({128}, RandomFloats(128, 3));
  Tensor out = MakeFloatTensor({3, 128}, std::vector<float>(3 * 128, -1.0f));
  Value args[] = {x, w, b, out};
  auto called = (*kernel)(ArgSpan(args, 4));
  ASSERT_TRUE(called.ok()) << called.status();
  const std::vector<float> xs = ReadFloats(x), ws = ReadFloats(w), bs = ReadFloats(b);
  const std::vector<float> got = ReadFloats(out);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 128; ++j) {
      float acc = bs[j];
      for (int k = 0; k < 784; ++k) acc += xs[i * 784 + k] * ws[k * 128 + j];
      EXPECT_NEAR(got[i * 128 + j], acc > 0 ? acc : 0, 1e-4) << i << "," << j;
    }
  }
  // Its arguments are checked as any loaded kernel's.
  Value wrong[] = {x, x, b, out};
  EXPECT_EQ((*kernel)(ArgSpan(wrong, 4)).status().code(), absl::StatusCode::kInvalidArgument);

  for (const KernelInfo& k : (*library)->kernels()) UnregisterSystemLibSymbol(prefix, k.name);
  UnregisterSystemLibSymbol(prefix, "__tether_kernel_manifest");
  *kernel = Function();
  dlclose(handle);
}

TEST_F(StaticLibraryTest, AnArchiveForAnotherMachineNamesBothMachines) {
#if defined(__x86_64__)
  const std::string target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  const std::string other = "aarch64", here = "x86_64";
#elif defined(__aarch64__)
  const std::string target = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4";
  const std::string other = "x86_64", here = "aarch64";
#else
  GTEST_SKIP() << "no other machine chosen for this host";
#endif
  Ref<vm::Executable> exec = BuildMlp(SystemLib("slt_board", target));
  ASSERT_TRUE(exec);
  auto library = LoadStaticLibrary(KernelsOf(exec, "static"));
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ((*library)->machine_name(), other);
  EXPECT_EQ((*library)->prefix(), "slt_board");
  EXPECT_EQ(NamesOf((*library)->kernels()),
            NamesOf(LoadStaticLibrary(archive_).value()->kernels()));
  absl::Status refused = (*library)->GetFunction("fused_matmul_add").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("is built for " + other + ", but this process runs on " + here));
}

TEST_F(StaticLibraryTest, NamedDamageIsRefusedSayingWhatIsWrong) {
  auto read = ReadArArchive(archive_);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->members.size(), 1u);
  const size_t object_at = read->members[0].data.data() - archive_.data();
  const size_t header_at = read->members[0].header_offset;
  auto expect_refused = [](const std::string& bytes, const std::string& fragment) {
    absl::Status s = LoadStaticLibrary(bytes).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(fragment));
  };
  expect_refused(static_exec_->SaveToBytes(), "not an ar archive");
  std::string bad = archive_;
  bad.replace(header_at + 48, 3, "x1y");  // the object's size field
  expect_refused(bad, "not a decimal number");
  bad = archive_;
  bad[8 + 60] = '\x7f';  // the symbol count's high byte
  expect_refused(bad, "claims");
  bad = archive_;
  bad[8 + 60 + 7] ^= 0x10;  // the first symbol's member offset
  expect_refused(bad, "where no member starts");
  bad = archive_;
  bad.replace(bad.find("tether_system_lib_register_slt_mlp"), 6, "xether");
  expect_refused(bad, "expected one tether_system_lib_register_<prefix> symbol");
  bad = archive_;
  bad[object_at] = 'X';  // the ELF magic
  expect_refused(bad, "is not an ELF object");
  bad = archive_;
  bad[object_at + 16] = ET_DYN;  // e_type
  expect_refused(bad, "not a relocatable object");
  bad = archive_;
  // The symbol's name in the string table (not the "__tether_kernel_manifest"
  // the registration passes, which ends the same).
  const size_t symbol = bad.find(std::string("\0tether_kernel_manifest\0", 24), object_at);
  ASSERT_NE(symbol, std::string::npos);
  bad[symbol + 1] = 'x';
  expect_refused(bad, "has no readable kernel manifest");
  bad = archive_;
  bad.replace(bad.find("tether-kernel-manifest 1\n"), 24, "tether-kernel-manifest 9");
  expect_refused(bad, "kernel manifest does not start with");
}

// Every cut and every byte of every header flipped: INVALID_ARGUMENT or, for
// bytes that do not matter (dates, padding), the same library — never a
// crash, never another code.
TEST_F(StaticLibraryTest, DamagedArchivesFailCleanly) {
  for (size_t cut = 0; cut < archive_.size(); ++cut) {
    absl::Status s = LoadStaticLibrary(absl::string_view(archive_).substr(0, cut)).status();
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut << ": " << s;
  }
  auto read = ReadArArchive(archive_);
  ASSERT_TRUE(read.ok()) << read.status();
  const size_t object_at = read->members[0].data.data() - archive_.data();
  const absl::string_view object = read->members[0].data;
  // The archive's headers and symbol table, the object's ELF header, its
  // section header table and its symbol table.
  std::vector<std::pair<size_t, size_t>> regions = {{0, object_at}, {object_at, 64}};
  Elf64_Ehdr eh;
  std::memcpy(&eh, object.data(), sizeof(eh));
  regions.push_back({object_at + eh.e_shoff, size_t{eh.e_shnum} * sizeof(Elf64_Shdr)});
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, object.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
    if (sh.sh_type == SHT_SYMTAB) regions.push_back({object_at + sh.sh_offset, sh.sh_size});
  }
  int refused = 0, loaded = 0;
  for (auto [begin, size] : regions) {
    ASSERT_LE(begin + size, archive_.size());
    for (size_t at = begin; at < begin + size; ++at) {
      for (unsigned char flip : {0x01, 0x80, 0xff}) {
        std::string bad = archive_;
        bad[at] = static_cast<char>(bad[at] ^ flip);
        auto library = LoadStaticLibrary(bad);
        if (library.ok()) {
          ++loaded;
          continue;
        }
        ++refused;
        ASSERT_EQ(library.status().code(), absl::StatusCode::kInvalidArgument)
            << "byte " << at << " ^ " << int{flip} << ": " << library.status();
      }
    }
  }
  // Most of the object's tables are bytes the reader never needs (other
  // symbols, other sections); what it reads is checked.
  EXPECT_GT(refused, 400) << loaded << " loaded";
}

}  // namespace
}  // namespace tether::compiler
