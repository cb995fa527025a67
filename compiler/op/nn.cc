// The neural-network operator family (relax.nn.*). Each group lives in its
// own file — conv2d.cc, pooling.cc, normalization.cc — and registers here;
// relax.nn.pad, a small injective operator, is defined here.
//
// relax.nn.pad(data, pad_width=[before_0, after_0, before_1, after_1, ...],
// pad_mode="constant"|"edge"|"reflect", pad_value=0.0), as TVM's: output dim
// k is in_k + before_k + after_k (negative widths crop). Each output element
// reads input index o - before, which is in bounds (constant), clamped
// (edge) or mirrored without repeating the edge (reflect, numpy's "reflect").
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

constexpr char kPad[] = "relax.nn.pad";

absl::StatusOr<std::vector<int64_t>> PadWidth(const CallNode& call, int64_t ndim) {
  std::vector<int64_t> w = GetIntsAttr(call.attrs, "pad_width");
  if (static_cast<int64_t>(w.size()) != 2 * ndim) {
    return OpError(call, absl::StrCat("pad_width [", absl::StrJoin(w, ", "), "] must have ",
                                      2 * ndim, " values for ", ndim, " dims"));
  }
  return w;
}

absl::StatusOr<StructInfo> InferPad(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  const std::string mode = GetStringAttr(call.attrs, "pad_mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    return OpError(call,
                   absl::StrCat("pad_mode must be constant, edge or reflect, got '", mode, "'"));
  }
  if ((*t)->ndim < 0) return TensorSInfoOfRank(-1, (*t)->dtype, (*t)->vdevice);
  absl::StatusOr<std::vector<int64_t>> w = PadWidth(call, (*t)->ndim);
  if (!w.ok()) return w.status();
  if (!(*t)->shape.has_value()) return TensorLike(*t, std::nullopt, (*t)->ndim);
  std::vector<PrimExpr> shape;
  for (int64_t k = 0; k < (*t)->ndim; ++k) {
    const PrimExpr& d = (*(*t)->shape)[k];
    const int64_t before = (*w)[2 * k], after = (*w)[2 * k + 1];
    const int64_t* dc = d.as_int();
    if (dc != nullptr && *dc + before + after < 0) {
      return OpError(call, absl::StrCat("pad_width [", absl::StrJoin(*w, ", "),
                                        "] crops more than dim ", k, " of size ", *dc));
    }
    if (dc != nullptr && *dc == 0 && before + after > 0) {
      return OpError(call, absl::StrCat("cannot pad the empty dim ", k));
    }
    if (mode == "reflect" && dc != nullptr && (before >= *dc || after >= *dc) && *dc > 1) {
      return OpError(call, absl::StrCat("reflect pad_width [", absl::StrJoin(*w, ", "),
                                        "] must be smaller than dim ", k, " of size ", *dc));
    }
    shape.push_back(d + PrimExpr(before + after));
  }
  return TensorLike(*t, shape, (*t)->ndim);
}

PrimExpr ComputePad(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  const std::vector<int64_t> w = GetIntsAttr(ctx.call->attrs, "pad_width");
  const std::string mode = GetStringAttr(ctx.call->attrs, "pad_mode", "constant");
  std::vector<PrimExpr> in_idx;
  PrimExpr inside;
  for (size_t k = 0; k < idx.size(); ++k) {
    const PrimExpr i = idx[k] - PrimExpr(w[2 * k]);
    const PrimExpr last = in[k] - 1;
    if (mode == "reflect") {
      // Period 2 (d - 1); a dim of size 1 reflects onto itself.
      const PrimExpr period = Max(last * 2, PrimExpr(1));
      const PrimExpr r = FloorMod(i, period);
      in_idx.push_back(Select(LT(r, in[k]), r, period - r));
    } else {
      in_idx.push_back(Max(Min(i, last), PrimExpr(0)));
      if (mode == "constant" && (w[2 * k] > 0 || w[2 * k + 1] > 0)) {
        PrimExpr ok = And(GE(i, PrimExpr(0)), LE(i, last));
        inside = inside.defined() ? And(inside, ok) : ok;
      }
    }
  }
  PrimExpr v = ctx.inputs[0](in_idx);
  if (!inside.defined()) return v;
  const double pad_value = GetFloatAttr(ctx.call->attrs, "pad_value", 0.0);
  return Select(inside, v, MakeConst(v.dtype(), pad_value));
}

void RegisterPadOp() {
  OpInfo info;
  info.name = kPad;
  info.pattern = OpPattern::kInjective;
  info.num_args = 1;
  info.infer = InferPad;
  info.compute = ComputePad;
  RegisterOp(std::move(info));
}

}  // namespace

void RegisterNNOps() { RegisterPadOp(); }

}  // namespace tether::compiler
