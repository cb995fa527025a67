// ONNX converters for reductions and arg-reductions: ReduceSum, ReduceMean,
// ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare, ArgMax and ArgMin, and TopK.
//
// The reduced axes come from the `axes` attribute, or (ReduceSum from
// opset 13, the others from opset 18) from the optional second input, known
// at import time or read when the model runs. No axes reduces everything unless
// noop_with_empty_axes is set (then the node is an identity). The composite
// reductions are built from relax.sum / relax.max and elementwise ops;
// LogSumExp subtracts the maximum first so large inputs do not overflow.
// ArgMax/ArgMin with select_last_index reverse the axis (a strided slice)
// and map the index back. TopK is relax.topk (compiler/op/sorting.cc).
// Axes and K read when the model runs are handled by EmitReduce and
// RunTimeTopK.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::InputDType;
using nn_convert::InputRank;
using nn_convert::InputShape;
using nn_convert::NormalizeAxis;

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// How a node reduces: `attrs` ("axis", absent: all, and "keepdims") for
// axes known at import time; for axes read when the model runs, `reduced`
// holds per dim whether it is reduced (a boolean evaluated then) and
// `count` the number of axes. nullopt attrs and empty `reduced`: an
// identity (empty axes with noop_with_empty_axes).
struct ReducePlan {
  std::optional<Attrs> attrs;
  std::vector<PrimExpr> reduced;
  int64_t count = 0;
  bool keepdims = true;
  bool identity() const { return !attrs.has_value() && reduced.empty(); }
};

absl::StatusOr<ReducePlan> PlanReduce(ConvertContext& ctx, int since_axes_input) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  ReducePlan plan;
  plan.keepdims = ctx.AttrInt("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (ctx.opset() >= since_axes_input) {
    if (ctx.HasInput(1) && !ctx.ConstantInput(1).has_value()) {
      TETHER_ASSIGN_OR_RETURN(KnownInts k, ctx.KnownOrRunTimeInts(1, "axes"));
      if (k.scalar) return ctx.Invalid("input 1 (axes) must be 1-D");
      if (!k.values.empty()) plan.reduced = AxisMask(RunTimeAxes(k, rank), rank);
      plan.count = static_cast<int64_t>(k.values.size());
      if (plan.count > rank) {
        return ctx.Invalid(absl::StrCat(plan.count, " axes for a tensor of ", rank, " dims"));
      }
      if (!k.values.empty()) return plan;
    } else if (ctx.HasInput(1)) {
      TETHER_ASSIGN_OR_RETURN(axes, ctx.ConstantInts(1, "axes"));
    }
  } else {
    axes = ctx.AttrInts("axes");
  }
  if (axes.empty()) {
    if (ctx.opset() >= since_axes_input && ctx.AttrInt("noop_with_empty_axes", 0) != 0) {
      return plan;
    }
    plan.attrs = Attrs{{"keepdims", plan.keepdims}};
    return plan;
  }
  std::vector<int64_t> normalized;
  for (int64_t a : axes) {
    TETHER_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, "axis"));
    for (int64_t seen : normalized) {
      if (seen == n) {
        return ctx.Invalid(absl::StrCat("axes [", absl::StrJoin(axes, ", "), "] repeat axis ", a));
      }
    }
    normalized.push_back(n);
  }
  plan.attrs = Attrs{{"axis", normalized}, {"keepdims", plan.keepdims}};
  return plan;
}

// The reduction `op` (relax.sum, relax.max, ...) of `x` by `plan`, with
// keepdims overridden by `keepdims`. Axes read when the model runs reduce
// one dim at a time: the reduction along d (kept as a dim of 1) and the
// unreduced value are concatenated along d and a relax.dynamic_slice picks
// one of them, so every kernel has a static rank; without keepdims the
// result is then viewed without the reduced dims (a view that refuses
// axes out of range or repeated).
absl::StatusOr<Expr> EmitReduce(ConvertContext& ctx, const char* op, const Expr& x,
                                const ReducePlan& plan, bool keepdims) {
  if (plan.attrs.has_value()) {
    Attrs attrs = *plan.attrs;
    attrs["keepdims"] = keepdims;
    return ctx.EmitOp(op, {x}, std::move(attrs));
  }
  const auto* info = x.struct_info().as<TensorStructInfoNode>();
  if (info == nullptr || !info->shape.has_value() || !info->dtype.has_value()) {
    return ctx.Unsupported("a reduction over run-time axes of a tensor of unknown shape");
  }
  std::vector<PrimExpr> shape = *info->shape;
  Expr cur = x;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t axis = static_cast<int64_t>(d);
    TETHER_ASSIGN_OR_RETURN(
        Expr r, ctx.EmitOp(op, {cur}, {{"axis", std::vector<int64_t>{axis}}, {"keepdims", true}}));
    TETHER_ASSIGN_OR_RETURN(Expr both,
                            ctx.EmitOp("relax.concat", {MakeTuple({r, cur})}, {{"axis", axis}}));
    std::vector<PrimExpr> begin(shape.size(), PrimExpr(0)), strides(shape.size(), PrimExpr(1));
    begin[d] = Select(plan.reduced[d], PrimExpr(0), PrimExpr(1));
    shape[d] = Simplify(Select(plan.reduced[d], PrimExpr(1), shape[d]));
    TETHER_ASSIGN_OR_RETURN(
        cur, ctx.EmitOp("relax.dynamic_slice", {both, MakeShapeExpr(begin), MakeShapeExpr(shape),
                                                MakeShapeExpr(strides)}));
  }
  // Every axis must hit a dim of its own: as many dims reduced as axes given.
  PrimExpr hits(0);
  for (const PrimExpr& r : plan.reduced) hits = hits + Select(r, PrimExpr(1), PrimExpr(0));
  TETHER_ASSIGN_OR_RETURN(
      cur, EmitRequire(ctx, cur, EQ(hits, PrimExpr(plan.count)),
                       absl::StrCat("axes out of range or repeated (", plan.count,
                                    " axes for a tensor of ", shape.size(), " dims)")));
  if (keepdims) return cur;
  const std::vector<PrimExpr> out =
      KeptDims(*info->shape, plan.reduced, static_cast<int64_t>(shape.size()) - plan.count);
  const auto* cinfo = cur.struct_info().as<TensorStructInfoNode>();
  return EmitRunTimeView(ctx, cur, out, *cinfo->dtype);
}

ConvertResult ConvertReduce(ConvertContext& ctx, Reduce kind, int since_axes_input) {
  TETHER_ASSIGN_OR_RETURN(ReducePlan plan, PlanReduce(ctx, since_axes_input));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (plan.identity()) return One(x);
  auto reduce = [&](const char* op, const Expr& v) {
    return EmitReduce(ctx, op, v, plan, plan.keepdims);
  };
  Expr y;
  switch (kind) {
    case Reduce::kSum: {
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.sum", x));
      break;
    }
    case Reduce::kMean: {
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.mean", x));
      break;
    }
    case Reduce::kMax: {
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.max", x));
      break;
    }
    case Reduce::kMin: {
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.min", x));
      break;
    }
    case Reduce::kProd: {
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.prod", x));
      break;
    }
    case Reduce::kL1: {
      TETHER_ASSIGN_OR_RETURN(Expr a, ctx.EmitOp("relax.abs", {x}));
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.sum", a));
      break;
    }
    case Reduce::kL2:
    case Reduce::kSumSquare: {
      TETHER_ASSIGN_OR_RETURN(Expr sq, ctx.EmitOp("relax.multiply", {x, x}));
      TETHER_ASSIGN_OR_RETURN(y, reduce("relax.sum", sq));
      if (kind == Reduce::kL2) {
        TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
        if (dtype.is_float()) {
          TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.sqrt", {y}));
        } else {
          // Integer L2 norms round down, as the reference's astype does.
          TETHER_ASSIGN_OR_RETURN(
              Expr f, ctx.EmitOp("relax.astype", {y}, {{"dtype", DataType::Float(64)}}));
          TETHER_ASSIGN_OR_RETURN(f, ctx.EmitOp("relax.sqrt", {f}));
          TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.astype", {f}, {{"dtype", dtype}}));
        }
      }
      break;
    }
    case Reduce::kLogSum: {
      TETHER_ASSIGN_OR_RETURN(Expr s, reduce("relax.sum", x));
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.log", {s}));
      break;
    }
    case Reduce::kLogSumExp: {
      // log(sum(exp(x - m))) + m with m the maximum (kept dims for the subtraction).
      TETHER_ASSIGN_OR_RETURN(Expr m_keep, EmitReduce(ctx, "relax.max", x, plan, true));
      TETHER_ASSIGN_OR_RETURN(Expr d, ctx.EmitOp("relax.subtract", {x, m_keep}));
      TETHER_ASSIGN_OR_RETURN(d, ctx.EmitOp("relax.exp", {d}));
      TETHER_ASSIGN_OR_RETURN(Expr s, reduce("relax.sum", d));
      TETHER_ASSIGN_OR_RETURN(s, ctx.EmitOp("relax.log", {s}));
      Expr m = m_keep;
      if (!plan.keepdims) {
        TETHER_ASSIGN_OR_RETURN(m, reduce("relax.max", x));
      }
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {s, m}));
      break;
    }
  }
  return One(y);
}

ConvertResult ConvertArgReduce(ConvertContext& ctx, bool is_max) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  if (rank == 0) return ctx.Invalid("input must have at least 1 dim");
  TETHER_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.AttrInt("axis", 0), rank, "axis"));
  const bool keepdims = ctx.AttrInt("keepdims", 1) != 0;
  const bool last = ctx.AttrInt("select_last_index", 0) != 0;
  const char* op = is_max ? "relax.argmax" : "relax.argmin";
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  Attrs attrs = {{"axis", axis}, {"keepdims", keepdims}};
  if (!last) {
    TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp(op, {x}, attrs));
    return One(y);
  }
  // The last extreme is the first one of the reversed axis: index d-1-i.
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  const int64_t* extent = shape[axis].as_int();
  if (extent == nullptr) {
    return ctx.Unsupported(
        absl::StrCat("select_last_index over the symbolic dim ", ToString(shape[axis])));
  }
  TETHER_ASSIGN_OR_RETURN(
      Expr rev, ctx.EmitOp("relax.strided_slice", {x},
                           {{"axes", std::vector<int64_t>{axis}},
                            {"begin", std::vector<int64_t>{-1}},
                            {"end", std::vector<int64_t>{std::numeric_limits<int64_t>::min() / 2}},
                            {"strides", std::vector<int64_t>{-1}}}));
  TETHER_ASSIGN_OR_RETURN(Expr i, ctx.EmitOp(op, {rev}, attrs));
  TETHER_ASSIGN_OR_RETURN(Expr top, nn_convert::ScalarConstant(DataType::Int(64), *extent - 1));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.subtract", {top, i}));
  return One(y);
}

void RegisterReduce(const std::string& op, Reduce kind, int since_axes_input) {
  RegisterConverter(op, 1, [kind, since_axes_input](ConvertContext& ctx) {
    return ConvertReduce(ctx, kind, since_axes_input);
  });
}

// Values and int64 indices of the k largest (or smallest) along `axis`,
// sorted; k is attribute `k` (opset 1) or input 1 (opset 10 on).
// TopK with K read when the model runs, over an axis of constant size:
// the whole axis sorted by relax.topk, viewed with the axis as max(K, size)
// (a view that refuses K > size), and the first K kept by a
// relax.dynamic_slice.
ConvertResult RunTimeTopK(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(KnownInts ks, ctx.KnownOrRunTimeInts(1, "K"));
  if (ks.values.size() != 1) return ctx.Invalid("input 1 (K) must hold one value");
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.AttrInt("axis", -1), rank, "axis"));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(DataType dt, InputDType(ctx, 0));
  const int64_t* size = shape[axis].as_int();
  if (size == nullptr) {
    return ctx.Unsupported(
        absl::StrCat("a run-time K over the symbolic dim ", ToString(shape[axis])));
  }
  const bool largest = ctx.AttrInt("largest", 1) != 0;
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(
      Expr both,
      ctx.EmitOp("relax.topk", {x}, {{"k", *size}, {"axis", axis}, {"largest", largest}}));
  const PrimExpr k = Cast(DataType::Int(64), ks.values[0]);
  std::vector<PrimExpr> checked = shape, begin(shape.size(), PrimExpr(0)), extent = shape,
                        strides(shape.size(), PrimExpr(1));
  checked[axis] = Max(k, shape[axis]);
  extent[axis] = k;
  std::vector<OnnxValue> out;
  for (int i = 0; i < 2; ++i) {
    TETHER_ASSIGN_OR_RETURN(Expr v, ctx.Emit(MakeTupleGetItem(both, i)));
    TETHER_ASSIGN_OR_RETURN(v, EmitRunTimeView(ctx, v, checked, i == 0 ? dt : DataType::Int(64)));
    TETHER_ASSIGN_OR_RETURN(
        v, ctx.EmitOp("relax.dynamic_slice",
                      {v, MakeShapeExpr(begin), MakeShapeExpr(extent), MakeShapeExpr(strides)}));
    out.push_back(OnnxValue::Of(v));
  }
  return out;
}

ConvertResult ConvertTopK(ConvertContext& ctx) {
  if (ctx.opset() >= 10 && ctx.HasInput(1) && !ctx.ConstantInput(1).has_value()) {
    return RunTimeTopK(ctx);
  }
  int64_t k = ctx.AttrInt("k", -1);
  if (ctx.opset() >= 10) {
    TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> ks, ctx.ConstantInts(1, "K"));
    if (ks.size() != 1) return ctx.Invalid("input 1 (K) must hold one value");
    k = ks[0];
  }
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.AttrInt("axis", -1), rank, "axis"));
  if (k < 0) return ctx.Invalid(absl::StrCat("k must not be negative, got ", k));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (k == 0) {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
    shape[static_cast<size_t>(axis)] = PrimExpr(0);
    TETHER_ASSIGN_OR_RETURN(DataType dt, InputDType(ctx, 0));
    TETHER_ASSIGN_OR_RETURN(Expr v,
                            ctx.EmitOp("relax.zeros", {MakeShapeExpr(shape)}, {{"dtype", dt}}));
    TETHER_ASSIGN_OR_RETURN(
        Expr i, ctx.EmitOp("relax.zeros", {MakeShapeExpr(shape)}, {{"dtype", DataType::Int(64)}}));
    return std::vector<OnnxValue>{OnnxValue::Of(v), OnnxValue::Of(i)};
  }
  const bool largest = ctx.AttrInt("largest", 1) != 0;
  TETHER_ASSIGN_OR_RETURN(
      Expr both, ctx.EmitOp("relax.topk", {x}, {{"k", k}, {"axis", axis}, {"largest", largest}}));
  TETHER_ASSIGN_OR_RETURN(Expr values, ctx.Emit(MakeTupleGetItem(both, 0)));
  TETHER_ASSIGN_OR_RETURN(Expr indices, ctx.Emit(MakeTupleGetItem(both, 1)));
  return std::vector<OnnxValue>{OnnxValue::Of(values), OnnxValue::Of(indices)};
}

}  // namespace

// Called from RegisterNNConverters (convert_nn.cc).
void RegisterReduceConverters() {
  RegisterReduce("ReduceSum", Reduce::kSum, 13);
  RegisterReduce("ReduceMean", Reduce::kMean, 18);
  RegisterReduce("ReduceMax", Reduce::kMax, 18);
  RegisterReduce("ReduceMin", Reduce::kMin, 18);
  RegisterReduce("ReduceProd", Reduce::kProd, 18);
  RegisterReduce("ReduceL1", Reduce::kL1, 18);
  RegisterReduce("ReduceL2", Reduce::kL2, 18);
  RegisterReduce("ReduceLogSum", Reduce::kLogSum, 18);
  RegisterReduce("ReduceLogSumExp", Reduce::kLogSumExp, 18);
  RegisterReduce("ReduceSumSquare", Reduce::kSumSquare, 18);
  RegisterConverter("ArgMax", 1, [](ConvertContext& ctx) { return ConvertArgReduce(ctx, true); });
  RegisterConverter("ArgMin", 1, [](ConvertContext& ctx) { return ConvertArgReduce(ctx, false); });
  RegisterConverter("TopK", 1, ConvertTopK);
}

}  // namespace tether::compiler::onnx_frontend
