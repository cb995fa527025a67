// PackConstantWeights (pack_weights.h).
#include "compiler/transform/pack_weights.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "compiler/op/cpu_gemm.h"
#include "compiler/op/op.h"
#include "compiler/transform/relax_rewrite.h"

namespace tether::compiler {
namespace {

// The constant behind `e` (itself, or a variable bound to one), else null.
const ConstantNode* ConstantOf(const Expr& e,
                               const absl::flat_hash_map<const VarNode*, Expr>& bound) {
  if (const auto* c = e.as<ConstantNode>()) return c;
  if (const auto* v = e.as<VarNode>()) {
    auto it = bound.find(v);
    if (it != bound.end()) return it->second.as<ConstantNode>();
  }
  return nullptr;
}

// relax.matmul(a, w) as relax.matmul_packed, or `value` where w is not a
// constant float matrix or the product is not a plain one.
Expr Packed(const Expr& value, const absl::flat_hash_map<const VarNode*, Expr>& bound) {
  if (CalledOpName(value) != "relax.matmul") return value;
  const auto* call = value.as<CallNode>();
  if (call->args.size() != 2 || call->attrs.count("out_dtype")) return value;
  const ConstantNode* w = ConstantOf(call->args[1], bound);
  const auto* a = call->args[0].struct_info().as<TensorStructInfoNode>();
  if (w == nullptr || a == nullptr || a->ndim < 1 || !a->shape.has_value()) return value;
  const Tensor& wt = w->data;
  if (wt->ndim() != 2 || !wt->dtype().is_float() || a->dtype != wt->dtype()) return value;
  absl::StatusOr<Tensor> panels = PackGemmPanels(wt);
  if (!panels.ok()) return value;
  Expr packed = MakeCall(GetOp("relax.matmul_packed"), {call->args[0], MakeConstant(*panels)},
                         {{"n", wt->shape()[1]}});
  packed->set_struct_info(value.struct_info());
  return packed;
}

}  // namespace

absl::StatusOr<IRModule> PackConstantWeights(IRModule module) {
  return RewriteFunctionBodies(
      std::move(module),
      [](const std::string&, const Expr& body, IRModule*) -> absl::StatusOr<Expr> {
        const auto* seq = body.as<SeqExprNode>();
        absl::flat_hash_map<const VarNode*, Expr> bound;
        std::vector<BindingBlock> blocks = seq->blocks;
        bool changed = false;
        for (BindingBlock& block : blocks) {
          for (Binding& b : block.bindings) {
            if (b.is_match_cast()) continue;
            if (b.value.kind() == ExprKind::kConstant) bound[b.var.as<VarNode>()] = b.value;
            Expr packed = Packed(b.value, bound);
            if (packed.same_as(b.value)) continue;
            b.value = std::move(packed);
            changed = true;
          }
        }
        if (!changed) return body;
        return MakeSeqExprOf(std::move(blocks), seq->body);
      });
}

}  // namespace tether::compiler
