// Tests of the system library: registration, lookup, and independent prefixes
// (reference test_multi_systemlib).
#include "runtime/module/system_lib.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

int kernel_a = 0;
int kernel_b = 0;

TEST(SystemLibTest, TwoPrefixesAreIndependent) {
  RegisterSystemLibFunction("libA_", "main",
                            Function::FromTyped("main", [](int64_t x) { return x + 1; }));
  RegisterSystemLibFunction("libB_", "main",
                            Function::FromTyped("main", [](int64_t x) { return x * 10; }));
  RegisterSystemLibFunction("libB_", "only_b", Function::FromTyped("only_b", []() { return 7; }));

  Ref<Module> a = SystemLib("libA_");
  Ref<Module> b = SystemLib("libB_");
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(a->type_key(), "system_lib");

  absl::StatusOr<Function> fa = a->GetFunction("main");
  absl::StatusOr<Function> fb = b->GetFunction("main");
  ASSERT_TRUE(fa.ok()) << fa.status();
  ASSERT_TRUE(fb.ok()) << fb.status();
  EXPECT_EQ(fa->Call(int64_t{4})->int_value(), 5);
  EXPECT_EQ(fb->Call(int64_t{4})->int_value(), 40);

  EXPECT_TRUE(b->ImplementsFunction("only_b"));
  EXPECT_FALSE(a->ImplementsFunction("only_b"));
  absl::StatusOr<Function> missing = a->GetFunction("only_b");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("only_b"));

  // The same prefix gives the same module.
  EXPECT_EQ(SystemLib("libA_").get(), a.get());
}

TEST(SystemLibTest, RawSymbolsAreStoredAndExposed) {
  EXPECT_EQ(TetherSystemLibRegister("libA_", "kernel", &kernel_a), 0);
  EXPECT_EQ(TetherSystemLibRegister("libB_", "kernel", &kernel_b), 0);
  EXPECT_EQ(TetherSystemLibRegister("libB_", nullptr, &kernel_b), -1);
  auto* a = static_cast<SystemLibModule*>(SystemLib("libA_").get());
  auto* b = static_cast<SystemLibModule*>(SystemLib("libB_").get());
  EXPECT_EQ(a->GetSymbol("kernel"), &kernel_a);
  EXPECT_EQ(b->GetSymbol("kernel"), &kernel_b);
  EXPECT_EQ(a->GetSymbol("nope"), nullptr);
  EXPECT_TRUE(a->ImplementsFunction("kernel"));
  // No kernel ABI yet: a raw symbol is not callable.
  EXPECT_EQ(a->GetFunction("kernel").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(a->ListSymbols(), ::testing::Contains("kernel"));
}

TEST(SystemLibTest, DefaultPrefixAndLateRegistration) {
  Ref<Module> lib = SystemLib();
  EXPECT_FALSE(lib->ImplementsFunction("late_fn"));
  RegisterSystemLibFunction("", "late_fn", Function::FromTyped("late_fn", []() { return 1; }));
  EXPECT_TRUE(lib->ImplementsFunction("late_fn"));
  EXPECT_TRUE(UnregisterSystemLibSymbol("", "late_fn"));
  EXPECT_FALSE(UnregisterSystemLibSymbol("", "late_fn"));
  EXPECT_FALSE(lib->ImplementsFunction("late_fn"));
}

TEST(SystemLibTest, ImportedSystemLibIsSearched) {
  RegisterSystemLibFunction("libC_", "deep", Function::FromTyped("deep", []() { return 3; }));
  Ref<Module> outer = SystemLib("libC_outer_");
  outer->ImportModule(SystemLib("libC_"));
  absl::StatusOr<Function> f = outer->GetFunction("deep", /*query_imports=*/true);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->Call()->int_value(), 3);
}

}  // namespace
}  // namespace tether
