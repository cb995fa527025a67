// Shared helpers of the matmul and neural-network operators (nn_common.h).
#include "compiler/op/nn_common.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace tether::compiler::nn_internal {

absl::StatusOr<const TensorStructInfoNode*> TensorArg(const CallNode& call, size_t i,
                                                      absl::string_view op) {
  if (i >= call.args.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": missing argument ", i, " (the call has ", call.args.size(), ")"));
  }
  const StructInfo& s = call.args[i].struct_info();
  const auto* t = s.as<TensorStructInfoNode>();
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": argument ", i, " must be a tensor, got ",
                                                   s.defined() ? ToString(s) : "no struct info"));
  }
  return t;
}

absl::Status CheckArity(const CallNode& call, size_t n, absl::string_view op) {
  if (call.args.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expected ", n, " arguments, got ", call.args.size()));
  }
  return absl::OkStatus();
}

bool SameDim(const PrimExpr& a, const PrimExpr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined() || a.kind() != b.kind() || a.dtype() != b.dtype()) {
    const int64_t* x = a.defined() ? a.as_int() : nullptr;
    const int64_t* y = b.defined() ? b.as_int() : nullptr;
    return x && y && *x == *y;
  }
  switch (a.kind()) {
    case PrimKind::kIntImm:
      return *a.as_int() == *b.as_int();
    case PrimKind::kFloatImm:
      return a.as<FloatImmNode>()->value == b.as<FloatImmNode>()->value;
    case PrimKind::kVar:
      return false;  // different nodes
    default:
      break;
  }
  if (const auto* x = a.as<BinaryNode>()) {
    const auto* y = b.as<BinaryNode>();
    return SameDim(x->a, y->a) && SameDim(x->b, y->b);
  }
  if (const auto* x = a.as<CastNode>()) return SameDim(x->value, b.as<CastNode>()->value);
  return false;
}

bool IsConst(const PrimExpr& a, int64_t value) {
  const int64_t* v = a.as_int();
  return v != nullptr && *v == value;
}

std::string ShapeString(const std::vector<PrimExpr>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? ", " : "", ToString(shape[i]));
  if (shape.size() == 1) s += ",";
  return s + ")";
}

bool BroadcastDim(const PrimExpr& a, const PrimExpr& b, PrimExpr* out) {
  if (IsConst(a, 1)) {
    *out = b;
    return true;
  }
  if (IsConst(b, 1) || SameDim(a, b)) {
    *out = a;
    return true;
  }
  return false;
}

PrimExpr CeilDiv(const PrimExpr& a, int64_t b) {
  return FloorDiv(a + PrimExpr(b - 1), PrimExpr(b));
}

Stmt Loop(const std::string& name, const PrimExpr& extent, ForKind kind,
          const std::function<Stmt(const PrimExpr&)>& body) {
  Var v(name);
  Stmt b = body(v);
  return For(v, PrimExpr(0), extent, kind, std::move(b));
}

absl::StatusOr<std::vector<PrimExpr>> KnownShape(const StructInfo& sinfo, absl::string_view op,
                                                 absl::string_view what) {
  const auto* t = sinfo.as<TensorStructInfoNode>();
  if (t == nullptr || !t->shape.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the shape of ", what,
                                                   " must be known to lower, got ",
                                                   sinfo.defined() ? ToString(sinfo) : "none"));
  }
  return *t->shape;
}

absl::StatusOr<Buffer> InputBuffer(const LowerContext& ctx, size_t i, absl::string_view op) {
  if (i >= ctx.input_buffers.size() || ctx.input_buffers[i] == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": argument ", i, " must be a kernel parameter buffer to be scheduled"));
  }
  return ctx.input_buffers[i];
}

absl::StatusOr<TensorReader> InputReader(const LowerContext& ctx, size_t i, absl::string_view op) {
  if (i < ctx.inputs.size() && ctx.inputs[i]) return ctx.inputs[i];
  if (i < ctx.input_buffers.size() && ctx.input_buffers[i] != nullptr) {
    Buffer b = ctx.input_buffers[i];
    return TensorReader([b](const std::vector<PrimExpr>& idx) { return Load(b, idx); });
  }
  return absl::InvalidArgumentError(absl::StrCat(op, ": argument ", i, " has no tensor reader"));
}

DataType ComputeType(DataType dtype) {
  if ((dtype.is_float() && dtype.bits() < 32) || dtype.is_bfloat16()) return DataType::Float(32);
  return dtype;
}

PrimExpr LowestValue(DataType dtype) {
  if (dtype.is_float() || dtype.is_bfloat16()) {
    return FloatImm(dtype, -std::numeric_limits<double>::infinity());
  }
  if (dtype.is_uint() || dtype.is_bool()) return MakeConst(dtype, 0);
  int64_t lowest = dtype.bits() >= 64 ? std::numeric_limits<int64_t>::min()
                                      : -(int64_t{1} << (dtype.bits() - 1));
  return IntImm(dtype, lowest);
}

Stmt LaneReduce(const std::string& name, const PrimExpr& extent, DataType dtype,
                const PrimExpr& init, const std::function<PrimExpr(const PrimExpr&)>& reader,
                const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
                const Buffer& dst) {
  Buffer part =
      MakeBuffer(name + "_part", dtype, {PrimExpr(kReduceLanes)}, BufferNode::Scope::kLocal);
  PrimExpr lanes(kReduceLanes);
  PrimExpr full = FloorDiv(extent, lanes);
  Stmt init_part = Loop(name + "_l0", lanes, ForKind::kVectorized,
                        [&](const PrimExpr& l) { return Store(part, {l}, init); });
  Stmt body = Loop(name + "_ro", full, ForKind::kSerial, [&](const PrimExpr& ro) {
    return Loop(name + "_l", lanes, ForKind::kVectorized, [&](const PrimExpr& l) {
      return Store(part, {l}, combine(Load(part, {l}), reader(ro * lanes + l)));
    });
  });
  Var rt(name + "_rt");
  PrimExpr tail_begin = full * lanes;
  Stmt tail = For(rt, tail_begin, extent - tail_begin, ForKind::kSerial,
                  Store(part, {PrimExpr(0)}, combine(Load(part, {PrimExpr(0)}), reader(rt))));
  Stmt fold =
      Seq({Store(dst, {PrimExpr(0)}, init),
           Loop(name + "_lf", lanes, ForKind::kUnrolled, [&](const PrimExpr& l) {
             return Store(dst, {PrimExpr(0)}, combine(Load(dst, {PrimExpr(0)}), Load(part, {l})));
           })});
  return Allocate(part, Seq({init_part, body, tail, fold}));
}

absl::StatusOr<std::vector<int64_t>> Pair(const Attrs& attrs, const std::string& key,
                                          std::vector<int64_t> def, int64_t min_value,
                                          absl::string_view op) {
  std::vector<int64_t> v = GetIntsAttr(attrs, key, std::move(def));
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", key, " must have 1 or 2 values, got ", v.size()));
  }
  for (int64_t x : v) {
    if (x < min_value) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", key, " must be at least ", min_value, ", got ", x));
    }
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> Padding4(const Attrs& attrs, absl::string_view op) {
  std::vector<int64_t> p = GetIntsAttr(attrs, "padding", {0, 0});
  if (p.size() == 1) p = {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) p = {p[0], p[1], p[0], p[1]};
  if (p.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": padding must have 1, 2 or 4 values, got ", p.size()));
  }
  for (int64_t x : p) {
    if (x < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": padding must be non-negative, got ", x));
  }
  return p;
}

absl::StatusOr<std::vector<int64_t>> Triple(const Attrs& attrs, const std::string& key,
                                            std::vector<int64_t> def, int64_t min_value,
                                            absl::string_view op) {
  std::vector<int64_t> v = GetIntsAttr(attrs, key, std::move(def));
  if (v.size() == 1) v = {v[0], v[0], v[0]};
  if (v.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", key, " must have 1 or 3 values, got ", v.size()));
  }
  for (int64_t x : v) {
    if (x < min_value) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", key, " must be at least ", min_value, ", got ", x));
    }
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> Padding6(const Attrs& attrs, absl::string_view op) {
  std::vector<int64_t> p = GetIntsAttr(attrs, "padding", {0, 0, 0});
  if (p.size() == 1) p = {p[0], p[0], p[0], p[0], p[0], p[0]};
  if (p.size() == 3) p = {p[0], p[1], p[2], p[0], p[1], p[2]};
  if (p.size() != 6) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": padding must have 1, 3 or 6 values, got ", p.size()));
  }
  for (int64_t x : p) {
    if (x < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": padding must be non-negative, got ", x));
  }
  return p;
}

absl::Status CheckLayout(const Attrs& attrs, const std::string& key, const std::string& expected,
                         absl::string_view op) {
  std::string layout = GetStringAttr(attrs, key, expected);
  if (layout != expected && !(key == "out_layout" && layout.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": only ", key, " \"", expected, "\" is supported, got \"", layout, "\""));
  }
  return absl::OkStatus();
}

}  // namespace tether::compiler::nn_internal
