// Shape and data-movement converters of the ONNX importer: Reshape,
// Transpose, Flatten, Squeeze, Unsqueeze, Concat, Split, Slice, Gather,
// Expand and Tile. The index-driven ones (GatherElements, Trilu, CumSum,
// OneHot, DepthToSpace, SpaceToDepth) are in convert_index.cc.
//
// Shape arithmetic stays at import time: when the data input of Gather,
// Concat, Slice, Squeeze, Unsqueeze or Reshape is a KnownInts value (a
// shape, maybe symbolic), the result is KnownInts too and no code is
// emitted, so PyTorch's Shape -> Gather -> Unsqueeze -> Concat -> Reshape
// chains end in a relax.reshape with a symbolic ShapeExpr. Slice, Split,
// Squeeze, Unsqueeze and Tile also take their starts, sizes, axes or
// repeats from values read when the model runs (RunTimeSlice and the
// like: expressions with Selects over symbolic vars).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

ConvertResult OneKnown(std::vector<PrimExpr> values, bool scalar, DataType dtype) {
  KnownInts k;
  k.values = std::move(values);
  k.scalar = scalar;
  k.dtype = dtype;
  return std::vector<OnnxValue>{OnnxValue::Known(std::move(k))};
}

// ---- Reshape ----

// The target shape of a Reshape: 0 copies the input dim (unless allowzero),
// -1 is resolved from the element count when the input shape is known.
absl::StatusOr<std::vector<PrimExpr>> ReshapeTarget(ConvertContext& ctx,
                                                    const std::vector<PrimExpr>& target,
                                                    const std::optional<std::vector<PrimExpr>>& in,
                                                    bool allowzero) {
  std::vector<PrimExpr> out = target;
  int infer_at = -1;
  for (size_t k = 0; k < out.size(); ++k) {
    std::optional<int64_t> c = AsConstInt(out[k]);
    if (c == 0 && !allowzero) {
      if (!in.has_value())
        return ctx.Unsupported("reshape with 0 in the shape of an unknown-shape input");
      if (k >= in->size()) {
        return ctx.Invalid(absl::StrCat("shape element ", k, " is 0 (copy) but the input has only ",
                                        in->size(), " dims"));
      }
      out[k] = (*in)[k];
    } else if (c == -1) {
      if (infer_at >= 0) return ctx.Invalid("the shape has more than one -1");
      infer_at = static_cast<int>(k);
    } else if (c.has_value() && *c < -1) {
      return ctx.Invalid(absl::StrCat("shape element ", k, " is ", *c));
    }
  }
  if (infer_at >= 0 && in.has_value()) {
    // Cancel the target dims that equal an input dim, so [batch, 3, 4] to
    // [batch, -1] gives 12 rather than floordiv(batch * 12, batch).
    std::vector<PrimExpr> rest = *in;
    PrimExpr denom = 1;
    for (size_t k = 0; k < out.size(); ++k) {
      if (static_cast<int>(k) == infer_at) continue;
      auto it = std::find_if(rest.begin(), rest.end(),
                             [&](const PrimExpr& d) { return ProveEqual(d, out[k]); });
      if (it != rest.end()) {
        rest.erase(it);
      } else {
        denom = denom * out[k];
      }
    }
    PrimExpr numer = Simplify(Product(rest));
    denom = Simplify(denom);
    std::optional<int64_t> nc = AsConstInt(numer), dc = AsConstInt(denom);
    if (nc.has_value() && dc.has_value() && (*dc == 0 || *nc % *dc != 0)) {
      return ctx.Invalid(absl::StrCat("cannot reshape ", *nc, " elements into dims of ", *dc,
                                      " elements and a -1"));
    }
    out[infer_at] = Simplify(FloorDiv(numer, denom));
  }
  return out;
}

// A Reshape to a shape read at run time (`target`, symbolic vars that may
// hold 0 or -1): each dim resolved by the rules of ReshapeTarget with
// Selects, evaluated when the model runs, and the reshape done as a view
// (vm.builtin.reshape, which checks the element count).
ConvertResult RunTimeReshape(ConvertContext& ctx, const std::vector<PrimExpr>& target,
                             bool allowzero) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value() || !(*info)->dtype.has_value()) {
    return ctx.Unsupported("reshape of a tensor of unknown shape to a run-time shape");
  }
  const std::vector<PrimExpr>& in = *(*info)->shape;
  std::vector<PrimExpr> resolved, known;  // known: -1 counted as 1
  for (size_t k = 0; k < target.size(); ++k) {
    const PrimExpr& v = target[k];
    PrimExpr r = allowzero || k >= in.size() ? v : Select(EQ(v, PrimExpr(0)), in[k], v);
    resolved.push_back(r);
    known.push_back(Select(EQ(v, PrimExpr(-1)), PrimExpr(1), r));
  }
  std::vector<PrimExpr> out;
  for (size_t k = 0; k < target.size(); ++k) {
    std::vector<PrimExpr> others = known;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(k));
    PrimExpr inferred = FloorDiv(Product(in), Max(Product(others), PrimExpr(1)));
    out.push_back(Select(EQ(target[k], PrimExpr(-1)), inferred, resolved[k]));
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(EmitRunTimeView(ctx, *x, out, *(*info)->dtype));
}

ConvertResult ConvertReshape(ConvertContext& ctx) {
  const bool allowzero = ctx.AttrInt("allowzero", 0) != 0;
  // (The importer starts at opset 7; the shape attribute of opset < 5 never occurs.)
  const bool run_time = !ctx.KnownInput(1).has_value();
  absl::StatusOr<KnownInts> shape = ctx.KnownOrRunTimeInts(1, "shape");
  if (!shape.ok()) return shape.status();
  if (shape->scalar) return ctx.Invalid("input 1 (shape) must be 1-D");
  if (run_time) return RunTimeReshape(ctx, shape->values, allowzero);
  const std::vector<PrimExpr>& target = shape->values;
  // Reshape of import-time ints (to a scalar or a vector) stays known.
  if (std::optional<KnownInts> data = ctx.KnownInput(0); data.has_value() && target.size() <= 1) {
    std::vector<PrimExpr> in{static_cast<int64_t>(data->values.size())};
    if (data->scalar) in.clear();
    absl::StatusOr<std::vector<PrimExpr>> t = ReshapeTarget(ctx, target, in, allowzero);
    if (!t.ok()) return t.status();
    std::optional<int64_t> n = t->empty() ? std::optional<int64_t>(1) : AsConstInt((*t)[0]);
    if (n == static_cast<int64_t>(data->values.size())) {
      return OneKnown(data->values, t->empty(), data->dtype);
    }
  }
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::vector<PrimExpr>> t = ReshapeTarget(ctx, target, (*info)->shape, allowzero);
  if (!t.ok()) return t.status();
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp("relax.reshape", {*x, MakeShapeExpr(*t)}));
}

// ---- Transpose, Flatten ----

ConvertResult ConvertTranspose(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  const int64_t rank = (*info)->ndim;
  if (rank < 0) return ctx.Unsupported("transpose of a tensor of unknown rank");
  std::vector<int64_t> perm = ctx.AttrInts("perm");
  if (perm.empty()) {
    for (int64_t k = rank; k-- > 0;) perm.push_back(k);
  }
  absl::StatusOr<std::vector<int64_t>> axes = NormalizeOnnxAxes(ctx, perm, rank, "perm");
  if (!axes.ok()) return axes.status();
  if (static_cast<int64_t>(axes->size()) != rank) {
    return ctx.Invalid(
        absl::StrCat("perm has ", axes->size(), " entries for a tensor of ", rank, " dims"));
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp("relax.permute_dims", {*x}, {{"axes", *axes}}));
}

ConvertResult ConvertFlatten(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value()) return ctx.Unsupported("flatten of a tensor of unknown shape");
  const std::vector<PrimExpr>& in = *(*info)->shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.AttrInt("axis", 1);
  if (axis < -rank || axis > rank) {
    return ctx.Invalid(
        absl::StrCat("axis ", axis, " is out of range for a tensor of ", rank, " dims"));
  }
  if (axis < 0) axis += rank;
  std::vector<PrimExpr> outer(in.begin(), in.begin() + axis), inner(in.begin() + axis, in.end());
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp("relax.reshape",
                        {*x, MakeShapeExpr({Simplify(Product(outer)), Simplify(Product(inner))})}));
}

// ---- Squeeze, Unsqueeze ----

// Axes of Squeeze/Unsqueeze fed from a run-time value (opset 13 input 1).
bool RunTimeAxes(ConvertContext& ctx) {
  return ctx.opset() >= 13 && ctx.HasInput(1) && !ctx.ConstantInput(1).has_value();
}

// `shape[index]` for an index known only when the model runs (0 when out of range).
PrimExpr DimAt(const std::vector<PrimExpr>& shape, const PrimExpr& index) {
  PrimExpr out(0);
  for (size_t m = 0; m < shape.size(); ++m) {
    out = Select(EQ(index, PrimExpr(static_cast<int64_t>(m))), shape[m], out);
  }
  return out;
}

// Squeeze or Unsqueeze with axes read when the model runs: the output rank
// follows from the number of axes, each output dim is picked with Selects,
// and the data is viewed at that shape. Axes out of range or repeated give
// dims whose element count differs, which the view refuses; so does
// squeezing a dim that is not 1.
ConvertResult RunTimeSqueeze(ConvertContext& ctx, bool squeeze) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  if (!info->shape.has_value() || !info->dtype.has_value()) {
    return ctx.Unsupported("run-time axes on a tensor of unknown shape");
  }
  TETHER_ASSIGN_OR_RETURN(KnownInts k, ctx.KnownOrRunTimeInts(1, "axes"));
  if (k.scalar) return ctx.Invalid("input 1 (axes) must be 1-D");
  const std::vector<PrimExpr>& in = *info->shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t n = static_cast<int64_t>(k.values.size());
  if (!squeeze && n == 0) return ctx.Invalid("axes must be given and non-empty");
  if (squeeze && n > rank) {
    return ctx.Invalid(absl::StrCat(n, " axes to squeeze from a tensor of ", rank, " dims"));
  }
  const int64_t out_rank = squeeze ? rank - n : rank + n;
  const std::vector<PrimExpr> axes = RunTimeAxes(k, squeeze ? rank : out_rank);
  std::vector<PrimExpr> out;
  if (squeeze) {
    out = KeptDims(in, AxisMask(axes, rank), out_rank);
  } else {
    // Output dim j is 1 when it is an axis, else input dim j - (axes before j).
    const std::vector<PrimExpr> added = AxisMask(axes, out_rank);
    for (int64_t j = 0; j < out_rank; ++j) {
      PrimExpr before(0);
      for (const PrimExpr& a : axes) {
        before = before + Select(LT(a, PrimExpr(j)), PrimExpr(1), PrimExpr(0));
      }
      out.push_back(Simplify(Select(added[j], PrimExpr(1), DimAt(in, PrimExpr(j) - before))));
    }
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  return One(EmitRunTimeView(ctx, x, out, *info->dtype));
}

ConvertResult ConvertSqueeze(ConvertContext& ctx) {
  if (RunTimeAxes(ctx)) return RunTimeSqueeze(ctx, true);
  absl::StatusOr<std::optional<std::vector<int64_t>>> axes = AxesAttrOrInput(ctx, 13, 1, "axes");
  if (!axes.ok()) return axes.status();
  if (std::optional<KnownInts> data = ctx.KnownInput(0);
      data.has_value() && !data->scalar && data->values.size() == 1) {
    bool all_ok = !axes->has_value() || std::all_of((*axes)->begin(), (*axes)->end(),
                                                    [](int64_t a) { return a == 0 || a == -1; });
    if (all_ok) return OneKnown(data->values, true, data->dtype);
  }
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  Attrs attrs;
  if (axes->has_value()) {
    if ((*info)->ndim < 0) return ctx.Unsupported("squeeze of a tensor of unknown rank");
    absl::StatusOr<std::vector<int64_t>> norm =
        NormalizeOnnxAxes(ctx, **axes, (*info)->ndim, "axes");
    if (!norm.ok()) return norm.status();
    if ((*info)->shape.has_value()) {
      for (int64_t a : *norm) {
        std::optional<int64_t> c = AsConstInt((*(*info)->shape)[a]);
        if (c.has_value() && *c != 1) {
          return ctx.Invalid(absl::StrCat("cannot squeeze axis ", a, " of size ", *c));
        }
      }
    }
    attrs["axis"] = *norm;
  }
  return One(ctx.EmitOp("relax.squeeze", {*x}, std::move(attrs)));
}

ConvertResult ConvertUnsqueeze(ConvertContext& ctx) {
  if (RunTimeAxes(ctx)) return RunTimeSqueeze(ctx, false);
  absl::StatusOr<std::optional<std::vector<int64_t>>> axes = AxesAttrOrInput(ctx, 13, 1, "axes");
  if (!axes.ok()) return axes.status();
  if (!axes->has_value() || (*axes)->empty())
    return ctx.Invalid("axes must be given and non-empty");
  if (std::optional<KnownInts> data = ctx.KnownInput(0); data.has_value() && data->scalar &&
                                                         (*axes)->size() == 1 &&
                                                         ((**axes)[0] == 0 || (**axes)[0] == -1)) {
    return OneKnown(data->values, false, data->dtype);
  }
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim < 0) return ctx.Unsupported("unsqueeze of a tensor of unknown rank");
  const int64_t out_rank = (*info)->ndim + static_cast<int64_t>((*axes)->size());
  absl::StatusOr<std::vector<int64_t>> norm = NormalizeOnnxAxes(ctx, **axes, out_rank, "axes");
  if (!norm.ok()) return norm.status();
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp("relax.expand_dims", {*x}, {{"axis", *norm}}));
}

// ---- Concat, Split ----

ConvertResult ConvertConcat(ConvertContext& ctx) {
  const int64_t axis = ctx.AttrInt("axis", 0);
  if (!ctx.HasAttr("axis") && ctx.opset() >= 4) return ctx.Invalid("missing attribute axis");
  const int n = ctx.num_inputs();
  if (n == 0) return ctx.Invalid("concat of no inputs");
  // All inputs known vectors: concatenate at import time.
  if (axis == 0 || axis == -1) {
    std::vector<PrimExpr> values;
    std::optional<DataType> dtype;
    bool all_known = true;
    for (int i = 0; i < n && all_known; ++i) {
      std::optional<KnownInts> k = ctx.KnownInput(i);
      if (!k.has_value() || k->scalar) {
        all_known = false;
        break;
      }
      values.insert(values.end(), k->values.begin(), k->values.end());
      dtype = k->dtype;
    }
    if (all_known) return OneKnown(std::move(values), false, *dtype);
  }
  std::vector<Expr> fields;
  int64_t rank = -1;
  for (int i = 0; i < n; ++i) {
    if (!ctx.HasInput(i)) continue;
    absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(i);
    if (!info.ok()) return info.status();
    rank = std::max<int64_t>(rank, (*info)->ndim);
    absl::StatusOr<Expr> x = ctx.Input(i);
    if (!x.ok()) return x.status();
    fields.push_back(*x);
  }
  if (rank < 0) return ctx.Unsupported("concat of tensors of unknown rank");
  absl::StatusOr<int64_t> a = NormalizeOnnxAxis(ctx, axis, rank, "axis");
  if (!a.ok()) return a.status();
  if (fields.size() == 1) return One(fields[0]);
  return One(ctx.EmitOp("relax.concat", {MakeTuple(std::move(fields))}, {{"axis", *a}}));
}

// Split with sizes read when the model runs: the input viewed with the
// split axis as the sum of the sizes (a view that refuses sizes which do not
// sum to the axis), then one relax.dynamic_slice per output.
ConvertResult RunTimeSplit(ConvertContext& ctx, const TensorStructInfoNode* info, int64_t axis,
                           int num_outputs) {
  TETHER_ASSIGN_OR_RETURN(KnownInts k, ctx.KnownOrRunTimeInts(1, "split"));
  if (static_cast<int>(k.values.size()) != num_outputs) {
    return ctx.Invalid(
        absl::StrCat("split has ", k.values.size(), " sizes for ", num_outputs, " outputs"));
  }
  if (!info->dtype.has_value()) return ctx.Unsupported("split of a tensor of unknown dtype");
  std::vector<PrimExpr> shape = *info->shape;
  PrimExpr total(0);
  for (const PrimExpr& v : k.values) total = total + Max(Cast(DataType::Int(64), v), PrimExpr(0));
  shape[axis] = Simplify(total);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  PrimExpr non_negative = BoolImm(true);
  for (const PrimExpr& v : k.values) {
    non_negative = And(non_negative, GE(Cast(DataType::Int(64), v), PrimExpr(0)));
  }
  TETHER_ASSIGN_OR_RETURN(x, EmitRequire(ctx, x, non_negative, "a split size is negative"));
  TETHER_ASSIGN_OR_RETURN(x, EmitRunTimeView(ctx, x, shape, *info->dtype));
  std::vector<OnnxValue> out;
  PrimExpr offset(0);
  for (const PrimExpr& v : k.values) {
    const PrimExpr size = Simplify(Max(Cast(DataType::Int(64), v), PrimExpr(0)));
    std::vector<PrimExpr> begin(shape.size(), PrimExpr(0)), extent = shape,
                                                            strides(shape.size(), PrimExpr(1));
    begin[axis] = Simplify(offset);
    extent[axis] = size;
    TETHER_ASSIGN_OR_RETURN(Expr part, ctx.EmitOp("relax.dynamic_slice",
                                                  {x, MakeShapeExpr(begin), MakeShapeExpr(extent),
                                                   MakeShapeExpr(strides)}));
    out.push_back(OnnxValue::Of(part));
    offset = offset + size;
  }
  return out;
}

ConvertResult ConvertSplit(ConvertContext& ctx) {
  const int num_outputs = ctx.node().output_size();
  if (num_outputs < 1) return ctx.Invalid("split has no outputs");
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value()) return ctx.Unsupported("split of a tensor of unknown shape");
  absl::StatusOr<int64_t> axis =
      NormalizeOnnxAxis(ctx, ctx.AttrInt("axis", 0), (*info)->ndim, "axis");
  if (!axis.ok()) return axis.status();
  const PrimExpr dim = (*(*info)->shape)[*axis];
  std::vector<int64_t> sizes;
  if (ctx.opset() < 13) {
    sizes = ctx.AttrInts("split");
  } else if (ctx.HasInput(1) && !ctx.ConstantInput(1).has_value()) {
    return RunTimeSplit(ctx, *info, *axis, num_outputs);
  } else if (ctx.HasInput(1)) {
    absl::StatusOr<std::vector<int64_t>> s = ctx.ConstantInts(1, "split");
    if (!s.ok()) return s.status();
    sizes = *s;
  }
  AttrValue sections;
  if (sizes.empty()) {
    std::optional<int64_t> c = AsConstInt(dim);
    if (c.has_value() && *c % num_outputs != 0) {
      return ctx.Invalid(absl::StrCat("axis ", *axis, " of size ", *c, " does not split into ",
                                      num_outputs, " equal parts"));
    }
    sections = static_cast<int64_t>(num_outputs);
  } else {
    if (static_cast<int>(sizes.size()) != num_outputs) {
      return ctx.Invalid(
          absl::StrCat("split has ", sizes.size(), " sizes for ", num_outputs, " outputs"));
    }
    std::vector<int64_t> indices;
    int64_t sum = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (sizes[k] < 0) return ctx.Invalid(absl::StrCat("split size ", sizes[k], " is negative"));
      sum += sizes[k];
      if (k + 1 < sizes.size()) indices.push_back(sum);
    }
    std::optional<int64_t> c = AsConstInt(dim);
    if (c.has_value() && *c != sum) {
      return ctx.Invalid(absl::StrCat("split sizes [", absl::StrJoin(sizes, ", "), "] sum to ", sum,
                                      ", but axis ", *axis, " has size ", *c));
    }
    sections = indices;
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  if (num_outputs == 1) return One(*x);
  absl::StatusOr<Expr> tuple =
      ctx.EmitOp("relax.split", {*x}, {{"indices_or_sections", sections}, {"axis", *axis}});
  if (!tuple.ok()) return tuple.status();
  std::vector<OnnxValue> out;
  for (int k = 0; k < num_outputs; ++k) {
    absl::StatusOr<Expr> item = ctx.Emit(MakeTupleGetItem(*tuple, k));
    if (!item.ok()) return item.status();
    out.push_back(OnnxValue::Of(*item));
  }
  return out;
}

// ---- Slice ----

// Numpy-style clamped slice bounds of one axis of constant size `dim`: the
// elements picked.
std::vector<int64_t> SliceIndices(int64_t dim, int64_t start, int64_t end, int64_t step) {
  auto norm = [dim](int64_t v) { return v < 0 ? (v < -dim ? -1 : v + dim) : v; };
  std::vector<int64_t> out;
  if (step > 0) {
    int64_t b = std::clamp<int64_t>(norm(start), 0, dim);
    int64_t e = std::clamp<int64_t>(norm(end), 0, dim);
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    int64_t b = std::clamp<int64_t>(norm(start), -1, dim - 1);
    int64_t e = std::clamp<int64_t>(norm(end), -1, dim - 1);
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

// Slice with starts, ends, axes or steps read when the model runs: every
// dim gets a begin, an extent and a stride, computed with Selects by the
// rules of SliceIndices (numpy clamping, negative indices from the end) and
// evaluated when the model runs, and one relax.dynamic_slice reads them. A
// step of 0 divides by zero in the shape computation, which the VM
// refuses.
ConvertResult RunTimeSlice(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  if (!info->shape.has_value()) return ctx.Unsupported("slice of a tensor of unknown shape");
  const std::vector<PrimExpr>& shape = *info->shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  TETHER_ASSIGN_OR_RETURN(KnownInts starts, ctx.KnownOrRunTimeInts(1, "starts"));
  TETHER_ASSIGN_OR_RETURN(KnownInts ends, ctx.KnownOrRunTimeInts(2, "ends"));
  const size_t n = starts.values.size();
  KnownInts axes, steps;
  if (ctx.HasInput(3)) {
    TETHER_ASSIGN_OR_RETURN(axes, ctx.KnownOrRunTimeInts(3, "axes"));
  } else {
    for (size_t i = 0; i < n; ++i) axes.values.push_back(PrimExpr(static_cast<int64_t>(i)));
  }
  if (ctx.HasInput(4)) {
    TETHER_ASSIGN_OR_RETURN(steps, ctx.KnownOrRunTimeInts(4, "steps"));
  } else {
    steps.values.assign(n, PrimExpr(1));
  }
  if (ends.values.size() != n || axes.values.size() != n || steps.values.size() != n) {
    return ctx.Invalid(absl::StrCat("starts, ends, axes and steps have different lengths: ", n,
                                    ", ", ends.values.size(), ", ", axes.values.size(), ", ",
                                    steps.values.size()));
  }
  const std::vector<PrimExpr> norm_axes = RunTimeAxes(axes, rank);
  std::vector<PrimExpr> begin(shape.size(), PrimExpr(0)), extent = shape,
                                                          strides(shape.size(), PrimExpr(1));
  constexpr int64_t kBig = int64_t{1} << 60;
  for (size_t i = 0; i < n; ++i) {
    const PrimExpr s = Cast(DataType::Int(64), steps.values[i]);
    for (int64_t d = 0; d < rank; ++d) {
      const PrimExpr dim = shape[d];
      auto from_end = [&](const PrimExpr& raw) {
        const PrimExpr v = Min(Max(Cast(DataType::Int(64), raw), PrimExpr(-kBig)), PrimExpr(kBig));
        return Select(LT(v, PrimExpr(0)), v + dim, v);
      };
      const PrimExpr b0 = from_end(starts.values[i]), e0 = from_end(ends.values[i]);
      const PrimExpr b_up = Min(Max(b0, PrimExpr(0)), dim);
      const PrimExpr e_up = Min(Max(e0, PrimExpr(0)), dim);
      const PrimExpr b_down = Min(Max(b0, PrimExpr(-1)), dim - 1);
      const PrimExpr e_down = Min(Max(e0, PrimExpr(-1)), dim - 1);
      const PrimExpr up = GT(s, PrimExpr(0));
      const PrimExpr ext =
          Select(up, Max(FloorDiv(e_up - b_up + s - 1, s), PrimExpr(0)),
                 Max(FloorDiv(b_down - e_down - s - 1, PrimExpr(0) - s), PrimExpr(0)));
      const PrimExpr hit = EQ(norm_axes[i], PrimExpr(d));
      begin[d] = Simplify(Select(hit, Select(up, b_up, b_down), begin[d]));
      extent[d] = Simplify(Select(hit, ext, extent[d]));
      strides[d] = Simplify(Select(hit, s, strides[d]));
    }
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  return One(ctx.EmitOp("relax.dynamic_slice",
                        {x, MakeShapeExpr(begin), MakeShapeExpr(extent), MakeShapeExpr(strides)}));
}

// Whether any of Slice's inputs 1..4 is present and not a constant.
bool SliceReadsRunTimeValues(ConvertContext& ctx) {
  if (ctx.opset() < 10) return false;
  for (int i = 1; i <= 4; ++i) {
    if (ctx.HasInput(i) && !ctx.ConstantInput(i).has_value()) return true;
  }
  return false;
}

ConvertResult ConvertSlice(ConvertContext& ctx) {
  if (SliceReadsRunTimeValues(ctx) && !ctx.KnownInput(0).has_value()) return RunTimeSlice(ctx);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.AttrInts("starts");
    ends = ctx.AttrInts("ends");
    axes = ctx.AttrInts("axes");
  } else {
    absl::StatusOr<std::vector<int64_t>> s = ctx.ConstantInts(1, "starts");
    if (!s.ok()) return s.status();
    starts = *s;
    absl::StatusOr<std::vector<int64_t>> e = ctx.ConstantInts(2, "ends");
    if (!e.ok()) return e.status();
    ends = *e;
    if (ctx.HasInput(3)) {
      absl::StatusOr<std::vector<int64_t>> a = ctx.ConstantInts(3, "axes");
      if (!a.ok()) return a.status();
      axes = *a;
    }
    if (ctx.HasInput(4)) {
      absl::StatusOr<std::vector<int64_t>> st = ctx.ConstantInts(4, "steps");
      if (!st.ok()) return st.status();
      steps = *st;
    }
  }
  if (axes.empty()) {
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return ctx.Invalid(
        absl::StrCat("starts, ends, axes and steps have different lengths: ", starts.size(), ", ",
                     ends.size(), ", ", axes.size(), ", ", steps.size()));
  }
  for (int64_t s : steps) {
    if (s == 0) return ctx.Invalid("a step is 0");
  }
  if (std::optional<KnownInts> data = ctx.KnownInput(0); data.has_value() && !data->scalar) {
    if (axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) {
      return ctx.Invalid(
          absl::StrCat("axes [", absl::StrJoin(axes, ", "), "] are out of range for a 1-D input"));
    }
    std::vector<PrimExpr> values;
    for (int64_t i :
         SliceIndices(static_cast<int64_t>(data->values.size()), starts[0], ends[0], steps[0])) {
      values.push_back(data->values[i]);
    }
    return OneKnown(std::move(values), false, data->dtype);
  }
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim < 0) return ctx.Unsupported("slice of a tensor of unknown rank");
  absl::StatusOr<std::vector<int64_t>> norm = NormalizeOnnxAxes(ctx, axes, (*info)->ndim, "axes");
  if (!norm.ok()) return norm.status();
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp("relax.strided_slice", {*x},
                        {{"axes", *norm}, {"begin", starts}, {"end", ends}, {"strides", steps}}));
}

// ---- Gather ----

ConvertResult ConvertGather(ConvertContext& ctx) {
  const int64_t axis = ctx.AttrInt("axis", 0);
  std::optional<KnownInts> data = ctx.KnownInput(0);
  std::optional<KnownInts> indices = ctx.KnownInput(1);
  if (data.has_value() && !data->scalar && indices.has_value() && (axis == 0 || axis == -1)) {
    const int64_t n = static_cast<int64_t>(data->values.size());
    std::vector<PrimExpr> values;
    bool constant = true;
    for (const PrimExpr& e : indices->values) {
      std::optional<int64_t> i = AsConstInt(e);
      if (!i.has_value()) {
        constant = false;
        break;
      }
      if (*i < -n || *i >= n) {
        return ctx.Invalid(absl::StrCat("index ", *i, " is out of range for a dim of size ", n));
      }
      values.push_back(data->values[*i < 0 ? *i + n : *i]);
    }
    if (constant) return OneKnown(std::move(values), indices->scalar, data->dtype);
  }
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if ((*info)->ndim < 0) return ctx.Unsupported("gather from a tensor of unknown rank");
  absl::StatusOr<int64_t> a = NormalizeOnnxAxis(ctx, axis, (*info)->ndim, "axis");
  if (!a.ok()) return a.status();
  absl::StatusOr<const TensorStructInfoNode*> ind_info = ctx.InputTensorInfo(1);
  if (!ind_info.ok()) return ind_info.status();
  if (!(*ind_info)->dtype.has_value() ||
      !((*ind_info)->dtype->is_int() || (*ind_info)->dtype->is_uint())) {
    return ctx.Invalid("indices must be an integer tensor");
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  absl::StatusOr<Expr> ind = ctx.Input(1);
  if (!ind.ok()) return ind.status();
  return One(ctx.EmitOp("relax.take", {*x, *ind}, {{"axis", *a}}));
}

// ---- Expand, Tile ----

ConvertResult ConvertExpand(ConvertContext& ctx) {
  const bool run_time = !ctx.KnownInput(1).has_value();
  absl::StatusOr<KnownInts> shape = ctx.KnownOrRunTimeInts(1, "shape");
  if (!shape.ok()) return shape.status();
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value()) return ctx.Unsupported("expand of a tensor of unknown shape");
  const std::vector<PrimExpr>& in = *(*info)->shape;
  const std::vector<PrimExpr>& to = shape->values;
  const size_t rank = std::max(in.size(), to.size());
  std::vector<PrimExpr> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // Right-aligned: a missing dim counts as 1.
    PrimExpr a = k + in.size() >= rank ? in[k + in.size() - rank] : PrimExpr(1);
    PrimExpr b = k + to.size() >= rank ? to[k + to.size() - rank] : PrimExpr(1);
    std::optional<int64_t> ac = AsConstInt(a), bc = AsConstInt(b);
    if (bc == 1) {
      out[k] = a;
    } else if (ac == 1 || ProveEqual(a, b)) {
      out[k] = b;
    } else if (ac.has_value() && bc.has_value()) {
      return ctx.Invalid(absl::StrCat("cannot expand dim of size ", *ac, " to ", *bc));
    } else {
      // Symbolic: the requested size (broadcast_to checks it at run time);
      // a size read at run time may be 1, which keeps the input's dim.
      out[k] = run_time ? Select(EQ(b, PrimExpr(1)), a, b) : b;
    }
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  return One(ctx.EmitOp("relax.broadcast_to", {*x, MakeShapeExpr(out)}));
}

// Tile as expand_dims -> broadcast_to -> reshape: [d0, d1] by [r0, r1] is
// [1, d0, 1, d1] broadcast to [r0, d0, r1, d1], reshaped to [r0*d0, r1*d1].
// All three are injective and fuse into one kernel.
ConvertResult ConvertTile(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value()) return ctx.Unsupported("tile of a tensor of unknown shape");
  // Repeats read when the model runs are symbolic; a negative one gives a
  // negative dim, which the allocation refuses.
  absl::StatusOr<KnownInts> repeats = ctx.KnownOrRunTimeInts(1, "repeats");
  if (!repeats.ok()) return repeats.status();
  const std::vector<PrimExpr>& in = *(*info)->shape;
  if (repeats->values.size() != in.size()) {
    return ctx.Invalid(absl::StrCat("repeats has ", repeats->values.size(),
                                    " entries for a tensor of ", in.size(), " dims"));
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  bool identity = true;
  for (const PrimExpr& r : repeats->values) {
    std::optional<int64_t> c = AsConstInt(r);
    if (c.has_value() && *c < 0) return ctx.Invalid(absl::StrCat("repeat ", *c, " is negative"));
    identity = identity && c == 1;
  }
  if (identity) return One(*x);
  std::vector<int64_t> new_axes;
  std::vector<PrimExpr> wide, out;
  for (size_t k = 0; k < in.size(); ++k) {
    const PrimExpr r = Cast(DataType::Int(64), repeats->values[k]);
    new_axes.push_back(static_cast<int64_t>(2 * k));
    wide.push_back(r);
    wide.push_back(in[k]);
    out.push_back(Simplify(in[k] * r));
  }
  absl::StatusOr<Expr> e = ctx.EmitOp("relax.expand_dims", {*x}, {{"axis", new_axes}});
  if (!e.ok()) return e.status();
  absl::StatusOr<Expr> b = ctx.EmitOp("relax.broadcast_to", {*e, MakeShapeExpr(wide)});
  if (!b.ok()) return b.status();
  return One(ctx.EmitOp("relax.reshape", {*b, MakeShapeExpr(out)}));
}

}  // namespace

void RegisterShapeConverters() {
  RegisterConverter("Reshape", 5, ConvertReshape);
  RegisterConverter("Transpose", 1, ConvertTranspose);
  RegisterConverter("Flatten", 1, ConvertFlatten);
  RegisterConverter("Squeeze", 1, ConvertSqueeze);
  RegisterConverter("Unsqueeze", 1, ConvertUnsqueeze);
  RegisterConverter("Concat", 1, ConvertConcat);
  RegisterConverter("Split", 1, ConvertSplit);
  RegisterConverter("Slice", 1, ConvertSlice);
  RegisterConverter("Gather", 1, ConvertGather);
  RegisterConverter("Expand", 8, ConvertExpand);
  RegisterConverter("Tile", 6, ConvertTile);
  RegisterIndexConverters();  // convert_index.cc
}

}  // namespace tether::compiler::onnx_frontend
