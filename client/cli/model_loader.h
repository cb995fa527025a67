// The compiler side of the CLI's model loading (model_loader.cc, built only
// with the compiler): what `tether compile` needs beyond commands.h.
#ifndef TETHER_CLIENT_CLI_MODEL_LOADER_H_
#define TETHER_CLIENT_CLI_MODEL_LOADER_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/cli/commands.h"
#include "compiler/relax/module.h"

namespace tether::cli {

// A Relax module from a .rx or .onnx file (the ONNX graph inputs fixed by
// options.shapes), for `tether compile`.
absl::StatusOr<compiler::IRModule> LoadModelSource(const std::string& path,
                                                   const ModelOptions& options);

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_MODEL_LOADER_H_
