// Tensor manipulation: reshape, flatten, permute_dims, expand_dims, squeeze,
// broadcast_to, tril/triu, cumsum, depth_to_space, and the creation ops
// full, zeros and ones; the slicing ops (concat, split, strided_slice, take,
// gather_elements) are in slicing.cc. Each but cumsum and depth_to_space
// (schedules) is a `compute` that
// maps an output index to the input element it copies, so they fuse into
// their consumers; cumsum is a serial scan along its axis (a `schedule`).
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

// Axes given as an int or a list of ints; nullopt when absent.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesAttr(const CallNode& call,
                                                             const std::string& key) {
  auto it = call.attrs.find(key);
  if (it == call.attrs.end()) return std::optional<std::vector<int64_t>>();
  if (const auto* v = std::get_if<int64_t>(&it->second)) {
    return std::optional<std::vector<int64_t>>(std::vector<int64_t>{*v});
  }
  if (const auto* l = std::get_if<std::vector<int64_t>>(&it->second)) {
    return std::optional<std::vector<int64_t>>(*l);
  }
  return OpError(call,
                 absl::StrCat("attribute ", key, " must be ints, got ", ToString(it->second)));
}

// ---- reshape, flatten ----

absl::StatusOr<StructInfo> InferReshape(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::vector<PrimExpr>> target = ShapeArg(call, 1);
  if (!target.ok()) return target.status();
  std::vector<PrimExpr> shape = *target;
  int infer_at = -1;
  PrimExpr known = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    std::optional<int64_t> c = AsConstInt(shape[k]);
    if (c == -1) {
      if (infer_at >= 0) return OpError(call, "more than one -1 in the new shape");
      infer_at = static_cast<int>(k);
    } else if (c.has_value() && *c < 0) {
      return OpError(call, absl::StrCat("dim ", *c, " of the new shape is negative"));
    } else {
      known = known * shape[k];
    }
  }
  if (!(*t)->shape.has_value()) {
    if (infer_at >= 0)
      return TensorSInfoOfRank(static_cast<int>(shape.size()), (*t)->dtype, (*t)->vdevice);
    return TensorSInfo(SimplifyShape(shape), (*t)->dtype, (*t)->vdevice);
  }
  PrimExpr total = Simplify(Product(*(*t)->shape));
  if (infer_at >= 0) {
    std::optional<int64_t> kc = AsConstInt(known);
    std::optional<int64_t> tc = AsConstInt(total);
    if (kc.has_value() && tc.has_value() && (*kc == 0 || *tc % *kc != 0)) {
      return OpError(call, absl::StrCat("cannot reshape ", ToString(call.args[0].struct_info()),
                                        " to ", ToString(ShapeSInfo(*target))));
    }
    shape[static_cast<size_t>(infer_at)] = Simplify(FloorDiv(total, known));
  }
  PrimExpr new_total = Simplify(Product(shape));
  std::optional<int64_t> a = AsConstInt(total), b = AsConstInt(new_total);
  if ((a.has_value() && b.has_value() && *a != *b) ||
      (!ProveEqual(total, new_total) && a.has_value() != b.has_value())) {
    return OpError(
        call, absl::StrCat("cannot reshape ", ToString(call.args[0].struct_info()), " (",
                           ToString(total), " elements) to ", ToString(ShapeSInfo(*target)), " (",
                           ToString(new_total), " elements)"));
  }
  return TensorSInfo(SimplifyShape(shape), (*t)->dtype, (*t)->vdevice);
}

PrimExpr ComputeReshape(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  return ctx.inputs[0](UnravelIndex(RavelIndex(idx, OutShape(ctx)), ArgShape(ctx, 0)));
}

absl::StatusOr<StructInfo> InferFlatten(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  if (!(*t)->shape.has_value()) return TensorSInfoOfRank(1, (*t)->dtype, (*t)->vdevice);
  return TensorSInfo({Simplify(Product(*(*t)->shape))}, (*t)->dtype, (*t)->vdevice);
}

// ---- permute_dims, expand_dims, squeeze ----

absl::StatusOr<std::vector<int64_t>> PermAxes(const CallNode& call, int64_t ndim) {
  absl::StatusOr<std::optional<std::vector<int64_t>>> axes = AxesAttr(call, "axes");
  if (!axes.ok()) return axes.status();
  if (!axes->has_value()) {
    std::vector<int64_t> rev;
    for (int64_t k = ndim; k-- > 0;) rev.push_back(k);
    return rev;
  }
  if (static_cast<int64_t>((*axes)->size()) != ndim) {
    return OpError(call, absl::StrCat("axes has ", (*axes)->size(), " entries for a tensor of ",
                                      ndim, " dims"));
  }
  return NormalizeAxes(call, **axes, ndim);
}

absl::StatusOr<StructInfo> InferPermute(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  if ((*t)->ndim < 0) return TensorSInfoOfRank(-1, (*t)->dtype, (*t)->vdevice);
  absl::StatusOr<std::vector<int64_t>> axes = PermAxes(call, (*t)->ndim);
  if (!axes.ok()) return axes.status();
  if (!(*t)->shape.has_value()) return TensorLike(*t, std::nullopt, (*t)->ndim);
  std::vector<PrimExpr> shape;
  for (int64_t a : *axes) shape.push_back((*(*t)->shape)[a]);
  return TensorLike(*t, shape, (*t)->ndim);
}

PrimExpr ComputePermute(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  std::vector<int64_t> axes = *PermAxes(*ctx.call, static_cast<int64_t>(in.size()));
  std::vector<PrimExpr> in_idx(in.size());
  for (size_t k = 0; k < axes.size(); ++k) in_idx[axes[k]] = idx[k];
  return ctx.inputs[0](in_idx);
}

absl::StatusOr<std::vector<int64_t>> ExpandAxes(const CallNode& call, int64_t out_ndim) {
  absl::StatusOr<std::optional<std::vector<int64_t>>> axes = AxesAttr(call, "axis");
  if (!axes.ok()) return axes.status();
  if (!axes->has_value()) return OpError(call, "missing attribute axis");
  absl::StatusOr<std::vector<int64_t>> n = NormalizeAxes(call, **axes, out_ndim);
  if (!n.ok()) return n.status();
  std::sort(n->begin(), n->end());
  return n;
}

absl::StatusOr<StructInfo> InferExpandDims(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::optional<std::vector<int64_t>>> raw = AxesAttr(call, "axis");
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return OpError(call, "missing attribute axis");
  if ((*t)->ndim < 0) return TensorSInfoOfRank(-1, (*t)->dtype, (*t)->vdevice);
  const int64_t out_ndim = (*t)->ndim + static_cast<int64_t>((*raw)->size());
  absl::StatusOr<std::vector<int64_t>> axes = ExpandAxes(call, out_ndim);
  if (!axes.ok()) return axes.status();
  if (!(*t)->shape.has_value()) return TensorLike(*t, std::nullopt, static_cast<int>(out_ndim));
  std::vector<PrimExpr> shape;
  size_t j = 0;
  for (int64_t k = 0; k < out_ndim; ++k) {
    if (std::find(axes->begin(), axes->end(), k) != axes->end()) {
      shape.push_back(1);
    } else {
      shape.push_back((*(*t)->shape)[j++]);
    }
  }
  return TensorLike(*t, shape, static_cast<int>(out_ndim));
}

// The input index is the output index without the inserted axes.
PrimExpr ComputeExpandDims(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  std::vector<int64_t> axes = *ExpandAxes(*ctx.call, static_cast<int64_t>(idx.size()));
  std::vector<PrimExpr> in_idx;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) == axes.end()) {
      in_idx.push_back(idx[k]);
    }
  }
  return ctx.inputs[0](in_idx);
}

// The input index: 0 on the squeezed axes, the output indices elsewhere.
// The squeezed axes are the input's size-1 dims the output lacks, matched
// from the left.
PrimExpr ComputeSqueeze(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  std::vector<int64_t> axes;
  if (absl::StatusOr<std::optional<std::vector<int64_t>>> raw = AxesAttr(*ctx.call, "axis");
      raw.ok() && raw->has_value()) {
    axes = *NormalizeAxes(*ctx.call, **raw, static_cast<int64_t>(in.size()));
  } else {
    for (size_t k = 0; k < in.size(); ++k) {
      if (AsConstInt(in[k]) == 1) axes.push_back(static_cast<int64_t>(k));
    }
  }
  std::vector<PrimExpr> in_idx;
  size_t j = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) != axes.end()) {
      in_idx.push_back(0);
    } else {
      in_idx.push_back(idx[j++]);
    }
  }
  return ctx.inputs[0](in_idx);
}

absl::StatusOr<StructInfo> InferSqueeze(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::optional<std::vector<int64_t>>> raw = AxesAttr(call, "axis");
  if (!raw.ok()) return raw.status();
  if (!(*t)->shape.has_value()) {
    if ((*t)->ndim >= 0 && raw->has_value()) {
      return TensorSInfoOfRank((*t)->ndim - static_cast<int>((*raw)->size()), (*t)->dtype,
                               (*t)->vdevice);
    }
    return TensorSInfoOfRank(-1, (*t)->dtype, (*t)->vdevice);
  }
  const std::vector<PrimExpr>& in = *(*t)->shape;
  std::vector<int64_t> axes;
  if (raw->has_value()) {
    absl::StatusOr<std::vector<int64_t>> n = NormalizeAxes(call, **raw, (*t)->ndim);
    if (!n.ok()) return n.status();
    for (int64_t a : *n) {
      std::optional<int64_t> c = AsConstInt(in[a]);
      if (c.has_value() && *c != 1) {
        return OpError(call,
                       absl::StrCat("cannot squeeze axis ", a, " of ",
                                    ToString(call.args[0].struct_info()), ": its size is ", *c));
      }
    }
    axes = *n;
  } else {
    for (int64_t k = 0; k < (*t)->ndim; ++k) {
      if (AsConstInt(in[k]) == 1) axes.push_back(k);
    }
  }
  std::vector<PrimExpr> shape;
  for (int64_t k = 0; k < (*t)->ndim; ++k) {
    if (std::find(axes.begin(), axes.end(), k) == axes.end()) shape.push_back(in[k]);
  }
  return TensorLike(*t, shape, static_cast<int>(shape.size()));
}

// ---- broadcast_to ----

absl::StatusOr<StructInfo> InferBroadcastTo(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::vector<PrimExpr>> target = ShapeArg(call, 1);
  if (!target.ok()) return target.status();
  if ((*t)->shape.has_value()) {
    const std::vector<PrimExpr>& in = *(*t)->shape;
    StructInfo target_sinfo = TensorSInfo(*target, (*t)->dtype);
    if (in.size() > target->size()) {
      return OpError(call, absl::StrCat("cannot broadcast ", ToString(call.args[0].struct_info()),
                                        " to ", ToString(target_sinfo)));
    }
    for (size_t k = 0; k < in.size(); ++k) {
      const PrimExpr& d = in[k];
      const PrimExpr& o = (*target)[k + target->size() - in.size()];
      std::optional<int64_t> dc = AsConstInt(d), oc = AsConstInt(o);
      if (dc == 1 || ProveEqual(d, o)) continue;
      if (dc.has_value() && oc.has_value()) {
        return OpError(call, absl::StrCat("cannot broadcast ", ToString(call.args[0].struct_info()),
                                          " to ", ToString(target_sinfo)));
      }
    }
  }
  return TensorSInfo(SimplifyShape(*target), (*t)->dtype, (*t)->vdevice);
}

PrimExpr ComputeBroadcastTo(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  return ctx.inputs[0](BroadcastIndices(idx, ArgShape(ctx, 0)));
}

// ---- full, zeros, ones ----

absl::StatusOr<StructInfo> InferFull(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
  absl::StatusOr<std::vector<PrimExpr>> shape = ShapeArg(call, 0);
  if (!shape.ok()) return shape.status();
  std::optional<DataType> dtype = GetDTypeAttr(call.attrs, "dtype");
  const StructInfo& v = call.args[1].struct_info();
  if (const auto* p = v.as<PrimStructInfoNode>()) {
    if (!dtype.has_value()) dtype = p->dtype;
  } else if (const auto* t = v.as<TensorStructInfoNode>()) {
    if (t->ndim != 0) {
      return OpError(call, absl::StrCat("fill value must be a scalar, got ", ToString(v)));
    }
    if (!dtype.has_value()) dtype = t->dtype;
  } else {
    return OpError(call, absl::StrCat("fill value must be a PrimValue or a scalar tensor, got ",
                                      v.defined() ? ToString(v) : "no struct info"));
  }
  return TensorSInfo(SimplifyShape(*shape), dtype);
}

PrimExpr CastFill(DataType to, const PrimExpr& v) {
  if (to.is_bool() && v.dtype() != to) return NE(v, MakeConst(v.dtype(), 0));
  return Cast(to, v);
}

PrimExpr ComputeFull(const LowerContext& ctx, const std::vector<PrimExpr>&) {
  DataType to = *ctx.out_sinfo.as<TensorStructInfoNode>()->dtype;
  if (const auto* pv = ctx.call->args[1].as<PrimValueNode>()) return CastFill(to, pv->value);
  return CastFill(to, ctx.inputs[1]({}));
}

void RegisterFill(const std::string& name, double value) {
  RegisterComputeOp(
      name, OpPattern::kElemWise, 1,
      [](const CallNode& call) -> absl::StatusOr<StructInfo> {
        if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
        absl::StatusOr<std::vector<PrimExpr>> shape = ShapeArg(call, 0);
        if (!shape.ok()) return shape.status();
        std::optional<DataType> dtype = GetDTypeAttr(call.attrs, "dtype");
        return TensorSInfo(SimplifyShape(*shape), dtype.value_or(DataType::Float(32)));
      },
      [value](const LowerContext& ctx, const std::vector<PrimExpr>&) {
        DataType to = *ctx.out_sinfo.as<TensorStructInfoNode>()->dtype;
        return to.is_bool() ? BoolImm(value != 0) : MakeConst(to, value);
      });
}

// ---- arange ----

// R.arange(start, end, step, dtype=int64): start, start + step, ... while
// below end (above it for a negative step), as TVM's relax.arange and ONNX
// Range. The arguments are int64 PrimValues and may be symbolic (a length
// from a Shape, a bound read at run time); the length is
// max(ceil((end - start) / step), 0).
absl::StatusOr<StructInfo> InferArange(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 3); !s.ok()) return s;
  std::vector<PrimExpr> v;
  for (size_t i = 0; i < 3; ++i) {
    const auto* pv = call.args[i].as<PrimValueNode>();
    if (pv == nullptr || !(pv->value.dtype().is_int() || pv->value.dtype().is_uint())) {
      return OpError(call, absl::StrCat("argument ", i, " must be an integer prim value, got ",
                                        ToString(call.args[i].struct_info())));
    }
    v.push_back(Cast(DataType::Int(64), pv->value));
  }
  if (AsConstInt(v[2]) == 0) return OpError(call, "step is 0");
  // ceil(a / b) = -floor(-a / b) for either sign of b.
  PrimExpr n = Max(PrimExpr(0) - FloorDiv(v[0] - v[1], v[2]), PrimExpr(0));
  std::optional<DataType> dtype = GetDTypeAttr(call.attrs, "dtype");
  return TensorSInfo({Simplify(n)}, dtype.value_or(DataType::Int(64)));
}

PrimExpr ComputeArange(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  auto arg = [&](size_t i) {
    return Cast(DataType::Int(64), ctx.call->args[i].as<PrimValueNode>()->value);
  };
  DataType to = *ctx.out_sinfo.as<TensorStructInfoNode>()->dtype;
  return Cast(to, arg(0) + idx[0] * arg(2));
}

// ---- tril, triu ----

// Keeps the elements on and below (tril) or above (triu) the k-th diagonal
// of the last two dims and zeroes the rest: element (.., i, j) is kept when
// j - i <= k (tril) or j - i >= k (triu).
absl::StatusOr<StructInfo> InferTriangle(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  if ((*t)->ndim >= 0 && (*t)->ndim < 2) {
    return OpError(call, absl::StrCat("the tensor must have at least 2 dims, got ",
                                      ToString(call.args[0].struct_info())));
  }
  return call.args[0].struct_info();
}

PrimExpr ComputeTriangle(const LowerContext& ctx, const std::vector<PrimExpr>& idx, bool lower) {
  const size_t n = idx.size();
  const PrimExpr diff = idx[n - 1] - idx[n - 2];
  const PrimExpr k = GetIntAttr(ctx.call->attrs, "k", 0);
  const PrimExpr keep = lower ? LE(diff, k) : GE(diff, k);
  const DataType dtype = *ctx.out_sinfo.as<TensorStructInfoNode>()->dtype;
  const PrimExpr zero = dtype.is_bool() ? BoolImm(false) : MakeConst(dtype, 0);
  return Select(keep, ctx.inputs[0](idx), zero);
}

// ---- cumsum ----

// The running sum along attr "axis" (required), with "exclusive" (the sum
// of the elements before, 0 first) and "reverse" (summing from the end, as
// ONNX's CumSum). A schedule: per position of the other dims, a serial loop
// along the axis with a thread-local accumulator.
absl::StatusOr<StructInfo> InferCumsum(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  if ((*t)->dtype.has_value() && (*t)->dtype->is_bool()) {
    return OpError(call, "cannot sum a bool tensor");
  }
  if (call.attrs.count("axis") == 0) return OpError(call, "missing attribute axis");
  if ((*t)->ndim >= 0) {
    absl::StatusOr<int64_t> axis = AxisAttr(call, (*t)->ndim);
    if (!axis.ok()) return axis.status();
  }
  return call.args[0].struct_info();
}

absl::StatusOr<Stmt> ScheduleCumsum(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue) {
  const CallNode& call = *ctx.call;
  const std::vector<PrimExpr>& shape = ArgShape(ctx, 0);
  absl::StatusOr<int64_t> axis = AxisAttr(call, static_cast<int64_t>(shape.size()));
  if (!axis.ok()) return axis.status();
  const bool exclusive = GetBoolAttr(call.attrs, "exclusive", false);
  const bool reverse = GetBoolAttr(call.attrs, "reverse", false);
  const Buffer& out = outputs[0];
  const DataType dtype = out->dtype;
  const PrimExpr n = shape[*axis];
  std::vector<PrimExpr> outer = shape;
  outer.erase(outer.begin() + *axis);
  Var j("j");
  return MakeParallelLoopNest(
      outer,
      [&](const std::vector<PrimExpr>& outer_idx) -> Stmt {
        std::vector<PrimExpr> idx = outer_idx;
        idx.insert(idx.begin() + *axis, reverse ? n - 1 - j : PrimExpr(j));
        Buffer acc = MakeBuffer("acc", dtype, {1}, BufferNode::Scope::kLocal);
        const PrimExpr x = ctx.inputs[0](idx);
        Stmt add = Store(acc, {0}, Load(acc, {0}) + x);
        Stmt store = Store(out, idx, epilogue(Load(acc, {0}), idx));
        Stmt body = exclusive ? Seq({store, add}) : Seq({add, store});
        return Allocate(
            acc, Seq({Store(acc, {0}, MakeConst(dtype, 0)), For(j, 0, n, ForKind::kSerial, body)}));
      },
      ForKind::kSerial, /*gpu=*/ctx.target.gpu);  // for a GPU: one thread per scanned line
}

// ---- depth_to_space ----
//
// relax.nn.depth_to_space(x, block_size=[r1, r2], mode="CRD" | "DCR"):
// [N, C * r1 * r2, H, W] -> [N, C, H * r1, W * r2], output (n, c, h * r1 + a,
// w * r2 + b) taking input channel c * r1 * r2 + a * r2 + b (CRD: torch's
// pixel_shuffle, and the non-overlapping ConvTranspose of the ONNX importer)
// or (a * r2 + b) * C + c (DCR, ONNX DepthToSpace's default). As reshape,
// permute_dims and reshape it was one elementwise loop over the output
// whose every lane read another plane (16x slower than a copy of the same
// bytes); here a task writes one output row from r2 contiguous input rows
// (the r2 loop unrolled inside the vectorized one: LLVM interleaves the
// stores), with the elementwise ops after it as its epilogue.

absl::StatusOr<std::vector<int64_t>> BlockSize(const CallNode& call) {
  std::vector<int64_t> r = GetIntsAttr(call.attrs, "block_size", {});
  if (r.size() != 2 || r[0] < 1 || r[1] < 1) {
    return OpError(call, "block_size must be two positive values");
  }
  const std::string mode = GetStringAttr(call.attrs, "mode", "CRD");
  if (mode != "CRD" && mode != "DCR")
    return OpError(call, absl::StrCat("mode must be CRD or DCR, not ", mode));
  return r;
}

absl::StatusOr<StructInfo> InferDepthToSpace(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  absl::StatusOr<std::vector<int64_t>> r = BlockSize(call);
  if (!r.ok()) return r.status();
  if ((*t)->ndim >= 0 && (*t)->ndim != 4) return OpError(call, "expects 4-d data (NCHW)");
  if (!(*t)->shape.has_value()) return TensorLike(*t, std::nullopt, 4);
  const std::vector<PrimExpr>& s = *(*t)->shape;
  const int64_t block = (*r)[0] * (*r)[1];
  const int64_t* c = s[1].as_int();
  if (c == nullptr || *c % block != 0) {
    return OpError(
        call, absl::StrCat("data has ", ToString(s[1]), " channels, not a multiple of ", block));
  }
  return TensorLike(*t,
                    std::vector<PrimExpr>{s[0], PrimExpr(*c / block), s[2] * PrimExpr((*r)[0]),
                                          s[3] * PrimExpr((*r)[1])},
                    4);
}

absl::StatusOr<Stmt> ScheduleDepthToSpace(const LowerContext& ctx,
                                          const std::vector<Buffer>& outputs,
                                          const Epilogue& epilogue) {
  absl::StatusOr<std::vector<int64_t>> r = BlockSize(*ctx.call);
  if (!r.ok()) return r.status();
  const bool dcr = GetStringAttr(ctx.call->attrs, "mode", "CRD") == "DCR";
  const Buffer& out = outputs[0];
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  const PrimExpr N = out->shape[0], C = out->shape[1], H = in[2], W = in[3];
  const PrimExpr R1((*r)[0]), R2((*r)[1]);
  auto channel = [&](const PrimExpr& c, const PrimExpr& a, const PrimExpr& b) {
    return dcr ? (a * R2 + b) * C + c : (c * R1 + a) * R2 + b;
  };
  auto put = [&](const std::vector<PrimExpr>& yi, const PrimExpr& v) {
    return Store(out, yi, epilogue ? epilogue(v, yi) : v);
  };
  if (ctx.target.gpu) {
    return MakeParallelLoopNest(
        out->shape,
        [&](const std::vector<PrimExpr>& i) {
          PrimExpr a = FloorMod(i[2], R1), b = FloorMod(i[3], R2);
          return put(i, ctx.inputs[0](
                            {i[0], channel(i[1], a, b), FloorDiv(i[2], R1), FloorDiv(i[3], R2)}));
        },
        ForKind::kVectorized, /*gpu=*/true);
  }
  using nn_internal::Loop;
  return Loop("dr", N * C * H * R1, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, C, H, R1});
    PrimExpr n = i[0], c = i[1], h = i[2], a = i[3];
    return Loop("dw", W, ForKind::kVectorized, [&](const PrimExpr& w) {
      return Loop("db", R2, ForKind::kUnrolled, [&](const PrimExpr& b) {
        return put({n, c, h * R1 + a, w * R2 + b}, ctx.inputs[0]({n, channel(c, a, b), h, w}));
      });
    });
  });
}

}  // namespace

void RegisterManipulationOps() {
  RegisterComputeOp("relax.reshape", OpPattern::kInjective, 2, InferReshape, ComputeReshape);
  RegisterComputeOp("relax.flatten", OpPattern::kInjective, 1, InferFlatten, ComputeReshape);
  RegisterComputeOp("relax.permute_dims", OpPattern::kInjective, 1, InferPermute, ComputePermute);
  RegisterComputeOp("relax.expand_dims", OpPattern::kInjective, 1, InferExpandDims,
                    ComputeExpandDims);
  RegisterComputeOp("relax.squeeze", OpPattern::kInjective, 1, InferSqueeze, ComputeSqueeze);
  RegisterComputeOp("relax.broadcast_to", OpPattern::kBroadcast, 2, InferBroadcastTo,
                    ComputeBroadcastTo);
  RegisterComputeOp("relax.full", OpPattern::kElemWise, 2, InferFull, ComputeFull);
  RegisterComputeOp("relax.arange", OpPattern::kInjective, 3, InferArange, ComputeArange);
  RegisterFill("relax.zeros", 0);
  RegisterFill("relax.ones", 1);
  RegisterComputeOp("relax.tril", OpPattern::kInjective, 1, InferTriangle,
                    [](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
                      return ComputeTriangle(ctx, idx, /*lower=*/true);
                    });
  RegisterComputeOp("relax.triu", OpPattern::kInjective, 1, InferTriangle,
                    [](const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
                      return ComputeTriangle(ctx, idx, /*lower=*/false);
                    });
  RegisterScheduleOp("relax.cumsum", OpPattern::kOpaque, 1, InferCumsum, ScheduleCumsum);
  RegisterScheduleOp("relax.nn.depth_to_space", OpPattern::kOutEWiseFusable, 1, InferDepthToSpace,
                     ScheduleDepthToSpace);
}

}  // namespace tether::compiler
