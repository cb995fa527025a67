// Helpers shared by the NN-family ONNX converters (convert_nn_util.h).
#include "compiler/frontend/onnx/convert_nn_util.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"
#include "runtime/core/scalar.h"

namespace tether::compiler::onnx_frontend::nn_convert {
absl::StatusOr<Tensor> MakeFilledTensor(DataType dtype, const std::vector<int64_t>& shape,
                                        const std::vector<double>& values) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (values.size() != 1 && static_cast<int64_t>(values.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("onnx: constant of ", n, " elements given ", values.size(), " values"));
  }
  TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(shape, dtype, Device::Cpu()));
  void* p = t->element_data();
  const bool known = DispatchScalarType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      static_cast<T*>(p)[i] = ScalarFromDouble<T>(values.size() == 1 ? values[0] : values[i]);
    }
  });
  if (!known) {
    return absl::UnimplementedError(
        absl::StrCat("onnx: constants of dtype ", dtype.ToString(), " are not supported"));
  }
  return t;
}

absl::StatusOr<Expr> ScalarConstant(DataType dtype, double value) {
  TETHER_ASSIGN_OR_RETURN(Tensor t, MakeFilledTensor(dtype, {}, {value}));
  return MakeConstant(std::move(t));
}

absl::StatusOr<DataType> InputDType(ConvertContext& ctx, int i) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, ctx.InputTensorInfo(i));
  if (!t->dtype.has_value()) {
    return ctx.Unsupported(absl::StrCat("input ", i, " has an unknown dtype"));
  }
  return *t->dtype;
}

absl::StatusOr<int> InputRank(ConvertContext& ctx, int i) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, ctx.InputTensorInfo(i));
  if (t->ndim < 0) return ctx.Unsupported(absl::StrCat("input ", i, " has an unknown rank"));
  return t->ndim;
}

absl::StatusOr<std::vector<PrimExpr>> InputShape(ConvertContext& ctx, int i) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, ctx.InputTensorInfo(i));
  if (!t->shape.has_value()) {
    return ctx.Unsupported(absl::StrCat("input ", i, " has an unknown shape"));
  }
  return *t->shape;
}

absl::StatusOr<int64_t> NormalizeAxis(const ConvertContext& ctx, int64_t axis, int64_t ndim,
                                      absl::string_view what) {
  if (axis < -ndim || axis >= ndim) {
    return ctx.Invalid(
        absl::StrCat(what, " ", axis, " is out of range for an input of ", ndim, " dims"));
  }
  return axis < 0 ? axis + ndim : axis;
}

bool WantsOutput(const ConvertContext& ctx, int i) {
  return i < ctx.node().output_size() && !ctx.node().output(i).empty();
}

bool DimsMayMatch(const PrimExpr& a, const PrimExpr& b) {
  std::optional<int64_t> x = AsConstInt(a), y = AsConstInt(b);
  return !x.has_value() || !y.has_value() || *x == *y;
}

absl::StatusOr<Expr> ExpandDims(ConvertContext& ctx, const Expr& x, std::vector<int64_t> axes) {
  if (axes.empty()) return x;
  return ctx.EmitOp("relax.expand_dims", {x}, {{"axis", std::move(axes)}});
}

absl::StatusOr<Expr> Squeeze(ConvertContext& ctx, const Expr& x, std::vector<int64_t> axes) {
  if (axes.empty()) return x;
  return ctx.EmitOp("relax.squeeze", {x}, {{"axis", std::move(axes)}});
}

absl::StatusOr<Expr> MulScalar(ConvertContext& ctx, const Expr& x, DataType dtype, double value) {
  TETHER_ASSIGN_OR_RETURN(Expr c, ScalarConstant(dtype, value));
  return ctx.EmitOp("relax.multiply", {x, c});
}

absl::StatusOr<Expr> AddScalar(ConvertContext& ctx, const Expr& x, DataType dtype, double value) {
  TETHER_ASSIGN_OR_RETURN(Expr c, ScalarConstant(dtype, value));
  return ctx.EmitOp("relax.add", {x, c});
}

}  // namespace tether::compiler::onnx_frontend::nn_convert
