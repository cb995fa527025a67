// Index-driven data-movement converters of the ONNX importer: OneHot,
// DepthToSpace, SpaceToDepth and GatherND (compositions of reshape,
// permute_dims, arithmetic, where and take), ReverseSequence (a
// gather_elements with a computed index), ScatterND (flattened onto
// scatter_elements), and GatherElements, Trilu, CumSum and ScatterElements
// (one Relax operator each). Registered from RegisterShapeConverters.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

// A CPU int64 tensor constant of `shape` holding `values`.
absl::StatusOr<Expr> Int64Constant(const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& values) {
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, DataType::Int(64), values.data(), values.size() * sizeof(int64_t));
  if (!t.ok()) return t.status();
  return MakeConstant(*std::move(t));
}

// The single value of a constant 0-D or 1-element tensor of any int or
// float dtype, as an integer.
absl::StatusOr<int64_t> ScalarInt(ConvertContext& ctx, int i, absl::string_view what) {
  std::optional<Tensor> t = ctx.ConstantInput(i);
  if (!t.has_value()) {
    return ctx.Unsupported(absl::StrCat("input ", i, " (", what, ") must be known at import time"));
  }
  if ((*t)->NumElements() != 1) {
    return ctx.Invalid(absl::StrCat("input ", i, " (", what, ") must have one element, got ",
                                    (*t)->NumElements()));
  }
  const DataType dt = (*t)->dtype();
  const void* p = (*t)->element_data();
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  if (dt == DataType::Int(64)) return load(int64_t{});
  if (dt == DataType::Int(32)) return load(int32_t{});
  if (dt == DataType::UInt(64)) return static_cast<int64_t>(load(uint64_t{}));
  if (dt == DataType::UInt(32)) return load(uint32_t{});
  if (dt == DataType::Float(32)) return static_cast<int64_t>(load(float{}));
  if (dt == DataType::Float(64)) return static_cast<int64_t>(load(double{}));
  return ctx.Unsupported(absl::StrCat("input ", i, " (", what, ") of dtype ", dt.ToString()));
}

// ---- OneHot ----

// one_hot = where(expand_dims(idx, axis) == iota, on, off), where iota is a
// constant [depth] laid along `axis` and negative indices count from the end.
// The depth of a OneHot: a constant, or a 0-D/1-element tensor of any
// numeric dtype read when the model runs. `tensor` is it as an int64 scalar
// tensor, `n` as a PrimExpr.
struct OneHotDepth {
  Expr tensor;
  PrimExpr n;
};

absl::StatusOr<OneHotDepth> DepthOf(ConvertContext& ctx) {
  if (ctx.ConstantInput(1).has_value()) {
    TETHER_ASSIGN_OR_RETURN(int64_t depth, ScalarInt(ctx, 1, "depth"));
    if (depth <= 0) return ctx.Invalid(absl::StrCat("depth ", depth, " must be positive"));
    TETHER_ASSIGN_OR_RETURN(Expr t, Int64Constant({}, {depth}));
    return OneHotDepth{t, PrimExpr(depth)};
  }
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(1));
  if (info->ndim > 1) return ctx.Invalid("input 1 (depth) must be a scalar or have one element");
  TETHER_ASSIGN_OR_RETURN(Expr t, ctx.Input(1));
  TETHER_ASSIGN_OR_RETURN(t, ctx.EmitOp("relax.reshape", {t, MakeShapeExpr({})}));
  if (info->dtype != DataType::Int(64)) {
    TETHER_ASSIGN_OR_RETURN(t, ctx.EmitOp("relax.astype", {t}, {{"dtype", DataType::Int(64)}}));
  }
  TETHER_ASSIGN_OR_RETURN(KnownInts k, ctx.RunTimeInts(t, ctx.node().input(1)));
  return OneHotDepth{t, k.values[0]};
}

ConvertResult ConvertOneHot(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim < 0) return ctx.Unsupported("one-hot of indices of unknown rank");
  TETHER_ASSIGN_OR_RETURN(OneHotDepth depth, DepthOf(ctx));
  const int64_t out_rank = (*info)->ndim + 1;
  absl::StatusOr<int64_t> axis = NormalizeOnnxAxis(ctx, ctx.AttrInt("axis", -1), out_rank, "axis");
  if (!axis.ok()) return axis.status();
  absl::StatusOr<const TensorStructInfoNode*> vinfo = ctx.InputTensorInfo(2);
  if (!vinfo.ok()) return vinfo.status();
  if ((*vinfo)->shape.has_value() &&
      ((*vinfo)->ndim != 1 || AsConstInt((*(*vinfo)->shape)[0]) != 2)) {
    return ctx.Invalid("values must be a tensor of 2 elements [off, on]");
  }
  absl::StatusOr<Expr> indices = ctx.Input(0);
  if (!indices.ok()) return indices.status();
  absl::StatusOr<Expr> values = ctx.Input(2);
  if (!values.ok()) return values.status();

  // Indices in [-depth, 0) count from the end; any other index out of
  // [0, depth) matches no position and gives all `off`.
  absl::StatusOr<Expr> idx = ctx.EmitOp("relax.astype", {*indices}, {{"dtype", DataType::Int(64)}});
  if (!idx.ok()) return idx.status();
  absl::StatusOr<Expr> zero = Int64Constant({}, {0});
  if (!zero.ok()) return zero.status();
  absl::StatusOr<Expr> neg = ctx.EmitOp("relax.less", {*idx, *zero});
  if (!neg.ok()) return neg.status();
  absl::StatusOr<Expr> wrapped = ctx.EmitOp("relax.add", {*idx, depth.tensor});
  if (!wrapped.ok()) return wrapped.status();
  idx = ctx.EmitOp("relax.where", {*neg, *wrapped, *idx});
  if (!idx.ok()) return idx.status();
  idx = ctx.EmitOp("relax.expand_dims", {*idx}, {{"axis", std::vector<int64_t>{*axis}}});
  if (!idx.ok()) return idx.status();

  std::vector<PrimExpr> iota_shape(static_cast<size_t>(out_rank), PrimExpr(1));
  iota_shape[*axis] = depth.n;
  TETHER_ASSIGN_OR_RETURN(Expr iota_c, EmitIota(ctx, depth.n, iota_shape));
  absl::StatusOr<Expr> hot = ctx.EmitOp("relax.equal", {*idx, iota_c});
  if (!hot.ok()) return hot.status();

  absl::StatusOr<Expr> off_i = Int64Constant({}, {0});
  absl::StatusOr<Expr> on_i = Int64Constant({}, {1});
  if (!off_i.ok() || !on_i.ok()) return off_i.ok() ? on_i.status() : off_i.status();
  absl::StatusOr<Expr> off = ctx.EmitOp("relax.take", {*values, *off_i}, {{"axis", int64_t{0}}});
  if (!off.ok()) return off.status();
  absl::StatusOr<Expr> on = ctx.EmitOp("relax.take", {*values, *on_i}, {{"axis", int64_t{0}}});
  if (!on.ok()) return on.status();
  return One(ctx.EmitOp("relax.where", {*hot, *on, *off}));
}

// ---- DepthToSpace, SpaceToDepth ----

struct Nchw {
  PrimExpr n, c, h, w;
};

absl::StatusOr<Nchw> NchwOf(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value() || (*info)->ndim != 4) {
    return ctx.Invalid(
        absl::StrCat("input must be a 4-D tensor of known shape, got rank ", (*info)->ndim));
  }
  const std::vector<PrimExpr>& s = *(*info)->shape;
  return Nchw{s[0], s[1], s[2], s[3]};
}

std::vector<PrimExpr> SimplifyAll(std::vector<PrimExpr> v) {
  for (PrimExpr& e : v) e = Simplify(e);
  return v;
}

absl::StatusOr<Expr> ReshapePermuteReshape(ConvertContext& ctx, std::vector<PrimExpr> first,
                                           std::vector<int64_t> perm, std::vector<PrimExpr> last) {
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  absl::StatusOr<Expr> r = ctx.EmitOp("relax.reshape", {*x, MakeShapeExpr(SimplifyAll(first))});
  if (!r.ok()) return r.status();
  absl::StatusOr<Expr> p = ctx.EmitOp("relax.permute_dims", {*r}, {{"axes", std::move(perm)}});
  if (!p.ok()) return p.status();
  return ctx.EmitOp("relax.reshape", {*p, MakeShapeExpr(SimplifyAll(last))});
}

ConvertResult ConvertDepthToSpace(ConvertContext& ctx) {
  const int64_t b = ctx.AttrInt("blocksize", 0);
  if (b <= 0) return ctx.Invalid(absl::StrCat("blocksize ", b, " must be positive"));
  const std::string mode = ctx.AttrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return ctx.Unsupported(absl::StrCat("mode '", mode, "'"));
  absl::StatusOr<Nchw> s = NchwOf(ctx);
  if (!s.ok()) return s.status();
  if (std::optional<int64_t> c = AsConstInt(s->c); c.has_value() && *c % (b * b) != 0) {
    return ctx.Invalid(absl::StrCat(*c, " channels do not divide by blocksize^2 = ", b * b));
  }
  if (AsConstInt(s->c).has_value()) {
    // One pass writing whole output rows (relax.nn.depth_to_space).
    absl::StatusOr<Expr> x = ctx.Input(0);
    if (!x.ok()) return x.status();
    return One(ctx.EmitOp("relax.nn.depth_to_space", {*x},
                          {{"block_size", std::vector<int64_t>{b, b}}, {"mode", mode}}));
  }
  const PrimExpr c = FloorDiv(s->c, b * b);
  std::vector<PrimExpr> last{s->n, c, s->h * b, s->w * b};
  if (mode == "DCR") {
    return One(ReshapePermuteReshape(ctx, {s->n, b, b, c, s->h, s->w}, {0, 3, 4, 1, 5, 2}, last));
  }
  return One(ReshapePermuteReshape(ctx, {s->n, c, b, b, s->h, s->w}, {0, 1, 4, 2, 5, 3}, last));
}

ConvertResult ConvertSpaceToDepth(ConvertContext& ctx) {
  const int64_t b = ctx.AttrInt("blocksize", 0);
  if (b <= 0) return ctx.Invalid(absl::StrCat("blocksize ", b, " must be positive"));
  absl::StatusOr<Nchw> s = NchwOf(ctx);
  if (!s.ok()) return s.status();
  for (const PrimExpr& d : {s->h, s->w}) {
    if (std::optional<int64_t> c = AsConstInt(d); c.has_value() && *c % b != 0) {
      return ctx.Invalid(absl::StrCat("spatial dim ", *c, " does not divide by blocksize ", b));
    }
  }
  const PrimExpr h = FloorDiv(s->h, b), w = FloorDiv(s->w, b);
  return One(ReshapePermuteReshape(ctx, {s->n, s->c, h, b, w, b}, {0, 3, 5, 1, 2, 4},
                                   {s->n, s->c * (b * b), h, w}));
}

// ---- GatherElements, Trilu, CumSum ----

ConvertResult ConvertGatherElements(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  absl::StatusOr<const TensorStructInfoNode*> ind_info = ctx.InputTensorInfo(1);
  if (!ind_info.ok()) return ind_info.status();
  if ((*info)->ndim < 0) return ctx.Unsupported("gather of a tensor of unknown rank");
  if ((*ind_info)->ndim != (*info)->ndim) {
    return ctx.Invalid(
        absl::StrCat("indices have ", (*ind_info)->ndim, " dims, data ", (*info)->ndim));
  }
  absl::StatusOr<int64_t> axis =
      NormalizeOnnxAxis(ctx, ctx.AttrInt("axis", 0), (*info)->ndim, "axis");
  if (!axis.ok()) return axis.status();
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  absl::StatusOr<Expr> ind = ctx.Input(1);
  if (!ind.ok()) return ind.status();
  return One(ctx.EmitOp("relax.gather_elements", {*x, *ind}, {{"axis", *axis}}));
}

// ReverseSequence-10: along time_axis, the first sequence_lens[b] steps of
// batch b reversed, the rest kept: a gather_elements whose index is
// len - 1 - t for t < len, else t (an index past the axis, from a length
// longer than it, is clamped by the gather, never read outside).
ConvertResult ConvertReverseSequence(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  if (!info->shape.has_value() || info->ndim < 2) {
    return ctx.Unsupported("reverse_sequence of a tensor of unknown shape or fewer than 2 dims");
  }
  const int64_t time = ctx.AttrInt("time_axis", 0), batch = ctx.AttrInt("batch_axis", 1);
  if ((time != 0 && time != 1) || (batch != 0 && batch != 1) || time == batch) {
    return ctx.Invalid(absl::StrCat("time_axis ", time, " and batch_axis ", batch,
                                    " must be 0 and 1 in some order"));
  }
  const std::vector<PrimExpr>& shape = *info->shape;
  const DataType i64 = DataType::Int(64);
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* linfo, ctx.InputTensorInfo(1));
  if (linfo->ndim != 1) return ctx.Invalid("sequence_lens must be 1-D");
  auto along = [&](int64_t axis, const PrimExpr& n) {
    std::vector<PrimExpr> s(shape.size(), PrimExpr(1));
    s[static_cast<size_t>(axis)] = n;
    return s;
  };
  TETHER_ASSIGN_OR_RETURN(Expr t, EmitIota(ctx, shape[time], along(time, shape[time])));
  TETHER_ASSIGN_OR_RETURN(Expr len, ctx.Input(1));
  TETHER_ASSIGN_OR_RETURN(len, ctx.EmitOp("relax.astype", {len}, {{"dtype", i64}}));
  TETHER_ASSIGN_OR_RETURN(
      len, ctx.EmitOp("relax.reshape", {len, MakeShapeExpr(along(batch, shape[batch]))}));
  TETHER_ASSIGN_OR_RETURN(Expr one, Int64Constant({}, {1}));
  TETHER_ASSIGN_OR_RETURN(Expr last, ctx.EmitOp("relax.subtract", {len, one}));
  TETHER_ASSIGN_OR_RETURN(Expr rev, ctx.EmitOp("relax.subtract", {last, t}));
  TETHER_ASSIGN_OR_RETURN(Expr inside, ctx.EmitOp("relax.less", {t, len}));
  TETHER_ASSIGN_OR_RETURN(Expr idx, ctx.EmitOp("relax.where", {inside, rev, t}));
  TETHER_ASSIGN_OR_RETURN(idx, ctx.EmitOp("relax.broadcast_to", {idx, MakeShapeExpr(shape)}));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  return One(ctx.EmitOp("relax.gather_elements", {x, idx}, {{"axis", time}}));
}

// Trilu with k read when the model runs: x[..., i, j] kept where j - i >= k
// (upper) or j - i <= k (lower), else 0; one fused elementwise kernel.
ConvertResult RunTimeTrilu(ConvertContext& ctx, const TensorStructInfoNode* info, bool upper) {
  if (!info->shape.has_value() || !info->dtype.has_value()) {
    return ctx.Unsupported("trilu of a tensor of unknown shape with a run-time k");
  }
  const std::vector<PrimExpr>& shape = *info->shape;
  const PrimExpr rows = shape[shape.size() - 2], cols = shape[shape.size() - 1];
  TETHER_ASSIGN_OR_RETURN(Expr i, EmitIota(ctx, rows, {rows, PrimExpr(1)}));
  TETHER_ASSIGN_OR_RETURN(Expr j, EmitIota(ctx, cols, {cols}));
  TETHER_ASSIGN_OR_RETURN(Expr diff, ctx.EmitOp("relax.subtract", {j, i}));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* kinfo, ctx.InputTensorInfo(1));
  if (kinfo->ndim > 1) return ctx.Invalid("input 1 (k) must be a scalar");
  TETHER_ASSIGN_OR_RETURN(Expr k, ctx.Input(1));
  if (kinfo->dtype != DataType::Int(64)) {
    TETHER_ASSIGN_OR_RETURN(k, ctx.EmitOp("relax.astype", {k}, {{"dtype", DataType::Int(64)}}));
  }
  TETHER_ASSIGN_OR_RETURN(
      Expr keep, ctx.EmitOp(upper ? "relax.greater_equal" : "relax.less_equal", {diff, k}));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr zero, ScalarConstant(*info->dtype, 0));
  return One(ctx.EmitOp("relax.where", {keep, x, zero}));
}

ConvertResult ConvertTrilu(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim >= 0 && (*info)->ndim < 2) {
    return ctx.Invalid(absl::StrCat("input must have at least 2 dims, got ", (*info)->ndim));
  }
  const bool upper = ctx.AttrInt("upper", 1) != 0;
  int64_t k = 0;
  if (ctx.HasInput(1)) {
    if (!ctx.ConstantInput(1).has_value()) return RunTimeTrilu(ctx, *info, upper);
    absl::StatusOr<int64_t> v = ScalarInt(ctx, 1, "k");
    if (!v.ok()) return v.status();
    k = *v;
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp(upper ? "relax.triu" : "relax.tril", {*x}, {{"k", k}}));
}

// CumSum along an axis read when the model runs: the input viewed as
// [outer, n, inner] (outer the dims before the axis, inner those after,
// picked with Selects), summed along its middle dim, viewed back. An axis
// out of range makes the first view's element count wrong, which the view
// refuses when the model runs.
ConvertResult RunTimeCumSum(ConvertContext& ctx, const TensorStructInfoNode* info, Attrs attrs) {
  if (!info->shape.has_value() || !info->dtype.has_value()) {
    return ctx.Unsupported("cumsum of a tensor of unknown shape along a run-time axis");
  }
  TETHER_ASSIGN_OR_RETURN(KnownInts a, ctx.KnownOrRunTimeInts(1, "axis"));
  if (a.values.size() != 1) return ctx.Invalid("input 1 (axis) must be a scalar");
  const std::vector<PrimExpr>& shape = *info->shape;
  const PrimExpr axis = RunTimeAxis(a.values[0], static_cast<int64_t>(shape.size()));
  PrimExpr outer(1), n(0), inner(1);
  for (size_t k = 0; k < shape.size(); ++k) {
    const PrimExpr kk(static_cast<int64_t>(k));
    outer = outer * Select(LT(kk, axis), shape[k], PrimExpr(1));
    n = n + Select(EQ(kk, axis), shape[k], PrimExpr(0));
    inner = inner * Select(GT(kk, axis), shape[k], PrimExpr(1));
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr x3, EmitRunTimeView(ctx, x, {outer, n, inner}, *info->dtype));
  attrs["axis"] = int64_t{1};
  TETHER_ASSIGN_OR_RETURN(Expr y3, ctx.EmitOp("relax.cumsum", {x3}, std::move(attrs)));
  return One(EmitRunTimeView(ctx, y3, shape, *info->dtype));
}

ConvertResult ConvertCumSum(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim < 1) return ctx.Unsupported("cumsum of a scalar or a tensor of unknown rank");
  Attrs attrs = {{"exclusive", ctx.AttrInt("exclusive", 0) != 0},
                 {"reverse", ctx.AttrInt("reverse", 0) != 0}};
  if (!ctx.ConstantInput(1).has_value()) return RunTimeCumSum(ctx, *info, std::move(attrs));
  absl::StatusOr<int64_t> raw_axis = ScalarInt(ctx, 1, "axis");
  if (!raw_axis.ok()) return raw_axis.status();
  absl::StatusOr<int64_t> axis = NormalizeOnnxAxis(ctx, *raw_axis, (*info)->ndim, "axis");
  if (!axis.ok()) return axis.status();
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  attrs["axis"] = *axis;
  return One(ctx.EmitOp("relax.cumsum", {*x}, std::move(attrs)));
}

// ---- ScatterElements (and the older Scatter), GatherND ----

ConvertResult ConvertScatterElements(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim < 1)
    return ctx.Unsupported("scatter into a scalar or a tensor of unknown rank");
  absl::StatusOr<int64_t> axis =
      NormalizeOnnxAxis(ctx, ctx.AttrInt("axis", 0), (*info)->ndim, "axis");
  if (!axis.ok()) return axis.status();
  std::string reduction = ctx.AttrString("reduction", "none");
  if (reduction == "none") reduction = "update";
  if (reduction != "update" && reduction != "add" && reduction != "mul") {
    return ctx.Unsupported(absl::StrCat("reduction '", reduction, "'"));
  }
  std::vector<Expr> args;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Expr> e = ctx.Input(i);
    if (!e.ok()) return e.status();
    args.push_back(*e);
  }
  return One(ctx.EmitOp("relax.scatter_elements", std::move(args),
                        {{"axis", *axis}, {"reduction", reduction}}));
}

// The row-major flat index, over dims `dims`, of each index tuple along the
// last dim of `ind` (any int dtype; negative entries count from the end):
// int64 of ind's shape without the last dim.
absl::StatusOr<Expr> FlatRowIndex(ConvertContext& ctx, const Expr& ind,
                                  const std::vector<int64_t>& dims) {
  const int64_t k = static_cast<int64_t>(dims.size());
  std::vector<int64_t> strides(dims.size());
  int64_t block = 1;
  for (int64_t j = k; j-- > 0;) {
    strides[j] = block;
    block *= dims[j];
  }
  absl::StatusOr<Expr> idx = ctx.EmitOp("relax.astype", {ind}, {{"dtype", DataType::Int(64)}});
  if (!idx.ok()) return idx.status();
  absl::StatusOr<Expr> zero = Int64Constant({}, {0});
  absl::StatusOr<Expr> dims_c = Int64Constant({k}, dims);
  absl::StatusOr<Expr> strides_c = Int64Constant({k}, strides);
  for (const absl::StatusOr<Expr>* c : {&zero, &dims_c, &strides_c}) {
    if (!c->ok()) return c->status();
  }
  absl::StatusOr<Expr> neg = ctx.EmitOp("relax.less", {*idx, *zero});
  if (!neg.ok()) return neg.status();
  absl::StatusOr<Expr> wrapped = ctx.EmitOp("relax.add", {*idx, *dims_c});
  if (!wrapped.ok()) return wrapped.status();
  idx = ctx.EmitOp("relax.where", {*neg, *wrapped, *idx});
  if (!idx.ok()) return idx.status();
  idx = ctx.EmitOp("relax.multiply", {*idx, *strides_c});
  if (!idx.ok()) return idx.status();
  return ctx.EmitOp("relax.sum", {*idx}, {{"axis", std::vector<int64_t>{-1}}});
}

// GatherND as a flat take: the last index dim (k entries) addresses dims
// [b, b + k) of data (b = batch_dims); the flat row is
// batch * prod(those dims) + sum(index_j * stride_j), over data reshaped to
// [batches * prod, rest...]. Needs data's dims up to b + k known.
ConvertResult ConvertGatherND(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  absl::StatusOr<const TensorStructInfoNode*> ind_info = ctx.InputTensorInfo(1);
  if (!ind_info.ok()) return ind_info.status();
  if (!(*info)->shape.has_value() || !(*ind_info)->shape.has_value()) {
    return ctx.Unsupported("gather-nd of tensors of unknown shape");
  }
  const std::vector<PrimExpr>& ds = *(*info)->shape;
  const std::vector<PrimExpr>& is = *(*ind_info)->shape;
  const int64_t b = ctx.AttrInt("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(ds.size()), q = static_cast<int64_t>(is.size());
  if (q < 1 || b < 0 || b >= q || b >= r) {
    return ctx.Invalid(
        absl::StrCat("batch_dims ", b, " with data of ", r, " dims and indices of ", q, " dims"));
  }
  std::optional<int64_t> kc = AsConstInt(is[q - 1]);
  if (!kc.has_value()) return ctx.Unsupported("gather-nd with a symbolic last index dim");
  const int64_t k = *kc;
  if (k < 1 || b + k > r) {
    return ctx.Invalid(absl::StrCat("index tuples of ", k, " entries for data of ", r,
                                    " dims and batch_dims ", b));
  }
  std::vector<int64_t> dims;
  for (int64_t j = 0; j < k; ++j) {
    std::optional<int64_t> d = AsConstInt(ds[b + j]);
    if (!d.has_value()) return ctx.Unsupported("gather-nd over symbolic data dims");
    dims.push_back(*d);
  }
  int64_t block = 1;
  for (int64_t d : dims) block *= d;
  // Batch offsets: batch_index * block, laid along the first b dims.
  std::vector<int64_t> batch_shape;
  int64_t batches = 1;
  for (int64_t j = 0; j < b; ++j) {
    std::optional<int64_t> d = AsConstInt(ds[j]);
    if (!d.has_value()) return ctx.Unsupported("gather-nd over symbolic batch dims");
    batch_shape.push_back(*d);
    batches *= *d;
  }
  absl::StatusOr<Expr> data = ctx.Input(0);
  if (!data.ok()) return data.status();
  absl::StatusOr<Expr> ind = ctx.Input(1);
  if (!ind.ok()) return ind.status();
  absl::StatusOr<Expr> idx = FlatRowIndex(ctx, *ind, dims);
  if (!idx.ok()) return idx.status();
  if (b > 0) {
    std::vector<int64_t> offset_shape = batch_shape, offsets(static_cast<size_t>(batches));
    offset_shape.resize(static_cast<size_t>(q - 1), 1);
    for (int64_t i = 0; i < batches; ++i) offsets[i] = i * block;
    absl::StatusOr<Expr> off = Int64Constant(offset_shape, offsets);
    if (!off.ok()) return off.status();
    idx = ctx.EmitOp("relax.add", {*idx, *off});
    if (!idx.ok()) return idx.status();
  }
  std::vector<PrimExpr> flat_shape{batches * block};
  flat_shape.insert(flat_shape.end(), ds.begin() + b + k, ds.end());
  absl::StatusOr<Expr> flat = ctx.EmitOp("relax.reshape", {*data, MakeShapeExpr(flat_shape)});
  if (!flat.ok()) return flat.status();
  return One(ctx.EmitOp("relax.take", {*flat, *idx}, {{"axis", int64_t{0}}}));
}

// ScatterND as a flat scatter_elements: data reshaped to [prod(first k
// dims), rest...], each index tuple turned into its row, broadcast over the
// rest, with updates reshaped to [tuples, rest...]; then reshaped back.
ConvertResult ConvertScatterND(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  absl::StatusOr<const TensorStructInfoNode*> ind_info = ctx.InputTensorInfo(1);
  if (!ind_info.ok()) return ind_info.status();
  if (!(*info)->shape.has_value() || !(*ind_info)->shape.has_value()) {
    return ctx.Unsupported("scatter-nd of tensors of unknown shape");
  }
  const std::vector<PrimExpr>& ds = *(*info)->shape;
  const std::vector<PrimExpr>& is = *(*ind_info)->shape;
  if (is.empty()) return ctx.Invalid("indices must have at least 1 dim");
  std::optional<int64_t> kc = AsConstInt(is.back());
  const int64_t r = static_cast<int64_t>(ds.size());
  if (!kc.has_value() || *kc < 1 || *kc > r) {
    return ctx.Invalid(
        absl::StrCat("index tuples of ", ToString(is.back()), " entries for data of ", r, " dims"));
  }
  std::string reduction = ctx.AttrString("reduction", "none");
  if (reduction == "none") reduction = "update";
  if (reduction != "update" && reduction != "add" && reduction != "mul") {
    return ctx.Unsupported(absl::StrCat("reduction '", reduction, "'"));
  }
  std::vector<int64_t> dims;
  for (int64_t j = 0; j < *kc; ++j) {
    std::optional<int64_t> d = AsConstInt(ds[j]);
    if (!d.has_value()) return ctx.Unsupported("scatter-nd over symbolic data dims");
    dims.push_back(*d);
  }
  int64_t block = 1;
  for (int64_t d : dims) block *= d;
  const PrimExpr tuples = Simplify(Product(std::vector<PrimExpr>(is.begin(), is.end() - 1)));
  std::vector<PrimExpr> rest(ds.begin() + *kc, ds.end());
  std::vector<PrimExpr> flat_shape{block}, upd_shape{tuples}, bcast_shape{tuples};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  upd_shape.insert(upd_shape.end(), rest.begin(), rest.end());
  bcast_shape.insert(bcast_shape.end(), rest.begin(), rest.end());
  std::vector<int64_t> rest_axes;
  for (size_t j = 0; j < rest.size(); ++j) rest_axes.push_back(static_cast<int64_t>(j + 1));

  absl::StatusOr<Expr> data = ctx.Input(0);
  if (!data.ok()) return data.status();
  absl::StatusOr<Expr> ind = ctx.Input(1);
  if (!ind.ok()) return ind.status();
  absl::StatusOr<Expr> upd = ctx.Input(2);
  if (!upd.ok()) return upd.status();
  absl::StatusOr<Expr> rows = FlatRowIndex(ctx, *ind, dims);
  if (!rows.ok()) return rows.status();
  rows = ctx.EmitOp("relax.reshape", {*rows, MakeShapeExpr({tuples})});
  if (!rows.ok()) return rows.status();
  if (!rest.empty()) {
    rows = ctx.EmitOp("relax.expand_dims", {*rows}, {{"axis", rest_axes}});
    if (!rows.ok()) return rows.status();
    rows = ctx.EmitOp("relax.broadcast_to", {*rows, MakeShapeExpr(bcast_shape)});
    if (!rows.ok()) return rows.status();
  }
  absl::StatusOr<Expr> flat = ctx.EmitOp("relax.reshape", {*data, MakeShapeExpr(flat_shape)});
  if (!flat.ok()) return flat.status();
  absl::StatusOr<Expr> flat_upd = ctx.EmitOp("relax.reshape", {*upd, MakeShapeExpr(upd_shape)});
  if (!flat_upd.ok()) return flat_upd.status();
  absl::StatusOr<Expr> scattered = ctx.EmitOp("relax.scatter_elements", {*flat, *rows, *flat_upd},
                                              {{"axis", int64_t{0}}, {"reduction", reduction}});
  if (!scattered.ok()) return scattered.status();
  return One(ctx.EmitOp("relax.reshape", {*scattered, MakeShapeExpr(ds)}));
}

}  // namespace

void RegisterIndexConverters() {
  RegisterConverter("OneHot", 9, ConvertOneHot);
  RegisterConverter("DepthToSpace", 1, ConvertDepthToSpace);
  RegisterConverter("SpaceToDepth", 1, ConvertSpaceToDepth);
  RegisterConverter("GatherElements", 11, ConvertGatherElements);
  RegisterConverter("ReverseSequence", 10, ConvertReverseSequence);
  RegisterConverter("Trilu", 14, ConvertTrilu);
  RegisterConverter("CumSum", 11, ConvertCumSum);
  RegisterConverter("Scatter", 9, ConvertScatterElements);
  RegisterConverter("ScatterElements", 11, ConvertScatterElements);
  RegisterConverter("GatherND", 11, ConvertGatherND);
  RegisterConverter("ScatterND", 11, ConvertScatterND);
}

}  // namespace tether::compiler::onnx_frontend
