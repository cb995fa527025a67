// LegalizeOps (TVM's relax.transform.LegalizeOps): every call to a
// registered operator that lowers to a kernel becomes
// `R.call_tir(cls.<kernel>, (tensor args...), out_sinfo=<the call's struct
// info>)`, and the kernel (compiler/lower/lower.h LowerCallToKernel) joins
// module.kernels under a readable unique name ("add", "add_1", "matmul").
// Calls that lower to identical kernels (same operator, attributes and
// argument struct infos) share one kernel.
//
// R.reshape is not copied: it becomes the view
// `R.call_pure_packed("vm.builtin.reshape", x, shape, sinfo_args=...)`
// (memory planning keeps x alive as long as the view). Non-tensor arguments
// (shapes, prim values) must be compile-time constants or symbolic vars that
// a tensor shape of the call binds. See docs/design/compiler-pipeline.md.
//
// Thread contract: pure function of its arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_LEGALIZE_H_
#define TETHER_COMPILER_TRANSFORM_LEGALIZE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"
#include "compiler/tir/kernel_target.h"

namespace tether::compiler {

struct LegalizeOptions {
  // The machine the kernels will run on (LowerCallToKernel's target).
  KernelTarget target;
  // R.reshape as a run-time view (vm.builtin.reshape) rather than a copy kernel.
  bool reshape_as_view = true;
};

// INVALID_ARGUMENT naming the function and operator when a call cannot be
// lowered (unknown shape, a shape argument only known at run time, ...).
[[nodiscard]] absl::StatusOr<IRModule> LegalizeOps(IRModule module,
                                                   const LegalizeOptions& options = {});

// Adds `kernel` to `module` under a unique name derived from `name_hint`,
// unless a kernel with the same parameters and body was already added
// through this cache; returns the name to call. Shared by LegalizeOps and
// FuseOps so identical kernels are emitted once.
class KernelDeduplicator {
 public:
  // Thread-hostile: one per pass run.
  explicit KernelDeduplicator(IRModule* module) : module_(module) {}
  std::string Add(const KernelFunc& kernel, const std::string& name_hint);

 private:
  IRModule* module_;
  std::map<std::string, std::string> by_text_;  // kernel text (name elided) -> name
};

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_LEGALIZE_H_
