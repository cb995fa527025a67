// Axis helpers of the shape converters (see convert_shape_util.h).
#include "compiler/frontend/onnx/convert_shape_util.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<Expr> EmitRunTimeView(ConvertContext& ctx, const Expr& x,
                                     const std::vector<PrimExpr>& shape, DataType dtype) {
  return ctx.Emit(MakeCall(GetOp("relax.call_pure_packed"),
                           {MakeExternFunc("vm.builtin.reshape"), x, MakeShapeExpr(shape)}, {},
                           {TensorSInfo(shape, dtype)}));
}

}  // namespace tether::compiler::onnx_frontend
