// Rough static estimates over kernel IR for code generation decisions:
// how much code a statement becomes (to start the largest kernel modules first) and
// how much work it does when run (to run small parallel loops inline, where
// waking the thread pool would cost more than the loop).
//
// Thread contract: pure functions.
#ifndef TETHER_COMPILER_BACKEND_LLVM_WORK_ESTIMATE_H_
#define TETHER_COMPILER_BACKEND_LLVM_WORK_ESTIMATE_H_

#include <cstdint>

#include "compiler/tir/kernel_ir.h"

namespace tether::compiler::codegen {

// Statements after unrolling: unrolled loops count once per iteration, other
// loops once.
int64_t CodeSize(const Stmt& s);

// Stores and lets executed by one run of `s`, loops multiplied by their trip
// counts; a loop whose extent is not a constant counts kUnknownTrips.
inline constexpr int64_t kUnknownTrips = 64;
int64_t WorkEstimate(const Stmt& s);

// Below this much work (WorkEstimate of the whole loop) a parallel loop runs
// on the calling thread: a few microseconds of work, about what handing
// chunks to the pool and waiting for them costs.
inline constexpr int64_t kMinParallelWork = 16384;

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_WORK_ESTIMATE_H_
