// ConstantFolding (TVM's relax.transform.FoldConstant): operator calls whose
// tensor arguments are all constants are evaluated at compile time — the
// call is lowered to a kernel (compiler/lower/lower.h), compiled for the
// host and run in this process (compiler/backend/llvm/jit.h), in waves of
// one library each, a constant subgraph of any depth in one wave — and the
// binding becomes an R.const. Also folds R.shape_of of a tensor with a
// static shape into R.shape([...]) and TupleGetItem of a literal tuple whose field is a literal
// (constant, shape, prim value). Folding cascades: a binding folded to a constant makes its users
// candidates.
//
// What is not folded (left as it is, never an error): calls with a
// non-constant tensor argument, tuple outputs, results whose shape is not
// static or larger than max_result_bytes, operators that do not lower to a
// kernel, and calls whose lowering or compilation fails (LegalizeOps reports
// those later). See docs/design/compiler-pipeline.md.
//
// Thread contract: pure function of its arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_CONSTANT_FOLD_H_
#define TETHER_COMPILER_TRANSFORM_CONSTANT_FOLD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

struct ConstantFoldingOptions {
  // Results larger than this stay computed at run time (the constant would
  // be stored in the executable).
  int64_t max_result_bytes = int64_t{256} << 20;
  // When set, incremented once per kernel library compiled (what folding
  // costs, for tests and timing).
  int* libraries_built = nullptr;
};

// INVALID_ARGUMENT when a function is not normalized.
[[nodiscard]] absl::StatusOr<IRModule> ConstantFolding(IRModule module,
                                                       const ConstantFoldingOptions& options = {});

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_CONSTANT_FOLD_H_
