// FloatOps: shorthands over an IRBuilder for one floating-point value type
// (a scalar or a vector of float or double; constants are splatted to it),
// shared by the double-precision math (math_emitter.cc) and the float32 math
// (math_f32.cc).
//
// Thread contract: as the builder it wraps.
#ifndef TETHER_COMPILER_BACKEND_LLVM_FLOAT_OPS_H_
#define TETHER_COMPILER_BACKEND_LLVM_FLOAT_OPS_H_

#include <vector>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"

namespace tether::compiler::codegen {

struct FloatOps {
  llvm::IRBuilder<>& b;
  llvm::Type* ft;  // the value type

  llvm::Value* C(double v) const { return llvm::ConstantFP::get(ft, v); }
  llvm::Value* Add(llvm::Value* a, llvm::Value* c) const { return b.CreateFAdd(a, c); }
  llvm::Value* Sub(llvm::Value* a, llvm::Value* c) const { return b.CreateFSub(a, c); }
  llvm::Value* Mul(llvm::Value* a, llvm::Value* c) const { return b.CreateFMul(a, c); }
  llvm::Value* Div(llvm::Value* a, llvm::Value* c) const { return b.CreateFDiv(a, c); }
  llvm::Value* Lt(llvm::Value* a, llvm::Value* c) const { return b.CreateFCmpOLT(a, c); }
  llvm::Value* Gt(llvm::Value* a, llvm::Value* c) const { return b.CreateFCmpOGT(a, c); }
  llvm::Value* Sel(llvm::Value* c, llvm::Value* t, llvm::Value* f) const {
    return b.CreateSelect(c, t, f);
  }
  llvm::Value* Abs(llvm::Value* x) const {
    return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  }
  llvm::Value* Sqrt(llvm::Value* x) const {
    return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
  }
  llvm::Value* CopySign(llvm::Value* mag, llvm::Value* sign) const {
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  llvm::Value* IsNaN(llvm::Value* x) const { return b.CreateFCmpUNO(x, x); }
  // Horner: c[0] + x*(c[1] + x*(c[2] + ...)).
  llvm::Value* Poly(llvm::Value* x, const std::vector<double>& c) const {
    llvm::Value* acc = C(c.back());
    for (int i = static_cast<int>(c.size()) - 2; i >= 0; --i) acc = Add(C(c[i]), Mul(x, acc));
    return acc;
  }
};

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_FLOAT_OPS_H_
