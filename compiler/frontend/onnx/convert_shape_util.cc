// Axis helpers of the shape converters (see convert_shape_util.h).
#include "compiler/frontend/onnx/convert_shape_util.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {

absl::StatusOr<int64_t> NormalizeOnnxAxis(const ConvertContext& ctx, int64_t axis, int64_t rank,
                                          absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return ctx.Invalid(
        absl::StrCat(what, " ", axis, " is out of range for a tensor of ", rank, " dims"));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> NormalizeOnnxAxes(const ConvertContext& ctx,
                                                       const std::vector<int64_t>& axes,
                                                       int64_t rank, absl::string_view what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    absl::StatusOr<int64_t> n = NormalizeOnnxAxis(ctx, a, rank, what);
    if (!n.ok()) return n.status();
    if (std::find(out.begin(), out.end(), *n) != out.end()) {
      return ctx.Invalid(absl::StrCat(what, " repeats axis ", *n));
    }
    out.push_back(*n);
  }
  return out;
}

absl::StatusOr<std::optional<std::vector<int64_t>>> AxesAttrOrInput(ConvertContext& ctx,
                                                                    int64_t input_since_opset,
                                                                    int input_index,
                                                                    absl::string_view name) {
  if (ctx.opset() < input_since_opset) {
    if (!ctx.HasAttr(name)) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(ctx.AttrInts(name));
  }
  if (!ctx.HasInput(input_index)) return std::optional<std::vector<int64_t>>();
  absl::StatusOr<std::vector<int64_t>> v = ctx.ConstantInts(input_index, name);
  if (!v.ok()) return v.status();
  return std::optional<std::vector<int64_t>>(*std::move(v));
}

PrimExpr RunTimeAxis(const PrimExpr& axis, int64_t rank) {
  const PrimExpr a = Cast(DataType::Int(64), axis);
  return Select(LT(a, PrimExpr(0)), a + PrimExpr(rank), a);
}

std::vector<PrimExpr> RunTimeAxes(const KnownInts& axes, int64_t rank) {
  std::vector<PrimExpr> out;
  for (const PrimExpr& v : axes.values) out.push_back(RunTimeAxis(v, rank));
  return out;
}

std::vector<PrimExpr> AxisMask(const std::vector<PrimExpr>& axes, int64_t rank) {
  std::vector<PrimExpr> mask;
  for (int64_t d = 0; d < rank; ++d) {
    PrimExpr hit = BoolImm(false);
    for (const PrimExpr& a : axes) hit = Or(hit, EQ(a, PrimExpr(d)));
    mask.push_back(Simplify(hit));
  }
  return mask;
}

std::vector<PrimExpr> KeptDims(const std::vector<PrimExpr>& shape,
                               const std::vector<PrimExpr>& removed, int64_t out_rank) {
  std::vector<PrimExpr> out;
  for (int64_t j = 0; j < out_rank; ++j) {
    PrimExpr dim(0), kept(0);
    for (size_t m = 0; m < shape.size(); ++m) {
      const PrimExpr keep = Not(removed[m]);
      dim = Select(And(keep, EQ(kept, PrimExpr(j))), shape[m], dim);
      kept = kept + Select(keep, PrimExpr(1), PrimExpr(0));
    }
    out.push_back(Simplify(dim));
  }
  return out;
}

absl::StatusOr<Expr> EmitIota(ConvertContext& ctx, const PrimExpr& n,
                              const std::vector<PrimExpr>& shape) {
  TETHER_ASSIGN_OR_RETURN(
      Expr a, ctx.EmitOp("relax.arange",
                         {MakePrimValue(PrimExpr(0)), MakePrimValue(n), MakePrimValue(PrimExpr(1))},
                         {{"dtype", DataType::Int(64)}}));
  if (shape.size() == 1) return a;
  return ctx.EmitOp("relax.reshape", {a, MakeShapeExpr(shape)});
}

absl::StatusOr<Expr> EmitPackedCall(ConvertContext& ctx, const std::string& builtin,
                                    std::vector<Expr> args, StructInfo sinfo) {
  args.insert(args.begin(), MakeExternFunc(builtin));
  return ctx.Emit(
      MakeCall(GetOp("relax.call_pure_packed"), std::move(args), {}, {std::move(sinfo)}));
}

absl::StatusOr<Expr> EmitRunTimeView(ConvertContext& ctx, const Expr& x,
                                     const std::vector<PrimExpr>& shape, DataType dtype) {
  return EmitPackedCall(ctx, "vm.builtin.reshape", {x, MakeShapeExpr(shape)},
                        TensorSInfo(shape, dtype));
}

absl::StatusOr<Expr> EmitRequire(ConvertContext& ctx, const Expr& x, const PrimExpr& ok,
                                 absl::string_view what) {
  const PrimExpr cond = Simplify(Cast(DataType::Int(64), ok));
  if (const int64_t* c = cond.as_int(); c != nullptr && *c != 0) return x;
  return EmitPackedCall(
      ctx, "vm.builtin.require",
      {x, MakePrimValue(cond), MakeStringImm(absl::StrCat(ctx.Describe(), ": ", what))},
      x.struct_info());
}

}  // namespace tether::compiler::onnx_frontend
