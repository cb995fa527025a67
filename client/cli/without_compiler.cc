// The CLI of a tether built without the compiler (-DTETHER_BUILD_COMPILER=OFF,
// a board's build): it runs, benchmarks and profiles compiled executables,
// and says plainly that models (.rx, .onnx) must be compiled elsewhere
// (`tether compile MODEL --target ...` on a machine with the compiler).
// CMake builds this file instead of compile_command.cc and model_loader.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"

namespace tether::cli {
namespace {

absl::Status NoCompiler(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what,
                   " needs the compiler, and this tether was built without it "
                   "(TETHER_BUILD_COMPILER=OFF): compile the model on a machine that has it "
                   "(tether compile MODEL --target ... -o model.tx) and run the executable here"));
}

}  // namespace

int RunCompile(const std::vector<std::string>& args) {
  return Fail("compile", NoCompiler("tether compile"));
}

std::string CompilerVersion() { return ""; }

absl::StatusOr<std::string> LoadOrCompileExecutable(const std::string& path,
                                                    const ModelOptions& options) {
  if (IsModelSource(path)) return NoCompiler(absl::StrCat("running ", path));
  return ReadFileToString(path);
}

absl::StatusOr<std::map<std::string, ModelInput>> ModelInputShapes(const std::string& path) {
  if (IsModelSource(path)) return NoCompiler(absl::StrCat("reading the inputs of ", path));
  return std::map<std::string, ModelInput>();
}

absl::StatusOr<std::vector<std::string>> ModelOutputNames(const std::string& path) {
  if (IsModelSource(path)) return NoCompiler(absl::StrCat("reading the outputs of ", path));
  return std::vector<std::string>();
}

absl::StatusOr<std::string> CompileTargetForCuda(absl::string_view compute_version) {
  return NoCompiler("choosing a compile target");
}

}  // namespace tether::cli
