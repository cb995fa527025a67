// Pieces of the elementwise converters (convert_elementwise.cc) for
// converters that apply one to a value of their own rather than to a node's
// input: the activations (RNN, GRU and LSTM name theirs in the
// `activations` attribute) and Round's half-to-even rounding (the
// quantizing converters).
//
// Thread contract: free functions over a converter's context; as
// thread-safe as the context they are given.
#ifndef TETHER_COMPILER_FRONTEND_ONNX_CONVERT_ELEMENTWISE_H_
#define TETHER_COMPILER_FRONTEND_ONNX_CONVERT_ELEMENTWISE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/frontend/onnx/converter.h"

namespace tether::compiler::onnx_frontend {

// Emits the ONNX activation `op` on `x` (of the float dtype `dtype`), with
// `alpha` and `beta` in place of its attributes (ignored by an activation
// without them): Relu, Tanh, Sigmoid, LeakyRelu, ThresholdedRelu,
// HardSigmoid, Elu, Softsign, Softplus, and the former experimental Affine
// (alpha * x + beta) and ScaledTanh (alpha * tanh(beta * x)). Names are
// exact; INVALID_ARGUMENT through ctx for another one.
absl::StatusOr<Expr> EmitActivation(ConvertContext& ctx, absl::string_view op, const Expr& x,
                                    DataType dtype, double alpha, double beta);

// x rounded half to even, as ONNX Round (x of the float dtype `dtype`).
absl::StatusOr<Expr> EmitRoundHalfToEven(ConvertContext& ctx, const Expr& x, DataType dtype);

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_CONVERT_ELEMENTWISE_H_
