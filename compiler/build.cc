// Build(): parameter binding, the pipeline, kernel code generation and VM code
// generation, in that order (see build.h). Also the `tether compile --emit`
// helpers, which stop after the step whose output they return.
#include "compiler/build.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compiler/backend/cuda/device_split.h"
#include "compiler/backend/cuda/simulate_on_cpu.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/backend/vm/vm_codegen.h"
#include "compiler/build_id.h"
#include "compiler/relax/bind.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/kernel_call.h"
#include "compiler/text/printer.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"
#include "runtime/device/host_target.h"
#include "runtime/vm/param_binding.h"

namespace tether::compiler {
namespace {

absl::Status CheckOptions(const BuildOptions& options) {
  if (options.exec_mode != "bytecode" && options.exec_mode != "compiled") {
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
  c.cache_dir = options.kernel_cache_dir;
  c.compiler_build = CompilerBuildId();
  c.cache_max_bytes = options.kernel_cache_max_bytes;
  return c;
}

// The kernel code generation's row and, for a CPU target, its parts.
void AddCodegenRows(absl::Duration wall, const CodegenStats& stats, BuildTimings* timings) {
  timings->Add(
      "kernel code generation", absl::ToDoubleSeconds(wall),
      stats.modules > 0
          ? absl::StrCat(stats.kernels, stats.kernels == 1 ? " kernel, " : " kernels, ",
                         stats.modules, stats.modules == 1 ? " module" : " modules", " on ",
                         stats.threads, stats.threads == 1 ? " thread" : " threads",
                         stats.cached > 0 ? absl::StrCat(", ", stats.cached, " from the cache")
                                          : std::string())
          : "");
  if (stats.modules == 0) return;
  timings->Add("  LLVM IR", stats.emit_seconds, "thread seconds", true);
  timings->Add("  optimization", stats.optimize_seconds, "thread seconds", true);
  timings->Add("  machine code", stats.machine_code_seconds, "thread seconds", true);
  timings->Add("  link", stats.link_seconds, "", true);
}

}  // namespace

void BuildTimings::Add(std::string step, double seconds, std::string note, bool part) {
  rows.push_back(Row{std::move(step), seconds, std::move(note), part});
}

std::string BuildTimings::Format() const {
  size_t width = 5;  // "total"
  for (const Row& r : rows) width = std::max(width, r.step.size());
  double total = 0;
  std::string out;
  for (const Row& r : rows) {
    if (!r.part) total += r.seconds;
    absl::StrAppendFormat(&out, "%-*s %8.3f s%s%s\n", static_cast<int>(width), r.step, r.seconds,
                          r.note.empty() ? "" : "   ", r.note);
  }
  absl::StrAppendFormat(&out, "%-*s %8.3f s\n", static_cast<int>(width), "total", total);
  return out;
}

std::string SourceHash(const IRModule& module) {
  std::string text = PrintModule(module);
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return absl::StrFormat("%016x", h);
}

namespace {

// Keeps the weights as parameters of `main`, after the others, and returns
// them in that order. They are checked as binding them would check them.
absl::StatusOr<ParamList> SeparateParams(Expr* main, const std::map<std::string, Tensor>& params) {
  TETHER_RETURN_IF_ERROR(BindParams(*main, params).status());
  const auto* f = main->as<FunctionNode>();
  std::vector<Expr> order;
  ParamList weights;
  for (const Expr& p : f->params) {
    if (!params.contains(p.as<VarNode>()->name_hint)) order.push_back(p);
  }
  for (const Expr& p : f->params) {
    auto it = params.find(p.as<VarNode>()->name_hint);
    if (it == params.end()) continue;
    order.push_back(p);
    weights.emplace_back(it->first, it->second);
  }
  Expr reordered =
      MakeFunction(std::move(order), f->body, f->ret_struct_info, f->is_pure, f->attrs);
  BlockBuilder bb;
  TETHER_ASSIGN_OR_RETURN(*main, bb.Normalize(reordered));
  return weights;
}

// LowerModule, and the weights separate_params kept as parameters.
absl::StatusOr<IRModule> Lower(IRModule module, const BuildOptions& options, ParamList* weights) {
  TETHER_RETURN_IF_ERROR(CheckOptions(options));
  // Kernel calls written by hand (a T.prim_func, a C++ BlockBuilder) must
  // fit their kernels; the compiler's own always do.
  TETHER_RETURN_IF_ERROR(CheckKernelCalls(module));
  if (!options.params.empty()) {
    auto it = module.functions.find("main");
    if (it == module.functions.end() || !it->second.as<FunctionNode>()) {
      return absl::InvalidArgumentError("params given but the module has no function main");
    }
    if (options.separate_params) {
      TETHER_ASSIGN_OR_RETURN(ParamList kept, SeparateParams(&it->second, options.params));
      if (weights != nullptr) *weights = std::move(kept);
    } else {
      TETHER_ASSIGN_OR_RETURN(it->second, BindParams(it->second, options.params));
    }
  }
  std::function<void(const std::string&, double)> after_pass;
  if (options.timings != nullptr) {
    after_pass = [&options](const std::string& name, double seconds) {
      options.timings->Add(name, seconds);
    };
  }
  if (options.relax_pipeline.has_value()) {
    TETHER_ASSIGN_OR_RETURN(module, options.relax_pipeline->Run(std::move(module), after_pass));
  } else {
    TETHER_ASSIGN_OR_RETURN(PipelineOptions pipeline_options, PipelineOptionsFor(options));
    TETHER_ASSIGN_OR_RETURN(Pipeline pipeline, GetPipeline(options.pipeline, pipeline_options));
    TETHER_ASSIGN_OR_RETURN(module, pipeline.Run(std::move(module), after_pass));
  }
  if (options.tir_pipeline.has_value()) {
    TETHER_ASSIGN_OR_RETURN(module, options.tir_pipeline->Run(std::move(module), after_pass));
  }
  return module;
}

vm::ParamType TypeOf(const StructInfo& sinfo) {
  vm::ParamType type;
  const auto* t = sinfo.defined() ? sinfo.as<TensorStructInfoNode>() : nullptr;
  if (t == nullptr) {
    type.is_tensor = false;
    return type;
  }
  type.dtype = t->dtype;
  if (t->shape) {
    type.dims.emplace();
    for (const PrimExpr& d : *t->shape) type.dims->push_back(AsConstInt(d));
  } else if (t->ndim >= 0) {
    type.dims.emplace(static_cast<size_t>(t->ndim), std::nullopt);
  }
  return type;
}

// The "param_types.<f>" metadata of each bytecode function of `exec`.
void RecordSignatures(const IRModule& lowered, vm::Executable* exec) {
  for (const auto& [name, fn] : lowered.functions) {
    const auto* f = fn.as<FunctionNode>();
    auto index = exec->function_map.find(name);
    if (f == nullptr || index == exec->function_map.end()) continue;
    const vm::FunctionInfo& info = exec->functions[index->second];
    if (!vm::IsVMFunction(info.kind) || info.num_args != static_cast<int64_t>(f->params.size())) {
      continue;
    }
    std::vector<vm::ParamType> types;
    for (const Expr& p : f->params) types.push_back(TypeOf(p.struct_info()));
    exec->metadata[absl::StrCat(vm::kParamTypesMetadataPrefix, name)] = vm::FormatParamTypes(types);
  }
}

// exec_mode="compiled": the functions' code is in the kernel library now;
// the functions become compiled ones (FunctionKind::kVMTIRFunc) with the
// same arity, registers and parameter names, and the bytecode goes.
void DropBytecode(vm::Executable* exec) {
  for (vm::FunctionInfo& f : exec->functions) {
    if (f.kind != vm::FunctionKind::kVMFunc) continue;
    f.kind = vm::FunctionKind::kVMTIRFunc;
    f.start_instr = f.end_instr = 0;
    // Validate() wants a compiled function's frame one larger than its arguments.
    f.register_file_size = std::max(f.register_file_size, f.num_args + 1);
  }
  exec->instr_offset.clear();
  exec->instr_data.clear();
}

}  // namespace

absl::StatusOr<PipelineOptions> PipelineOptionsFor(const BuildOptions& options) {
  TETHER_ASSIGN_OR_RETURN(Target target, Target::Parse(options.target));
  PipelineOptions pipeline;
  pipeline.target.num_threads = options.num_threads;
  pipeline.target.gpu = target.is_cuda();
  if (pipeline.target.gpu) pipeline.target.gpu_arch = target.archs.front();  // sorted: the lowest
  // "llvm" alone is this machine: its L2, unless the text names one.
  if (!target.is_cuda() && target.triple.empty() && target.l2_cache == 0) {
    target.l2_cache = ThisHostTarget().l2_cache_bytes;
  }
  pipeline.target.l2_cache_bytes = target.l2_cache;
  return pipeline;
}

absl::StatusOr<IRModule> LowerModule(IRModule module, const BuildOptions& options) {
  return Lower(std::move(module), options, nullptr);
}

absl::StatusOr<Ref<vm::Executable>> Build(IRModule module, const BuildOptions& options) {
  TETHER_ASSIGN_OR_RETURN(BuildOutput out, BuildModel(std::move(module), options));
  return std::move(out.exec);
}

absl::StatusOr<BuildOutput> BuildModel(IRModule module, const BuildOptions& options) {
  TETHER_RETURN_IF_ERROR(CheckOptions(options));
  TETHER_ASSIGN_OR_RETURN(Target target, Target::Parse(options.target));
  if (options.simulate_gpu_threads > 0 && !target.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulate_gpu_threads needs a cuda target, got \"", options.target, "\""));
  }
  std::string source_hash = SourceHash(module);
  BuildOutput out;
  TETHER_ASSIGN_OR_RETURN(IRModule lowered, Lower(std::move(module), options, &out.params));
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
  const bool compiled = options.exec_mode == "compiled";
  if (compiled && (kernel_target.is_cuda() || options.system_lib)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exec_mode \"compiled\" compiles the Relax functions into the CPU kernel library: it "
        "needs a CPU target without system_lib, got \"",
        kernel_target.ToString(), "\"", options.system_lib ? " with system_lib" : ""));
  }
  absl::Time start = absl::Now();
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, VMCodegen(lowered, {}));
  if (options.timings != nullptr) {
    options.timings->Add("VM code generation", absl::ToDoubleSeconds(absl::Now() - start));
  }
  if (!kernels.empty() || compiled) {
    CodegenOptions codegen = KernelOptions(options);
    if (compiled) codegen.vm_functions = exec.get();
    CodegenStats stats;
    codegen.stats = &stats;
    start = absl::Now();
    TETHER_ASSIGN_OR_RETURN(vm::KernelLibraryBlob lib,
                            BuildKernelLibrary(kernels, kernel_target, codegen));
    exec->kernel_libraries.push_back(std::move(lib));
    if (options.timings != nullptr) AddCodegenRows(absl::Now() - start, stats, options.timings);
  }
  if (compiled) DropBytecode(exec.get());
  exec->metadata["target"] = kernel_target.ToString();
  if (options.simulate_gpu_threads > 0) {
    exec->metadata["simulated_target"] =
        absl::StrCat(target.ToString(), " (", options.simulate_gpu_threads, " threads)");
  }
  exec->metadata["source_hash"] = source_hash;
  if (compiled) exec->metadata["exec_mode"] = "compiled";
  exec->metadata["compiler_version"] = kCompilerVersion;
  exec->metadata["compiler_build"] = CompilerBuildId();
  exec->metadata["pipeline"] =
      options.relax_pipeline.has_value()
          ? absl::StrCat("custom: ", absl::StrJoin(options.relax_pipeline->PassNames(), ", "))
          : options.pipeline;
  if (options.tir_pipeline.has_value()) {
    exec->metadata["tir_pipeline"] = absl::StrJoin(options.tir_pipeline->PassNames(), ", ");
  }
  RecordSignatures(lowered, exec.get());
  out.exec = std::move(exec);
  return out;
}

absl::Status CompileVMFunctions(vm::Executable* exec, const std::string& target) {
  TETHER_ASSIGN_OR_RETURN(
      Target cpu, target.empty() ? absl::StatusOr<Target>(Target::Host()) : Target::Parse(target));
  if (cpu.is_cuda()) {
    return absl::InvalidArgumentError("compiled VM functions need a CPU target, got cuda");
  }
  CodegenOptions codegen;
  codegen.vm_functions = exec;
  TETHER_ASSIGN_OR_RETURN(vm::KernelLibraryBlob lib, BuildKernelLibrary({}, cpu, codegen));
  exec->kernel_libraries.push_back(std::move(lib));
  DropBytecode(exec);
  exec->metadata["exec_mode"] = "compiled";
  return absl::OkStatus();
}

absl::Status ExportLibrary(vm::Executable* exec, const std::string& path,
                           const std::string& host_target) {
  bool has_cpu_library = false;
  for (const vm::KernelLibraryBlob& lib : exec->kernel_libraries) {
    if (lib.format == "static") {
      return absl::FailedPreconditionError(
          "a system-library executable is not exported as a shared library: its kernels are the "
          "archive that `tether compile --system-lib` wrote, linked into the program");
    }
    has_cpu_library |= lib.format == "so";
  }
  if (!has_cpu_library) {
    TETHER_ASSIGN_OR_RETURN(Target host, host_target.empty()
                                             ? absl::StatusOr<Target>(Target::Host())
                                             : Target::Parse(host_target));
    if (host.is_cuda()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the library's host target must be a CPU target, got \"", host_target, "\""));
    }
    TETHER_ASSIGN_OR_RETURN(vm::KernelLibraryBlob carrier, BuildKernelLibrary({}, host));
    exec->kernel_libraries.push_back(std::move(carrier));
  }
  return exec->ExportLibrary(path);
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
