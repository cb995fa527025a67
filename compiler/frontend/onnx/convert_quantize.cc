// ONNX converters for quantization: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, and the integer linear algebra of quantized models,
// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.
//
// Quantized values are 8-bit integers with a float scale and an integer
// zero point, per tensor or per axis (a 1-D scale along `axis`). The integer
// products are exact: operands are widened to int32 with their zero points
// subtracted, multiplied and accumulated in int32 by relax.matmul and
// relax.nn.conv2d, then rescaled in float32 and rounded half to even, as the
// operators' definitions (and onnxruntime's reference kernels) compute them.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/convert_elementwise.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::ExpandDims;
using nn_convert::InputDType;
using nn_convert::InputRank;

const DataType kF32 = DataType::Float(32);
const DataType kI32 = DataType::Int(32);

bool IsQuantizedType(DataType t) { return t == DataType::Int(8) || t == DataType::UInt(8); }

absl::StatusOr<Expr> AsType(ConvertContext& ctx, const Expr& x, DataType to) {
  return ctx.EmitOp("relax.astype", {x}, {{"dtype", to}});
}

// Input `i` (a scale or zero point of a value of rank `rank`) shaped to
// broadcast against that value: a scalar or one-element tensor as it is, a
// 1-D tensor of length C placed on `axis` (per-axis quantization).
absl::StatusOr<Expr> AlongAxis(ConvertContext& ctx, int i, int64_t axis, int rank) {
  TETHER_ASSIGN_OR_RETURN(Expr v, ctx.Input(i));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(i));
  if (info->ndim == 0) return v;
  if (info->ndim != 1) {
    return ctx.Invalid(
        absl::StrCat("input ", i, " must be a scalar or 1-D, got ", info->ndim, " dims"));
  }
  if (info->shape.has_value() && (*info->shape)[0].as_int() != nullptr &&
      *(*info->shape)[0].as_int() == 1) {
    return v;
  }
  if (axis < -rank || axis >= rank) {
    return ctx.Invalid(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> others;
  for (int64_t a = 0; a < rank; ++a) {
    if (a != axis) others.push_back(a);
  }
  return ExpandDims(ctx, v, others);
}

// Input `i` widened to int32 minus its zero point (input `zp`, optional,
// shaped by AlongAxis along `axis` of input `i`).
absl::StatusOr<Expr> Centered(ConvertContext& ctx, int i, int zp, int64_t axis) {
  TETHER_ASSIGN_OR_RETURN(DataType dt, InputDType(ctx, i));
  if (!IsQuantizedType(dt)) {
    return ctx.Invalid(absl::StrCat("input ", i, " must be int8 or uint8, got ", dt.ToString()));
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(i));
  TETHER_ASSIGN_OR_RETURN(x, AsType(ctx, x, kI32));
  if (!ctx.HasInput(zp)) return x;
  TETHER_ASSIGN_OR_RETURN(DataType zdt, InputDType(ctx, zp));
  if (zdt != dt) {
    return ctx.Invalid(absl::StrCat("input ", zp, " (zero point) is ", zdt.ToString(),
                                    ", its value is ", dt.ToString()));
  }
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, i));
  TETHER_ASSIGN_OR_RETURN(Expr z, AlongAxis(ctx, zp, axis, rank));
  TETHER_ASSIGN_OR_RETURN(z, AsType(ctx, z, kI32));
  return ctx.EmitOp("relax.subtract", {x, z});
}

// round_half_even(x) + zero_point, saturated to `to` (int8 or uint8) and
// cast: the last step of every quantizing operator. x and zp are float32.
absl::StatusOr<Expr> Saturate(ConvertContext& ctx, const Expr& x, const Expr& zp, DataType to) {
  TETHER_ASSIGN_OR_RETURN(Expr r, EmitRoundHalfToEven(ctx, x, kF32));
  TETHER_ASSIGN_OR_RETURN(r, ctx.EmitOp("relax.add", {r, zp}));
  const double lo = to == DataType::Int(8) ? -128 : 0, hi = to == DataType::Int(8) ? 127 : 255;
  TETHER_ASSIGN_OR_RETURN(Expr lo_c, ScalarConstant(kF32, lo));
  TETHER_ASSIGN_OR_RETURN(Expr hi_c, ScalarConstant(kF32, hi));
  TETHER_ASSIGN_OR_RETURN(r, ctx.EmitOp("relax.maximum", {r, lo_c}));
  TETHER_ASSIGN_OR_RETURN(r, ctx.EmitOp("relax.minimum", {r, hi_c}));
  return AsType(ctx, r, to);
}

// The zero point input `zp` as float32 shaped along `axis` (rank `rank`),
// and its dtype (uint8 when absent, as the operators say).
absl::StatusOr<std::pair<Expr, DataType>> ZeroPoint(ConvertContext& ctx, int zp, int64_t axis,
                                                    int rank) {
  if (!ctx.HasInput(zp)) {
    TETHER_ASSIGN_OR_RETURN(Expr z, ScalarConstant(kF32, 0));
    return std::make_pair(z, DataType::UInt(8));
  }
  TETHER_ASSIGN_OR_RETURN(DataType dt, InputDType(ctx, zp));
  if (!IsQuantizedType(dt)) {
    return ctx.Unsupported(
        absl::StrCat("a zero point of ", dt.ToString(), " (only int8 and uint8 are supported)"));
  }
  TETHER_ASSIGN_OR_RETURN(Expr z, AlongAxis(ctx, zp, axis, rank));
  TETHER_ASSIGN_OR_RETURN(z, AsType(ctx, z, kF32));
  return std::make_pair(z, dt);
}

absl::StatusOr<Expr> FloatInput(ConvertContext& ctx, int i) {
  TETHER_ASSIGN_OR_RETURN(DataType dt, InputDType(ctx, i));
  if (dt != kF32) {
    return ctx.Unsupported(absl::StrCat("input ", i, " is ", dt.ToString(), " (float32 expected)"));
  }
  return ctx.Input(i);
}

// y = saturate(round(x / scale) + zero_point).
ConvertResult ConvertQuantizeLinear(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  const int64_t axis = ctx.AttrInt("axis", 1);
  TETHER_ASSIGN_OR_RETURN(DataType xdt, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (xdt != kF32) {
    if (xdt != kI32) {
      return ctx.Unsupported(
          absl::StrCat("input 0 of ", xdt.ToString(), " (float32 and int32 are supported)"));
    }
    TETHER_ASSIGN_OR_RETURN(x, AsType(ctx, x, kF32));
  }
  TETHER_ASSIGN_OR_RETURN(Expr scale, AlongAxis(ctx, 1, axis, rank));
  TETHER_ASSIGN_OR_RETURN(auto zp, ZeroPoint(ctx, 2, axis, rank));
  TETHER_ASSIGN_OR_RETURN(Expr scaled, ctx.EmitOp("relax.divide", {x, scale}));
  return One(Saturate(ctx, scaled, zp.first, zp.second));
}

// y = (x - zero_point) * scale.
ConvertResult ConvertDequantizeLinear(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  const int64_t axis = ctx.AttrInt("axis", 1);
  TETHER_ASSIGN_OR_RETURN(DataType xdt, InputDType(ctx, 0));
  if (!IsQuantizedType(xdt) && xdt != kI32) {
    return ctx.Unsupported(
        absl::StrCat("input 0 of ", xdt.ToString(), " (int8, uint8 and int32 are supported)"));
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(x, AsType(ctx, x, kF32));
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(Expr z, AlongAxis(ctx, 2, axis, rank));
    TETHER_ASSIGN_OR_RETURN(z, AsType(ctx, z, kF32));
    TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.subtract", {x, z}));
  }
  TETHER_ASSIGN_OR_RETURN(Expr scale, AlongAxis(ctx, 1, axis, rank));
  return One(ctx.EmitOp("relax.multiply", {x, scale}));
}

// uint8 quantization with the scale and zero point of x's range (extended
// to include 0): scale = (max - min) / 255, zero point = round(-min / scale).
ConvertResult ConvertDynamicQuantizeLinear(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr x, FloatInput(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(Expr zero, ScalarConstant(kF32, 0));
  TETHER_ASSIGN_OR_RETURN(Expr range, ScalarConstant(kF32, 255));
  TETHER_ASSIGN_OR_RETURN(Expr hi, ctx.EmitOp("relax.max", {x}, {{"keepdims", false}}));
  TETHER_ASSIGN_OR_RETURN(Expr lo, ctx.EmitOp("relax.min", {x}, {{"keepdims", false}}));
  TETHER_ASSIGN_OR_RETURN(hi, ctx.EmitOp("relax.maximum", {hi, zero}));
  TETHER_ASSIGN_OR_RETURN(lo, ctx.EmitOp("relax.minimum", {lo, zero}));
  TETHER_ASSIGN_OR_RETURN(Expr span, ctx.EmitOp("relax.subtract", {hi, lo}));
  TETHER_ASSIGN_OR_RETURN(Expr scale, ctx.EmitOp("relax.divide", {span, range}));
  TETHER_ASSIGN_OR_RETURN(Expr neg_lo, ctx.EmitOp("relax.subtract", {zero, lo}));
  TETHER_ASSIGN_OR_RETURN(Expr zp_f, ctx.EmitOp("relax.divide", {neg_lo, scale}));
  TETHER_ASSIGN_OR_RETURN(Expr zp, Saturate(ctx, zp_f, zero, DataType::UInt(8)));
  TETHER_ASSIGN_OR_RETURN(Expr zp_back, AsType(ctx, zp, kF32));
  TETHER_ASSIGN_OR_RETURN(Expr scaled, ctx.EmitOp("relax.divide", {x, scale}));
  TETHER_ASSIGN_OR_RETURN(Expr y, Saturate(ctx, scaled, zp_back, DataType::UInt(8)));
  return std::vector<OnnxValue>{OnnxValue::Of(y), OnnxValue::Of(scale), OnnxValue::Of(zp)};
}

// (A - a_zero_point) x (B - b_zero_point) in int32; A's zero point may be
// per row (1-D of M), B's per column (1-D of N).
absl::StatusOr<Expr> IntegerMatMul(ConvertContext& ctx, int a, int a_zp, int b, int b_zp) {
  TETHER_ASSIGN_OR_RETURN(int a_rank, InputRank(ctx, a));
  TETHER_ASSIGN_OR_RETURN(int b_rank, InputRank(ctx, b));
  if (a_rank < 2 || b_rank < 2) {
    return ctx.Unsupported("1-D operands (only matrices and batches of them)");
  }
  TETHER_ASSIGN_OR_RETURN(Expr ca, Centered(ctx, a, a_zp, a_rank - 2));
  TETHER_ASSIGN_OR_RETURN(Expr cb, Centered(ctx, b, b_zp, b_rank - 1));
  return ctx.EmitOp("relax.matmul", {ca, cb});
}

ConvertResult ConvertMatMulInteger(ConvertContext& ctx) {
  return One(IntegerMatMul(ctx, 0, 2, 1, 3));
}

// y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zero_point) for
// the int32 accumulator `acc` of a QLinear operator; the scales are per
// tensor or along the given axes of acc (rank `rank`).
absl::StatusOr<Expr> Requantize(ConvertContext& ctx, const Expr& acc, int rank, int a_scale,
                                int64_t a_axis, int b_scale, int64_t b_axis, int y_scale,
                                int y_zp) {
  TETHER_ASSIGN_OR_RETURN(Expr f, AsType(ctx, acc, kF32));
  TETHER_ASSIGN_OR_RETURN(Expr sa, AlongAxis(ctx, a_scale, a_axis, rank));
  TETHER_ASSIGN_OR_RETURN(Expr sb, AlongAxis(ctx, b_scale, b_axis, rank));
  TETHER_ASSIGN_OR_RETURN(Expr sy, ctx.Input(y_scale));
  TETHER_ASSIGN_OR_RETURN(Expr s, ctx.EmitOp("relax.multiply", {sa, sb}));
  TETHER_ASSIGN_OR_RETURN(s, ctx.EmitOp("relax.divide", {s, sy}));
  TETHER_ASSIGN_OR_RETURN(f, ctx.EmitOp("relax.multiply", {f, s}));
  TETHER_ASSIGN_OR_RETURN(auto zp, ZeroPoint(ctx, y_zp, 0, 0));
  return Saturate(ctx, f, zp.first, zp.second);
}

// inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
ConvertResult ConvertQLinearMatMul(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr acc, IntegerMatMul(ctx, 0, 2, 3, 5));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  TETHER_ASSIGN_OR_RETURN(int b_rank, InputRank(ctx, 3));
  const int rank = std::max(static_cast<int>(info->ndim), b_rank);
  return One(Requantize(ctx, acc, rank, 1, -2, 4, -1, 6, 7));
}

// inputs: x, w, x_zero_point (per tensor), w_zero_point (per tensor or per
// output channel).
ConvertResult ConvertConvInteger(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr x, Centered(ctx, 0, 2, 1));
  TETHER_ASSIGN_OR_RETURN(Expr w, Centered(ctx, 1, 3, 0));
  return One(nn_convert::EmitConvolution(ctx, 0, 1, x, w));
}

// inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B (int32 bias, optional).
ConvertResult ConvertQLinearConv(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr x, Centered(ctx, 0, 2, 1));
  TETHER_ASSIGN_OR_RETURN(Expr w, Centered(ctx, 3, 5, 0));
  TETHER_ASSIGN_OR_RETURN(Expr acc, nn_convert::EmitConvolution(ctx, 0, 3, x, w));
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  if (ctx.HasInput(8)) {
    TETHER_ASSIGN_OR_RETURN(DataType bdt, InputDType(ctx, 8));
    if (bdt != kI32) return ctx.Invalid(absl::StrCat("B must be int32, got ", bdt.ToString()));
    TETHER_ASSIGN_OR_RETURN(Expr bias, AlongAxis(ctx, 8, 1, rank));
    TETHER_ASSIGN_OR_RETURN(acc, ctx.EmitOp("relax.add", {acc, bias}));
  }
  return One(Requantize(ctx, acc, rank, 1, 1, 4, 1, 6, 7));
}

}  // namespace

void RegisterQuantizeConverters() {
  RegisterConverter("QuantizeLinear", 10, ConvertQuantizeLinear);
  RegisterConverter("DequantizeLinear", 10, ConvertDequantizeLinear);
  RegisterConverter("DynamicQuantizeLinear", 11, ConvertDynamicQuantizeLinear);
  RegisterConverter("MatMulInteger", 10, ConvertMatMulInteger);
  RegisterConverter("QLinearMatMul", 10, ConvertQLinearMatMul);
  RegisterConverter("ConvInteger", 10, ConvertConvInteger);
  RegisterConverter("QLinearConv", 10, ConvertQLinearConv);
}

}  // namespace tether::compiler::onnx_frontend
