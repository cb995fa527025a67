// Static memory planning and the call_tir rewrite (TVM's
// StaticPlanBlockMemory + CallTIRRewrite in one pass): every
// `R.call_tir(kernel, (args...), out_sinfo)` becomes explicit allocations and
// a destination-passing call `kernel(args..., outputs...)`, the form the VM
// code generator (compiler/backend/vm/vm_codegen.h) consumes.
//
// Outputs with a static shape that do not escape the function share
// storages: a storage whose tensor's last use (aliases included) has passed
// is reused, best fit by bytes (dtype-agnostic). Storages are allocated once,
// at the start of the function; tensors returned from the function and
// tensors with symbolic shapes get their own run-time allocation
// (R.builtin.alloc_tensor). See docs/design/compiler-pipeline.md.
//
// Thread contract: pure functions of their arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_MEMORY_PLAN_H_
#define TETHER_COMPILER_TRANSFORM_MEMORY_PLAN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

// Plans memory in every Relax function of `module` and rewrites all
// relax.call_tir calls (inside If branches too) to destination-passing
// calls. Dataflow blocks become ordinary binding blocks (their DataflowVars
// become Vars), as after TVM's ToNonDataflow.
// INVALID_ARGUMENT: an unnormalized function, a call_tir whose callee is not
// a kernel of the module or whose out_sinfo is not a tensor or a tuple of
// tensors with known dtypes.
[[nodiscard]] absl::StatusOr<IRModule> StaticPlanBlockMemory(IRModule module);

// The bytes of all static storages of function `function` of a planned
// module (the sum of its R.memory.alloc_storage sizes): the peak of the
// planned memory. NOT_FOUND for an unknown function.
[[nodiscard]] absl::StatusOr<int64_t> PlannedPeakBytes(const IRModule& module,
                                                       absl::string_view function);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_MEMORY_PLAN_H_
