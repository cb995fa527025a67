// The compiler side of the CLI's model loading (model_loader.cc, built only
// with the compiler): what `tether compile` needs beyond commands.h.
#ifndef TETHER_CLIENT_CLI_MODEL_LOADER_H_
#define TETHER_CLIENT_CLI_MODEL_LOADER_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli/commands.h"
#include "compiler/relax/module.h"
#include "runtime/core/tensor.h"

namespace tether::cli {

// A Relax module from a .rx or .onnx file (the ONNX graph inputs fixed by
// options.shapes), for `tether compile`. With options.separate_params an
// ONNX model's initializers stay parameters of main, their values in
// *weights (when given).
absl::StatusOr<compiler::IRModule> LoadModelSource(
    const std::string& path, const ModelOptions& options,
    std::map<std::string, Tensor>* weights = nullptr);

// The kernel object cache's folder (compiler::BuildOptions::kernel_cache_dir):
// "kernels" in the compile cache's folder (commands.h ModelOptions), or ""
// when no home is known.
std::string KernelCacheDir();

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_MODEL_LOADER_H_
