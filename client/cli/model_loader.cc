// Model files to executables for the CLI: .tx files are read, .rx files are
// parsed and built, .onnx files are imported and built through an on-disk
// compile cache. Also the notice that long steps print on stderr.
#include "client/cli/model_loader.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/commands.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/build.h"
#include "compiler/build_id.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/text/parser.h"
#include "proto/codec/sha256.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/module/module.h"
#include "runtime/vm/executable.h"

namespace tether::cli {
namespace {

bool IsOnnx(const std::string& path) { return absl::EndsWith(path, ".onnx"); }
bool IsRelax(const std::string& path) { return absl::EndsWith(path, ".rx"); }

// The compile cache's folder, or "" when no home is known.
std::filesystem::path CacheDir() {
  if (const char* d = std::getenv("TETHER_CACHE_DIR"); d != nullptr && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d != nullptr && *d) {
    return std::filesystem::path(d) / "tether";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) {
    return std::filesystem::path(h) / ".cache" / "tether";
  }
  return {};
}

// What a cached build depends on: the model bytes, the target, the fixed
// shapes and the compiler — its build, not only its version, so that a
// rebuilt or upgraded tether never runs the old compiler's executables.
std::string CacheKey(absl::string_view model_bytes, const ModelOptions& options) {
  std::string key =
      absl::StrCat(rpc::Sha256Hex(model_bytes), "\n", options.target, "\n",
                   compiler::kCompilerVersion, "\n", compiler::CompilerBuildId(), "\n");
  if (options.separate_params) key += "separate-params\n";
  if (options.exec_mode != "bytecode") absl::StrAppend(&key, "exec_mode=", options.exec_mode, "\n");
  for (const auto& [name, dims] : options.shapes) {
    absl::StrAppend(&key, name, "=", absl::StrJoin(dims, "x"), "\n");
  }
  return rpc::Sha256Hex(key);
}

// With options.separate_params the initializers stay parameters of main,
// their values in *weights.
absl::StatusOr<compiler::IRModule> ImportOnnx(const std::string& path, absl::string_view bytes,
                                              const ModelOptions& options,
                                              std::map<std::string, Tensor>* weights) {
  compiler::onnx_frontend::OnnxImportOptions import;
  import.input_shapes = options.shapes;
  import.keep_params_in_input = options.separate_params;
  std::string base = std::filesystem::path(path).parent_path().string();
  absl::StatusOr<compiler::onnx_frontend::ImportedModel> model =
      compiler::onnx_frontend::ImportOnnxBytes(bytes, import, base.empty() ? "." : base);
  if (!model.ok()) {
    // Same code and payload, the file named first.
    absl::Status named(model.status().code(), absl::StrCat(path, ": ", model.status().message()));
    model.status().ForEachPayload(
        [&](absl::string_view url, const absl::Cord& payload) { named.SetPayload(url, payload); });
    return named;
  }
  if (weights != nullptr) *weights = std::move(model->params);
  return std::move(model->module);
}

// The executable's bytes; `weights` stay parameters of main with
// options.separate_params (an ONNX model's initializers).
absl::StatusOr<std::string> BuildToBytes(compiler::IRModule module, const std::string& path,
                                         const ModelOptions& options,
                                         std::map<std::string, Tensor> weights = {}) {
  SlowWorkNotice notice(absl::StrCat("compiling ", path), options.quiet);
  compiler::BuildOptions build;
  build.target = options.target;
  build.separate_params = options.separate_params;
  build.exec_mode = options.exec_mode;
  build.params = std::move(weights);
  if (options.use_cache) build.kernel_cache_dir = KernelCacheDir();
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, compiler::Build(std::move(module), build));
  return exec->SaveToBytes();
}

// Writes `bytes` to `file` through a temporary file and a rename, so a
// concurrent reader sees the old file or the whole new one.
void WriteCacheFile(const std::filesystem::path& file, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) return;  // the cache is an optimization: no cache, no error
  std::filesystem::path tmp = file;
  tmp += absl::StrCat(".tmp", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

absl::StatusOr<std::string> CompileOnnx(const std::string& path, const ModelOptions& options) {
  TETHER_ASSIGN_OR_RETURN(std::string model, ReadFileToString(path));
  std::filesystem::path dir = CacheDir();
  std::filesystem::path cached;
  if (options.use_cache && !dir.empty()) {
    cached = dir / "compiled" / (CacheKey(model, options) + ".tx");
    if (absl::StatusOr<std::string> hit = ReadFileToString(cached.string()); hit.ok()) {
      // A damaged entry is rebuilt, not trusted.
      if (vm::Executable::LoadFromBytes(*hit).ok()) return *hit;
    }
  }
  std::map<std::string, Tensor> weights;
  TETHER_ASSIGN_OR_RETURN(compiler::IRModule module, ImportOnnx(path, model, options, &weights));
  TETHER_ASSIGN_OR_RETURN(std::string bytes,
                          BuildToBytes(std::move(module), path, options, std::move(weights)));
  if (!cached.empty()) WriteCacheFile(cached, bytes);
  return bytes;
}

}  // namespace

std::string CompilerVersion() { return compiler::kCompilerVersion; }

std::string KernelCacheDir() {
  std::filesystem::path dir = CacheDir();
  return dir.empty() ? std::string() : (dir / "kernels").string();
}

absl::StatusOr<std::string> LoadOrCompileExecutable(const std::string& path,
                                                    const ModelOptions& options) {
  if (IsOnnx(path)) return CompileOnnx(path, options);
  if (!IsRelax(path)) return ReadFileToString(path);
  TETHER_ASSIGN_OR_RETURN(compiler::IRModule module, compiler::ParseModuleFile(path));
  return BuildToBytes(std::move(module), path, options);
}

absl::StatusOr<compiler::IRModule> LoadModelSource(const std::string& path,
                                                   const ModelOptions& options,
                                                   std::map<std::string, Tensor>* weights) {
  if (!IsOnnx(path)) return compiler::ParseModuleFile(path);
  TETHER_ASSIGN_OR_RETURN(std::string model, ReadFileToString(path));
  return ImportOnnx(path, model, options, weights);
}

absl::StatusOr<std::map<std::string, ModelInput>> ModelInputShapes(const std::string& path) {
  std::map<std::string, ModelInput> out;
  if (!IsOnnx(path)) return out;
  TETHER_ASSIGN_OR_RETURN(std::string model, ReadFileToString(path));
  TETHER_ASSIGN_OR_RETURN(std::vector<compiler::onnx_frontend::OnnxInputInfo> inputs,
                          compiler::onnx_frontend::ReadOnnxInputs(model));
  for (compiler::onnx_frontend::OnnxInputInfo& in : inputs) {
    out[in.name] = {std::move(in.shape), std::move(in.dim_names), in.dtype};
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ModelOutputNames(const std::string& path) {
  if (!IsOnnx(path)) return std::vector<std::string>();
  TETHER_ASSIGN_OR_RETURN(std::string model, ReadFileToString(path));
  return compiler::onnx_frontend::ReadOnnxOutputNames(model);
}

absl::StatusOr<std::string> CompileTargetForCuda(absl::string_view compute_version) {
  return compiler::CudaTargetFor(compute_version);
}

}  // namespace tether::cli
