// Slicing operators: concat (a Tuple of tensors; its fields are read
// through the readers LowerCallToKernel appends after the call's arguments),
// split (several outputs: a kOpaque `schedule`), strided_slice (numpy
// semantics: negative begin/end count from the end, out-of-range values
// clamp), dynamic_slice (begin, extent and strides as shapes of
// expressions evaluated when the model runs, its reads clamped), take and
// gather_elements (indices int32/int64; a negative index
// counts from the end once, and any index still out of range is clamped to
// the nearest valid one, so a bad index never reads outside the tensor),
// and scatter_elements (indices as gather_elements', clamped the same way).
// All but split and scatter_elements are injective `compute`s.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

// ---- concat ----

// The tensor struct infos of concat's Tuple argument.
absl::StatusOr<std::vector<const TensorStructInfoNode*>> TupleTensors(const CallNode& call) {
  if (call.args.empty()) return OpError(call, "missing argument 0");
  const auto* tup = call.args[0].struct_info().as<TupleStructInfoNode>();
  if (tup == nullptr) return OpError(call, "argument 0 must be a tuple of tensors");
  std::vector<const TensorStructInfoNode*> out;
  for (const StructInfo& f : tup->fields) {
    const auto* t = f.as<TensorStructInfoNode>();
    if (t == nullptr) {
      return OpError(call,
                     absl::StrCat("tuple field ", out.size(), " is not a tensor: ", ToString(f)));
    }
    out.push_back(t);
  }
  if (out.empty()) return OpError(call, "cannot concatenate an empty tuple");
  return out;
}

absl::StatusOr<StructInfo> InferConcat(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<std::vector<const TensorStructInfoNode*>> ts = TupleTensors(call);
  if (!ts.ok()) return ts.status();
  const TensorStructInfoNode* first = (*ts)[0];
  int ndim = -1;
  std::optional<DataType> dtype;
  for (const TensorStructInfoNode* t : *ts) {
    if (t->dtype.has_value()) {
      if (dtype.has_value() && *dtype != *t->dtype) {
        return OpError(call, absl::StrCat("tensors have different dtypes: ",
                                          ToString(call.args[0].struct_info())));
      }
      dtype = t->dtype;
    }
    if (t->ndim >= 0) {
      if (ndim >= 0 && ndim != t->ndim) {
        return OpError(call, absl::StrCat("tensors have different ranks: ",
                                          ToString(call.args[0].struct_info())));
      }
      ndim = t->ndim;
    }
  }
  if (ndim < 0) return TensorSInfoOfRank(-1, dtype, first->vdevice);
  if (ndim == 0) return OpError(call, "cannot concatenate scalars");
  absl::StatusOr<int64_t> axis = AxisAttr(call, ndim);
  if (!axis.ok()) return axis.status();
  std::vector<PrimExpr> shape;
  for (const TensorStructInfoNode* t : *ts) {
    if (!t->shape.has_value()) return TensorSInfoOfRank(ndim, dtype, first->vdevice);
    if (shape.empty()) {
      shape = *t->shape;
      continue;
    }
    for (int64_t k = 0; k < ndim; ++k) {
      if (k == *axis) {
        shape[k] = shape[k] + (*t->shape)[k];
      } else if (!ProveEqual(shape[k], (*t->shape)[k])) {
        std::optional<int64_t> a = AsConstInt(shape[k]), b = AsConstInt((*t->shape)[k]);
        if (a.has_value() && b.has_value()) {
          return OpError(call, absl::StrCat("dim ", k, " differs between the tensors of ",
                                            ToString(call.args[0].struct_info())));
        }
      }
    }
  }
  return TensorSInfo(SimplifyShape(shape), dtype, first->vdevice);
}

PrimExpr ComputeConcat(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const CallNode& call = *ctx.call;
  const auto* tup = call.args[0].struct_info().as<TupleStructInfoNode>();
  const size_t n = tup->fields.size();
  const int64_t ndim = static_cast<int64_t>(idx.size());
  const int64_t axis = *AxisAttr(call, ndim);
  // Each field read with its index clamped into range (Select evaluates both
  // sides), chosen by where idx[axis] falls.
  std::vector<PrimExpr> offsets{0};
  for (size_t f = 0; f < n; ++f) {
    offsets.push_back(
        Simplify(offsets.back() + (*tup->fields[f].as<TensorStructInfoNode>()->shape)[axis]));
  }
  PrimExpr result;
  for (size_t f = n; f-- > 0;) {
    const PrimExpr extent = (*tup->fields[f].as<TensorStructInfoNode>()->shape)[axis];
    std::vector<PrimExpr> in_idx = idx;
    in_idx[axis] = n == 1 ? idx[axis] : Max(Min(idx[axis] - offsets[f], extent - 1), PrimExpr(0));
    PrimExpr v = ctx.inputs[call.args.size() + f](in_idx);
    result = result.defined() ? Select(LT(idx[axis], offsets[f + 1]), v, result) : v;
  }
  return result;
}

// ---- split ----

// The [begin, end) of each piece along the axis.
absl::StatusOr<std::vector<std::pair<PrimExpr, PrimExpr>>> SplitRanges(const CallNode& call,
                                                                       const PrimExpr& dim) {
  auto it = call.attrs.find("indices_or_sections");
  if (it == call.attrs.end()) return OpError(call, "missing attribute indices_or_sections");
  std::vector<std::pair<PrimExpr, PrimExpr>> ranges;
  if (const auto* sections = std::get_if<int64_t>(&it->second)) {
    if (*sections <= 0)
      return OpError(call, absl::StrCat("sections must be positive, got ", *sections));
    std::optional<int64_t> c = AsConstInt(dim);
    if (c.has_value() && *c % *sections != 0) {
      return OpError(call, absl::StrCat("dim of size ", *c, " does not split into ", *sections,
                                        " equal sections"));
    }
    PrimExpr size = Simplify(FloorDiv(dim, *sections));
    for (int64_t s = 0; s < *sections; ++s) {
      ranges.emplace_back(Simplify(size * s), Simplify(size * (s + 1)));
    }
    return ranges;
  }
  const auto* indices = std::get_if<std::vector<int64_t>>(&it->second);
  if (indices == nullptr) return OpError(call, "attribute indices_or_sections must be ints");
  PrimExpr begin = 0;
  for (int64_t i : *indices) {
    if (i < 0) return OpError(call, absl::StrCat("split index ", i, " is negative"));
    PrimExpr end = Simplify(Max(Min(PrimExpr(i), dim), begin));
    ranges.emplace_back(begin, end);
    begin = end;
  }
  ranges.emplace_back(begin, dim);
  return ranges;
}

absl::StatusOr<StructInfo> InferSplit(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  if (!(*t)->shape.has_value()) return OpError(call, "the input shape must be known");
  absl::StatusOr<int64_t> axis = AxisAttr(call, (*t)->ndim);
  if (!axis.ok()) return axis.status();
  absl::StatusOr<std::vector<std::pair<PrimExpr, PrimExpr>>> ranges =
      SplitRanges(call, (*(*t)->shape)[*axis]);
  if (!ranges.ok()) return ranges.status();
  std::vector<StructInfo> fields;
  for (const auto& [b, e] : *ranges) {
    std::vector<PrimExpr> shape = *(*t)->shape;
    shape[*axis] = Simplify(e - b);
    fields.push_back(TensorSInfo(shape, (*t)->dtype, (*t)->vdevice));
  }
  return TupleSInfo(std::move(fields));
}

absl::StatusOr<Stmt> ScheduleSplit(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                   const Epilogue& epilogue) {
  const CallNode& call = *ctx.call;
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  absl::StatusOr<int64_t> axis = AxisAttr(call, static_cast<int64_t>(in.size()));
  if (!axis.ok()) return axis.status();
  absl::StatusOr<std::vector<std::pair<PrimExpr, PrimExpr>>> ranges = SplitRanges(call, in[*axis]);
  if (!ranges.ok()) return ranges.status();
  if (ctx.target.gpu) {
    // One thread per input element, stored into the output whose range
    // along the axis holds it (the ranges partition the axis in order).
    const size_t ax = static_cast<size_t>(*axis);
    return MakeFlatParallelLoop(in, [&](const std::vector<PrimExpr>& idx) {
      const PrimExpr v = ctx.inputs[0](idx);
      Stmt chain;
      for (size_t k = outputs.size(); k-- > 0;) {
        std::vector<PrimExpr> out_idx = idx;
        out_idx[ax] = idx[ax] - (*ranges)[k].first;
        Stmt store = Store(outputs[k], out_idx, k == 0 ? epilogue(v, out_idx) : v);
        chain =
            chain.defined() ? IfThenElse(LT(idx[ax], (*ranges)[k].second), store, chain) : store;
      }
      return chain;
    });
  }
  std::vector<Stmt> nests;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const PrimExpr begin = (*ranges)[k].first;
    const int64_t ax = *axis;
    nests.push_back(MakeElementwiseLoopNest(outputs[k], [&](const std::vector<PrimExpr>& idx) {
      std::vector<PrimExpr> in_idx = idx;
      in_idx[ax] = idx[ax] + begin;
      PrimExpr v = ctx.inputs[0](in_idx);
      return k == 0 ? epilogue(v, idx) : v;
    }));
  }
  return Seq(std::move(nests));
}

// ---- strided_slice ----

struct SliceAxis {
  PrimExpr begin;
  PrimExpr extent;
  int64_t stride;
};

absl::StatusOr<std::vector<SliceAxis>> SliceAxes(const CallNode& call,
                                                 const std::vector<PrimExpr>& shape) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes = GetIntsAttr(call.attrs, "axes");
  std::vector<int64_t> begin = GetIntsAttr(call.attrs, "begin");
  std::vector<int64_t> end = GetIntsAttr(call.attrs, "end");
  std::vector<int64_t> strides = GetIntsAttr(call.attrs, "strides");
  if (axes.empty()) {
    for (size_t k = 0; k < begin.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (begin.size() != axes.size() || end.size() != axes.size() ||
      (!strides.empty() && strides.size() != axes.size())) {
    return OpError(
        call,
        absl::StrCat("axes, begin, end and strides must have the same length, got ", axes.size(),
                     ", ", begin.size(), ", ", end.size(), ", ", strides.size()));
  }
  absl::StatusOr<std::vector<int64_t>> norm = NormalizeAxes(call, axes, ndim);
  if (!norm.ok()) return norm.status();
  std::vector<SliceAxis> out;
  for (int64_t k = 0; k < ndim; ++k) out.push_back({0, shape[k], 1});
  constexpr int64_t kBig = int64_t{1} << 60;
  for (size_t q = 0; q < norm->size(); ++q) {
    const int64_t a = (*norm)[q];
    const int64_t s = strides.empty() ? 1 : strides[q];
    if (s == 0) return OpError(call, absl::StrCat("stride of axis ", a, " is 0"));
    const PrimExpr dim = shape[a];
    auto norm_pos = [&](int64_t v) -> PrimExpr {
      v = std::clamp(v, -kBig, kBig);
      return v < 0 ? dim + v : PrimExpr(v);
    };
    PrimExpr b, e, extent;
    if (s > 0) {
      b = Min(Max(norm_pos(begin[q]), PrimExpr(0)), dim);
      e = Min(Max(norm_pos(end[q]), PrimExpr(0)), dim);
      extent = Max(FloorDiv(e - b + (s - 1), s), PrimExpr(0));
    } else {
      b = Min(Max(norm_pos(begin[q]), PrimExpr(-1)), dim - 1);
      e = Min(Max(norm_pos(end[q]), PrimExpr(-1)), dim - 1);
      extent = Max(FloorDiv(b - e + (-s - 1), -s), PrimExpr(0));
    }
    out[a] = {Simplify(b), Simplify(extent), s};
  }
  return out;
}

absl::StatusOr<StructInfo> InferStridedSlice(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  if (!(*t)->shape.has_value()) return TensorSInfoOfRank((*t)->ndim, (*t)->dtype, (*t)->vdevice);
  absl::StatusOr<std::vector<SliceAxis>> axes = SliceAxes(call, *(*t)->shape);
  if (!axes.ok()) return axes.status();
  std::vector<PrimExpr> shape;
  for (const SliceAxis& a : *axes) shape.push_back(a.extent);
  return TensorLike(*t, shape, (*t)->ndim);
}

PrimExpr ComputeStridedSlice(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  std::vector<SliceAxis> axes = *SliceAxes(*ctx.call, ArgShape(ctx, 0));
  std::vector<PrimExpr> in_idx(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) in_idx[k] = axes[k].begin + idx[k] * axes[k].stride;
  return ctx.inputs[0](in_idx);
}

// ---- dynamic_slice ----

// relax.dynamic_slice(x, begin, extent, strides): three shapes of x's rank,
// already resolved (clamped, negative indices counted from the end) by
// whoever built them -- the ONNX Slice of run-time starts, ends, axes or
// steps -- and evaluated when the model runs: out[i] = x[begin + i *
// strides], out of shape `extent`. An index still outside x is clamped,
// never a wild read.
absl::StatusOr<StructInfo> InferDynamicSlice(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 4); !s.ok()) return s;
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, TensorArg(call, 0));
  std::vector<PrimExpr> parts[3];
  for (size_t k = 0; k < 3; ++k) {
    TETHER_ASSIGN_OR_RETURN(parts[k], ShapeArg(call, k + 1));
    if (t->ndim >= 0 && static_cast<int64_t>(parts[k].size()) != t->ndim) {
      return OpError(call, absl::StrCat("begin, extent and strides must have ", t->ndim,
                                        " values (the input's rank), got ", parts[k].size()));
    }
  }
  return TensorSInfo(SimplifyShape(parts[1]), t->dtype, t->vdevice);
}

PrimExpr ComputeDynamicSlice(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& xs = ArgShape(ctx, 0);
  const std::vector<PrimExpr> begin = *ShapeArg(*ctx.call, 1);
  const std::vector<PrimExpr> strides = *ShapeArg(*ctx.call, 3);
  std::vector<PrimExpr> in_idx(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    in_idx[k] = Max(Min(begin[k] + idx[k] * strides[k], xs[k] - 1), PrimExpr(0));
  }
  return ctx.inputs[0](in_idx);
}

// ---- take ----

// Argument `i` as a tensor of integer indices (take, gather_elements,
// scatter_elements).
absl::StatusOr<const TensorStructInfoNode*> IndicesArg(const CallNode& call, int i) {
  absl::StatusOr<const TensorStructInfoNode*> ind = TensorArg(call, i);
  if (!ind.ok()) return ind.status();
  if ((*ind)->dtype.has_value() && !(*ind)->dtype->is_int() && !(*ind)->dtype->is_uint()) {
    return OpError(call, absl::StrCat("indices must be integers, got ", (*ind)->dtype->ToString()));
  }
  return ind;
}

absl::StatusOr<StructInfo> InferTake(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = TensorArg(call, 0);
  if (!x.ok()) return x.status();
  absl::StatusOr<const TensorStructInfoNode*> ind = IndicesArg(call, 1);
  if (!ind.ok()) return ind.status();
  const bool flat = call.attrs.count("axis") == 0;
  if (!(*x)->shape.has_value() || !(*ind)->shape.has_value()) {
    if ((*x)->ndim < 0 || (*ind)->ndim < 0)
      return TensorSInfoOfRank(-1, (*x)->dtype, (*x)->vdevice);
    return TensorSInfoOfRank(flat ? (*ind)->ndim : (*x)->ndim - 1 + (*ind)->ndim, (*x)->dtype,
                             (*x)->vdevice);
  }
  if (flat) return TensorSInfo(*(*ind)->shape, (*x)->dtype, (*x)->vdevice);
  if ((*x)->ndim == 0) return OpError(call, "cannot take from a scalar along an axis");
  absl::StatusOr<int64_t> axis = AxisAttr(call, (*x)->ndim);
  if (!axis.ok()) return axis.status();
  const std::vector<PrimExpr>& xs = *(*x)->shape;
  std::vector<PrimExpr> shape(xs.begin(), xs.begin() + *axis);
  shape.insert(shape.end(), (*ind)->shape->begin(), (*ind)->shape->end());
  shape.insert(shape.end(), xs.begin() + *axis + 1, xs.end());
  return TensorSInfo(SimplifyShape(shape), (*x)->dtype, (*x)->vdevice);
}

// An index into a dim of size `dim`: negative indices count from the end
// once, then anything still out of range is clamped (never a wild read).
PrimExpr SafeIndex(const PrimExpr& raw, const PrimExpr& dim) {
  PrimExpr i = Cast(DataType::Int(64), raw);
  i = Select(LT(i, PrimExpr(0)), i + dim, i);
  return Max(Min(i, dim - 1), PrimExpr(0));
}

PrimExpr ComputeTake(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& xs = ArgShape(ctx, 0);
  const std::vector<PrimExpr>& is = ArgShape(ctx, 1);
  if (ctx.call->attrs.count("axis") == 0) {
    PrimExpr flat = SafeIndex(ctx.inputs[1](idx), Product(xs));
    return ctx.inputs[0](UnravelIndex(flat, xs));
  }
  const size_t axis = static_cast<size_t>(*NormalizeAxis(
      *ctx.call, GetIntAttr(ctx.call->attrs, "axis", 0), static_cast<int64_t>(xs.size())));
  std::vector<PrimExpr> ind_idx(idx.begin() + axis, idx.begin() + axis + is.size());
  std::vector<PrimExpr> x_idx(idx.begin(), idx.begin() + axis);
  x_idx.push_back(SafeIndex(ctx.inputs[1](ind_idx), xs[axis]));
  x_idx.insert(x_idx.end(), idx.begin() + axis + is.size(), idx.end());
  return ctx.inputs[0](x_idx);
}

// ---- gather_elements ----

// out[i0, .., ia, ..] = x[i0, .., indices[i0, .., ia, ..], ..] along `axis`:
// the output has the shape of indices (which has x's rank).
absl::StatusOr<StructInfo> InferGatherElements(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = TensorArg(call, 0);
  if (!x.ok()) return x.status();
  absl::StatusOr<const TensorStructInfoNode*> ind = IndicesArg(call, 1);
  if (!ind.ok()) return ind.status();
  if ((*x)->ndim >= 0 && (*ind)->ndim >= 0 && (*x)->ndim != (*ind)->ndim) {
    return OpError(call,
                   absl::StrCat("indices have ", (*ind)->ndim, " dims, the tensor ", (*x)->ndim));
  }
  const int ndim = (*x)->ndim >= 0 ? (*x)->ndim : (*ind)->ndim;
  if (ndim == 0) return OpError(call, "cannot gather elements of a scalar");
  if (ndim > 0) {
    absl::StatusOr<int64_t> axis = AxisAttr(call, ndim);
    if (!axis.ok()) return axis.status();
  }
  if (!(*ind)->shape.has_value()) return TensorSInfoOfRank(ndim, (*x)->dtype, (*x)->vdevice);
  return TensorSInfo(*(*ind)->shape, (*x)->dtype, (*x)->vdevice);
}

PrimExpr ComputeGatherElements(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& xs = ArgShape(ctx, 0);
  const size_t axis = static_cast<size_t>(*NormalizeAxis(
      *ctx.call, GetIntAttr(ctx.call->attrs, "axis", 0), static_cast<int64_t>(xs.size())));
  std::vector<PrimExpr> x_idx = idx;
  x_idx[axis] = SafeIndex(ctx.inputs[1](idx), xs[axis]);
  return ctx.inputs[0](x_idx);
}

// ---- scatter_elements ----

// out = data, then for every position p of indices, in row-major order:
// out[p with p[axis] = indices[p]] = combine(that element, updates[p]), where
// "reduction" is "update" (the default: the last write wins), "add" or
// "mul". A kOpaque `schedule`: a parallel copy, then a serial loop nest over
// the updates (serial so repeated indices combine deterministically).
absl::StatusOr<StructInfo> InferScatterElements(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 3); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = TensorArg(call, 0);
  if (!x.ok()) return x.status();
  absl::StatusOr<const TensorStructInfoNode*> ind = IndicesArg(call, 1);
  if (!ind.ok()) return ind.status();
  absl::StatusOr<const TensorStructInfoNode*> upd = TensorArg(call, 2);
  if (!upd.ok()) return upd.status();
  if ((*x)->dtype.has_value() && (*upd)->dtype.has_value() && *(*x)->dtype != *(*upd)->dtype) {
    return OpError(call, absl::StrCat("updates are ", (*upd)->dtype->ToString(), ", the tensor ",
                                      (*x)->dtype->ToString()));
  }
  if ((*x)->ndim >= 0 && (*ind)->ndim >= 0 && (*x)->ndim != (*ind)->ndim) {
    return OpError(call,
                   absl::StrCat("indices have ", (*ind)->ndim, " dims, the tensor ", (*x)->ndim));
  }
  if ((*ind)->shape.has_value() && (*upd)->shape.has_value()) {
    for (size_t k = 0; k < (*ind)->shape->size() && k < (*upd)->shape->size(); ++k) {
      std::optional<int64_t> a = AsConstInt((*(*ind)->shape)[k]);
      std::optional<int64_t> b = AsConstInt((*(*upd)->shape)[k]);
      if ((*ind)->shape->size() != (*upd)->shape->size() ||
          (a.has_value() && b.has_value() && *a != *b)) {
        return OpError(
            call, absl::StrCat("updates ", ToString(call.args[2].struct_info()),
                               " do not match indices ", ToString(call.args[1].struct_info())));
      }
    }
  }
  const std::string reduction = GetStringAttr(call.attrs, "reduction", "update");
  if (reduction != "update" && reduction != "add" && reduction != "mul") {
    return OpError(call, absl::StrCat("unknown reduction '", reduction, "'"));
  }
  if ((*x)->ndim == 0) return OpError(call, "cannot scatter into a scalar");
  if ((*x)->ndim > 0) {
    absl::StatusOr<int64_t> axis = AxisAttr(call, (*x)->ndim);
    if (!axis.ok()) return axis.status();
  }
  return call.args[0].struct_info();
}

absl::StatusOr<Stmt> ScheduleScatterElements(const LowerContext& ctx,
                                             const std::vector<Buffer>& outputs,
                                             const Epilogue& /*epilogue: kOpaque, never fused*/) {
  const CallNode& call = *ctx.call;
  const std::vector<PrimExpr>& xs = ArgShape(ctx, 0);
  const std::vector<PrimExpr>& is = ArgShape(ctx, 1);
  absl::StatusOr<int64_t> axis = AxisAttr(call, static_cast<int64_t>(xs.size()));
  if (!axis.ok()) return axis.status();
  const std::string reduction = GetStringAttr(call.attrs, "reduction", "update");
  const Buffer& out = outputs[0];
  if (ctx.target.gpu) {
    // One thread per output element, without atomics: it starts from the
    // input element and applies, in the CPU schedule's order, every update
    // that targets it (those at its coordinates off the axis whose index
    // hits its coordinate on the axis), so repeated indices resolve as on
    // the CPU.
    const size_t ax = static_cast<size_t>(*axis);
    return MakeFlatParallelLoop(out->shape, [&](const std::vector<PrimExpr>& oi) {
      const PrimExpr zero(0);
      Buffer acc = MakeBuffer("scatter_acc", out->dtype, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Var s("s");
      std::vector<PrimExpr> ui = oi;
      ui[ax] = s;
      const PrimExpr u = ctx.inputs[2](ui);
      PrimExpr value = u;
      if (reduction == "add") value = Load(acc, {zero}) + u;
      if (reduction == "mul") value = Load(acc, {zero}) * u;
      Stmt apply =
          IfThenElse(EQ(SafeIndex(ctx.inputs[1](ui), xs[ax]), oi[ax]), Store(acc, {zero}, value));
      Stmt updates = For(s, 0, is[ax], ForKind::kSerial, apply);
      PrimExpr covered;  // the element's coordinates off the axis are inside the updates
      for (size_t k = 0; k < oi.size(); ++k) {
        if (k == ax) continue;
        PrimExpr in_k = LT(oi[k], is[k]);
        covered = covered.defined() ? And(covered, in_k) : in_k;
      }
      if (covered.defined()) updates = IfThenElse(covered, updates);
      return Allocate(acc, Seq({Store(acc, {zero}, ctx.inputs[0](oi)), updates,
                                Store(out, oi, Load(acc, {zero}))}));
    });
  }
  Stmt copy = MakeElementwiseLoopNest(
      out, [&](const std::vector<PrimExpr>& idx) { return ctx.inputs[0](idx); });
  std::vector<Var> vars;
  std::vector<PrimExpr> idx;
  for (size_t k = 0; k < is.size(); ++k) {
    vars.emplace_back(absl::StrCat("s", k));
    idx.push_back(vars.back());
  }
  std::vector<PrimExpr> target = idx;
  target[*axis] = SafeIndex(ctx.inputs[1](idx), xs[*axis]);
  const PrimExpr u = ctx.inputs[2](idx);
  PrimExpr value = u;
  if (reduction == "add") value = Load(out, target) + u;
  if (reduction == "mul") value = Load(out, target) * u;
  Stmt scatter = Store(out, target, value);
  for (size_t k = vars.size(); k-- > 0;) {
    scatter = For(vars[k], 0, is[k], ForKind::kSerial, scatter);
  }
  return Seq({copy, scatter});
}

}  // namespace

void RegisterSlicingOps() {
  RegisterComputeOp("relax.concat", OpPattern::kInjective, 1, InferConcat, ComputeConcat);
  RegisterComputeOp("relax.strided_slice", OpPattern::kInjective, 1, InferStridedSlice,
                    ComputeStridedSlice);
  RegisterComputeOp("relax.dynamic_slice", OpPattern::kInjective, 4, InferDynamicSlice,
                    ComputeDynamicSlice);
  RegisterComputeOp("relax.take", OpPattern::kInjective, 2, InferTake, ComputeTake);
  RegisterComputeOp("relax.gather_elements", OpPattern::kInjective, 2, InferGatherElements,
                    ComputeGatherElements);
  RegisterScheduleOp("relax.split", OpPattern::kOpaque, 1, InferSplit, ScheduleSplit);
  RegisterScheduleOp("relax.scatter_elements", OpPattern::kOpaque, 3, InferScatterElements,
                     ScheduleScatterElements);
}

}  // namespace tether::compiler
