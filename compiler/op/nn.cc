// The neural-network operator family (relax.nn.*). Each group lives in its
// own file — conv2d.cc, pooling.cc, normalization.cc — and registers here;
// relax.nn.pad, a small injective operator, is defined here.
//
// relax.nn.pad(data, pad_width=[before_0, after_0, before_1, after_1, ...],
// pad_mode="constant"|"edge"|"reflect", pad_value=0.0), as TVM's: output dim
// k is in_k + before_k + after_k (negative widths crop). Each output element
// reads input index o - before, which is in bounds (constant), clamped
// (edge) or mirrored without repeating the edge (reflect, numpy's "reflect").
// The widths may instead come as a second argument, a shape of 2 * ndim
// expressions evaluated when the model runs (an ONNX Pad whose pads are fed
// at run time; then there is no pad_width attribute), and the pad value as
// an optional third argument, a 0-D tensor read when the kernel runs.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

constexpr char kPad[] = "relax.nn.pad";

// The (before, after) widths, interleaved: the pad_width attribute, or the
// shape argument 1.
absl::StatusOr<std::vector<PrimExpr>> PadWidth(const CallNode& call, int64_t ndim) {
  std::vector<PrimExpr> w;
  if (call.args.size() >= 2) {
    if (call.attrs.count("pad_width") != 0) {
      return OpError(call, "pad_width is given both as an attribute and as an argument");
    }
    TETHER_ASSIGN_OR_RETURN(w, ShapeArg(call, 1));
  } else {
    for (int64_t v : GetIntsAttr(call.attrs, "pad_width")) w.push_back(PrimExpr(v));
  }
  if (static_cast<int64_t>(w.size()) != 2 * ndim) {
    std::vector<std::string> text;
    for (const PrimExpr& e : w) text.push_back(ToString(e));
    return OpError(call, absl::StrCat("pad_width [", absl::StrJoin(text, ", "), "] must have ",
                                      2 * ndim, " values for ", ndim, " dims"));
  }
  return w;
}

absl::StatusOr<StructInfo> InferPad(const CallNode& call) {
  if (call.args.empty() || call.args.size() > 3) {
    return OpError(call, absl::StrCat("expects 1 to 3 arguments (data, pad_width, pad_value), got ",
                                      call.args.size()));
  }
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  const std::string mode = GetStringAttr(call.attrs, "pad_mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    return OpError(call,
                   absl::StrCat("pad_mode must be constant, edge or reflect, got '", mode, "'"));
  }
  if (call.args.size() == 3) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* v, TensorArg(call, 2));
    if (v->ndim > 0) {
      return OpError(call, absl::StrCat("pad_value must be a 0-D tensor, got ",
                                        ToString(call.args[2].struct_info())));
    }
  }
  if ((*t)->ndim < 0) return TensorSInfoOfRank(-1, (*t)->dtype, (*t)->vdevice);
  absl::StatusOr<std::vector<PrimExpr>> w = PadWidth(call, (*t)->ndim);
  if (!w.ok()) return w.status();
  if (!(*t)->shape.has_value()) return TensorLike(*t, std::nullopt, (*t)->ndim);
  std::vector<PrimExpr> shape;
  for (int64_t k = 0; k < (*t)->ndim; ++k) {
    const PrimExpr& d = (*(*t)->shape)[k];
    const std::optional<int64_t> before = AsConstInt((*w)[2 * k]),
                                 after = AsConstInt((*w)[2 * k + 1]);
    const int64_t* dc = d.as_int();
    if (dc != nullptr && before.has_value() && after.has_value()) {
      if (*dc + *before + *after < 0) {
        return OpError(call, absl::StrCat("pad_width crops more than dim ", k, " of size ", *dc));
      }
      if (*dc == 0 && *before + *after > 0) {
        return OpError(call, absl::StrCat("cannot pad the empty dim ", k));
      }
      if (mode == "reflect" && (*before >= *dc || *after >= *dc) && *dc > 1) {
        return OpError(call, absl::StrCat("reflect pad_width (", *before, ", ", *after,
                                          ") must be smaller than dim ", k, " of size ", *dc));
      }
    }
    shape.push_back(Simplify(d + (*w)[2 * k] + (*w)[2 * k + 1]));
  }
  return TensorLike(*t, shape, (*t)->ndim);
}

PrimExpr ComputePad(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  const std::vector<PrimExpr> w = *PadWidth(*ctx.call, static_cast<int64_t>(in.size()));
  const std::string mode = GetStringAttr(ctx.call->attrs, "pad_mode", "constant");
  std::vector<PrimExpr> in_idx;
  PrimExpr inside;
  for (size_t k = 0; k < idx.size(); ++k) {
    const PrimExpr i = idx[k] - w[2 * k];
    const PrimExpr last = in[k] - 1;
    if (mode == "reflect") {
      // Period 2 (d - 1); a dim of size 1 reflects onto itself.
      const PrimExpr period = Max(last * 2, PrimExpr(1));
      const PrimExpr r = FloorMod(i, period);
      in_idx.push_back(Select(LT(r, in[k]), r, period - r));
    } else {
      in_idx.push_back(Max(Min(i, last), PrimExpr(0)));
      const std::optional<int64_t> before = AsConstInt(w[2 * k]), after = AsConstInt(w[2 * k + 1]);
      const bool never_outside =
          before.has_value() && after.has_value() && *before <= 0 && *after <= 0;
      if (mode == "constant" && !never_outside) {
        PrimExpr ok = And(GE(i, PrimExpr(0)), LE(i, last));
        inside = inside.defined() ? And(inside, ok) : ok;
      }
    }
  }
  PrimExpr v = ctx.inputs[0](in_idx);
  if (!inside.defined()) return v;
  const PrimExpr fill = ctx.call->args.size() == 3
                            ? Cast(v.dtype(), ctx.inputs[2]({}))
                            : MakeConst(v.dtype(), GetFloatAttr(ctx.call->attrs, "pad_value", 0.0));
  return Select(inside, v, fill);
}

void RegisterPadOp() {
  OpInfo info;
  info.name = kPad;
  info.pattern = OpPattern::kInjective;
  info.num_args = -1;  // data, and the optional run-time widths and value
  info.infer = InferPad;
  info.compute = ComputePad;
  RegisterOp(std::move(info));
}

}  // namespace

void RegisterNNOps() { RegisterPadOp(); }

}  // namespace tether::compiler
