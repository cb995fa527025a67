// The kernel object cache (compiler/backend/llvm/object_cache.h): shared
// objects built through it are the same bytes as without it, a second build
// takes every module from it, damaged entries are compiled again, the key
// follows the target and the code, and the folder stays under its bound.
#include "compiler/backend/llvm/object_cache.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/backend/llvm/jit.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/tir/kernel_ir.h"
#include "gtest/gtest.h"
#include "runtime/kernel/kernel_library.h"

namespace tether::compiler {
namespace {

namespace fs = std::filesystem;

const DataType kF32 = DataType::Float(32);

// A fresh folder under the test's temporary directory, removed afterwards.
class TempFolder {
 public:
  TempFolder() {
    std::string templ = (fs::temp_directory_path() / "tether-object-cache-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      ADD_FAILURE() << "cannot create a temporary folder from " << templ;
      return;
    }
    path_ = templ;
  }
  ~TempFolder() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Y[i] = op(X[i]) over a symbolic n, named `name`.
KernelFunc Unary(const std::string& name, const std::string& op) {
  Var n("n");
  Buffer x = MakeBuffer("X", kF32, {n});
  Buffer y = MakeBuffer("Y", kF32, {n});
  Var i("i");
  Stmt body = For(i, 0, n, ForKind::kVectorized, Store(y, {i}, Call(kF32, op, {Load(x, {i})})));
  return MakeKernelFunc(name, {KernelParam::Tensor(x), KernelParam::Tensor(y)}, body);
}

std::vector<KernelFunc> Kernels() {
  return {Unary("k_exp", "exp"), Unary("k_sqrt", "sqrt"), Unary("k_tanh", "tanh")};
}

struct Built {
  std::string data;
  vm::KernelLibraryBlob blob;
  CodegenStats stats;
};
Built Build(const std::vector<KernelFunc>& kernels, const std::string& cache_dir,
            Target target = Target::Host()) {
  Built out;
  CodegenOptions options;
  options.threads = 2;
  options.cache_dir = cache_dir;
  options.compiler_build = "test build";
  options.stats = &out.stats;
  absl::StatusOr<vm::KernelLibraryBlob> blob = BuildKernelLibrary(kernels, target, options);
  EXPECT_TRUE(blob.ok()) << blob.status();
  if (blob.ok()) {
    out.data = blob->data;
    out.blob = std::move(*blob);
  }
  return out;
}

std::vector<fs::path> Entries(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".o") out.push_back(e.path());
  }
  return out;
}

TEST(KernelObjectCacheTest, SecondBuildTakesEveryModuleFromTheCache) {
  TempFolder dir;
  const Built uncached = Build(Kernels(), "");
  const Built first = Build(Kernels(), dir.path());
  EXPECT_EQ(first.stats.modules, 4);  // three kernels and the library's own
  EXPECT_EQ(first.stats.cached, 0);
  EXPECT_GT(first.stats.optimize_seconds, 0);
  EXPECT_EQ(Entries(dir.path()).size(), 4u);
  const Built second = Build(Kernels(), dir.path());
  EXPECT_EQ(second.stats.cached, 4);
  EXPECT_EQ(second.stats.optimize_seconds, 0);
  EXPECT_EQ(second.stats.machine_code_seconds, 0);
  // The same library, whichever way its objects came.
  EXPECT_EQ(first.data, uncached.data);
  EXPECT_EQ(second.data, uncached.data);
  absl::StatusOr<Ref<Module>> lib = LoadKernelLibrary(second.blob);
  ASSERT_TRUE(lib.ok()) << lib.status();
  const float xv[] = {1, 4, 9};
  const int64_t shape[] = {3};
  absl::StatusOr<Tensor> x = Tensor::FromBytes(shape, kF32, xv, sizeof(xv));
  absl::StatusOr<Tensor> y = Tensor::Empty(shape, kF32, Device::Cpu());
  ASSERT_TRUE(x.ok() && y.ok());
  absl::StatusOr<Function> f = (*lib)->GetFunction("k_sqrt");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->Call(*x, *y).ok());
  float yv[3];
  ASSERT_TRUE(y->CopyToBytes(yv, sizeof(yv)).ok());
  EXPECT_EQ(yv[0], 1);
  EXPECT_EQ(yv[1], 2);
  EXPECT_EQ(yv[2], 3);
}

// Another set of kernels shares the entries of the kernels it has in common
// (each kernel is its own module); a kernel changed in one operation is not
// one of them.
TEST(KernelObjectCacheTest, KernelsAreSharedAcrossLibraries) {
  TempFolder dir;
  Build(Kernels(), dir.path());
  const Built other = Build({Unary("k_exp", "exp"), Unary("k_sqrt", "log")}, dir.path());
  EXPECT_EQ(other.stats.modules, 3);
  EXPECT_EQ(other.stats.cached, 1);  // k_exp; k_sqrt computes log now; the manifest differs
}

TEST(KernelObjectCacheTest, DamagedEntriesAreCompiledAgain) {
  TempFolder dir;
  const Built first = Build(Kernels(), dir.path());
  std::vector<fs::path> entries = Entries(dir.path());
  ASSERT_EQ(entries.size(), 4u);
  // One entry loses its last byte; another has a byte of its object flipped
  // (its size still right, so only the checksum can tell).
  fs::resize_file(entries[0], fs::file_size(entries[0]) - 1);
  {
    std::fstream f(entries[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-10, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  const Built second = Build(Kernels(), dir.path());
  EXPECT_EQ(second.stats.cached, 2);
  EXPECT_EQ(second.data, first.data);
  // Stored anew: the next build has them all.
  EXPECT_EQ(Build(Kernels(), dir.path()).stats.cached, 4);
}

TEST(KernelObjectCacheTest, KeyFollowsTargetOptimizationAndCode) {
  const std::string base = KernelObjectCache::Key("b", "x86_64-unknown-linux-gnu", "znver4",
                                                  "+avx512f", 3, "define void @k() { ret void }");
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, KernelObjectCache::Key("b", "x86_64-unknown-linux-gnu", "znver4", "+avx512f", 3,
                                         "define void @k() { ret void }"));
  EXPECT_NE(base, KernelObjectCache::Key("another build", "x86_64-unknown-linux-gnu", "znver4",
                                         "+avx512f", 3, "define void @k() { ret void }"));
  EXPECT_NE(base, KernelObjectCache::Key("b", "aarch64-unknown-linux-gnu", "znver4", "+avx512f", 3,
                                         "define void @k() { ret void }"));
  EXPECT_NE(base, KernelObjectCache::Key("b", "x86_64-unknown-linux-gnu", "skylake", "+avx512f", 3,
                                         "define void @k() { ret void }"));
  EXPECT_NE(base, KernelObjectCache::Key("b", "x86_64-unknown-linux-gnu", "znver4", "-avx512f", 3,
                                         "define void @k() { ret void }"));
  EXPECT_NE(base, KernelObjectCache::Key("b", "x86_64-unknown-linux-gnu", "znver4", "+avx512f", 2,
                                         "define void @k() { ret void }"));
  EXPECT_NE(base, KernelObjectCache::Key("b", "x86_64-unknown-linux-gnu", "znver4", "+avx512f", 3,
                                         "define void @j() { ret void }"));
  // Fields are delimited: moving text from one field to the next changes the key.
  EXPECT_NE(KernelObjectCache::Key("b", "ab", "c", "", 3, ""),
            KernelObjectCache::Key("b", "a", "bc", "", 3, ""));

  // A build for another CPU compiles its own objects.
  TempFolder dir;
  Build(Kernels(), dir.path());
  absl::StatusOr<Target> generic = Target::Parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64");
  ASSERT_TRUE(generic.ok()) << generic.status();
  EXPECT_EQ(Build(Kernels(), dir.path(), *generic).stats.cached, 0);
  EXPECT_EQ(Build(Kernels(), dir.path(), *generic).stats.cached, 4);
}

TEST(KernelObjectCacheTest, TrimEvictsLeastRecentlyUsedFirst) {
  TempFolder dir;
  const std::string object(1000, 'o');
  const int64_t entry = 1000 + 48;  // the object and its header
  KernelObjectCache cache(dir.path(), 2 * entry + entry / 2);
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  for (const std::string* k : {&a, &b, &c}) cache.Put(*k, object);
  // Oldest first: a, b, c; then a is used, so b and c are the least recent.
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(dir.path() + "/aa/" + a + ".o", now - std::chrono::hours(3));
  fs::last_write_time(dir.path() + "/bb/" + b + ".o", now - std::chrono::hours(2));
  fs::last_write_time(dir.path() + "/cc/" + c + ".o", now - std::chrono::hours(1));
  ASSERT_TRUE(cache.Get(a).has_value());
  // A writer's temporary file left an hour ago goes; a recent one stays.
  const std::string stale = dir.path() + "/aa/x.o.tmp.1.1", fresh = dir.path() + "/aa/y.o.tmp.2.2";
  std::ofstream(stale) << "x";
  std::ofstream(fresh) << "y";
  fs::last_write_time(stale, now - std::chrono::hours(2));
  cache.Trim();  // 3 entries > 2.5: down to 3/4 of the bound, 1 entry
  EXPECT_TRUE(cache.Get(a).has_value());
  EXPECT_FALSE(cache.Get(b).has_value());
  EXPECT_FALSE(cache.Get(c).has_value());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
  // Under the bound, nothing goes.
  cache.Put(b, object);
  cache.Trim();
  EXPECT_TRUE(cache.Get(a).has_value());
  EXPECT_TRUE(cache.Get(b).has_value());
}

// Without the compiler's build ID the cache is not used: its objects could
// be another build's.
TEST(KernelObjectCacheTest, NoCompilerBuildNoCache) {
  TempFolder dir;
  CodegenOptions options;
  options.cache_dir = dir.path();
  absl::StatusOr<vm::KernelLibraryBlob> blob =
      BuildKernelLibrary(Kernels(), Target::Host(), options);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_TRUE(Entries(dir.path()).empty());
}

// A folder that cannot be made leaves the build as it was.
TEST(KernelObjectCacheTest, UnusableFolderIsNoCache) {
  TempFolder dir;
  const std::string file = dir.path() + "/a-file";
  std::ofstream(file) << "not a folder";
  const Built built = Build(Kernels(), file + "/cache");
  EXPECT_EQ(built.stats.cached, 0);
  EXPECT_EQ(built.data, Build(Kernels(), "").data);
  EXPECT_EQ(Build(Kernels(), file + "/cache").stats.cached, 0);
}

}  // namespace
}  // namespace tether::compiler
