// Named pass pipelines, as relax.get_pipeline: the sequence of passes that
// takes a normalized Relax module to the lowered form the VM code generator
// consumes (every tensor operation a destination-passing kernel call, every
// allocation explicit, no relax.call_tir left).
//
//   "zero":    NormalizeModule -> LegalizeOps -> StaticPlanBlockMemory
//   "default": NormalizeModule -> ConstantFolding -> FuseOps -> LegalizeOps
//              -> DeadCodeElimination -> StaticPlanBlockMemory
//
// (Parameters are bound by Build before the pipeline runs, so weights
// given at build time are constants that ConstantFolding can use.) The
// passes and what each guarantees are described in
// docs/design/compiler-pipeline.md.
//
// Thread contract: pure functions of their arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_PIPELINE_H_
#define TETHER_COMPILER_TRANSFORM_PIPELINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/module.h"
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

// Runs the pipeline `name` on `module`. INVALID_ARGUMENT for an unknown
// name (the message lists the known ones); otherwise the first failing
// pass's error, prefixed with the pass name ("LegalizeOps: main: ...").
[[nodiscard]] absl::StatusOr<IRModule> RunPipeline(IRModule module, absl::string_view name,
                                                   const PipelineOptions& options = {});

// The pipeline names RunPipeline knows, sorted.
std::vector<std::string> ListPipelines();

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_PIPELINE_H_
