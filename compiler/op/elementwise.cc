// Elementwise operators: binary arithmetic with numpy broadcasting, unary
// math and activations, comparisons, logical ops, where, clip, astype and
// zeros_like/ones_like. Each lowers through a per-element `compute` that
// reads its operands through ctx.inputs with broadcast indices, so any of
// them can be fused. Float math that has no half-precision form is done in
// float32 for float16/bfloat16 tensors.
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/op/op_common.h"

namespace tether::compiler {
namespace {

// The element of tensor argument `i` for output element `idx`.
PrimExpr ReadBroadcast(const LowerContext& ctx, size_t i, const std::vector<PrimExpr>& idx) {
  return ctx.inputs[i](BroadcastIndices(idx, ArgShape(ctx, i)));
}

bool IsHalf(DataType t) { return (t.is_float() && t.bits() == 16) || t.is_bfloat16(); }

// A float intrinsic applied in float32 when `x` is a half type.
PrimExpr FloatCall(const std::string& name, std::vector<PrimExpr> args) {
  DataType t = args[0].dtype();
  if (IsHalf(t)) {
    for (PrimExpr& a : args) a = Cast(DataType::Float(32), a);
    return Cast(t, Call(DataType::Float(32), name, std::move(args)));
  }
  return Call(t, name, std::move(args));
}

enum class DTypeRule {
  kAny,    // any numeric dtype
  kFloat,  // float types only
  kBool,   // bool only
};

absl::Status CheckDType(const CallNode& call, const TensorStructInfoNode* t, DTypeRule rule) {
  if (!t->dtype.has_value()) return absl::OkStatus();
  const DataType d = *t->dtype;
  switch (rule) {
    case DTypeRule::kAny:
      return absl::OkStatus();
    case DTypeRule::kFloat:
      if (d.is_float() || d.is_bfloat16()) return absl::OkStatus();
      return OpError(call, absl::StrCat("requires a float tensor, got ", d.ToString()));
    case DTypeRule::kBool:
      if (d.is_bool()) return absl::OkStatus();
      return OpError(call, absl::StrCat("requires a bool tensor, got ", d.ToString()));
  }
  return absl::OkStatus();
}

// Unary: out has the input's struct info (or `out_dtype`).
void RegisterUnary(const std::string& name, DTypeRule rule,
                   std::function<PrimExpr(const PrimExpr&)> f,
                   OpPattern pattern = OpPattern::kElemWise,
                   std::optional<DataType> out_dtype = std::nullopt) {
  OpInfo info;
  info.name = name;
  info.pattern = pattern;
  info.num_args = 1;
  info.infer = [rule, out_dtype](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
    absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
    if (!t.ok()) return t.status();
    if (absl::Status s = CheckDType(call, *t, rule); !s.ok()) return s;
    std::optional<DataType> dt = out_dtype.has_value() ? out_dtype : (*t)->dtype;
    if ((*t)->shape.has_value()) return TensorSInfo(*(*t)->shape, dt, (*t)->vdevice);
    return TensorSInfoOfRank((*t)->ndim, dt, (*t)->vdevice);
  };
  info.compute = [f](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
    return f(ctx.inputs[0](idx));
  };
  RegisterOp(std::move(info));
}

// Binary with broadcasting; operands must share a dtype. `bool_result`
// makes the result bool (comparisons).
void RegisterBinary(const std::string& name, DTypeRule rule,
                    std::function<PrimExpr(const PrimExpr&, const PrimExpr&)> f,
                    bool bool_result = false) {
  OpInfo info;
  info.name = name;
  info.pattern = OpPattern::kBroadcast;
  info.num_args = 2;
  info.infer = [rule, bool_result](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
    absl::StatusOr<const TensorStructInfoNode*> a = TensorArg(call, 0);
    if (!a.ok()) return a.status();
    absl::StatusOr<const TensorStructInfoNode*> b = TensorArg(call, 1);
    if (!b.ok()) return b.status();
    if ((*a)->dtype.has_value() && (*b)->dtype.has_value() && *(*a)->dtype != *(*b)->dtype) {
      return OpError(call, absl::StrCat("operands have different dtypes: ",
                                        ToString(call.args[0].struct_info()), " and ",
                                        ToString(call.args[1].struct_info())));
    }
    if (absl::Status s = CheckDType(call, *a, rule); !s.ok()) return s;
    if (absl::Status s = CheckDType(call, *b, rule); !s.ok()) return s;
    std::optional<DataType> dt = (*a)->dtype.has_value() ? (*a)->dtype : (*b)->dtype;
    if (bool_result) dt = DataType::Bool();
    return BroadcastSInfo(call, {*a, *b}, dt);
  };
  info.compute = [f](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
    return f(ReadBroadcast(ctx, 0, idx), ReadBroadcast(ctx, 1, idx));
  };
  RegisterOp(std::move(info));
}

PrimExpr Const(const PrimExpr& like, double v) { return MakeConst(like.dtype(), v); }

PrimExpr Sigmoid(const PrimExpr& x) { return FloatCall("sigmoid", {x}); }

PrimExpr Gelu(const PrimExpr& x) {
  // 0.5 * x * (1 + erf(x / sqrt(2))), in float32 for half types.
  DataType t = x.dtype();
  PrimExpr xf = IsHalf(t) ? Cast(DataType::Float(32), x) : x;
  PrimExpr e = Call(xf.dtype(), "erf", {xf * Const(xf, 0.70710678118654752440)});
  return Cast(t, Const(xf, 0.5) * xf * (Const(xf, 1.0) + e));
}

PrimExpr GeluTanh(const PrimExpr& x) {
  DataType t = x.dtype();
  PrimExpr xf = IsHalf(t) ? Cast(DataType::Float(32), x) : x;
  PrimExpr inner = Const(xf, 0.79788456080286535588) * (xf + Const(xf, 0.044715) * xf * xf * xf);
  return Cast(t, Const(xf, 0.5) * xf * (Const(xf, 1.0) + Call(xf.dtype(), "tanh", {inner})));
}

// The scalar of a PrimValue argument, or an error naming the operator.
absl::StatusOr<PrimExpr> PrimArg(const CallNode& call, size_t i) {
  if (i >= call.args.size()) return OpError(call, absl::StrCat("missing argument ", i));
  const auto* pv = call.args[i].as<PrimValueNode>();
  if (pv == nullptr) {
    return OpError(call, absl::StrCat("argument ", i, " must be a PrimValue"));
  }
  return pv->value;
}

void RegisterClip() {
  OpInfo info;
  info.name = "relax.clip";
  info.pattern = OpPattern::kElemWise;
  info.num_args = 3;
  info.infer = [](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (absl::Status s = CheckNumArgs(call, 3); !s.ok()) return s;
    absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
    if (!t.ok()) return t.status();
    for (size_t i = 1; i < 3; ++i) {
      if (absl::StatusOr<PrimExpr> p = PrimArg(call, i); !p.ok()) return p.status();
    }
    return call.args[0].struct_info();
  };
  info.compute = [](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
    PrimExpr x = ctx.inputs[0](idx);
    PrimExpr lo = ctx.call->args[1].as<PrimValueNode>()->value;
    PrimExpr hi = ctx.call->args[2].as<PrimValueNode>()->value;
    return Min(Max(x, Cast(x.dtype(), lo)), Cast(x.dtype(), hi));
  };
  RegisterOp(std::move(info));
}

void RegisterWhere() {
  OpInfo info;
  info.name = "relax.where";
  info.pattern = OpPattern::kBroadcast;
  info.num_args = 3;
  info.infer = [](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (absl::Status s = CheckNumArgs(call, 3); !s.ok()) return s;
    std::vector<const TensorStructInfoNode*> ts;
    for (size_t i = 0; i < 3; ++i) {
      absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, i);
      if (!t.ok()) return t.status();
      ts.push_back(*t);
    }
    if (absl::Status s = CheckDType(call, ts[0], DTypeRule::kBool); !s.ok()) return s;
    if (ts[1]->dtype.has_value() && ts[2]->dtype.has_value() && *ts[1]->dtype != *ts[2]->dtype) {
      return OpError(call, absl::StrCat("operands have different dtypes: ",
                                        ToString(call.args[1].struct_info()), " and ",
                                        ToString(call.args[2].struct_info())));
    }
    return BroadcastSInfo(call, ts, ts[1]->dtype.has_value() ? ts[1]->dtype : ts[2]->dtype);
  };
  info.compute = [](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
    PrimExpr c = ReadBroadcast(ctx, 0, idx);
    if (c.dtype() != DataType::Bool()) c = NE(c, MakeConst(c.dtype(), 0));
    return Select(c, ReadBroadcast(ctx, 1, idx), ReadBroadcast(ctx, 2, idx));
  };
  RegisterOp(std::move(info));
}

// Cast with C++ semantics, except that a cast to bool is "!= 0".
PrimExpr CastTo(DataType to, const PrimExpr& x) {
  if (to == x.dtype()) return x;
  if (to.is_bool()) return NE(x, MakeConst(x.dtype(), 0));
  return Cast(to, x);
}

void RegisterAstype() {
  OpInfo info;
  info.name = "relax.astype";
  info.pattern = OpPattern::kElemWise;
  info.num_args = 1;
  info.infer = [](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
    absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
    if (!t.ok()) return t.status();
    std::optional<DataType> dt = GetDTypeAttr(call.attrs, "dtype");
    if (!dt.has_value()) return OpError(call, "missing or invalid attribute dtype");
    if ((*t)->shape.has_value()) return TensorSInfo(*(*t)->shape, dt, (*t)->vdevice);
    return TensorSInfoOfRank((*t)->ndim, dt, (*t)->vdevice);
  };
  info.compute = [](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
    DataType to = *ctx.out_sinfo.as<TensorStructInfoNode>()->dtype;
    return CastTo(to, ctx.inputs[0](idx));
  };
  RegisterOp(std::move(info));
}

// zeros_like / ones_like: the input's shape, attr dtype or the input's.
void RegisterFillLike(const std::string& name, double value) {
  OpInfo info;
  info.name = name;
  info.pattern = OpPattern::kElemWise;
  info.num_args = 1;
  info.infer = [](const CallNode& call) -> absl::StatusOr<StructInfo> {
    if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
    absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
    if (!t.ok()) return t.status();
    std::optional<DataType> dt = GetDTypeAttr(call.attrs, "dtype");
    if (!dt.has_value()) dt = (*t)->dtype;
    if ((*t)->shape.has_value()) return TensorSInfo(*(*t)->shape, dt, (*t)->vdevice);
    return TensorSInfoOfRank((*t)->ndim, dt, (*t)->vdevice);
  };
  info.compute = [value](const LowerContext& ctx, const std::vector<PrimExpr>&) {
    DataType to = *ctx.out_sinfo.as<TensorStructInfoNode>()->dtype;
    return to.is_bool() ? BoolImm(value != 0) : MakeConst(to, value);
  };
  RegisterOp(std::move(info));
}

}  // namespace

void RegisterElementwiseOps() {
  using E = const PrimExpr&;
  const DTypeRule kAny = DTypeRule::kAny, kFloat = DTypeRule::kFloat, kBool = DTypeRule::kBool;
  RegisterBinary("relax.add", kAny, [](E a, E b) { return a + b; });
  RegisterBinary("relax.subtract", kAny, [](E a, E b) { return a - b; });
  RegisterBinary("relax.multiply", kAny, [](E a, E b) { return a * b; });
  RegisterBinary("relax.divide", kAny, [](E a, E b) { return Div(a, b); });
  RegisterBinary("relax.floor_divide", kAny, [](E a, E b) {
    if (a.dtype().is_int() || a.dtype().is_uint()) return FloorDiv(a, b);
    return FloatCall("floor", {Div(a, b)});
  });
  RegisterBinary("relax.power", kFloat, [](E a, E b) {
    // x ** 2 (a decomposed LayerNorm's variance) as x * x: pow is correctly
    // rounded there too, so the values are the same, and it vectorizes.
    if (const auto* c = b.as<FloatImmNode>(); c != nullptr && c->value == 2.0) {
      if (!IsHalf(a.dtype())) return a * a;
      const PrimExpr w = Cast(DataType::Float(32), a);
      return Cast(a.dtype(), w * w);
    }
    return FloatCall("pow", {a, b});
  });
  RegisterBinary("relax.maximum", kAny, [](E a, E b) { return Max(a, b); });
  RegisterBinary("relax.minimum", kAny, [](E a, E b) { return Min(a, b); });
  RegisterBinary(
      "relax.equal", kAny, [](E a, E b) { return EQ(a, b); }, true);
  RegisterBinary(
      "relax.not_equal", kAny, [](E a, E b) { return NE(a, b); }, true);
  RegisterBinary(
      "relax.less", kAny, [](E a, E b) { return LT(a, b); }, true);
  RegisterBinary(
      "relax.less_equal", kAny, [](E a, E b) { return LE(a, b); }, true);
  RegisterBinary(
      "relax.greater", kAny, [](E a, E b) { return GT(a, b); }, true);
  RegisterBinary(
      "relax.greater_equal", kAny, [](E a, E b) { return GE(a, b); }, true);
  RegisterBinary("relax.logical_and", kBool, [](E a, E b) { return And(a, b); });
  RegisterBinary("relax.logical_or", kBool, [](E a, E b) { return Or(a, b); });

  RegisterUnary("relax.negative", kAny, [](E x) { return Const(x, 0) - x; });
  RegisterUnary("relax.abs", kAny, [](E x) {
    if (x.dtype().is_float() || x.dtype().is_bfloat16()) return FloatCall("fabs", {x});
    if (x.dtype().is_uint() || x.dtype().is_bool()) return x;
    return Select(LT(x, Const(x, 0)), Const(x, 0) - x, x);
  });
  for (const char* f : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"}) {
    std::string fn = f;
    RegisterUnary(absl::StrCat("relax.", f), kFloat, [fn](E x) { return FloatCall(fn, {x}); });
  }
  for (const char* f : {"floor", "ceil", "round", "sin", "cos", "asin", "acos", "atan"}) {
    std::string fn = f;
    RegisterUnary(absl::StrCat("relax.", f), kFloat, [fn](E x) { return FloatCall(fn, {x}); });
  }
  RegisterUnary("relax.logical_not", kBool, [](E x) { return Not(x); });
  RegisterUnary("relax.nn.relu", kAny, [](E x) { return Max(x, Const(x, 0)); });
  RegisterUnary("relax.nn.gelu", kFloat, Gelu);
  RegisterUnary("relax.nn.gelu_tanh", kFloat, GeluTanh);
  RegisterUnary("relax.nn.silu", kFloat, [](E x) { return x * Sigmoid(x); });
  RegisterClip();
  RegisterWhere();
  RegisterAstype();
  RegisterFillLike("relax.zeros_like", 0);
  RegisterFillLike("relax.ones_like", 1);
}

}  // namespace tether::compiler
