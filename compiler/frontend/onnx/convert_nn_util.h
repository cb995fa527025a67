// Helpers shared by the NN-family converters of the ONNX importer
// (convert_nn.cc, convert_norm.cc, convert_reduce.cc, convert_loss.cc,
// convert_recurrent.cc): constants of a given dtype, input shape and axis
// checks with node-named errors, and the small Relax idioms (expand_dims,
// squeeze, scalar arithmetic) the converters compose. Internal to
// compiler/frontend/onnx/.
//
// Thread contract: free functions; thread-safe (they only touch the context
// they are given, which a converter owns for the duration of one node).
#ifndef TETHER_COMPILER_FRONTEND_ONNX_CONVERT_NN_UTIL_H_
#define TETHER_COMPILER_FRONTEND_ONNX_CONVERT_NN_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/frontend/onnx/converter.h"

namespace tether::compiler::onnx_frontend::nn_convert {

// A constant tensor of `dtype` and `shape` with element i = values[i] (one
// value broadcasts to every element). UNIMPLEMENTED for dtypes other than
// float32/64 and the (unsigned) integer types.
absl::StatusOr<Tensor> MakeFilledTensor(DataType dtype, const std::vector<int64_t>& shape,
                                        const std::vector<double>& values);
// A 0-d constant of `dtype`.
absl::StatusOr<Expr> ScalarConstant(DataType dtype, double value);

// The dtype of input `i`; UNIMPLEMENTED when it is not known at import time.
absl::StatusOr<DataType> InputDType(ConvertContext& ctx, int i);
// The rank of input `i`; UNIMPLEMENTED when unknown.
absl::StatusOr<int> InputRank(ConvertContext& ctx, int i);
// Conv of node input `x_input` by node input `w_input` with the node's Conv
// attributes (strides, pads/auto_pad, dilations, group; 1-D or 2-D), on `x`
// and `weight`: those inputs' values, maybe converted (the integer
// convolutions pass them as int32 without their zero points). No bias.
absl::StatusOr<Expr> EmitConvolution(ConvertContext& ctx, int x_input, int w_input, Expr x,
                                     Expr weight);
// The (maybe symbolic) shape of input `i`; UNIMPLEMENTED when unknown.
absl::StatusOr<std::vector<PrimExpr>> InputShape(ConvertContext& ctx, int i);
// `axis` in [-ndim, ndim) normalized to [0, ndim); INVALID_ARGUMENT naming
// `what` otherwise.
absl::StatusOr<int64_t> NormalizeAxis(const ConvertContext& ctx, int64_t axis, int64_t ndim,
                                      absl::string_view what);

// Whether node output `i` exists and is read (a non-empty name).
bool WantsOutput(const ConvertContext& ctx, int i);
// Whether two dims may be equal: true unless both are constants that differ.
bool DimsMayMatch(const PrimExpr& a, const PrimExpr& b);

// Emit helpers: relax.expand_dims / relax.squeeze with the "axis" list, and
// x * scalar, x + scalar with a 0-d constant of x's dtype.
absl::StatusOr<Expr> ExpandDims(ConvertContext& ctx, const Expr& x, std::vector<int64_t> axes);
absl::StatusOr<Expr> Squeeze(ConvertContext& ctx, const Expr& x, std::vector<int64_t> axes);
absl::StatusOr<Expr> MulScalar(ConvertContext& ctx, const Expr& x, DataType dtype, double value);
absl::StatusOr<Expr> AddScalar(ConvertContext& ctx, const Expr& x, DataType dtype, double value);

}  // namespace tether::compiler::onnx_frontend::nn_convert

#endif  // TETHER_COMPILER_FRONTEND_ONNX_CONVERT_NN_UTIL_H_
