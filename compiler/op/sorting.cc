// Selection: topk (attrs "k", "axis", "largest"), as ONNX TopK and TVM's
// relax.topk with ret_type "both": a tuple of the k largest (or smallest)
// values along the axis, sorted, and their int64 indices. Ties go to the
// lower index, as ONNX defines it.
//
// One thread per line along the axis keeps the best k seen so far in a
// local array, sorted: each element is counted against the kept ones
// (how many are at least as good, so an equal element already kept stays
// ahead) and, when that count is below k, the worse ones shift down one
// place to make room. O(n * k) per line; k is a compile-time constant.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/op/op_common.h"

namespace tether::compiler {
namespace {

absl::StatusOr<StructInfo> InferTopK(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = TensorArg(call, 0);
  if (!x.ok()) return x.status();
  if ((*x)->ndim < 1) return OpError(call, "expects a tensor of at least one dim");
  if (!(*x)->shape.has_value()) return OpError(call, "the input's shape must be known");
  absl::StatusOr<int64_t> axis = AxisAttr(call, (*x)->ndim);
  if (!axis.ok()) return axis.status();
  const int64_t k = GetIntAttr(call.attrs, "k", -1);
  if (k < 1) return OpError(call, absl::StrCat("k must be at least 1, got ", k));
  std::vector<PrimExpr> shape = *(*x)->shape;
  const PrimExpr& n = shape[static_cast<size_t>(*axis)];
  if (const int64_t* len = n.as_int(); len != nullptr && k > *len) {
    return OpError(call, absl::StrCat("k = ", k, " exceeds the axis length ", *len));
  }
  shape[static_cast<size_t>(*axis)] = PrimExpr(k);
  return TupleSInfo({TensorSInfo(shape, (*x)->dtype, (*x)->vdevice),
                     TensorSInfo(shape, DataType::Int(64), (*x)->vdevice)});
}

absl::StatusOr<Stmt> ScheduleTopK(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                  const Epilogue&) {
  const CallNode& call = *ctx.call;
  const std::vector<PrimExpr>& shape = ArgShape(ctx, 0);
  absl::StatusOr<int64_t> axis = AxisAttr(call, static_cast<int64_t>(shape.size()));
  if (!axis.ok()) return axis.status();
  if (outputs.size() != 2) return OpError(call, "expects two outputs (values, indices)");
  const int64_t k = GetIntAttr(call.attrs, "k", 1);
  const bool largest = GetBoolAttr(call.attrs, "largest", true);
  const Buffer& out_values = outputs[0];
  const Buffer& out_indices = outputs[1];
  const DataType dtype = out_values->dtype;
  const DataType i64 = DataType::Int(64);
  const PrimExpr n = shape[static_cast<size_t>(*axis)];
  std::vector<PrimExpr> outer = shape;
  outer.erase(outer.begin() + *axis);
  auto at = [&](const std::vector<PrimExpr>& outer_idx, const PrimExpr& i) {
    std::vector<PrimExpr> idx = outer_idx;
    idx.insert(idx.begin() + *axis, i);
    return idx;
  };
  return MakeParallelLoopNest(
      outer,
      [&](const std::vector<PrimExpr>& outer_idx) -> Stmt {
        Buffer vals = MakeBuffer("vals", dtype, {k}, BufferNode::Scope::kLocal);
        Buffer idxs = MakeBuffer("idxs", i64, {k}, BufferNode::Scope::kLocal);
        Buffer pos = MakeBuffer("pos", i64, {1}, BufferNode::Scope::kLocal);
        Var j("j"), t("t"), s("s");
        const PrimExpr v = ctx.inputs[0](at(outer_idx, j));
        // Kept so far: min(j, k), the first entries of vals.
        const PrimExpr kept = Min(Cast(i64, j), PrimExpr(k));
        const PrimExpr ahead = largest ? GE(Load(vals, {t}), v) : LE(Load(vals, {t}), v);
        Stmt count = Seq({Store(pos, {0}, PrimExpr(0)),
                          For(t, 0, k, ForKind::kSerial,
                              IfThenElse(And(LT(PrimExpr(t), kept), ahead),
                                         Store(pos, {0}, Load(pos, {0}) + PrimExpr(1))))});
        // Shift the entries after the insertion point down one place, last first.
        const PrimExpr dst = PrimExpr(k - 1) - s;
        Stmt shift = For(
            s, 0, k - 1, ForKind::kSerial,
            IfThenElse(GT(dst, Load(pos, {0})), Seq({Store(vals, {dst}, Load(vals, {dst - 1})),
                                                     Store(idxs, {dst}, Load(idxs, {dst - 1}))})));
        Stmt insert = IfThenElse(
            LT(Load(pos, {0}), PrimExpr(k)),
            Seq({shift, Store(vals, {Load(pos, {0})}, v), Store(idxs, {Load(pos, {0})}, j)}));
        Var w("w");
        Stmt write = For(w, 0, k, ForKind::kSerial,
                         Seq({Store(out_values, at(outer_idx, w), Load(vals, {w})),
                              Store(out_indices, at(outer_idx, w), Load(idxs, {w}))}));
        Stmt body = Seq({For(j, 0, n, ForKind::kSerial, Seq({count, insert})), write});
        return Allocate(vals, Allocate(idxs, Allocate(pos, body)));
      },
      ForKind::kSerial, /*gpu=*/ctx.target.gpu);
}

}  // namespace

void RegisterSortingOps() {
  RegisterScheduleOp("relax.topk", OpPattern::kOpaque, 1, InferTopK, ScheduleTopK);
}

}  // namespace tether::compiler
