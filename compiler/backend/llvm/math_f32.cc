// Single-precision math (see math_f32.h). Each function works on float or
// <N x float>; constants are splatted to the argument's type.
#include "compiler/backend/llvm/math_f32.h"

#include <cmath>
#include <vector>

#include "compiler/backend/llvm/float_ops.h"

namespace tether::compiler::codegen {
namespace {

// Shorthands over one builder and one value type (float or <N x float>) with
// the matching int32 type.
struct G : FloatOps {
  llvm::Type* it;

  G(llvm::IRBuilder<>& builder, llvm::Type* type) : FloatOps{builder, type} {
    it = b.getInt32Ty();
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(type)) {
      it = llvm::VectorType::get(it, vt->getElementCount());
    }
  }
  llvm::Value* I(int32_t v) const {
    return llvm::ConstantInt::get(it, static_cast<uint64_t>(v), true);
  }
  // Round to nearest integer (|x| < 2^22), as an int32 and as a float.
  llvm::Value* RoundToInt(llvm::Value* x) {
    llvm::Value* h = CopySign(C(0.5), x);
    return b.CreateFPToSI(Add(x, h), it);
  }
  // 2^k for int32 k in [-126, 127].
  llvm::Value* Pow2(llvm::Value* k) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, I(127)), I(23)), ft);
  }
};

llvm::Value* Exp(G& g, llvm::Value* x) {
  // x = k ln2 + r, |r| <= ln2/2; 2^k as two factors so that k down to -150
  // (subnormal results) stays representable.
  llvm::Value* xc = g.Sel(g.Lt(x, g.C(-104.0)), g.C(-104.0), x);
  xc = g.Sel(g.Gt(xc, g.C(89.0)), g.C(89.0), xc);
  xc = g.Sel(g.IsNaN(x), g.C(0), xc);
  llvm::Value* k = g.RoundToInt(g.Mul(xc, g.C(1.4426950408889634)));
  llvm::Value* kf = g.b.CreateSIToFP(k, g.ft);
  llvm::Value* r = g.Sub(g.Sub(xc, g.Mul(kf, g.C(0.693359375))), g.Mul(kf, g.C(-2.12194440e-4)));
  llvm::Value* p =
      g.Poly(r, {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
  llvm::Value* k1 = g.b.CreateAShr(k, g.I(1));
  llvm::Value* k2 = g.b.CreateSub(k, k1);
  llvm::Value* y = g.Mul(g.Mul(p, g.Pow2(k1)), g.Pow2(k2));
  y = g.Sel(g.Gt(x, g.C(88.72283905206835)), g.C(INFINITY), y);
  y = g.Sel(g.Lt(x, g.C(-103.97207708)), g.C(0), y);
  return g.Sel(g.IsNaN(x), x, y);
}

llvm::Value* Log(G& g, llvm::Value* x) {
  llvm::IRBuilder<>& b = g.b;
  llvm::Value* subnormal = g.Lt(x, g.C(1.1754943508222875e-38));
  llvm::Value* xs = g.Sel(subnormal, g.Mul(x, g.C(8388608.0)), x);  // * 2^23
  llvm::Value* bits = b.CreateBitCast(xs, g.it);
  llvm::Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, g.I(23)), g.I(0xff)), g.I(127));
  e = b.CreateSub(e, b.CreateSelect(subnormal, g.I(23), g.I(0)));
  llvm::Value* m =
      b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, g.I(0x007fffff)), g.I(0x3f800000)), g.ft);
  llvm::Value* big = g.Gt(m, g.C(1.4142135623730951));
  m = g.Sel(big, g.Mul(m, g.C(0.5)), m);
  e = b.CreateAdd(e, b.CreateSelect(big, g.I(1), g.I(0)));
  llvm::Value* f = g.Sub(m, g.C(1));
  llvm::Value* s = g.Div(f, g.Add(g.C(2), f));
  llvm::Value* z = g.Mul(s, s);
  llvm::Value* log_m =
      g.Mul(g.Mul(g.C(2), s), g.Poly(z, {1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9}));
  llvm::Value* ef = b.CreateSIToFP(e, g.ft);
  llvm::Value* y = g.Add(g.Mul(ef, g.C(0.693359375)), g.Add(log_m, g.Mul(ef, g.C(-2.12194440e-4))));
  y = g.Sel(b.CreateFCmpOEQ(x, g.C(INFINITY)), g.C(INFINITY), y);
  y = g.Sel(b.CreateFCmpOEQ(x, g.C(0)), g.C(-INFINITY), y);
  y = g.Sel(g.Lt(x, g.C(0)), g.C(NAN), y);
  return g.Sel(g.IsNaN(x), x, y);
}

llvm::Value* Tanh(G& g, llvm::Value* x) {
  llvm::Value* a = g.Abs(x);
  // Small |x|: the odd Taylor series (the x^13 term is below float's ulp at
  // |x| < 0.55); larger: 1 - 2 / (exp(2|x|) + 1), saturating at 1.
  llvm::Value* z = g.Mul(a, a);
  llvm::Value* small = g.Mul(a, g.Poly(z, {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835,
                                           -1382.0 / 155925, 21844.0 / 6081075}));
  llvm::Value* two_a = g.Sel(g.Gt(a, g.C(20)), g.C(40), g.Mul(a, g.C(2)));
  llvm::Value* large = g.Sub(g.C(1), g.Div(g.C(2), g.Add(Exp(g, two_a), g.C(1))));
  llvm::Value* t = g.Sel(g.Lt(a, g.C(0.55)), small, large);
  t = g.Sel(g.IsNaN(x), x, t);
  return g.CopySign(t, x);
}

llvm::Value* Erf(G& g, llvm::Value* x) {
  llvm::Value* a = g.Abs(x);
  // |x| < 1: the Maclaurin series; beyond, 1 - erfc with erfc from the
  // continued-fraction-free approximation erfc(a) = t exp(-a^2 + P(t)),
  // t = 1 / (1 + a/2) (Numerical Recipes' erfcc, relative error < 1.2e-7).
  std::vector<double> c;
  double fact = 1;
  for (int n = 0; n <= 11; ++n) {
    if (n > 0) fact *= n;
    c.push_back((n % 2 ? -1.0 : 1.0) * 1.1283791670955126 / (fact * (2 * n + 1)));
  }
  llvm::Value* series = g.Mul(a, g.Poly(g.Mul(a, a), c));
  llvm::Value* t = g.Div(g.C(1), g.Add(g.C(1), g.Mul(g.C(0.5), a)));
  llvm::Value* poly = g.Poly(t, {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277});
  llvm::Value* ac = g.Sel(g.Gt(a, g.C(10)), g.C(10), a);
  llvm::Value* erfc = g.Mul(t, Exp(g, g.Add(g.Sub(g.C(0), g.Mul(ac, ac)), poly)));
  llvm::Value* y = g.Sel(g.Lt(a, g.C(1)), series, g.Sub(g.C(1), erfc));
  y = g.Sel(g.IsNaN(x), x, y);
  return g.CopySign(y, x);
}

}  // namespace

bool HasFloat32Math(absl::string_view op) {
  return op == "exp" || op == "log" || op == "tanh" || op == "erf" || op == "sigmoid" ||
         op == "sqrt" || op == "rsqrt";
}

llvm::Value* EmitFloat32Math(llvm::IRBuilder<>& b, absl::string_view op, llvm::Value* x) {
  if (!x->getType()->getScalarType()->isFloatTy()) return nullptr;
  G g(b, x->getType());
  if (op == "exp") return Exp(g, x);
  if (op == "log") return Log(g, x);
  if (op == "tanh") return Tanh(g, x);
  if (op == "erf") return Erf(g, x);
  if (op == "sigmoid") return g.Div(g.C(1), g.Add(g.C(1), Exp(g, g.Sub(g.C(0), x))));
  if (op == "sqrt") return g.Sqrt(x);
  if (op == "rsqrt") return g.Div(g.C(1), g.Sqrt(x));
  return nullptr;
}

}  // namespace tether::compiler::codegen
