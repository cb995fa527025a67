// Branch-free double-precision implementations of the kernel IR's math
// intrinsics: range reduction plus Taylor polynomials (exact coefficients
// 1/n!, evaluated with Horner's rule), with special values patched by selects.
#include "compiler/backend/llvm/math_emitter.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler/backend/llvm/float_ops.h"
#include "llvm/IR/Intrinsics.h"

namespace tether::compiler::codegen {
namespace {

// Shorthands over one builder, on double.
struct F : FloatOps {
  explicit F(llvm::IRBuilder<>& builder) : FloatOps{builder, builder.getDoubleTy()} {}
  llvm::Type* f64() const { return ft; }
  llvm::Value* I(int64_t v) const { return b.getInt64(static_cast<uint64_t>(v)); }
  // trunc(x) for |x| < 2^52 through an int64 round trip; x itself beyond
  // (already integral, inf or NaN). fptosi is only fed in-range values.
  llvm::Value* Trunc(llvm::Value* x) {
    llvm::Value* small = Lt(Abs(x), C(4503599627370496.0));
    llvm::Value* safe = Sel(small, x, C(0));
    llvm::Value* t = b.CreateSIToFP(b.CreateFPToSI(safe, b.getInt64Ty()), f64());
    return Sel(small, CopySign(t, x), x);
  }
  llvm::Value* Floor(llvm::Value* x) {
    llvm::Value* t = Trunc(x);
    return Sel(Gt(t, x), Sub(t, C(1)), t);
  }
  llvm::Value* Ceil(llvm::Value* x) {
    llvm::Value* t = Trunc(x);
    return Sel(Lt(t, x), Add(t, C(1)), t);
  }
  // Half away from zero, exact (no x + 0.5 rounding).
  llvm::Value* Round(llvm::Value* x) {
    llvm::Value* t = Trunc(x);
    llvm::Value* frac = Abs(Sub(x, t));
    return Sel(b.CreateFCmpOGE(frac, C(0.5)), Add(t, CopySign(C(1), x)), t);
  }
  // 2^k for an int64 k in [-1022, 1023].
  llvm::Value* Pow2(llvm::Value* k) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, I(1023)), I(52)), f64());
  }
};

std::vector<double> InverseFactorials(int degree) {
  std::vector<double> c(degree + 1);
  double f = 1;
  for (int i = 0; i <= degree; ++i) {
    if (i > 0) f *= i;
    c[i] = 1.0 / f;
  }
  return c;
}

llvm::Value* Exp(F& f, llvm::Value* x) {
  // x = k ln2 + r, |r| <= ln2/2; 2^k applied as two halves so that k down to
  // -1075 (subnormal results) and up to 1024 stays representable.
  llvm::Value* xc = f.Sel(f.Lt(x, f.C(-745.2)), f.C(-745.2), x);
  xc = f.Sel(f.Gt(xc, f.C(709.8)), f.C(709.8), xc);
  xc = f.Sel(f.IsNaN(x), f.C(0), xc);
  llvm::Value* kf = f.Floor(f.Add(f.Mul(xc, f.C(1.4426950408889634)), f.C(0.5)));
  llvm::Value* r = f.Sub(f.Sub(xc, f.Mul(kf, f.C(6.93147180369123816490e-01))),
                         f.Mul(kf, f.C(1.90821492927058770002e-10)));
  llvm::Value* p = f.Poly(r, InverseFactorials(14));
  llvm::Value* k = f.b.CreateFPToSI(kf, f.b.getInt64Ty());
  llvm::Value* k1 = f.b.CreateAShr(k, f.I(1));
  llvm::Value* k2 = f.b.CreateSub(k, k1);
  llvm::Value* y = f.Mul(f.Mul(p, f.Pow2(k1)), f.Pow2(k2));
  y = f.Sel(f.Gt(x, f.C(709.782712893384)), f.C(INFINITY), y);
  y = f.Sel(f.Lt(x, f.C(-745.2)), f.C(0), y);
  return f.Sel(f.IsNaN(x), x, y);
}

llvm::Value* Log(F& f, llvm::Value* x) {
  llvm::IRBuilder<>& b = f.b;
  llvm::Value* subnormal = f.Lt(x, f.C(2.2250738585072014e-308));
  llvm::Value* xs = f.Sel(subnormal, f.Mul(x, f.C(18014398509481984.0)), x);  // * 2^54
  llvm::Value* bits = b.CreateBitCast(xs, b.getInt64Ty());
  llvm::Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, f.I(52)), f.I(0x7ff)), f.I(1023));
  e = b.CreateSub(e, b.CreateSelect(subnormal, f.I(54), f.I(0)));
  llvm::Value* mbits =
      b.CreateOr(b.CreateAnd(bits, f.I(0x000fffffffffffffLL)), f.I(0x3ff0000000000000LL));
  llvm::Value* m = b.CreateBitCast(mbits, f.f64());
  llvm::Value* big = f.Gt(m, f.C(1.4142135623730951));
  m = f.Sel(big, f.Mul(m, f.C(0.5)), m);
  e = b.CreateAdd(e, b.CreateSelect(big, f.I(1), f.I(0)));
  llvm::Value* fm = f.Sub(m, f.C(1));
  llvm::Value* s = f.Div(fm, f.Add(f.C(2), fm));
  llvm::Value* z = f.Mul(s, s);
  std::vector<double> c;
  for (int i = 0; i <= 11; ++i) c.push_back(1.0 / (2 * i + 1));
  llvm::Value* log_m = f.Mul(f.Mul(f.C(2), s), f.Poly(z, c));
  llvm::Value* ef = b.CreateSIToFP(e, f.f64());
  llvm::Value* y = f.Add(f.Mul(ef, f.C(6.93147180369123816490e-01)),
                         f.Add(log_m, f.Mul(ef, f.C(1.90821492927058770002e-10))));
  y = f.Sel(b.CreateFCmpOEQ(x, f.C(INFINITY)), f.C(INFINITY), y);
  y = f.Sel(b.CreateFCmpOEQ(x, f.C(0)), f.C(-INFINITY), y);
  y = f.Sel(f.Lt(x, f.C(0)), f.C(NAN), y);
  return f.Sel(f.IsNaN(x), x, y);
}

llvm::Value* Tanh(F& f, llvm::Value* x) {
  llvm::Value* a = f.Abs(x);
  llvm::Value* two_a = f.Mul(a, f.C(2));
  // Small |x|: expm1(2a) / (expm1(2a) + 2) without cancellation.
  llvm::Value* em1 = f.Mul(two_a, f.Poly(two_a, [] {
    std::vector<double> c = InverseFactorials(21);
    c.erase(c.begin());
    return c;
  }()));
  llvm::Value* small = f.Div(em1, f.Add(em1, f.C(2)));
  llvm::Value* large = f.Sub(f.C(1), f.Div(f.C(2), f.Add(Exp(f, two_a), f.C(1))));
  llvm::Value* t = f.Sel(f.Lt(a, f.C(0.55)), small, large);
  return f.CopySign(t, x);
}

llvm::Value* Erf(F& f, llvm::Value* x) {
  llvm::Value* a = f.Abs(x);
  // |x| < 3: erf(a) = 2/sqrt(pi) * sum (-1)^n a^(2n+1) / (n! (2n+1)).
  std::vector<double> c;
  double fact = 1;
  for (int n = 0; n <= 52; ++n) {
    if (n > 0) fact *= n;
    c.push_back((n % 2 ? -1.0 : 1.0) * 1.1283791670955126 / (fact * (2 * n + 1)));
  }
  llvm::Value* as = f.Sel(f.Lt(a, f.C(3)), a, f.C(0));
  llvm::Value* series = f.Mul(as, f.Poly(f.Mul(as, as), c));
  // |x| >= 3: erfc(a) ~ exp(-a^2) / (a sqrt(pi)) * (1 - 1/(2a^2) + 3/(4a^4) - ...).
  llvm::Value* al = f.Sel(f.Lt(a, f.C(3)), f.C(3), f.Sel(f.Gt(a, f.C(7)), f.C(7), a));
  llvm::Value* inv2 = f.Div(f.C(1), f.Mul(al, al));
  llvm::Value* asym = f.Poly(inv2, {1.0, -0.5, 0.75, -1.875, 6.5625, -29.53125, 162.421875});
  llvm::Value* erfc =
      f.Mul(f.Div(Exp(f, f.Sub(f.C(0), f.Mul(al, al))), f.Mul(al, f.C(1.7724538509055159))), asym);
  llvm::Value* tail = f.Sel(f.Gt(a, f.C(6.5)), f.C(1), f.Sub(f.C(1), erfc));
  llvm::Value* y = f.Sel(f.Lt(a, f.C(3)), series, tail);
  y = f.Sel(f.IsNaN(x), x, y);
  return f.CopySign(y, x);
}

// sin or cos through reduction by pi/2 (Cody-Waite, three parts).
llvm::Value* SinCos(F& f, llvm::Value* x, bool is_cos) {
  llvm::IRBuilder<>& b = f.b;
  llvm::Value* ok = f.Lt(f.Abs(x), f.C(1e9));
  llvm::Value* xs = f.Sel(ok, x, f.C(0));
  llvm::Value* kf = f.Floor(f.Add(f.Mul(xs, f.C(0.63661977236758134)), f.C(0.5)));
  llvm::Value* r = f.Sub(xs, f.Mul(kf, f.C(1.57079632673412561417e+00)));
  r = f.Sub(r, f.Mul(kf, f.C(6.07710050630396597660e-11)));
  r = f.Sub(r, f.Mul(kf, f.C(2.02226624879595063154e-21)));
  llvm::Value* z = f.Mul(r, r);
  std::vector<double> sc, cc;
  std::vector<double> inv = InverseFactorials(20);
  for (int i = 0; i <= 9; ++i) {
    sc.push_back((i % 2 ? -1.0 : 1.0) * inv[2 * i + 1]);
    cc.push_back((i % 2 ? -1.0 : 1.0) * inv[2 * i]);
  }
  llvm::Value* s = f.Mul(r, f.Poly(z, sc));
  llvm::Value* c = f.Poly(z, cc);
  llvm::Value* q = b.CreateAnd(b.CreateFPToSI(kf, b.getInt64Ty()), f.I(3));
  if (is_cos) q = b.CreateAnd(b.CreateAdd(q, f.I(1)), f.I(3));
  // sin(r + q pi/2): q=0 s, 1 c, 2 -s, 3 -c.
  llvm::Value* neg_s = f.Sub(f.C(0), s);
  llvm::Value* neg_c = f.Sub(f.C(0), c);
  llvm::Value* y =
      f.Sel(b.CreateICmpEQ(q, f.I(0)), s,
            f.Sel(b.CreateICmpEQ(q, f.I(1)), c, f.Sel(b.CreateICmpEQ(q, f.I(2)), neg_s, neg_c)));
  return f.Sel(ok, y, f.C(NAN));
}

llvm::Value* Pow(F& f, llvm::Value* a, llvm::Value* e) {
  llvm::IRBuilder<>& b = f.b;
  llvm::Value* r = Exp(f, f.Mul(e, Log(f, f.Abs(a))));
  llvm::Value* integral = b.CreateFCmpOEQ(f.Floor(e), e);
  llvm::Value* half = f.Mul(e, f.C(0.5));
  llvm::Value* odd = b.CreateAnd(integral, b.CreateFCmpUNE(f.Floor(half), half));
  llvm::Value* neg = f.Lt(a, f.C(0));
  llvm::Value* y = f.Sel(b.CreateAnd(neg, odd), f.Sub(f.C(0), r), r);
  y = f.Sel(b.CreateAnd(neg, b.CreateNot(integral)), f.C(NAN), y);
  return f.Sel(b.CreateOr(b.CreateFCmpOEQ(e, f.C(0)), b.CreateFCmpOEQ(a, f.C(1))), f.C(1), y);
}

// atan: |x| > 1 folds to pi/2 - atan(1/|x|); two half-angle steps
// (t / (1 + sqrt(1 + t^2))) bring the argument under tan(pi/16) ~ 0.199,
// where 13 terms of the alternating series reach double precision.
llvm::Value* Atan(F& f, llvm::Value* x) {
  llvm::Value* a = f.Abs(x);
  llvm::Value* big = f.Gt(a, f.C(1));
  llvm::Value* t = f.Sel(big, f.Div(f.C(1), a), a);
  for (int i = 0; i < 2; ++i) {
    llvm::Value* r = f.b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, f.Add(f.C(1), f.Mul(t, t)));
    t = f.Div(t, f.Add(f.C(1), r));
  }
  std::vector<double> c(13);
  for (int k = 0; k < 13; ++k) c[k] = (k % 2 ? -1.0 : 1.0) / (2 * k + 1);
  llvm::Value* y = f.Mul(f.C(4), f.Mul(t, f.Poly(f.Mul(t, t), c)));
  y = f.Sel(big, f.Sub(f.C(1.5707963267948966), y), y);
  y = f.CopySign(y, x);
  return f.Sel(f.IsNaN(x), x, y);
}

// asin(x) = atan(x / sqrt((1 - x)(1 + x))): +-pi/2 at +-1, NaN beyond.
llvm::Value* Asin(F& f, llvm::Value* x) {
  llvm::Value* d =
      f.b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, f.Mul(f.Sub(f.C(1), x), f.Add(f.C(1), x)));
  llvm::Value* y = Atan(f, f.Div(x, d));
  return f.Sel(f.Gt(f.Abs(x), f.C(1)), f.C(NAN), y);
}

// acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): accurate near 1, pi at -1.
llvm::Value* Acos(F& f, llvm::Value* x) {
  llvm::Value* q =
      f.b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, f.Div(f.Sub(f.C(1), x), f.Add(f.C(1), x)));
  llvm::Value* y = f.Mul(f.C(2), Atan(f, q));
  return f.Sel(f.Gt(f.Abs(x), f.C(1)), f.C(NAN), y);
}

}  // namespace

llvm::Value* MathEmitter::Build(llvm::IRBuilder<>& b, const std::string& op, llvm::Value* x,
                                llvm::Value* y) {
  F f(b);
  if (op == "exp") return Exp(f, x);
  if (op == "log") return Log(f, x);
  if (op == "tanh") return Tanh(f, x);
  if (op == "erf") return Erf(f, x);
  if (op == "sigmoid") return f.Div(f.C(1), f.Add(f.C(1), Exp(f, f.Sub(f.C(0), x))));
  if (op == "sqrt") return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
  if (op == "rsqrt") return f.Div(f.C(1), b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
  if (op == "fabs") return f.Abs(x);
  if (op == "floor") return f.Floor(x);
  if (op == "ceil") return f.Ceil(x);
  if (op == "trunc") return f.Trunc(x);
  if (op == "round") return f.Round(x);
  if (op == "sin") return SinCos(f, x, /*is_cos=*/false);
  if (op == "cos") return SinCos(f, x, /*is_cos=*/true);
  if (op == "pow") return Pow(f, x, y);
  if (op == "atan") return Atan(f, x);
  if (op == "asin") return Asin(f, x);
  if (op == "acos") return Acos(f, x);
  return nullptr;
}

llvm::Function* MathEmitter::GetOrCreate(const std::string& op, int arity) {
  auto it = functions_.find(op);
  if (it != functions_.end()) return it->second;
  llvm::LLVMContext& ctx = module_->getContext();
  llvm::Type* f64 = llvm::Type::getDoubleTy(ctx);
  std::vector<llvm::Type*> params(arity, f64);
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(f64, params, false),
                                    llvm::GlobalValue::InternalLinkage,
                                    absl::StrCat("tether.math.", op), module_);
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->setDoesNotAccessMemory();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* result = Build(b, op, fn->getArg(0), arity > 1 ? fn->getArg(1) : nullptr);
  if (result == nullptr) {
    fn->eraseFromParent();
    return nullptr;
  }
  b.CreateRet(result);
  functions_[op] = fn;
  return fn;
}

absl::StatusOr<llvm::Value*> MathEmitter::Call(llvm::IRBuilder<>& b, absl::string_view op,
                                               const std::vector<llvm::Value*>& args) {
  int arity = op == "pow" ? 2 : 1;
  if (static_cast<int>(args.size()) != arity) {
    return absl::InvalidArgumentError(
        absl::StrCat("math intrinsic ", op, " takes ", arity, " arguments, got ", args.size()));
  }
  llvm::Function* fn = GetOrCreate(std::string(op), arity);
  if (fn == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown math intrinsic \"", op, "\""));
  }
  return b.CreateCall(fn, args);
}

}  // namespace tether::compiler::codegen
