// Tests of Module: function lookup through imports, loader dispatch by magic,
// file round trips and file errors.
#include "runtime/module/module.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/file.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

// A module whose functions return a fixed tag; saved as "TSTMOD1\n" + tag.
class TagModule final : public Module {
 public:
  TagModule(std::string tag, std::vector<std::string> names)
      : tag_(std::move(tag)), names_(std::move(names)) {}
  absl::string_view type_key() const override { return "test.TagModule"; }
  absl::StatusOr<std::string> SaveToBinary() const override {
    return absl::StrCat("TSTMOD1\n", tag_);
  }
  const std::string& tag() const { return tag_; }

 protected:
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override {
    if (!ImplementsOwnFunction(name)) return absl::NotFoundError("no");
    std::string tag = tag_;
    return Function::FromTyped(std::string(name), [tag]() { return tag; });
  }
  bool ImplementsOwnFunction(absl::string_view name) const override {
    for (const std::string& n : names_) {
      if (n == name) return true;
    }
    return false;
  }

 private:
  std::string tag_;
  std::vector<std::string> names_;
};

// A module that cannot be saved and whose lookups fail with another error.
class BrokenModule final : public Module {
 public:
  absl::string_view type_key() const override { return "test.Broken"; }

 protected:
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override {
    return absl::DataLossError("library is corrupt");
  }
  bool ImplementsOwnFunction(absl::string_view) const override { return false; }
};

Ref<TagModule> Tag(std::string tag, std::vector<std::string> names) {
  return MakeRef<TagModule>(std::move(tag), std::move(names));
}

std::string CallTag(Module& m, absl::string_view name, bool query_imports) {
  absl::StatusOr<Function> f = m.GetFunction(name, query_imports);
  if (!f.ok()) return std::string(f.status().message());
  absl::StatusOr<Value> v = f->Call();
  return v.ok() ? v->string_value() : "call failed";
}

void RegisterTagLoader() {
  static bool once = [] {
    absl::Status s = RegisterModuleLoader(ModuleLoader{
        "test.TagModule", "TSTMOD1\n", [](absl::string_view bytes) -> absl::StatusOr<Ref<Module>> {
          return Ref<Module>(Tag(std::string(bytes.substr(8)), {"f"}));
        }});
    return s.ok();
  }();
  ASSERT_TRUE(once);
}

std::string TempPath(absl::string_view leaf) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/tether_module_test_", getpid(), "_", std::string(leaf));
}

TEST(ModuleTest, OwnFunctionsComeFirst) {
  Ref<TagModule> root = Tag("root", {"f"});
  root->ImportModule(Tag("import", {"f", "g"}));
  EXPECT_EQ(CallTag(*root, "f", true), "root");
  EXPECT_TRUE(root->ImplementsFunction("f"));
}

TEST(ModuleTest, ImportsAreSearchedDepthFirstOnlyWhenAsked) {
  //   root -> a -> a1 (g)
  //        -> b (g, h)
  Ref<TagModule> root = Tag("root", {});
  Ref<TagModule> a = Tag("a", {});
  a->ImportModule(Tag("a1", {"g"}));
  root->ImportModule(a);
  root->ImportModule(Tag("b", {"g", "h"}));
  EXPECT_EQ(CallTag(*root, "g", true), "a1");  // depth-first: a's subtree before b
  EXPECT_EQ(CallTag(*root, "h", true), "b");
  EXPECT_TRUE(root->ImplementsFunction("g", true));
  EXPECT_FALSE(root->ImplementsFunction("g", false));

  absl::StatusOr<Function> f = root->GetFunction("g");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.status().message(), "function g not found in module test.TagModule");

  f = root->GetFunction("zzz", true);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(),
              HasSubstr("function zzz not found in module test.TagModule or its imports"));
  EXPECT_FALSE(root->ImplementsFunction("zzz", true));
}

TEST(ModuleTest, ImportCyclesTerminate) {
  Ref<TagModule> a = Tag("a", {});
  Ref<TagModule> b = Tag("b", {});
  a->ImportModule(b);
  b->ImportModule(a);
  EXPECT_EQ(a->GetFunction("x", true).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(a->ImplementsFunction("x", true));
  // Break the cycle so both are freed.
  const_cast<std::vector<Ref<Module>>&>(b->imported_modules()).clear();
}

TEST(ModuleTest, OtherLookupErrorsAreNotMaskedAsNotFound) {
  Ref<TagModule> root = Tag("root", {});
  root->ImportModule(MakeRef<BrokenModule>());
  root->ImportModule(Tag("later", {"f"}));
  absl::StatusOr<Function> f = root->GetFunction("f", true);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
}

TEST(ModuleTest, SaveToBinaryIsUnimplementedByDefault) {
  Ref<Module> m = MakeRef<BrokenModule>();
  absl::StatusOr<std::string> bytes = m->SaveToBinary();
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(bytes.status().message(), HasSubstr("test.Broken"));
  EXPECT_EQ(m->SaveToFile(TempPath("never")).code(), absl::StatusCode::kUnimplemented);
}

TEST(ModuleTest, LoaderDispatchesOnMagic) {
  RegisterTagLoader();
  absl::StatusOr<Ref<Module>> m = Module::LoadFromBinary("TSTMOD1\nhello");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->type_key(), "test.TagModule");
  EXPECT_EQ(CallTag(**m, "f", false), "hello");

  absl::Status dup = RegisterModuleLoader(
      ModuleLoader{"test.TagModule", "OTHER", [](absl::string_view) -> absl::StatusOr<Ref<Module>> {
                     return absl::InternalError("unused");
                   }});
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterModuleLoader(ModuleLoader{"test.Empty", "", nullptr}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModuleTest, UnknownMagicIsRejected) {
  RegisterTagLoader();
  absl::StatusOr<Ref<Module>> m =
      Module::LoadFromBinary(std::string("\x7f"
                                         "ELF\x02\x01\x01\x00junk",
                                         12));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              HasSubstr("unrecognized module file: first bytes 7f 45 4c 46 02 01 01 00"));
  EXPECT_THAT(m.status().message(), HasSubstr("test.TagModule"));
  EXPECT_THAT(Module::LoadFromBinary("").status().message(), HasSubstr("(none)"));
}

TEST(ModuleTest, SaveToFileAndLoadFromFile) {
  RegisterTagLoader();
  std::string path = TempPath("tag.bin");
  ASSERT_TRUE(Tag("filed", {"f"})->SaveToFile(path).ok());
  absl::StatusOr<Ref<Module>> m = Module::LoadFromFile(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(CallTag(**m, "f", false), "filed");
  // Overwriting replaces the file atomically and leaves no temporary behind.
  ASSERT_TRUE(Tag("again", {"f"})->SaveToFile(path).ok());
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "TSTMOD1\nagain");
  unlink(path.c_str());
}

TEST(ModuleTest, MissingFileIsNotFound) {
  absl::StatusOr<Ref<Module>> m = Module::LoadFromFile(TempPath("does_not_exist"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("cannot find file"));
}

TEST(ModuleTest, ReadFileToStringLimitsAndDirectories) {
  std::string path = TempPath("big.txt");
  ASSERT_TRUE(WriteStringToFileAtomic(path, std::string(100, 'x')).ok());
  EXPECT_EQ(ReadFileToString(path, 99).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> all = ReadFileToString(path, 100);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 100u);
  unlink(path.c_str());
  EXPECT_EQ(ReadFileToString("/").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(WriteStringToFileAtomic("/nonexistent_dir_tether/x", "y").ok());
}

}  // namespace
}  // namespace tether
