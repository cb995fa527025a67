// examples/mlp.rx compiled with compiler::Build, for the tests of what an
// executable becomes outside the VM (exported and static libraries). A
// failure to parse or build is a test failure, and the result is then null.
#ifndef TETHER_TESTS_COMPILER_BUILD_MLP_H_
#define TETHER_TESTS_COMPILER_BUILD_MLP_H_

#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "gtest/gtest.h"
#include "runtime/vm/executable.h"
#include "tests/testing/repo_root.h"

namespace tether::compiler {

inline Ref<vm::Executable> BuildMlp(BuildOptions options = {}) {
  auto module = ParseModuleFile(tether::testing::RepoRoot() + "/examples/mlp.rx");
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return Ref<vm::Executable>();
  auto exec = Build(*module, options);
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? *exec : Ref<vm::Executable>();
}

}  // namespace tether::compiler

#endif  // TETHER_TESTS_COMPILER_BUILD_MLP_H_
