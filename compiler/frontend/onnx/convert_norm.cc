// ONNX converters for normalizations and softmaxes: BatchNormalization
// (inference), LayerNormalization, InstanceNormalization,
// MeanVarianceNormalization, LRN, Softmax, LogSoftmax and Hardmax.
//
// BatchNormalization is folded into a per-channel scale and shift
// (x * scale + shift, the parameters' arithmetic folded by ConstantFolding
// when they are initializers), so a preceding Conv takes it as an epilogue.
// LayerNormalization maps to relax.nn.layer_norm when only Y is read and
// Scale/B cover exactly the normalized dims; otherwise, like the instance
// and mean-variance normalizations, it is composed from mean reductions
// (centered variance) and elementwise ops. Softmax before opset 13 coerces
// the input to 2-D at `axis` (a reshape around a last-axis softmax).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::AddScalar;
using nn_convert::ExpandDims;
using nn_convert::InputDType;
using nn_convert::InputRank;
using nn_convert::InputShape;
using nn_convert::NormalizeAxis;
using nn_convert::ScalarConstant;
using nn_convert::WantsOutput;

// Axes [from, to).
std::vector<int64_t> AxisRange(int64_t from, int64_t to) {
  std::vector<int64_t> axes;
  for (int64_t k = from; k < to; ++k) axes.push_back(k);
  return axes;
}

// Input `i` cast to `dtype` when its dtype differs (BatchNormalization-15
// allows parameters of another float type).
absl::StatusOr<Expr> InputAs(ConvertContext& ctx, int i, DataType dtype) {
  TETHER_ASSIGN_OR_RETURN(Expr e, ctx.Input(i));
  TETHER_ASSIGN_OR_RETURN(DataType have, InputDType(ctx, i));
  if (have == dtype) return e;
  return ctx.EmitOp("relax.astype", {e}, {{"dtype", dtype}});
}

// Per-channel parameter `i` (shape (C,)) reshaped to broadcast against an
// NC... input of rank `rank`: (C, 1, ..., 1).
absl::StatusOr<Expr> ChannelParam(ConvertContext& ctx, const Expr& p, int rank) {
  return ExpandDims(ctx, p, AxisRange(1, rank - 1));
}

// The statistics of x over `axes` (keepdims): the mean, x - mean and
// 1 / sqrt(var + eps) with the centered variance.
struct Moments {
  Expr mean, centered, inv_std;
};

absl::StatusOr<Moments> ComputeMoments(ConvertContext& ctx, const Expr& x, DataType dtype,
                                       const std::vector<int64_t>& axes, double eps) {
  Moments m;
  Attrs reduce = {{"axis", axes}, {"keepdims", true}};
  TETHER_ASSIGN_OR_RETURN(m.mean, ctx.EmitOp("relax.mean", {x}, reduce));
  TETHER_ASSIGN_OR_RETURN(m.centered, ctx.EmitOp("relax.subtract", {x, m.mean}));
  TETHER_ASSIGN_OR_RETURN(Expr sq, ctx.EmitOp("relax.multiply", {m.centered, m.centered}));
  TETHER_ASSIGN_OR_RETURN(Expr var, ctx.EmitOp("relax.mean", {sq}, reduce));
  TETHER_ASSIGN_OR_RETURN(var, AddScalar(ctx, var, dtype, eps));
  TETHER_ASSIGN_OR_RETURN(m.inv_std, ctx.EmitOp("relax.rsqrt", {var}));
  return m;
}

// ---- BatchNormalization ------------------------------------------------------

ConvertResult ConvertBatchNorm(ConvertContext& ctx) {
  if (ctx.opset() < 9 && ctx.AttrInt("spatial", 1) != 1) {
    return ctx.Unsupported("spatial=0 (per-element statistics)");
  }
  if (ctx.AttrInt("training_mode", 0) != 0) return ctx.Unsupported("training_mode=1");
  for (int i = 1; i < ctx.node().output_size(); ++i) {
    if (WantsOutput(ctx, i)) {
      return ctx.Unsupported(absl::StrCat("output ", i, " (the training statistics)"));
    }
  }
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  if (rank < 2) return ctx.Invalid(absl::StrCat("input must have at least 2 dims, got ", rank));
  for (int i = 1; i < 5; ++i) {
    TETHER_ASSIGN_OR_RETURN(int r, InputRank(ctx, i));
    if (r != 1) return ctx.Invalid(absl::StrCat("input ", i, " must have 1 dim, got ", r));
  }
  const double eps = ctx.AttrFloat("epsilon", 1e-5f);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr gamma, InputAs(ctx, 1, dtype));
  TETHER_ASSIGN_OR_RETURN(Expr beta, InputAs(ctx, 2, dtype));
  TETHER_ASSIGN_OR_RETURN(Expr mean, InputAs(ctx, 3, dtype));
  TETHER_ASSIGN_OR_RETURN(Expr var, InputAs(ctx, 4, dtype));
  // scale = gamma / sqrt(var + eps); shift = beta - mean * scale.
  TETHER_ASSIGN_OR_RETURN(Expr v, AddScalar(ctx, var, dtype, eps));
  TETHER_ASSIGN_OR_RETURN(v, ctx.EmitOp("relax.rsqrt", {v}));
  TETHER_ASSIGN_OR_RETURN(Expr scale, ctx.EmitOp("relax.multiply", {gamma, v}));
  TETHER_ASSIGN_OR_RETURN(Expr ms, ctx.EmitOp("relax.multiply", {mean, scale}));
  TETHER_ASSIGN_OR_RETURN(Expr shift, ctx.EmitOp("relax.subtract", {beta, ms}));
  TETHER_ASSIGN_OR_RETURN(scale, ChannelParam(ctx, scale, rank));
  TETHER_ASSIGN_OR_RETURN(shift, ChannelParam(ctx, shift, rank));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.multiply", {x, scale}));
  TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, shift}));
  return One(y);
}

// ---- LayerNormalization, InstanceNormalization, MVN -------------------------------

// Whether input `i` has exactly the dims `dims` (structurally).
bool HasShape(ConvertContext& ctx, int i, const std::vector<PrimExpr>& dims) {
  absl::StatusOr<const TensorStructInfoNode*> t = ctx.InputTensorInfo(i);
  if (!t.ok() || !(*t)->shape.has_value() || (*t)->shape->size() != dims.size()) return false;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (!ProveEqual((*(*t)->shape)[k], dims[k])) return false;
  }
  return true;
}

ConvertResult ConvertLayerNorm(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  const int64_t rank = static_cast<int64_t>(shape.size());
  TETHER_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.AttrInt("axis", -1), rank, "axis"));
  const double eps = ctx.AttrFloat("epsilon", 1e-5f);
  const std::vector<int64_t> axes = AxisRange(axis, rank);
  const std::vector<PrimExpr> norm_dims(shape.begin() + axis, shape.end());
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr scale, ctx.Input(1));
  const bool want_stats = WantsOutput(ctx, 1) || WantsOutput(ctx, 2);
  if (!want_stats && HasShape(ctx, 1, norm_dims) &&
      (!ctx.HasInput(2) || HasShape(ctx, 2, norm_dims))) {
    Expr bias;
    if (ctx.HasInput(2)) {
      TETHER_ASSIGN_OR_RETURN(bias, ctx.Input(2));
    } else {
      TETHER_ASSIGN_OR_RETURN(bias, ctx.EmitOp("relax.zeros_like", {scale}));
    }
    TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.nn.layer_norm", {x, scale, bias},
                                               {{"axes", axes}, {"epsilon", eps}}));
    return One(y);
  }
  TETHER_ASSIGN_OR_RETURN(Moments m, ComputeMoments(ctx, x, dtype, axes, eps));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.multiply", {m.centered, m.inv_std}));
  TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.multiply", {y, scale}));
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(Expr bias, ctx.Input(2));
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, bias}));
  }
  return std::vector<OnnxValue>{OnnxValue::Of(y), OnnxValue::Of(m.mean), OnnxValue::Of(m.inv_std)};
}

ConvertResult ConvertInstanceNorm(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  if (rank < 3) return ctx.Invalid(absl::StrCat("input must have at least 3 dims, got ", rank));
  for (int i = 1; i < 3; ++i) {
    TETHER_ASSIGN_OR_RETURN(int r, InputRank(ctx, i));
    if (r != 1) return ctx.Invalid(absl::StrCat("input ", i, " must have 1 dim, got ", r));
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr scale, ctx.Input(1));
  TETHER_ASSIGN_OR_RETURN(Expr bias, ctx.Input(2));
  TETHER_ASSIGN_OR_RETURN(Moments m, ComputeMoments(ctx, x, dtype, AxisRange(2, rank),
                                                    ctx.AttrFloat("epsilon", 1e-5f)));
  TETHER_ASSIGN_OR_RETURN(scale, ChannelParam(ctx, scale, rank));
  TETHER_ASSIGN_OR_RETURN(bias, ChannelParam(ctx, bias, rank));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.multiply", {m.centered, m.inv_std}));
  TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.multiply", {y, scale}));
  TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, bias}));
  return One(y);
}

// (X - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]), as the
// ONNX function body defines it.
ConvertResult ConvertMeanVarianceNorm(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  std::vector<int64_t> axes;
  for (int64_t a : ctx.AttrInts("axes", {0, 2, 3})) {
    TETHER_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, "axis"));
    axes.push_back(n);
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Moments m, ComputeMoments(ctx, x, dtype, axes, 0.0));
  // inv_std is 1 / sqrt(var); the function adds 1e-9 to sqrt(var).
  TETHER_ASSIGN_OR_RETURN(Expr one, ScalarConstant(dtype, 1.0));
  TETHER_ASSIGN_OR_RETURN(Expr std, ctx.EmitOp("relax.divide", {one, m.inv_std}));
  TETHER_ASSIGN_OR_RETURN(std, AddScalar(ctx, std, dtype, 1e-9));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.divide", {m.centered, std}));
  return One(y);
}

// y = x / (bias + alpha / size * sum_{window over C} x^2) ^ beta. The channel
// window sum is an average pool (count_include_pad) over a (N, 1, C, rest) view.
ConvertResult ConvertLRN(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  if (shape.size() < 3) {
    return ctx.Invalid(absl::StrCat("input must have at least 3 dims, got ", shape.size()));
  }
  const int64_t size = ctx.AttrInt("size", 0);
  if (size < 1) return ctx.Invalid(absl::StrCat("size must be positive, got ", size));
  const double alpha = ctx.AttrFloat("alpha", 1e-4f);
  const double beta = ctx.AttrFloat("beta", 0.75f);
  const double bias = ctx.AttrFloat("bias", 1.0f);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr sq, ctx.EmitOp("relax.multiply", {x, x}));
  std::vector<PrimExpr> rest(shape.begin() + 2, shape.end());
  std::vector<PrimExpr> view = {shape[0], PrimExpr(1), shape[1], Simplify(Product(rest))};
  TETHER_ASSIGN_OR_RETURN(sq, ctx.EmitOp("relax.reshape", {sq, MakeShapeExpr(view)}));
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  TETHER_ASSIGN_OR_RETURN(Expr avg, ctx.EmitOp("relax.nn.avg_pool2d", {sq},
                                               {{"pool_size", std::vector<int64_t>{size, 1}},
                                                {"padding", std::vector<int64_t>{lo, 0, hi, 0}},
                                                {"count_include_pad", true}}));
  TETHER_ASSIGN_OR_RETURN(avg, ctx.EmitOp("relax.reshape", {avg, MakeShapeExpr(shape)}));
  TETHER_ASSIGN_OR_RETURN(Expr d, nn_convert::MulScalar(ctx, avg, dtype, alpha));
  TETHER_ASSIGN_OR_RETURN(d, AddScalar(ctx, d, dtype, bias));
  TETHER_ASSIGN_OR_RETURN(Expr b, ScalarConstant(dtype, beta));
  TETHER_ASSIGN_OR_RETURN(d, ctx.EmitOp("relax.power", {d, b}));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.divide", {x, d}));
  return One(y);
}

// ---- Softmax, LogSoftmax, Hardmax ----------------------------------------------

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// One-hot of the first maximum along `axis` (static extent), in x's dtype.
absl::StatusOr<Expr> EmitHardmax(ConvertContext& ctx, const Expr& x, DataType dtype,
                                 const std::vector<PrimExpr>& shape, int64_t axis) {
  const int64_t* extent = shape[axis].as_int();
  if (extent == nullptr) {
    return ctx.Unsupported(absl::StrCat("Hardmax over the symbolic dim ", ToString(shape[axis])));
  }
  TETHER_ASSIGN_OR_RETURN(Expr idx,
                          ctx.EmitOp("relax.argmax", {x}, {{"axis", axis}, {"keepdims", true}}));
  // iota along `axis`: shape (extent, 1, ..., 1) for the trailing dims.
  std::vector<int64_t> iota_shape(shape.size() - axis, 1);
  iota_shape[0] = *extent;
  std::vector<double> values;
  for (int64_t i = 0; i < *extent; ++i) values.push_back(static_cast<double>(i));
  TETHER_ASSIGN_OR_RETURN(Tensor iota,
                          nn_convert::MakeFilledTensor(DataType::Int(64), iota_shape, values));
  TETHER_ASSIGN_OR_RETURN(Expr hot, ctx.EmitOp("relax.equal", {idx, MakeConstant(iota)}));
  return ctx.EmitOp("relax.astype", {hot}, {{"dtype", dtype}});
}

ConvertResult ConvertSoftmax(ConvertContext& ctx, SoftmaxKind kind) {
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool coerce = ctx.opset() < 13;
  if (rank == 0) return ctx.Invalid("input must have at least 1 dim");
  TETHER_ASSIGN_OR_RETURN(int64_t axis,
                          NormalizeAxis(ctx, ctx.AttrInt("axis", coerce ? 1 : -1), rank, "axis"));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  std::vector<PrimExpr> work_shape = shape;
  int64_t work_axis = axis;
  // Before opset 13 the input is flattened to 2-D at `axis` and the softmax
  // runs over the second dim; that is a plain softmax when axis is the last.
  const bool reshape = coerce && axis != rank - 1;
  if (reshape) {
    std::vector<PrimExpr> outer(shape.begin(), shape.begin() + axis);
    std::vector<PrimExpr> inner(shape.begin() + axis, shape.end());
    work_shape = {Simplify(Product(outer)), Simplify(Product(inner))};
    work_axis = 1;
    TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.reshape", {x, MakeShapeExpr(work_shape)}));
  }
  Expr y;
  if (kind == SoftmaxKind::kHardmax) {
    TETHER_ASSIGN_OR_RETURN(y, EmitHardmax(ctx, x, dtype, work_shape, work_axis));
  } else {
    TETHER_ASSIGN_OR_RETURN(
        y, ctx.EmitOp(kind == SoftmaxKind::kSoftmax ? "relax.nn.softmax" : "relax.nn.log_softmax",
                      {x}, {{"axis", work_axis}}));
  }
  if (reshape) {
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.reshape", {y, MakeShapeExpr(shape)}));
  }
  return One(y);
}

}  // namespace

// Called from RegisterNNConverters (convert_nn.cc).
void RegisterNormConverters() {
  RegisterConverter("BatchNormalization", 1, ConvertBatchNorm);
  RegisterConverter("LayerNormalization", 17, ConvertLayerNorm);
  RegisterConverter("InstanceNormalization", 1, ConvertInstanceNorm);
  RegisterConverter("MeanVarianceNormalization", 1, ConvertMeanVarianceNorm);
  RegisterConverter("LRN", 1, ConvertLRN);
  RegisterConverter("Softmax", 1,
                    [](ConvertContext& ctx) { return ConvertSoftmax(ctx, SoftmaxKind::kSoftmax); });
  RegisterConverter("LogSoftmax", 1, [](ConvertContext& ctx) {
    return ConvertSoftmax(ctx, SoftmaxKind::kLogSoftmax);
  });
  RegisterConverter("Hardmax", 1,
                    [](ConvertContext& ctx) { return ConvertSoftmax(ctx, SoftmaxKind::kHardmax); });
}

}  // namespace tether::compiler::onnx_frontend
