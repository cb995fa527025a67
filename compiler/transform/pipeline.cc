// The named pipelines: each a list of (pass name, pass) run in order.
#include "compiler/transform/pipeline.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/relax/block_builder.h"
#include "compiler/transform/constant_fold.h"
#include "compiler/transform/dead_code.h"
#include "compiler/transform/fuse.h"
#include "compiler/transform/legalize.h"
#include "compiler/transform/memory_plan.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

using Pass = std::function<absl::StatusOr<IRModule>(IRModule)>;

struct NamedPass {
  const char* name;
  Pass run;
};

std::vector<NamedPass> PassesOf(absl::string_view name, const PipelineOptions& options) {
  LegalizeOptions legalize;
  legalize.target = options.target;
  std::vector<NamedPass> passes;
  passes.push_back({"NormalizeModule", [](IRModule m) { return NormalizeModule(std::move(m)); }});
  if (name == "default") {
    if (options.fold_constants) {
      passes.push_back(
          {"ConstantFolding", [](IRModule m) { return ConstantFolding(std::move(m)); }});
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

std::vector<std::string> ListPipelines() { return {"default", "zero"}; }

absl::StatusOr<IRModule> RunPipeline(IRModule module, absl::string_view name,
                                     const PipelineOptions& options) {
  const std::vector<std::string> known = ListPipelines();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown pipeline \"", name, "\", known pipelines: ", absl::StrJoin(known, ", ")));
  }
  for (const NamedPass& pass : PassesOf(name, options)) {
    absl::StatusOr<IRModule> next = pass.run(std::move(module));
    if (!next.ok()) {
      return Annotate(next.status(), pass.name, ": ");
    }
    module = *std::move(next);
  }
  return module;
}

}  // namespace tether::compiler
