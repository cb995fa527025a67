// ONNX elementwise converters: arithmetic (with import-time folding of
// known integer values, so shape arithmetic stays symbolic and emits no
// code), math, activations (composed from Relax ops where Relax has no
// operator of their own), comparisons, logic, Where, Clip, Max/Min/Sum/Mean,
// Mod, IsNaN/IsInf, Cast/CastLike. Every converter is dtype-generic: scalar
// constants take the input's dtype. EmitActivation (convert_elementwise.h)
// lends the activations to converters that apply them to values of their
// own (RNN, GRU, LSTM).
#include "compiler/frontend/onnx/convert_elementwise.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/frontend/onnx/tensor_proto.h"

namespace tether::compiler::onnx_frontend {
namespace {

#define TETHER_ASSIGN_OR_RETURN_IMPL(var, expr, tmp) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  var = std::move(*tmp)
#define TETHER_ONNX_CONCAT2(a, b) a##b
#define TETHER_ONNX_CONCAT(a, b) TETHER_ONNX_CONCAT2(a, b)
#define ASSIGN_OR_RETURN(var, expr) \
  TETHER_ASSIGN_OR_RETURN_IMPL(var, expr, TETHER_ONNX_CONCAT(status_or_, __LINE__))

ConvertResult OneKnown(KnownInts k) {
  return std::vector<OnnxValue>{OnnxValue::Known(std::move(k))};
}

absl::StatusOr<DataType> InputDType(ConvertContext& ctx, int i) {
  ASSIGN_OR_RETURN(const TensorStructInfoNode* t, ctx.InputTensorInfo(i));
  if (!t->dtype.has_value()) return ctx.Unsupported(absl::StrCat("input ", i, " has no dtype"));
  return *t->dtype;
}

bool IsFloat(DataType d) { return d.is_float() || d.is_bfloat16(); }

// A scalar constant of `dtype`.
absl::StatusOr<Expr> Scalar(ConvertContext& ctx, DataType dtype, double v) {
  absl::StatusOr<Expr> c = ScalarConstant(dtype, v);
  if (!c.ok()) return ctx.Unsupported(std::string(c.status().message()));
  return c;
}

// ---- Known-int folding ----

// Elementwise combination of two known values with numpy broadcasting of
// 0-D/1-D operands; nullopt when the sizes do not broadcast.
std::optional<KnownInts> CombineKnown(const KnownInts& a, const KnownInts& b,
                                      const std::function<PrimExpr(PrimExpr, PrimExpr)>& f,
                                      DataType dtype) {
  const size_t na = a.values.size(), nb = b.values.size();
  size_t n = std::max(na, nb);
  if (na != nb && na != 1 && nb != 1) return std::nullopt;
  if (na == 0 || nb == 0) n = 0;
  KnownInts out;
  out.scalar = a.scalar && b.scalar;
  out.dtype = dtype;
  for (size_t i = 0; i < n; ++i) {
    out.values.push_back(f(a.values[na == 1 ? 0 : i], b.values[nb == 1 ? 0 : i]));
  }
  return out;
}

bool IsIntType(DataType d) { return (d.is_int() || d.is_uint()) && d.lanes() == 1; }

// Both inputs known ints of one integer dtype, with at least one of them
// shape-derived or both small: the result stays known.
std::optional<std::pair<KnownInts, KnownInts>> KnownPair(ConvertContext& ctx) {
  if (ctx.num_inputs() != 2) return std::nullopt;
  std::optional<KnownInts> a = ctx.KnownInput(0), b = ctx.KnownInput(1);
  if (!a || !b || a->dtype != b->dtype || !IsIntType(a->dtype)) return std::nullopt;
  return std::make_pair(*a, *b);
}

// C (truncating) division and remainder of ints, symbolic as floor division
// (shape values are non-negative, where both agree).
PrimExpr TruncDiv(PrimExpr a, PrimExpr b) {
  const int64_t* x = a.as_int();
  const int64_t* y = b.as_int();
  if (x && y && *y != 0) return PrimExpr(*x / *y);
  return FloorDiv(std::move(a), std::move(b));
}

// ---- Binary ----

Converter Binary(std::string relax_op, std::function<PrimExpr(PrimExpr, PrimExpr)> fold = nullptr,
                 bool bool_result = false) {
  return [relax_op, fold, bool_result](ConvertContext& ctx) -> ConvertResult {
    if (fold) {
      if (auto pair = KnownPair(ctx)) {
        if (const int64_t* z =
                pair->second.values.size() == 1 ? pair->second.values[0].as_int() : nullptr;
            relax_op != "relax.divide" || z == nullptr || *z != 0) {
          if (auto k = CombineKnown(pair->first, pair->second, fold,
                                    bool_result ? DataType::Bool() : pair->first.dtype)) {
            return OneKnown(*k);
          }
        }
      }
    }
    ASSIGN_OR_RETURN(Expr a, ctx.Input(0));
    ASSIGN_OR_RETURN(Expr b, ctx.Input(1));
    ASSIGN_OR_RETURN(DataType da, InputDType(ctx, 0));
    ASSIGN_OR_RETURN(DataType db, InputDType(ctx, 1));
    if (da != db) {
      return ctx.Invalid(
          absl::StrCat("operands have different dtypes ", da.ToString(), " and ", db.ToString()));
    }
    ASSIGN_OR_RETURN(Expr out, ctx.EmitOp(relax_op, {a, b}));
    return One(out);
  };
}

// Add/Sub/Mul/Div/Pow before opset 7: `broadcast`=1 with `axis` aligns B's
// dims with A's starting at `axis` (legacy broadcasting: B is reshaped with
// trailing unit dims, then numpy rules apply); without `axis` B aligns with
// A's trailing dims, which is numpy's rule; `broadcast`=0 needs equal shapes,
// which numpy rules accept as well.
Converter LegacyBinary(std::string relax_op) {
  return [relax_op](ConvertContext& ctx) -> ConvertResult {
    ASSIGN_OR_RETURN(Expr a, ctx.Input(0));
    ASSIGN_OR_RETURN(Expr b, ctx.Input(1));
    ASSIGN_OR_RETURN(DataType da, InputDType(ctx, 0));
    ASSIGN_OR_RETURN(DataType db, InputDType(ctx, 1));
    if (da != db) {
      return ctx.Invalid(
          absl::StrCat("operands have different dtypes ", da.ToString(), " and ", db.ToString()));
    }
    if (ctx.AttrInt("broadcast", 0) != 0 && ctx.HasAttr("axis")) {
      ASSIGN_OR_RETURN(const TensorStructInfoNode* ta, ctx.InputTensorInfo(0));
      ASSIGN_OR_RETURN(const TensorStructInfoNode* tb, ctx.InputTensorInfo(1));
      if (ta->ndim < 0 || !tb->shape.has_value()) {
        return ctx.Unsupported("legacy broadcast with an operand of unknown rank or shape");
      }
      int64_t axis = ctx.AttrInt("axis", 0);
      if (axis < 0) axis += ta->ndim;
      const int64_t rb = static_cast<int64_t>(tb->shape->size());
      if (axis < 0 || axis + rb > ta->ndim) {
        return ctx.Invalid(absl::StrCat("broadcast axis ", ctx.AttrInt("axis", 0),
                                        " does not fit B of rank ", rb, " into A of rank ",
                                        ta->ndim));
      }
      std::vector<PrimExpr> dims = *tb->shape;
      for (int64_t i = axis + rb; i < ta->ndim; ++i) dims.push_back(PrimExpr(1));
      ASSIGN_OR_RETURN(b, ctx.EmitOp("relax.reshape", {b, MakeShapeExpr(dims)}));
    }
    ASSIGN_OR_RETURN(Expr out, ctx.EmitOp(relax_op, {a, b}));
    return One(out);
  };
}

ConvertResult ConvertPow(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr y, ctx.Input(1));
  ASSIGN_OR_RETURN(DataType dx, InputDType(ctx, 0));
  ASSIGN_OR_RETURN(DataType dy, InputDType(ctx, 1));
  // Float math in x's float type, or float64 for integer x (then cast back).
  const DataType work = IsFloat(dx) ? dx : DataType::Float(64);
  if (dx != work) {
    ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.astype", {x}, {{"dtype", work}}));
  }
  if (dy != work) {
    ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.astype", {y}, {{"dtype", work}}));
  }
  ASSIGN_OR_RETURN(Expr out, ctx.EmitOp("relax.power", {x, y}));
  if (dx != work) {
    // The float power of integers is a hair off (exp/log); round first.
    ASSIGN_OR_RETURN(out, ctx.EmitOp("relax.round", {out}));
    ASSIGN_OR_RETURN(out, ctx.EmitOp("relax.astype", {out}, {{"dtype", dx}}));
  }
  return One(out);
}

// ---- Unary ----

// `fold`, where given, computes an import-time integer input's result (a
// shape computation's Neg or Abs stays known).
Converter Unary(std::string relax_op, std::function<PrimExpr(PrimExpr)> fold = nullptr) {
  return [relax_op, fold](ConvertContext& ctx) -> ConvertResult {
    if (std::optional<KnownInts> k = fold ? ctx.KnownInput(0) : std::nullopt;
        k.has_value() && k->dtype.is_int()) {
      for (PrimExpr& v : k->values) v = fold(v);
      return OneKnown(*k);
    }
    ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
    ASSIGN_OR_RETURN(Expr out, ctx.EmitOp(relax_op, {x}));
    return One(out);
  };
}

// Small graph-building vocabulary for composed activations.
struct Builder {
  ConvertContext& ctx;
  DataType dtype;
  absl::StatusOr<Expr> C(double v) { return Scalar(ctx, dtype, v); }
  absl::StatusOr<Expr> Op(const char* op, std::vector<Expr> args) {
    return ctx.EmitOp(op, std::move(args));
  }
};

#define EMIT(var, call) ASSIGN_OR_RETURN(Expr var, call)

// f(ctx, builder, x) -> output, for one-input float activations.
using Composer = std::function<absl::StatusOr<Expr>(ConvertContext&, Builder&, Expr)>;

Converter Composed(Composer f) {
  return [f](ConvertContext& ctx) -> ConvertResult {
    ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
    ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
    Builder b{ctx, d};
    ASSIGN_OR_RETURN(Expr out, f(ctx, b, x));
    return One(out);
  };
}

absl::StatusOr<Expr> LeakyReluOf(Builder& b, Expr x, double alpha) {
  EMIT(a, b.C(alpha));
  EMIT(zero, b.C(0));
  EMIT(neg, b.Op("relax.less", {x, zero}));
  EMIT(ax, b.Op("relax.multiply", {a, x}));
  return b.Op("relax.where", {neg, ax, x});
}

absl::StatusOr<Expr> LeakyRelu(ConvertContext& ctx, Builder& b, Expr x) {
  return LeakyReluOf(b, x, ctx.AttrFloat("alpha", 0.01f));
}

absl::StatusOr<Expr> HardSigmoidOf(Builder& b, Expr x, double alpha, double beta) {
  EMIT(a, b.C(alpha));
  EMIT(c, b.C(beta));
  EMIT(zero, b.C(0));
  EMIT(one, b.C(1));
  EMIT(ax, b.Op("relax.multiply", {a, x}));
  EMIT(axb, b.Op("relax.add", {ax, c}));
  EMIT(lo, b.Op("relax.maximum", {axb, zero}));
  return b.Op("relax.minimum", {lo, one});
}

absl::StatusOr<Expr> HardSigmoid(ConvertContext& ctx, Builder& b, Expr x) {
  return HardSigmoidOf(b, x, ctx.AttrFloat("alpha", 0.2f), ctx.AttrFloat("beta", 0.5f));
}

absl::StatusOr<Expr> HardSwish(ConvertContext&, Builder& b, Expr x) {
  EMIT(hs, HardSigmoidOf(b, x, 1.0 / 6.0, 0.5));
  return b.Op("relax.multiply", {x, hs});
}

// alpha * (exp(x) - 1) where x < 0, else x.
absl::StatusOr<Expr> EluOf(Builder& b, Expr x, double alpha) {
  EMIT(a, b.C(alpha));
  EMIT(zero, b.C(0));
  EMIT(one, b.C(1));
  EMIT(neg, b.Op("relax.less", {x, zero}));
  EMIT(e, b.Op("relax.exp", {x}));
  EMIT(em1, b.Op("relax.subtract", {e, one}));
  EMIT(scaled, b.Op("relax.multiply", {a, em1}));
  return b.Op("relax.where", {neg, scaled, x});
}

absl::StatusOr<Expr> Elu(ConvertContext& ctx, Builder& b, Expr x) {
  return EluOf(b, x, ctx.AttrFloat("alpha", 1.0f));
}

absl::StatusOr<Expr> Selu(ConvertContext& ctx, Builder& b, Expr x) {
  EMIT(e, EluOf(b, x, ctx.AttrFloat("alpha", 1.67326319217681884765625f)));
  EMIT(g, b.C(ctx.AttrFloat("gamma", 1.05070102214813232421875f)));
  return b.Op("relax.multiply", {g, e});
}

absl::StatusOr<Expr> Celu(ConvertContext& ctx, Builder& b, Expr x) {
  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
  const double alpha = ctx.AttrFloat("alpha", 1.0f);
  EMIT(a, b.C(alpha));
  EMIT(zero, b.C(0));
  EMIT(one, b.C(1));
  EMIT(xa, b.Op("relax.divide", {x, a}));
  EMIT(e, b.Op("relax.exp", {xa}));
  EMIT(em1, b.Op("relax.subtract", {e, one}));
  EMIT(scaled, b.Op("relax.multiply", {a, em1}));
  EMIT(neg, b.Op("relax.minimum", {zero, scaled}));
  EMIT(pos, b.Op("relax.maximum", {zero, x}));
  return b.Op("relax.add", {pos, neg});
}

absl::StatusOr<Expr> Softplus(ConvertContext&, Builder& b, Expr x) {
  // log(1 + exp(x)), written as max(x, 0) + log(1 + exp(-|x|)) so large x
  // does not overflow.
  EMIT(zero, b.C(0));
  EMIT(one, b.C(1));
  EMIT(ax, b.Op("relax.abs", {x}));
  EMIT(nax, b.Op("relax.negative", {ax}));
  EMIT(e, b.Op("relax.exp", {nax}));
  EMIT(e1, b.Op("relax.add", {one, e}));
  EMIT(l, b.Op("relax.log", {e1}));
  EMIT(m, b.Op("relax.maximum", {x, zero}));
  return b.Op("relax.add", {m, l});
}

absl::StatusOr<Expr> Softsign(ConvertContext&, Builder& b, Expr x) {
  EMIT(one, b.C(1));
  EMIT(ax, b.Op("relax.abs", {x}));
  EMIT(d, b.Op("relax.add", {one, ax}));
  return b.Op("relax.divide", {x, d});
}

absl::StatusOr<Expr> ThresholdedReluOf(Builder& b, Expr x, double alpha) {
  EMIT(a, b.C(alpha));
  EMIT(zero, b.C(0));
  EMIT(gt, b.Op("relax.greater", {x, a}));
  return b.Op("relax.where", {gt, x, zero});
}

absl::StatusOr<Expr> ThresholdedRelu(ConvertContext& ctx, Builder& b, Expr x) {
  return ThresholdedReluOf(b, x, ctx.AttrFloat("alpha", 1.0f));
}

absl::StatusOr<Expr> Reciprocal(ConvertContext&, Builder& b, Expr x) {
  EMIT(one, b.C(1));
  return b.Op("relax.divide", {one, x});
}

absl::StatusOr<Expr> Sign(ConvertContext&, Builder& b, Expr x) {
  EMIT(zero, b.C(0));
  EMIT(one, b.C(1));
  EMIT(pos, b.Op("relax.greater", {x, zero}));
  Expr minus;
  if (b.dtype.is_uint()) {
    minus = zero;
  } else {
    ASSIGN_OR_RETURN(minus, b.C(-1));
  }
  EMIT(neg, b.Op("relax.less", {x, zero}));
  EMIT(inner, b.Op("relax.where", {neg, minus, zero}));
  return b.Op("relax.where", {pos, one, inner});
}

absl::StatusOr<Expr> Tan(ConvertContext&, Builder& b, Expr x) {
  EMIT(s, b.Op("relax.sin", {x}));
  EMIT(c, b.Op("relax.cos", {x}));
  return b.Op("relax.divide", {s, c});
}

// (exp(x) + sign * exp(-x)) / 2
absl::StatusOr<Expr> HyperbolicOf(Builder& b, Expr x, bool cosh) {
  EMIT(half, b.C(0.5));
  EMIT(e, b.Op("relax.exp", {x}));
  EMIT(nx, b.Op("relax.negative", {x}));
  EMIT(en, b.Op("relax.exp", {nx}));
  EMIT(s, b.Op(cosh ? "relax.add" : "relax.subtract", {e, en}));
  return b.Op("relax.multiply", {s, half});
}

absl::StatusOr<Expr> Sinh(ConvertContext&, Builder& b, Expr x) { return HyperbolicOf(b, x, false); }
absl::StatusOr<Expr> Cosh(ConvertContext&, Builder& b, Expr x) { return HyperbolicOf(b, x, true); }

// log(x + sqrt(x * x + sign)), sign 1 for asinh, -1 for acosh.
absl::StatusOr<Expr> InverseHyperbolicOf(Builder& b, Expr x, double sign) {
  EMIT(s, b.C(sign));
  EMIT(xx, b.Op("relax.multiply", {x, x}));
  EMIT(r, b.Op("relax.add", {xx, s}));
  EMIT(q, b.Op("relax.sqrt", {r}));
  EMIT(t, b.Op("relax.add", {x, q}));
  return b.Op("relax.log", {t});
}

absl::StatusOr<Expr> Asinh(ConvertContext&, Builder& b, Expr x) {
  // asinh is odd: compute on |x| so large negative x keeps its precision.
  EMIT(ax, b.Op("relax.abs", {x}));
  EMIT(r, InverseHyperbolicOf(b, ax, 1));
  EMIT(zero, b.C(0));
  EMIT(neg, b.Op("relax.less", {x, zero}));
  EMIT(nr, b.Op("relax.negative", {r}));
  return b.Op("relax.where", {neg, nr, r});
}

absl::StatusOr<Expr> Acosh(ConvertContext&, Builder& b, Expr x) {
  return InverseHyperbolicOf(b, x, -1);
}

absl::StatusOr<Expr> Atanh(ConvertContext&, Builder& b, Expr x) {
  // 0.5 * log((1 + x) / (1 - x))
  EMIT(one, b.C(1));
  EMIT(half, b.C(0.5));
  EMIT(p, b.Op("relax.add", {one, x}));
  EMIT(m, b.Op("relax.subtract", {one, x}));
  EMIT(q, b.Op("relax.divide", {p, m}));
  EMIT(l, b.Op("relax.log", {q}));
  return b.Op("relax.multiply", {half, l});
}

// Round half to even: relax.round rounds half away from zero, so ties are
// sent to the even neighbour.
absl::StatusOr<Expr> RoundEven(ConvertContext&, Builder& b, Expr x) {
  EMIT(half, b.C(0.5));
  EMIT(two, b.C(2));
  EMIT(fl, b.Op("relax.floor", {x}));
  EMIT(frac, b.Op("relax.subtract", {x, fl}));
  EMIT(tie, b.Op("relax.equal", {frac, half}));
  EMIT(halved, b.Op("relax.multiply", {fl, half}));
  EMIT(hf, b.Op("relax.floor", {halved}));
  EMIT(hf2, b.Op("relax.multiply", {hf, two}));
  EMIT(even, b.Op("relax.equal", {hf2, fl}));
  EMIT(one, b.C(1));
  EMIT(up, b.Op("relax.add", {fl, one}));
  EMIT(tie_value, b.Op("relax.where", {even, fl, up}));
  EMIT(r, b.Op("relax.round", {x}));
  return b.Op("relax.where", {tie, tie_value, r});
}

absl::StatusOr<Expr> IsNaN(ConvertContext&, Builder& b, Expr x) {
  return b.Op("relax.not_equal", {x, x});
}

absl::StatusOr<Expr> IsInf(ConvertContext& ctx, Builder& b, Expr x) {
  const bool pos = ctx.AttrInt("detect_positive", 1) != 0;
  const bool neg = ctx.AttrInt("detect_negative", 1) != 0;
  EMIT(pinf, b.C(std::numeric_limits<double>::infinity()));
  EMIT(ninf, b.C(-std::numeric_limits<double>::infinity()));
  EMIT(is_p, b.Op("relax.equal", {x, pinf}));
  EMIT(is_n, b.Op("relax.equal", {x, ninf}));
  if (pos && neg) return b.Op("relax.logical_or", {is_p, is_n});
  if (pos) return is_p;
  if (neg) return is_n;
  return b.Op("relax.logical_and", {is_p, is_n});  // all false
}

// where(x < 0, slope * x, x).
ConvertResult PRelu(ConvertContext& ctx, const Expr& x, const Expr& slope) {
  ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
  Builder b{ctx, d};
  EMIT(zero, b.C(0));
  EMIT(neg, b.Op("relax.less", {x, zero}));
  EMIT(sx, b.Op("relax.multiply", {slope, x}));
  EMIT(out, b.Op("relax.where", {neg, sx, x}));
  return One(out);
}

ConvertResult ConvertPRelu(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr slope, ctx.Input(1));
  return PRelu(ctx, x, slope);
}

// PRelu before opset 7: a slope of one value per channel (axis 1), not
// numpy-broadcast from the trailing dims.
ConvertResult ConvertPRelu6(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr slope, ctx.Input(1));
  ASSIGN_OR_RETURN(const TensorStructInfoNode* tx, ctx.InputTensorInfo(0));
  ASSIGN_OR_RETURN(const TensorStructInfoNode* ts, ctx.InputTensorInfo(1));
  if (tx->ndim > 2 && ts->shape.has_value() && ts->shape->size() == 1) {
    std::vector<PrimExpr> dims = *ts->shape;
    for (int i = 2; i < tx->ndim; ++i) dims.push_back(PrimExpr(1));
    ASSIGN_OR_RETURN(slope, ctx.EmitOp("relax.reshape", {slope, MakeShapeExpr(dims)}));
  }
  return PRelu(ctx, x, slope);
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
ConvertResult ConvertShrink(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
  Builder b{ctx, d};
  const double lambd = ctx.AttrFloat("lambd", 0.5f), bias = ctx.AttrFloat("bias", 0.0f);
  EMIT(lo, b.C(-lambd));
  EMIT(hi, b.C(lambd));
  EMIT(bv, b.C(bias));
  EMIT(zero, b.C(0));
  EMIT(below, b.Op("relax.less", {x, lo}));
  EMIT(above, b.Op("relax.greater", {x, hi}));
  EMIT(up, b.Op("relax.add", {x, bv}));
  EMIT(down, b.Op("relax.subtract", {x, bv}));
  EMIT(mid, b.Op("relax.where", {above, down, zero}));
  EMIT(out, b.Op("relax.where", {below, up, mid}));
  return One(out);
}

// ---- Logic, compare, where ----

ConvertResult ConvertXor(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr a, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr b, ctx.Input(1));
  ASSIGN_OR_RETURN(Expr out, ctx.EmitOp("relax.not_equal", {a, b}));
  return One(out);
}

ConvertResult ConvertWhere(ConvertContext& ctx) {
  std::optional<KnownInts> c = ctx.KnownInput(0), x = ctx.KnownInput(1), y = ctx.KnownInput(2);
  if (c && x && y && x->dtype == y->dtype && IsIntType(x->dtype)) {
    // Select on known values (shape arithmetic), with 0-D/1-D broadcasting.
    const size_t n = std::max({c->values.size(), x->values.size(), y->values.size()});
    auto fits = [n](const KnownInts& k) { return k.values.size() == 1 || k.values.size() == n; };
    if (fits(*c) && fits(*x) && fits(*y)) {
      KnownInts out;
      out.dtype = x->dtype;
      out.scalar = c->scalar && x->scalar && y->scalar;
      for (size_t i = 0; i < n; ++i) {
        auto at = [i](const KnownInts& k) { return k.values[k.values.size() == 1 ? 0 : i]; };
        PrimExpr cond = at(*c);
        if (cond.dtype() != DataType::Bool()) cond = NE(cond, PrimExpr(0));
        out.values.push_back(Select(cond, at(*x), at(*y)));
      }
      return OneKnown(out);
    }
  }
  ASSIGN_OR_RETURN(Expr cond, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr a, ctx.Input(1));
  ASSIGN_OR_RETURN(Expr b, ctx.Input(2));
  ASSIGN_OR_RETURN(Expr out, ctx.EmitOp("relax.where", {cond, a, b}));
  return One(out);
}

// ---- Clip ----

ConvertResult ConvertClip(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
  Builder b{ctx, d};
  Expr lo, hi;
  if (ctx.opset() < 11) {
    if (ctx.HasAttr("min")) {
      ASSIGN_OR_RETURN(lo, b.C(ctx.AttrFloat("min", 0)));
    }
    if (ctx.HasAttr("max")) {
      ASSIGN_OR_RETURN(hi, b.C(ctx.AttrFloat("max", 0)));
    }
  } else {
    if (ctx.HasInput(1)) {
      ASSIGN_OR_RETURN(lo, ctx.Input(1));
    }
    if (ctx.HasInput(2)) {
      ASSIGN_OR_RETURN(hi, ctx.Input(2));
    }
  }
  Expr out = x;
  if (lo.defined()) {
    ASSIGN_OR_RETURN(out, ctx.EmitOp("relax.maximum", {out, lo}));
  }
  if (hi.defined()) {
    ASSIGN_OR_RETURN(out, ctx.EmitOp("relax.minimum", {out, hi}));
  }
  if (!lo.defined() && !hi.defined()) return One(x);
  return One(out);
}

// ---- Variadic ----

Converter Variadic(std::string relax_op, bool mean) {
  return [relax_op, mean](ConvertContext& ctx) -> ConvertResult {
    if (ctx.num_inputs() < 1) return ctx.Invalid("needs at least one input");
    ASSIGN_OR_RETURN(Expr acc, ctx.Input(0));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      ASSIGN_OR_RETURN(Expr x, ctx.Input(i));
      ASSIGN_OR_RETURN(acc, ctx.EmitOp(relax_op, {acc, x}));
    }
    if (mean && ctx.num_inputs() > 1) {
      ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
      ASSIGN_OR_RETURN(Expr n, Scalar(ctx, d, ctx.num_inputs()));
      ASSIGN_OR_RETURN(acc, ctx.EmitOp("relax.divide", {acc, n}));
    }
    if (ctx.num_inputs() == 1) {
      // A single input passes through, but as the node's own value.
      return One(acc);
    }
    return One(acc);
  };
}

// ---- Mod ----

ConvertResult ConvertMod(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr a, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr b, ctx.Input(1));
  ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
  const bool fmod = ctx.AttrInt("fmod", 0) != 0;
  if (IsFloat(d) && !fmod) return ctx.Invalid("fmod must be 1 for floating-point inputs");
  Builder bl{ctx, d};
  Expr q;
  if (!fmod) {
    // Integer modulo with the sign of the divisor: a - floor(a / b) * b.
    ASSIGN_OR_RETURN(q, ctx.EmitOp("relax.floor_divide", {a, b}));
  } else if (IsFloat(d)) {
    // C fmod: a - trunc(a / b) * b.
    EMIT(div, bl.Op("relax.divide", {a, b}));
    EMIT(zero, bl.C(0));
    EMIT(neg, bl.Op("relax.less", {div, zero}));
    EMIT(c, bl.Op("relax.ceil", {div}));
    EMIT(f, bl.Op("relax.floor", {div}));
    ASSIGN_OR_RETURN(q, bl.Op("relax.where", {neg, c, f}));
  } else {
    ASSIGN_OR_RETURN(q, ctx.EmitOp("relax.divide", {a, b}));  // C truncating division
  }
  EMIT(qb, bl.Op("relax.multiply", {q, b}));
  EMIT(out, bl.Op("relax.subtract", {a, qb}));
  return One(out);
}

// ---- Cast ----

ConvertResult CastTo(ConvertContext& ctx, DataType to) {
  if (std::optional<KnownInts> k = ctx.KnownInput(0); k && IsIntType(to)) {
    k->dtype = to;
    return OneKnown(*k);
  }
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(DataType from, InputDType(ctx, 0));
  if (from == to) return One(x);
  ASSIGN_OR_RETURN(Expr out, ctx.EmitOp("relax.astype", {x}, {{"dtype", to}}));
  return One(out);
}

ConvertResult ConvertCast(ConvertContext& ctx) {
  if (!ctx.HasAttr("to")) return ctx.Invalid("missing attribute 'to'");
  absl::StatusOr<DataType> to = DataTypeFromOnnx(static_cast<int>(ctx.AttrInt("to", 0)));
  if (!to.ok()) {
    return ctx.Unsupported(
        absl::StrCat("cast to ", absl::StripPrefix(to.status().message(), "onnx: ")));
  }
  if (ctx.AttrInt("saturate", 1) != 1) return ctx.Unsupported("saturate=0");
  return CastTo(ctx, *to);
}

ConvertResult ConvertCastLike(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(DataType to, InputDType(ctx, 1));
  return CastTo(ctx, to);
}

// ---- BitShift ----

ConvertResult ConvertBitShift(ConvertContext& ctx) {
  ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  ASSIGN_OR_RETURN(Expr y, ctx.Input(1));
  ASSIGN_OR_RETURN(DataType d, InputDType(ctx, 0));
  if (!d.is_uint()) return ctx.Invalid(absl::StrCat("needs unsigned integers, got ", d.ToString()));
  const std::string dir = ctx.AttrString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") {
    return ctx.Invalid(absl::StrCat("direction must be LEFT or RIGHT, got '", dir, "'"));
  }
  // 2^y computed in float64 (exact for the shift counts a uint can take)
  // and rounded, then a wrapping multiply or an unsigned division.
  const DataType f64 = DataType::Float(64);
  ASSIGN_OR_RETURN(Expr two, Scalar(ctx, f64, 2));
  ASSIGN_OR_RETURN(Expr yf, ctx.EmitOp("relax.astype", {y}, {{"dtype", f64}}));
  ASSIGN_OR_RETURN(Expr p, ctx.EmitOp("relax.power", {two, yf}));
  ASSIGN_OR_RETURN(Expr pr, ctx.EmitOp("relax.round", {p}));
  ASSIGN_OR_RETURN(Expr pow2, ctx.EmitOp("relax.astype", {pr}, {{"dtype", d}}));
  ASSIGN_OR_RETURN(Expr out,
                   ctx.EmitOp(dir == "LEFT" ? "relax.multiply" : "relax.divide", {x, pow2}));
  return One(out);
}

}  // namespace

absl::StatusOr<Expr> EmitRoundHalfToEven(ConvertContext& ctx, const Expr& x, DataType dtype) {
  Builder b{ctx, dtype};
  return RoundEven(ctx, b, x);
}

absl::StatusOr<Expr> EmitActivation(ConvertContext& ctx, absl::string_view op, const Expr& x,
                                    DataType dtype, double alpha, double beta) {
  Builder b{ctx, dtype};
  if (op == "Relu") return b.Op("relax.nn.relu", {x});
  if (op == "Tanh") return b.Op("relax.tanh", {x});
  if (op == "Sigmoid") return b.Op("relax.sigmoid", {x});
  if (op == "LeakyRelu") return LeakyReluOf(b, x, alpha);
  if (op == "ThresholdedRelu") return ThresholdedReluOf(b, x, alpha);
  if (op == "HardSigmoid") return HardSigmoidOf(b, x, alpha, beta);
  if (op == "Elu") return EluOf(b, x, alpha);
  if (op == "Softsign") return Softsign(ctx, b, x);
  if (op == "Softplus") return Softplus(ctx, b, x);
  if (op == "Affine" || op == "ScaledTanh") {
    EMIT(a, b.C(alpha));
    EMIT(c, b.C(beta));
    if (op == "Affine") {
      EMIT(ax, b.Op("relax.multiply", {a, x}));
      return b.Op("relax.add", {ax, c});
    }
    EMIT(cx, b.Op("relax.multiply", {c, x}));
    EMIT(t, b.Op("relax.tanh", {cx}));
    return b.Op("relax.multiply", {a, t});
  }
  return ctx.Invalid(absl::StrCat("unknown activation '", op, "'"));
}

void RegisterElementwiseConverters() {
  using P = PrimExpr;
  for (const auto& [onnx_op, relax_op] :
       std::vector<std::pair<std::string, std::string>>{{"Add", "relax.add"},
                                                        {"Sub", "relax.subtract"},
                                                        {"Mul", "relax.multiply"},
                                                        {"Div", "relax.divide"},
                                                        {"Pow", "relax.power"}}) {
    RegisterConverter(onnx_op, 1, LegacyBinary(relax_op));
  }
  RegisterConverter("Add", 7, Binary("relax.add", [](P a, P b) { return a + b; }));
  RegisterConverter("Sub", 7, Binary("relax.subtract", [](P a, P b) { return a - b; }));
  RegisterConverter("Mul", 7, Binary("relax.multiply", [](P a, P b) { return a * b; }));
  RegisterConverter("Div", 7, Binary("relax.divide", TruncDiv));
  RegisterConverter("Pow", 7, ConvertPow);
  RegisterConverter("Equal", 7,
                    Binary(
                        "relax.equal", [](P a, P b) { return EQ(a, b); }, true));
  RegisterConverter("Less", 7, Binary("relax.less"));
  RegisterConverter("Greater", 7, Binary("relax.greater"));
  RegisterConverter("LessOrEqual", 12, Binary("relax.less_equal"));
  RegisterConverter("GreaterOrEqual", 12, Binary("relax.greater_equal"));
  RegisterConverter("And", 7, Binary("relax.logical_and"));
  RegisterConverter("Or", 7, Binary("relax.logical_or"));
  RegisterConverter("Xor", 7, ConvertXor);
  RegisterConverter("Not", 1, Unary("relax.logical_not"));
  RegisterConverter("Where", 9, ConvertWhere);

  for (const auto& [onnx, relax] :
       std::vector<std::pair<const char*, const char*>>{{"Relu", "relax.nn.relu"},
                                                        {"Sigmoid", "relax.sigmoid"},
                                                        {"Tanh", "relax.tanh"},
                                                        {"Erf", "relax.erf"},
                                                        {"Sqrt", "relax.sqrt"},
                                                        {"Exp", "relax.exp"},
                                                        {"Log", "relax.log"},
                                                        {"Floor", "relax.floor"},
                                                        {"Ceil", "relax.ceil"},
                                                        {"Sin", "relax.sin"},
                                                        {"Cos", "relax.cos"},
                                                        {"Asin", "relax.asin"},
                                                        {"Acos", "relax.acos"},
                                                        {"Atan", "relax.atan"}}) {
    RegisterConverter(onnx, 1, Unary(relax));
  }
  RegisterConverter("Abs", 1,
                    Unary("relax.abs", [](const PrimExpr& v) { return Max(v, PrimExpr(0) - v); }));
  RegisterConverter("Neg", 1,
                    Unary("relax.negative", [](const PrimExpr& v) { return PrimExpr(0) - v; }));
  RegisterConverter("Round", 11, Composed(RoundEven));
  RegisterConverter("Reciprocal", 1, Composed(Reciprocal));
  RegisterConverter("Sign", 9, Composed(Sign));
  RegisterConverter("Tan", 7, Composed(Tan));
  RegisterConverter("Sinh", 9, Composed(Sinh));
  RegisterConverter("Cosh", 9, Composed(Cosh));
  RegisterConverter("Asinh", 9, Composed(Asinh));
  RegisterConverter("Acosh", 9, Composed(Acosh));
  RegisterConverter("Atanh", 9, Composed(Atanh));
  RegisterConverter("LeakyRelu", 1, Composed(LeakyRelu));
  RegisterConverter("HardSigmoid", 1, Composed(HardSigmoid));
  RegisterConverter("HardSwish", 14, Composed(HardSwish));
  RegisterConverter("Elu", 1, Composed(Elu));
  RegisterConverter("Selu", 1, Composed(Selu));
  RegisterConverter("Celu", 12, Composed(Celu));
  RegisterConverter("Softplus", 1, Composed(Softplus));
  RegisterConverter("Softsign", 1, Composed(Softsign));
  RegisterConverter("ThresholdedRelu", 10, Composed(ThresholdedRelu));
  RegisterConverter("IsNaN", 9, Composed(IsNaN));
  RegisterConverter("IsInf", 10, Composed(IsInf));
  RegisterConverter("PRelu", 6, ConvertPRelu6);
  RegisterConverter("PRelu", 7, ConvertPRelu);
  RegisterConverter("Shrink", 9, ConvertShrink);
  RegisterConverter("Clip", 6, ConvertClip);
  // Before opset 8 the operands must have equal shapes, which numpy rules accept.
  RegisterConverter("Max", 6, Variadic("relax.maximum", false));
  RegisterConverter("Min", 6, Variadic("relax.minimum", false));
  RegisterConverter("Sum", 6, Variadic("relax.add", false));
  RegisterConverter("Mean", 6, Variadic("relax.add", true));
  RegisterConverter("Mod", 10, ConvertMod);
  RegisterConverter("BitShift", 11, ConvertBitShift);
  RegisterConverter("Cast", 6, ConvertCast);
  RegisterConverter("CastLike", 15, ConvertCastLike);
}

}  // namespace tether::compiler::onnx_frontend
