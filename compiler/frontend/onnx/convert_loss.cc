// ONNX converters for the losses: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (opset 12 on; opset 13 only widened the types),
// composed from Relax operators.
//
// For input x [N, C, d1..dk] and target t [N, d1..dk] the per-element loss
// is -x[n, t[n, d], d] * w[t[n, d]] (w = 1 without the optional weight),
// gathered along axis 1 with gather_elements. With ignore_index set, the
// ignored positions get loss 0 and weight 0, and their targets -- which may
// be any value, out of range included -- are replaced by 0 before anything
// is gathered. "mean" divides the summed loss by the summed weights of the
// positions that count (a plain mean when there is neither weight nor
// ignore_index), in x's dtype, as the ONNX reference does.
// SoftmaxCrossEntropyLoss is the same over log_softmax(scores, axis=1),
// whose value is also the optional second output (log_prob).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::DimsMayMatch;

enum class Reduction { kNone, kSum, kMean };

absl::StatusOr<Reduction> ParseReduction(const ConvertContext& ctx) {
  const std::string r = ctx.AttrString("reduction", "mean");
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  return ctx.Invalid(absl::StrCat("reduction '", r, "' is not one of none, sum, mean"));
}

// The checked operands of a loss node: x [N, C, d...] (input 0), target
// [N, d...] (input 1) and the optional weight [C] (input 2).
struct LossOperands {
  Expr x;
  Expr target;
  std::optional<Expr> weight;
  DataType dtype;         // of x (and the weight)
  DataType target_dtype;  // int32 or int64
};

absl::StatusOr<LossOperands> CheckOperands(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* xi, ctx.InputTensorInfo(0));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* ti, ctx.InputTensorInfo(1));
  if (!xi->dtype.has_value() || !ti->dtype.has_value()) {
    return ctx.Unsupported("input or target of unknown dtype");
  }
  if (!xi->dtype->is_float()) {
    return ctx.Invalid(absl::StrCat("input must be a float tensor, got ", xi->dtype->ToString()));
  }
  if (*ti->dtype != DataType::Int(32) && *ti->dtype != DataType::Int(64)) {
    return ctx.Invalid(absl::StrCat("target must be int32 or int64, got ", ti->dtype->ToString()));
  }
  if (xi->ndim < 0 || ti->ndim < 0) return ctx.Unsupported("input or target of unknown rank");
  if (xi->ndim < 2) {
    return ctx.Invalid(absl::StrCat("input must have at least 2 dims [N, C, ...], got ", xi->ndim));
  }
  if (ti->ndim != xi->ndim - 1) {
    return ctx.Invalid(absl::StrCat("target has ", ti->ndim, " dims, expected ", xi->ndim - 1,
                                    " for an input of ", xi->ndim));
  }
  if (xi->shape.has_value() && ti->shape.has_value()) {
    const std::vector<PrimExpr>& xs = *xi->shape;
    const std::vector<PrimExpr>& ts = *ti->shape;
    for (size_t k = 0; k < ts.size(); ++k) {
      const PrimExpr& want = xs[k == 0 ? 0 : k + 1];
      if (!DimsMayMatch(ts[k], want)) {
        return ctx.Invalid(absl::StrCat("target shape ", ToString(ti->shape->at(k)), " at dim ", k,
                                        " does not match input dim ", ToString(want)));
      }
    }
  }
  LossOperands ops;
  ops.dtype = *xi->dtype;
  ops.target_dtype = *ti->dtype;
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* wi, ctx.InputTensorInfo(2));
    if (wi->dtype.has_value() && *wi->dtype != ops.dtype) {
      return ctx.Invalid(
          absl::StrCat("weight is ", wi->dtype->ToString(), ", input ", ops.dtype.ToString()));
    }
    if (wi->ndim >= 0 && wi->ndim != 1) {
      return ctx.Invalid(absl::StrCat("weight must have 1 dim [C], got ", wi->ndim));
    }
    if (wi->shape.has_value() && xi->shape.has_value() &&
        !DimsMayMatch((*wi->shape)[0], (*xi->shape)[1])) {
      return ctx.Invalid(absl::StrCat("weight has ", ToString((*wi->shape)[0]), " elements, input ",
                                      ToString((*xi->shape)[1]), " classes"));
    }
    TETHER_ASSIGN_OR_RETURN(Expr w, ctx.Input(2));
    ops.weight = w;
  }
  TETHER_ASSIGN_OR_RETURN(ops.x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(ops.target, ctx.Input(1));
  return ops;
}

// The loss of log-probabilities `logp` (x's shape) against ops.target, with
// the node's weight, ignore_index and reduction.
absl::StatusOr<Expr> EmitNllLoss(ConvertContext& ctx, const LossOperands& ops, const Expr& logp) {
  TETHER_ASSIGN_OR_RETURN(Reduction reduction, ParseReduction(ctx));
  Expr target = ops.target;
  std::optional<Expr> ignored;  // bool [N, d...]
  const int64_t ii = ctx.AttrInt("ignore_index", 0);
  // An int32 target never equals an ignore_index outside int32's range; the
  // loss is then that of no ignore_index at all (the reference's mean
  // divides by the same summed weights either way).
  const bool representable =
      ops.target_dtype == DataType::Int(64) ||
      (ii >= std::numeric_limits<int32_t>::min() && ii <= std::numeric_limits<int32_t>::max());
  if (ctx.HasAttr("ignore_index") && representable) {
    TETHER_ASSIGN_OR_RETURN(Expr ii_c, ScalarConstant(ops.target_dtype, static_cast<double>(ii)));
    TETHER_ASSIGN_OR_RETURN(Expr zero_t, ScalarConstant(ops.target_dtype, 0));
    TETHER_ASSIGN_OR_RETURN(Expr mask, ctx.EmitOp("relax.equal", {target, ii_c}));
    // Ignored targets may be out of range: gather class 0 there instead.
    TETHER_ASSIGN_OR_RETURN(target, ctx.EmitOp("relax.where", {mask, zero_t, target}));
    ignored = mask;
  }
  TETHER_ASSIGN_OR_RETURN(Expr idx, nn_convert::ExpandDims(ctx, target, {1}));
  TETHER_ASSIGN_OR_RETURN(Expr picked,
                          ctx.EmitOp("relax.gather_elements", {logp, idx}, {{"axis", int64_t{1}}}));
  TETHER_ASSIGN_OR_RETURN(picked, nn_convert::Squeeze(ctx, picked, {1}));
  TETHER_ASSIGN_OR_RETURN(Expr loss, ctx.EmitOp("relax.negative", {picked}));

  TETHER_ASSIGN_OR_RETURN(Expr zero, ScalarConstant(ops.dtype, 0));
  std::optional<Expr> weight;  // per position [N, d...], 0 where ignored
  if (ops.weight.has_value()) {
    TETHER_ASSIGN_OR_RETURN(
        Expr w, ctx.EmitOp("relax.take", {*ops.weight, target}, {{"axis", int64_t{0}}}));
    weight = w;
  }
  if (ignored.has_value()) {
    // Zero the loss itself too (not just its weight): the gathered class-0
    // value may be -inf, and 0 * inf is NaN.
    TETHER_ASSIGN_OR_RETURN(loss, ctx.EmitOp("relax.where", {*ignored, zero, loss}));
    Expr kept;
    if (weight.has_value()) {
      kept = *weight;
    } else {
      TETHER_ASSIGN_OR_RETURN(kept, ScalarConstant(ops.dtype, 1));
    }
    TETHER_ASSIGN_OR_RETURN(Expr w, ctx.EmitOp("relax.where", {*ignored, zero, kept}));
    weight = w;
  }
  if (ops.weight.has_value()) {
    TETHER_ASSIGN_OR_RETURN(loss, ctx.EmitOp("relax.multiply", {loss, *weight}));
  }
  switch (reduction) {
    case Reduction::kNone:
      return loss;
    case Reduction::kSum:
      return ctx.EmitOp("relax.sum", {loss}, {{"keepdims", false}});
    case Reduction::kMean:
      break;
  }
  if (!weight.has_value()) return ctx.EmitOp("relax.mean", {loss}, {{"keepdims", false}});
  TETHER_ASSIGN_OR_RETURN(Expr total, ctx.EmitOp("relax.sum", {loss}, {{"keepdims", false}}));
  TETHER_ASSIGN_OR_RETURN(Expr count, ctx.EmitOp("relax.sum", {*weight}, {{"keepdims", false}}));
  return ctx.EmitOp("relax.divide", {total, count});
}

ConvertResult ConvertNllLoss(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(LossOperands ops, CheckOperands(ctx));
  TETHER_ASSIGN_OR_RETURN(Expr loss, EmitNllLoss(ctx, ops, ops.x));
  return One(loss);
}

ConvertResult ConvertSoftmaxCrossEntropyLoss(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(LossOperands ops, CheckOperands(ctx));
  TETHER_ASSIGN_OR_RETURN(Expr log_prob,
                          ctx.EmitOp("relax.nn.log_softmax", {ops.x}, {{"axis", int64_t{1}}}));
  TETHER_ASSIGN_OR_RETURN(Expr loss, EmitNllLoss(ctx, ops, log_prob));
  std::vector<OnnxValue> out{OnnxValue::Of(loss)};
  if (nn_convert::WantsOutput(ctx, 1)) out.push_back(OnnxValue::Of(log_prob));
  return out;
}

}  // namespace

void RegisterLossConverters() {
  RegisterConverter("NegativeLogLikelihoodLoss", 12, ConvertNllLoss);
  RegisterConverter("SoftmaxCrossEntropyLoss", 12, ConvertSoftmaxCrossEntropyLoss);
}

}  // namespace tether::compiler::onnx_frontend
