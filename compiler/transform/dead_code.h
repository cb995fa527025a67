// DeadCodeElimination (TVM's relax.transform.DeadCodeElimination, for
// bindings): removes every binding whose variable is never used — directly
// or through other removed bindings — and whose value has no side effects
// (operator calls, tuples, literals, variables). Calls of global or extern
// functions and match_cast bindings (a run-time check) are kept.
//
// Thread contract: pure function of its arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_DEAD_CODE_H_
#define TETHER_COMPILER_TRANSFORM_DEAD_CODE_H_

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

// INVALID_ARGUMENT when a function is not normalized.
[[nodiscard]] absl::StatusOr<IRModule> DeadCodeElimination(IRModule module);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_DEAD_CODE_H_
