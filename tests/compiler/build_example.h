// The example models (examples/*.rx) compiled with compiler::Build, for the
// compiler's tests. A failure to parse or build is a test failure, and the
// result is then null.
#ifndef TETHER_TESTS_COMPILER_BUILD_EXAMPLE_H_
#define TETHER_TESTS_COMPILER_BUILD_EXAMPLE_H_

#include <string>

#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "gtest/gtest.h"
#include "runtime/vm/executable.h"
#include "tests/testing/repo_root.h"

namespace tether::compiler {

// examples/`name` (e.g. "mlp.rx") built with `options`.
inline Ref<vm::Executable> BuildExample(const std::string& name, BuildOptions options = {}) {
  auto module = ParseModuleFile(tether::testing::RepoRoot() + "/examples/" + name);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return Ref<vm::Executable>();
  auto exec = Build(*module, options);
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? *exec : Ref<vm::Executable>();
}

inline Ref<vm::Executable> BuildMlp(BuildOptions options = {}) {
  return BuildExample("mlp.rx", std::move(options));
}

}  // namespace tether::compiler

#endif  // TETHER_TESTS_COMPILER_BUILD_EXAMPLE_H_
