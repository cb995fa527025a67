// FuseOps: operator fusion and the lowering of fused groups in one pass
// (TVM's FuseOps + FuseTIR; our kernels are composed at the operator level,
// compiler/op/op.h, so a group is lowered as it is formed).
//
// Within each dataflow block -- of a function body, or of an If branch at
// any depth -- calls of operators that lower to kernels are grouped by
// OpPattern, as TVM does:
//   - elementwise, broadcast and injective calls fuse with their
//     elementwise/broadcast/injective producers (the producers are inlined
//     through the consumer's TensorReaders);
//   - a reduction (kCommReduce) takes injective producers as a prologue
//     (inlined into its inputs) and becomes the group's anchor;
//   - an out-elementwise-fusable call (matmul, conv2d) starts a group as its
//     anchor and never inlines producers;
//   - elementwise and broadcast consumers whose output has the anchor's
//     shape fuse after an anchor as its epilogue (bias add, relu, ...).
// Only a value with exactly one use, a DataflowVar of the same block, is
// fused into its consumer; anything else (used twice, R.output, used after
// the block) ends a group as its output. Groups are single-output.
//
// Each group of two or more calls becomes one kernel "fused_<op>_<op>..."
// (params: the group's external tensor inputs, then the output) and one
// R.call_tir binding to the group's output variable. Single calls are left
// for LegalizeOps. A group whose lowering fails (e.g. a symbolic dim that
// no parameter binds) is left unfused.
//
// Thread contract: pure function of its arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_FUSE_H_
#define TETHER_COMPILER_TRANSFORM_FUSE_H_

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"
#include "compiler/tir/kernel_target.h"

namespace tether::compiler {

struct FuseOptions {
  // The machine the kernels will run on: for a GPU, groups lower GPU-friendly
  // bodies (LowerContext::target, MakeFlatParallelLoop for elementwise groups).
  KernelTarget target;
};

// INVALID_ARGUMENT when a function is not normalized.
[[nodiscard]] absl::StatusOr<IRModule> FuseOps(IRModule module, const FuseOptions& options = {});

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_FUSE_H_
