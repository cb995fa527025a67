// Helpers shared by the operator families (see op_common.h).
#include "compiler/op/op_common.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {

std::string OpName(const CallNode& call) {
  const auto* op = call.op.as<OpNode>();
  return op != nullptr ? op->name : "call";
}

absl::Status OpError(const CallNode& call, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(OpName(call), ": ", message));
}

absl::Status CheckNumArgs(const CallNode& call, size_t n) {
  if (call.args.size() != n) {
    return OpError(call, absl::StrCat("expected ", n, " arguments, got ", call.args.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const TensorStructInfoNode*> TensorArg(const CallNode& call, size_t i) {
  if (i >= call.args.size()) {
    return OpError(call, absl::StrCat("missing argument ", i));
  }
  const StructInfo& s = call.args[i].struct_info();
  if (!s.defined()) return OpError(call, absl::StrCat("argument ", i, " has no struct info"));
  const auto* t = s.as<TensorStructInfoNode>();
  if (t == nullptr) {
    return OpError(call, absl::StrCat("argument ", i, " must be a tensor, got ", ToString(s)));
  }
  return t;
}

absl::StatusOr<std::vector<PrimExpr>> ShapeArg(const CallNode& call, size_t i) {
  if (i >= call.args.size()) return OpError(call, absl::StrCat("missing argument ", i));
  if (const auto* se = call.args[i].as<ShapeExprNode>()) return se->values;
  const StructInfo& s = call.args[i].struct_info();
  if (const auto* sh = s.as<ShapeStructInfoNode>(); sh != nullptr && sh->values.has_value()) {
    return *sh->values;
  }
  return OpError(call, absl::StrCat("argument ", i, " must be a shape with known values"));
}

absl::StatusOr<std::optional<std::vector<PrimExpr>>> BroadcastShapes(const CallNode& call,
                                                                     const std::vector<PrimExpr>& a,
                                                                     const std::vector<PrimExpr>& b,
                                                                     const StructInfo& a_sinfo,
                                                                     const StructInfo& b_sinfo) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<PrimExpr> out(rank);
  bool known = true;
  for (size_t k = 0; k < rank; ++k) {
    // Aligned from the right.
    const bool has_a = k + a.size() >= rank;
    const bool has_b = k + b.size() >= rank;
    if (!has_a) {
      out[k] = b[k + b.size() - rank];
      continue;
    }
    if (!has_b) {
      out[k] = a[k + a.size() - rank];
      continue;
    }
    const PrimExpr& x = a[k + a.size() - rank];
    const PrimExpr& y = b[k + b.size() - rank];
    std::optional<int64_t> cx = AsConstInt(x);
    std::optional<int64_t> cy = AsConstInt(y);
    if (cx == 1) {
      out[k] = y;
    } else if (cy == 1) {
      out[k] = x;
    } else if (ProveEqual(x, y)) {
      out[k] = x;
    } else if (cx.has_value() && cy.has_value()) {
      return OpError(
          call, absl::StrCat("cannot broadcast ", ToString(a_sinfo), " with ", ToString(b_sinfo)));
    } else {
      known = false;
    }
  }
  if (!known) return std::optional<std::vector<PrimExpr>>();
  return std::optional<std::vector<PrimExpr>>(SimplifyShape(std::move(out)));
}

absl::StatusOr<StructInfo> BroadcastSInfo(const CallNode& call,
                                          const std::vector<const TensorStructInfoNode*>& tensors,
                                          std::optional<DataType> dtype) {
  std::optional<std::vector<PrimExpr>> shape = std::vector<PrimExpr>();
  int ndim = 0;
  StructInfo acc_sinfo;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorStructInfoNode* t = tensors[i];
    const StructInfo& s = call.args[i].struct_info();
    if (ndim >= 0) ndim = t->ndim < 0 ? -1 : std::max(ndim, t->ndim);
    if (shape.has_value() && t->shape.has_value()) {
      absl::StatusOr<std::optional<std::vector<PrimExpr>>> b =
          BroadcastShapes(call, *shape, *t->shape, i == 0 ? s : acc_sinfo, s);
      if (!b.ok()) return b.status();
      shape = *b;
    } else {
      shape.reset();
    }
    acc_sinfo = shape.has_value() ? TensorSInfo(*shape, dtype) : TensorSInfoOfRank(ndim, dtype);
  }
  std::optional<Device> vdevice = tensors.empty() ? std::nullopt : tensors[0]->vdevice;
  if (shape.has_value()) return TensorSInfo(*shape, dtype, vdevice);
  return TensorSInfoOfRank(ndim, dtype, vdevice);
}

std::vector<PrimExpr> BroadcastIndices(const std::vector<PrimExpr>& out_indices,
                                       const std::vector<PrimExpr>& in_shape) {
  std::vector<PrimExpr> idx(in_shape.size());
  const size_t offset = out_indices.size() - in_shape.size();
  for (size_t k = 0; k < in_shape.size(); ++k) {
    std::optional<int64_t> c = AsConstInt(in_shape[k]);
    idx[k] = c == 1 ? PrimExpr(0) : out_indices[k + offset];
  }
  return idx;
}

const std::vector<PrimExpr>& ArgShape(const LowerContext& ctx, size_t i) {
  return *ctx.call->args[i].struct_info().as<TensorStructInfoNode>()->shape;
}

const std::vector<PrimExpr>& OutShape(const LowerContext& ctx, size_t k) {
  if (const auto* tup = ctx.out_sinfo.as<TupleStructInfoNode>()) {
    return *tup->fields[k].as<TensorStructInfoNode>()->shape;
  }
  return *ctx.out_sinfo.as<TensorStructInfoNode>()->shape;
}

absl::StatusOr<int64_t> NormalizeAxis(const CallNode& call, int64_t axis, int64_t ndim) {
  if (axis < -ndim || axis >= ndim) {
    return OpError(call,
                   absl::StrCat("axis ", axis, " is out of range for a tensor of ", ndim, " dims"));
  }
  return axis < 0 ? axis + ndim : axis;
}

absl::StatusOr<int64_t> AxisAttr(const CallNode& call, int64_t ndim) {
  return NormalizeAxis(call, GetIntAttr(call.attrs, "axis", 0), ndim);
}

absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const CallNode& call,
                                                   const std::vector<int64_t>& axes, int64_t ndim) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    absl::StatusOr<int64_t> n = NormalizeAxis(call, a, ndim);
    if (!n.ok()) return n.status();
    if (std::find(out.begin(), out.end(), *n) != out.end()) {
      return OpError(call, absl::StrCat("axis ", a, " is repeated"));
    }
    out.push_back(*n);
  }
  return out;
}

PrimExpr RavelIndex(const std::vector<PrimExpr>& idx, const std::vector<PrimExpr>& shape) {
  PrimExpr flat = 0;
  for (size_t k = 0; k < shape.size(); ++k) flat = flat * shape[k] + idx[k];
  return flat;
}
std::vector<PrimExpr> UnravelIndex(const PrimExpr& flat, const std::vector<PrimExpr>& shape) {
  std::vector<PrimExpr> idx(shape.size());
  PrimExpr rest = flat;
  for (size_t k = shape.size(); k-- > 0;) {
    if (k == 0) {
      idx[k] = Simplify(rest);
    } else {
      idx[k] = Simplify(FloorMod(rest, shape[k]));
      rest = FloorDiv(rest, shape[k]);
    }
  }
  return idx;
}

StructInfo TensorLike(const TensorStructInfoNode* t, std::optional<std::vector<PrimExpr>> shape,
                      int ndim) {
  if (shape.has_value()) return TensorSInfo(SimplifyShape(std::move(*shape)), t->dtype, t->vdevice);
  return TensorSInfoOfRank(ndim, t->dtype, t->vdevice);
}

std::vector<PrimExpr> SimplifyShape(std::vector<PrimExpr> shape) {
  for (PrimExpr& d : shape) d = Simplify(d);
  return shape;
}

}  // namespace tether::compiler
