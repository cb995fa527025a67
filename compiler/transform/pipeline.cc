// The named pipelines: each a list of (pass name, pass) run in order.
#include "compiler/transform/pipeline.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compiler/relax/block_builder.h"
#include "compiler/transform/constant_fold.h"
#include "compiler/transform/dead_code.h"
#include "compiler/transform/fuse.h"
#include "compiler/transform/legalize.h"
#include "compiler/transform/memory_plan.h"
#include "compiler/transform/pack_weights.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

std::vector<Pass> PassesOf(absl::string_view name, const PipelineOptions& options) {
  LegalizeOptions legalize;
  legalize.target = options.target;
  std::vector<Pass> passes;
  passes.push_back({"NormalizeModule", [](IRModule m) { return NormalizeModule(std::move(m)); }});
  if (name == "default") {
    if (options.fold_constants) {
      passes.push_back(
          {"ConstantFolding", [](IRModule m) { return ConstantFolding(std::move(m)); }});
    }
    if (!options.target.gpu) {
      passes.push_back(
          {"PackConstantWeights", [](IRModule m) { return PackConstantWeights(std::move(m)); }});
    }
    if (options.fuse) {
      FuseOptions fuse;
      fuse.target = options.target;
      passes.push_back({"FuseOps", [fuse](IRModule m) { return FuseOps(std::move(m), fuse); }});
    }
  }
  passes.push_back(
      {"LegalizeOps", [legalize](IRModule m) { return LegalizeOps(std::move(m), legalize); }});
  if (name == "default") {
    passes.push_back(
        {"DeadCodeElimination", [](IRModule m) { return DeadCodeElimination(std::move(m)); }});
  }
  passes.push_back(
      {"StaticPlanBlockMemory", [](IRModule m) { return StaticPlanBlockMemory(std::move(m)); }});
  return passes;
}

}  // namespace

Pass KernelPass(std::string name, std::function<absl::StatusOr<KernelFunc>(const KernelFunc&)> fn) {
  return Pass{name, [name, fn = std::move(fn)](IRModule m) -> absl::StatusOr<IRModule> {
                for (auto& [kernel_name, kernel] : m.kernels) {
                  absl::StatusOr<KernelFunc> next = fn(kernel);
                  if (!next.ok()) return Annotate(next.status(), kernel_name, ": ");
                  if (*next == nullptr || (*next)->name != kernel_name) {
                    return absl::InvalidArgumentError(absl::StrCat(
                        kernel_name, ": the pass returned ",
                        *next == nullptr ? std::string("no kernel")
                                         : absl::StrCat("kernel '", (*next)->name, "'"),
                        "; a kernel pass keeps each kernel's name"));
                  }
                  kernel = *std::move(next);
                }
                return m;
              }};
}

std::vector<std::string> Pipeline::PassNames() const {
  std::vector<std::string> names;
  for (const Pass& p : passes_) names.push_back(p.name);
  return names;
}

absl::Status Pipeline::InsertAfter(absl::string_view anchor, Pass pass) {
  for (size_t i = 0; i < passes_.size(); ++i) {
    if (passes_[i].name != anchor) continue;
    passes_.insert(passes_.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(pass));
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no pass \"", anchor, "\" in the pipeline (",
                                          absl::StrJoin(PassNames(), ", "), ")"));
}

absl::Status Pipeline::InsertBefore(absl::string_view anchor, Pass pass) {
  for (size_t i = 0; i < passes_.size(); ++i) {
    if (passes_[i].name != anchor) continue;
    passes_.insert(passes_.begin() + static_cast<std::ptrdiff_t>(i), std::move(pass));
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no pass \"", anchor, "\" in the pipeline (",
                                          absl::StrJoin(PassNames(), ", "), ")"));
}

absl::StatusOr<IRModule> Pipeline::operator()(IRModule module) const {
  return Run(std::move(module), nullptr);
}

absl::StatusOr<IRModule> Pipeline::Run(
    IRModule module, const std::function<void(const std::string&, double)>& after_pass) const {
  for (const Pass& pass : passes_) {
    if (!pass.run) return absl::InvalidArgumentError(absl::StrCat(pass.name, ": an empty pass"));
    absl::Time start = absl::Now();
    absl::StatusOr<IRModule> next = pass.run(std::move(module));
    if (!next.ok()) return Annotate(next.status(), pass.name, ": ");
    if (after_pass) after_pass(pass.name, absl::ToDoubleSeconds(absl::Now() - start));
    module = *std::move(next);
  }
  return module;
}

std::vector<std::string> ListPipelines() { return {"default", "zero"}; }

absl::StatusOr<Pipeline> GetPipeline(absl::string_view name, const PipelineOptions& options) {
  const std::vector<std::string> known = ListPipelines();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown pipeline \"", name, "\", known pipelines: ", absl::StrJoin(known, ", ")));
  }
  return Pipeline(PassesOf(name, options));
}

absl::StatusOr<IRModule> RunPipeline(IRModule module, absl::string_view name,
                                     const PipelineOptions& options) {
  TETHER_ASSIGN_OR_RETURN(Pipeline pipeline, GetPipeline(name, options));
  return pipeline(std::move(module));
}

}  // namespace tether::compiler
