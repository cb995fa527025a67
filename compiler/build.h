// Build(): the compiler's front door, as tvm.relax.build. A parsed (or
// imported) IRModule goes through parameter binding, a named pipeline of
// passes (compiler/transform/pipeline.h), kernel code generation for the
// target (compiler/backend/llvm/), and VM code generation
// (compiler/backend/vm/vm_codegen.h), and comes out as an Executable the local
// VM or any tetherd can run. The emit helpers return the intermediate forms
// for `tether compile --emit`.
//
// Thread contract: the functions are thread-safe (they share nothing but the
// operator registry and LLVM, which codegen serializes where it must).
#ifndef TETHER_COMPILER_BUILD_H_
#define TETHER_COMPILER_BUILD_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"
#include "compiler/transform/pipeline.h"
#include "runtime/core/tensor.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/executable.h"

namespace tether::compiler {

// The version recorded in every executable's "compiler_version" metadata.
inline constexpr char kCompilerVersion[] = "tether-compiler 0.1.0";

// Where a build's time went (`tether compile --time-passes`): one row per
// step, in order, with its wall seconds. The kernel code generation's parts
// are thread seconds summed over the shards it compiled in parallel.
struct BuildTimings {
  struct Row {
    std::string step;
    double seconds = 0;
    std::string note;   // e.g. "68 kernels, 2 shards"
    bool part = false;  // a part of the row before it, not counted in the total
  };
  std::vector<Row> rows;
  void Add(std::string step, double seconds, std::string note = "", bool part = false);
  // The rows as an aligned table, ending with the total of the steps.
  std::string Format() const;
};

struct BuildOptions {
  // "llvm" (the host), "llvm -mtriple=... -mcpu=... -mattr=..." or
  // "cuda -arch=sm_90[,sm_80...]" (compiler/backend/llvm/target.h). With cuda every
  // kernel runs on the GPU: the executable's kernel library is PTX (format
  // "ptx") and its VM must be created on a cuda device.
  std::string target = "llvm";
  // A pipeline of compiler/transform/pipeline.h: "default" or "zero".
  std::string pipeline = "default";
  // TVM's relax_pipeline: a pipeline of the caller's, typically
  // GetPipeline(name, PipelineOptionsFor(options)) with passes spliced in;
  // it replaces `pipeline` and must end in the lowered form (every call a
  // kernel call, memory planned), as the named pipelines do.
  std::optional<Pipeline> relax_pipeline;
  // TVM's tir_pipeline: passes run on the lowered module before its kernels
  // are compiled (KernelPass applies a function to every kernel). None by
  // default: the kernel optimizations live in code generation.
  std::optional<Pipeline> tir_pipeline;
  // Weights bound into "main" by parameter name (BindParams): they become
  // constants and disappear from main's parameters...
  std::map<std::string, Tensor> params;
  // ...unless separate_params (TVM's keep_params_in_input): then they stay
  // parameters of main, moved after the others (in main's order), and
  // BuildModel returns them as the param dict that ships beside the
  // executable (`tether compile --separate-params`; a VM created with it
  // fills them, runtime/vm/param_binding.h). Each must name a parameter of
  // main and fit its struct info, as when binding.
  bool separate_params = false;
  // "bytecode": the interpreter runs the functions. "compiled" (TVM's
  // exec_mode="compiled"): each Relax function is also compiled to native
  // code, "__vmtir__<f>" in the CPU kernel library
  // (backend/llvm/vm_function_emitter.h), declared FunctionKind::kVMTIRFunc,
  // and the executable carries no bytecode; the VM runs the native code,
  // which calls the same functions through the VM's services
  // (runtime/vm/compiled_function.h). CPU targets only, not with system_lib.
  std::string exec_mode = "bytecode";
  // Emit the kernels as a static archive that registers them in the runtime's
  // system library (format "static") instead of an embedded shared object.
  bool system_lib = false;
  std::string system_lib_prefix;
  // Threads the kernels are tuned for (0: unknown).
  int num_threads = 0;
  // With a cuda target and a value N > 0: lower every kernel for the GPU
  // (operators' GPU schedules, then the device split of
  // compiler/backend/cuda/device_split.h) but compile the launches for this host,
  // each run as N simulated threads one after another (SimulateOnCpu). The
  // executable runs on a CPU VM and computes what the GPU build computes, so
  // the GPU lowering can be checked on machines without a GPU (the
  // conformance runner's --simulate-gpu). Its "target" metadata is the host;
  // "simulated_target" names the cuda target.
  int simulate_gpu_threads = 0;
  // When set, Build adds a row per step (each pass, code generation).
  BuildTimings* timings = nullptr;
  // A folder of compiled kernel objects shared between builds (CPU targets,
  // not system_lib; compiler/backend/llvm/object_cache.h): a kernel compiled
  // before, for the same target by the same compiler build, is not compiled
  // again. The CLI uses <its cache folder>/kernels; empty: no cache.
  std::string kernel_cache_dir;
  int64_t kernel_cache_max_bytes = int64_t{1} << 30;  // least recently used entries go first
};

// What a build makes: the executable and, with separate_params, the
// weights it takes as parameters of main, in main's order.
struct BuildOutput {
  Ref<vm::Executable> exec;
  ParamList params;
};

// Builds `module` into an executable. INVALID_ARGUMENT for bad options (an
// unknown exec_mode, target or pipeline, a param that main does not have)
// and for IR the pipeline or code generators reject, with their messages;
// and for exec_mode "compiled" with a cuda target or system_lib.
absl::StatusOr<Ref<vm::Executable>> Build(IRModule module, const BuildOptions& options);
// Build, also returning the param dict of separate_params (as TVM's
// relax.build with keep_params_in_input leaves the weights to the caller).
absl::StatusOr<BuildOutput> BuildModel(IRModule module, const BuildOptions& options);

// exec_mode="compiled" for an executable already built: compiles its
// bytecode functions to native code in one more CPU kernel library for
// `target` ("" is this machine), then drops the bytecode (the functions
// become FunctionKind::kVMTIRFunc). Build does the same in one library.
// INVALID_ARGUMENT for an invalid executable or a non-CPU target.
absl::Status CompileVMFunctions(vm::Executable* exec, const std::string& target = "");

// Exports `exec` as a shared library (vm::Executable::ExportLibrary) to
// `path`. An executable without a CPU kernel library (kernels all on the GPU,
// or none at all) first gets an empty one for `host_target` (a CPU target;
// "" is this machine) to carry it. FAILED_PRECONDITION for a system-library
// executable (its kernels are linked into the daemon, not loaded).
absl::Status ExportLibrary(vm::Executable* exec, const std::string& path,
                           const std::string& host_target = "");

// The PipelineOptions the named pipelines get for a build with `options`
// (the kernel target), for GetPipeline when building a relax_pipeline.
absl::StatusOr<PipelineOptions> PipelineOptionsFor(const BuildOptions& options);

// Binds the params and runs the pipeline: the module VMCodegen receives.
absl::StatusOr<IRModule> LowerModule(IRModule module, const BuildOptions& options);

// `tether compile --emit`: the lowered module as text (Relax functions and
// kernels), the executable's bytecode listing, or the kernels' assembly for
// the target.
absl::StatusOr<std::string> EmitLoweredIR(IRModule module, const BuildOptions& options);
absl::StatusOr<std::string> EmitBytecode(IRModule module, const BuildOptions& options);
absl::StatusOr<std::string> EmitKernelAssembly(IRModule module, const BuildOptions& options);

// Every executable records the parameter types of its bytecode functions
// (metadata "param_types.<function>", runtime/vm/param_binding.h), so a VM
// can check a param dict against it before the first call.

// The "source_hash" metadata of a build of `module`: FNV-1a 64 of its printed
// text, as 16 hex digits (stable across runs and machines).
std::string SourceHash(const IRModule& module);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BUILD_H_
