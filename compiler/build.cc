// Build(): parameter binding, the pipeline, kernel code generation and VM code
// generation, in that order (see build.h). Also the `tether compile --emit`
// helpers, which stop after the step whose output they return.
#include "compiler/build.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/backend/cuda/device_split.h"
#include "compiler/backend/cuda/simulate_on_cpu.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/backend/vm/vm_codegen.h"
#include "compiler/relax/bind.h"
#include "compiler/relax/kernel_call.h"
#include "compiler/relax/kernel_call.h"
#include "compiler/text/printer.h"
#include "compiler/transform/pipeline.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

absl::Status CheckOptions(const BuildOptions& options) {
  if (options.exec_mode == "compiled") {
    return absl::UnimplementedError(
        "exec_mode \"compiled\" (native Relax functions) is not implemented; use \"bytecode\"");
  }
  if (options.exec_mode != "bytecode") {
    return absl::InvalidArgumentError(absl::StrCat("unknown exec_mode \"", options.exec_mode,
                                                   "\"; expected \"bytecode\" or \"compiled\""));
  }
  if (options.simulate_gpu_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulate_gpu_threads must be >= 0, got ", options.simulate_gpu_threads));
  }
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 0, got ", options.num_threads));
  }
  return absl::OkStatus();
}

std::vector<KernelFunc> Kernels(const IRModule& module) {
  std::vector<KernelFunc> kernels;
  for (const auto& [name, k] : module.kernels) kernels.push_back(k);
  return kernels;
}

CodegenOptions KernelOptions(const BuildOptions& options) {
  CodegenOptions c;
  c.system_lib = options.system_lib;
  c.system_lib_prefix = options.system_lib_prefix;
  return c;
}

}  // namespace

std::string SourceHash(const IRModule& module) {
  std::string text = PrintModule(module);
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return absl::StrFormat("%016x", h);
}

absl::StatusOr<IRModule> LowerModule(IRModule module, const BuildOptions& options) {
  TETHER_RETURN_IF_ERROR(CheckOptions(options));
  // Kernel calls written by hand (a T.prim_func, a C++ BlockBuilder) must
  // fit their kernels; the compiler's own always do.
  TETHER_RETURN_IF_ERROR(CheckKernelCalls(module));
  if (!options.params.empty()) {
    auto it = module.functions.find("main");
    if (it == module.functions.end() || !it->second.as<FunctionNode>()) {
      return absl::InvalidArgumentError("params given but the module has no function main");
    }
    TETHER_ASSIGN_OR_RETURN(it->second, BindParams(it->second, options.params));
  }
  TETHER_ASSIGN_OR_RETURN(Target target, Target::Parse(options.target));
  PipelineOptions pipeline;
  pipeline.target.num_threads = options.num_threads;
  pipeline.target.gpu = target.is_cuda();
  if (pipeline.target.gpu) pipeline.target.gpu_arch = target.archs.front();  // sorted: the lowest
  return RunPipeline(std::move(module), options.pipeline, pipeline);
}

absl::StatusOr<Ref<vm::Executable>> Build(IRModule module, const BuildOptions& options) {
  TETHER_RETURN_IF_ERROR(CheckOptions(options));
  TETHER_ASSIGN_OR_RETURN(Target target, Target::Parse(options.target));
  if (options.simulate_gpu_threads > 0 && !target.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulate_gpu_threads needs a cuda target, got \"", options.target, "\""));
  }
  std::string source_hash = SourceHash(module);
  TETHER_ASSIGN_OR_RETURN(IRModule lowered, LowerModule(std::move(module), options));
  std::vector<vm::KernelLibraryBlob> libraries;
  std::vector<KernelFunc> kernels = Kernels(lowered);
  Target kernel_target = target;
  if (options.simulate_gpu_threads > 0) {
    for (KernelFunc& k : kernels) {
      TETHER_ASSIGN_OR_RETURN(DeviceKernel device, SplitForDevice(k));
      k = SimulateOnCpu(device, options.simulate_gpu_threads);
      lowered.kernels[k->name] = k;
    }
    kernel_target = Target();
  }
  if (!kernels.empty()) {
    TETHER_ASSIGN_OR_RETURN(vm::KernelLibraryBlob lib,
                            BuildKernelLibrary(kernels, kernel_target, KernelOptions(options)));
    libraries.push_back(std::move(lib));
  }
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, VMCodegen(lowered, std::move(libraries)));
  exec->metadata["target"] = kernel_target.ToString();
  if (options.simulate_gpu_threads > 0) {
    exec->metadata["simulated_target"] =
        absl::StrCat(target.ToString(), " (", options.simulate_gpu_threads, " threads)");
  }
  exec->metadata["source_hash"] = source_hash;
  exec->metadata["compiler_version"] = kCompilerVersion;
  exec->metadata["pipeline"] = options.pipeline;
  return exec;
}

absl::StatusOr<std::string> EmitLoweredIR(IRModule module, const BuildOptions& options) {
  TETHER_ASSIGN_OR_RETURN(IRModule lowered, LowerModule(std::move(module), options));
  return PrintModule(lowered);
}

absl::StatusOr<std::string> EmitBytecode(IRModule module, const BuildOptions& options) {
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, Build(std::move(module), options));
  return exec->AsText();
}

absl::StatusOr<std::string> EmitKernelAssembly(IRModule module, const BuildOptions& options) {
  TETHER_ASSIGN_OR_RETURN(Target target, Target::Parse(options.target));
  TETHER_ASSIGN_OR_RETURN(IRModule lowered, LowerModule(std::move(module), options));
  std::vector<KernelFunc> kernels = Kernels(lowered);
  if (kernels.empty()) return std::string("; no kernels\n");
  return EmitAssembly(kernels, target);
}

}  // namespace tether::compiler
