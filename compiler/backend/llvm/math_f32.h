// Single-precision math for float32 kernels: exp, log, tanh, erf, sigmoid,
// sqrt and rsqrt computed in float (range reduction plus short polynomials),
// on scalars or on LLVM vectors of float, inline at the builder's insertion
// point. float32 kernels use these instead of MathEmitter's double versions:
// half the width per vector register and a fraction of the terms, with
// results within a few ulp of float32 (the tests hold them to 2e-6 relative).
// Branch-free (selects only), so they vectorize and run inside the emitter's
// explicit vector loops (vectorize.h).
//
// Thread contract: functions; the builder is the caller's.
#ifndef TETHER_COMPILER_BACKEND_LLVM_MATH_F32_H_
#define TETHER_COMPILER_BACKEND_LLVM_MATH_F32_H_

#include "absl/strings/string_view.h"
#include "llvm/IR/IRBuilder.h"

namespace tether::compiler::codegen {

// Whether EmitFloat32Math implements `op` (a kernel IR math intrinsic name).
// Pure string logic, so the vectorization analysis can ask too.
bool HasFloat32Math(absl::string_view op);

// op(x) for x a float or a vector of float; nullptr for ops without a
// float32 version.
llvm::Value* EmitFloat32Math(llvm::IRBuilder<>& b, absl::string_view op, llvm::Value* x);

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_MATH_F32_H_
