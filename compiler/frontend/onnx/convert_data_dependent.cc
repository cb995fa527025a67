// ONNX converters for the operators the VM runs on the host: NonZero,
// Compress, Unique and NonMaxSuppression, whose output shape depends on
// input values, and Det. Each is a call of a VM
// builtin that runs on the host (runtime/vm/data_dependent_ops.cc) through
// R.call_pure_packed; its result's unknown dims become fresh symbolic vars
// with a match cast ("<output>_n"), so the rest of the model is compiled
// over them like over any dynamic dim.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/graph_importer.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::DimsMayMatch;
using nn_convert::InputRank;
using nn_convert::InputShape;

// R.call_pure_packed(builtin, args...) of rank `ndim` and `dtype`, cast to
// `dims` where a dim is undefined for a fresh symbolic var.
absl::StatusOr<Expr> CallBuiltin(ConvertContext& ctx, const std::string& builtin,
                                 std::vector<Expr> args, std::vector<PrimExpr> dims,
                                 DataType dtype) {
  const int ndim = static_cast<int>(dims.size());
  TETHER_ASSIGN_OR_RETURN(
      Expr raw, EmitPackedCall(ctx, builtin, std::move(args), TensorSInfoOfRank(ndim, dtype)));
  const std::string& out = ctx.node().output(0);
  for (PrimExpr& d : dims) {
    if (!d.defined()) d = Var(SymbolName(absl::StrCat(out.empty() ? "dyn" : out, "_n")));
  }
  return ctx.EmitMatchCast(raw, TensorSInfo(std::move(dims), dtype));
}

ConvertResult ConvertNonZero(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  return One(
      CallBuiltin(ctx, "vm.builtin.nonzero", {x}, {PrimExpr(rank), PrimExpr()}, DataType::Int(64)));
}

ConvertResult ConvertCompress(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr cond, ctx.Input(1));
  int64_t axis = -1;
  std::vector<PrimExpr> dims = {PrimExpr()};
  if (ctx.HasAttr("axis")) {
    axis = ctx.AttrInt("axis", 0);
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (axis < -rank || axis >= rank) {
      return ctx.Invalid(absl::StrCat("axis ", axis, " out of range for rank ", rank));
    }
    if (axis < 0) axis += rank;
    dims = shape;
    dims[static_cast<size_t>(axis)] = PrimExpr();
  }
  return One(CallBuiltin(ctx, "vm.builtin.compress", {x, cond, MakePrimValue(PrimExpr(axis))}, dims,
                         *info->dtype));
}

// Unique-11: vm.builtin.unique returns (y, indices, inverse, counts); y's
// length along the axis and the counts' length are one fresh var, the
// inverse is as long as the input's axis.
ConvertResult ConvertUnique(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = -1;
  std::vector<PrimExpr> y_dims;
  PrimExpr len;
  const std::string& out = ctx.node().output(0);
  const Var n(SymbolName(absl::StrCat(out.empty() ? "unique" : out, "_n")));
  if (ctx.HasAttr("axis")) {
    axis = ctx.AttrInt("axis", 0);
    if (axis < -rank || axis >= rank) {
      return ctx.Invalid(absl::StrCat("axis ", axis, " out of range for rank ", rank));
    }
    if (axis < 0) axis += rank;
    y_dims = shape;
    len = shape[static_cast<size_t>(axis)];
    y_dims[static_cast<size_t>(axis)] = n;
  } else {
    len = Simplify(Product(shape));
    y_dims = {n};
  }
  const int64_t sorted = ctx.AttrInt("sorted", 1);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  const DataType i64 = DataType::Int(64);
  const StructInfo raw_sinfo =
      TupleSInfo({TensorSInfoOfRank(static_cast<int>(y_dims.size()), *info->dtype),
                  TensorSInfoOfRank(1, i64), TensorSInfoOfRank(1, i64), TensorSInfoOfRank(1, i64)});
  TETHER_ASSIGN_OR_RETURN(
      Expr raw, EmitPackedCall(ctx, "vm.builtin.unique",
                               {x, MakePrimValue(PrimExpr(axis)), MakePrimValue(PrimExpr(sorted))},
                               raw_sinfo));
  const StructInfo field[4] = {TensorSInfo(y_dims, *info->dtype), TensorSInfo({n}, i64),
                               TensorSInfo({len}, i64), TensorSInfo({n}, i64)};
  std::vector<OnnxValue> outs;
  for (int i = 0; i < 4; ++i) {
    TETHER_ASSIGN_OR_RETURN(Expr item, ctx.Emit(MakeTupleGetItem(raw, i)));
    TETHER_ASSIGN_OR_RETURN(item, ctx.EmitMatchCast(item, field[i]));
    outs.push_back(OnnxValue::Of(item));
  }
  return outs;
}

// Det-11: vm.builtin.det on the host, [..., M, M] -> [...].
ConvertResult ConvertDet(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  if (shape.size() < 2 || !info->dtype.has_value() ||
      (*info->dtype != DataType::Float(32) && *info->dtype != DataType::Float(64))) {
    return ctx.Unsupported("Det of other than float32/float64 matrices [..., M, M]");
  }
  if (!DimsMayMatch(shape[shape.size() - 1], shape[shape.size() - 2])) {
    return ctx.Invalid(absl::StrCat("the matrices must be square, got ",
                                    ToString(shape[shape.size() - 2]), " x ",
                                    ToString(shape.back())));
  }
  shape.resize(shape.size() - 2);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  return One(EmitPackedCall(ctx, "vm.builtin.det", {x}, TensorSInfo(shape, *info->dtype)));
}

// inputs: boxes, scores, max_output_boxes_per_class, iou_threshold,
// score_threshold (the last three optional: 0, 0 and no threshold).
ConvertResult ConvertNonMaxSuppression(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr boxes, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr scores, ctx.Input(1));
  std::vector<Expr> args = {boxes, scores};
  const double defaults[3] = {0, 0, -std::numeric_limits<double>::infinity()};
  for (int i = 2; i < 5; ++i) {
    if (ctx.HasInput(i)) {
      TETHER_ASSIGN_OR_RETURN(Expr v, ctx.Input(i));
      args.push_back(v);
      continue;
    }
    const DataType dt = i == 2 ? DataType::Int(64) : DataType::Float(32);
    TETHER_ASSIGN_OR_RETURN(Expr v, ScalarConstant(dt, defaults[i - 2]));
    args.push_back(v);
  }
  const int64_t center = ctx.AttrInt("center_point_box", 0);
  if (center != 0 && center != 1) {
    return ctx.Invalid(absl::StrCat("center_point_box must be 0 or 1, got ", center));
  }
  args.push_back(MakePrimValue(PrimExpr(center)));
  return One(CallBuiltin(ctx, "vm.builtin.non_max_suppression", std::move(args),
                         {PrimExpr(), PrimExpr(3)}, DataType::Int(64)));
}

}  // namespace

void RegisterDataDependentConverters() {
  RegisterConverter("NonZero", 9, ConvertNonZero);
  RegisterConverter("Compress", 9, ConvertCompress);
  RegisterConverter("Unique", 11, ConvertUnique);
  RegisterConverter("Det", 11, ConvertDet);
  RegisterConverter("NonMaxSuppression", 10, ConvertNonMaxSuppression);
}

}  // namespace tether::compiler::onnx_frontend
