// Named pass pipelines, as relax.get_pipeline: the sequence of passes that
// takes a normalized Relax module to the lowered form the VM code generator
// consumes (every tensor operation a destination-passing kernel call, every
// allocation explicit, no relax.call_tir left).
//
//   "zero":    NormalizeModule -> LegalizeOps -> StaticPlanBlockMemory
//   "default": NormalizeModule -> ConstantFolding -> PackConstantWeights (CPU
//              targets) -> FuseOps -> LegalizeOps -> DeadCodeElimination
//              -> StaticPlanBlockMemory
//
// (Parameters are bound by Build before the pipeline runs, so weights
// given at build time are constants that ConstantFolding can use.) The
// passes and what each guarantees are described in
// docs/design/compiler-pipeline.md.
//
// Thread contract: pure functions of their arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_PIPELINE_H_
#define TETHER_COMPILER_TRANSFORM_PIPELINE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/module.h"
#include "compiler/tir/kernel_ir.h"
#include "compiler/tir/kernel_target.h"

namespace tether::compiler {

struct PipelineOptions {
  // The machine the kernels will run on. For a GPU (a "cuda" target), FuseOps
  // and LegalizeOps lower operators to bodies compiler/backend/cuda/device_split.h
  // accepts (no workspace allocations, one parallel loop over output elements).
  KernelTarget target;
  // "default" only: fuse operators (FuseOps) and fold constants (ConstantFolding).
  bool fuse = true;
  bool fold_constants = true;
};

// A module pass, TVM's tvm.transform.Pass: a name (for errors and
// listings) and what it does to the module.
struct Pass {
  std::string name;
  std::function<absl::StatusOr<IRModule>(IRModule)> run;
};

// A kernel-level pass (TVM's TIR passes): `fn` applied to every kernel of
// the module, as one module Pass named `name`.
Pass KernelPass(std::string name, std::function<absl::StatusOr<KernelFunc>(const KernelFunc&)> fn);

// A sequence of passes run in order, TVM's Sequential, as relax.get_pipeline
// returns it: a user can list it, splice passes of their own in, and hand
// it to Build (BuildOptions::relax_pipeline / tir_pipeline).
class Pipeline {
 public:
  Pipeline() = default;
  explicit Pipeline(std::vector<Pass> passes) : passes_(std::move(passes)) {}

  const std::vector<Pass>& passes() const { return passes_; }
  std::vector<std::string> PassNames() const;
  // Inserts `pass` right after / before the first pass named `anchor`;
  // NOT_FOUND listing the pipeline's passes when none is.
  [[nodiscard]] absl::Status InsertAfter(absl::string_view anchor, Pass pass);
  [[nodiscard]] absl::Status InsertBefore(absl::string_view anchor, Pass pass);
  void Append(Pass pass) { passes_.push_back(std::move(pass)); }
  // Runs the passes in order; the first failing pass's error, prefixed
  // with its name ("LegalizeOps: main: ...").
  [[nodiscard]] absl::StatusOr<IRModule> operator()(IRModule module) const;
  // The same, calling `after_pass(name, wall seconds)` after each pass that
  // succeeded (`tether compile --time-passes`).
  [[nodiscard]] absl::StatusOr<IRModule> Run(
      IRModule module, const std::function<void(const std::string&, double)>& after_pass) const;

 private:
  std::vector<Pass> passes_;
};

// The pipeline `name` for `options`, as relax.get_pipeline. INVALID_ARGUMENT
// for an unknown name (the message lists the known ones).
[[nodiscard]] absl::StatusOr<Pipeline> GetPipeline(absl::string_view name,
                                                   const PipelineOptions& options = {});

// Runs the pipeline `name` on `module` (GetPipeline, then the pipeline).
[[nodiscard]] absl::StatusOr<IRModule> RunPipeline(IRModule module, absl::string_view name,
                                                   const PipelineOptions& options = {});

// The pipeline names RunPipeline knows, sorted.
std::vector<std::string> ListPipelines();

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_PIPELINE_H_
