// DeadCodeElimination: one backward sweep over each function's bindings.
#include "compiler/transform/dead_code.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "compiler/transform/relax_rewrite.h"

namespace tether::compiler {
namespace {

bool IsRemovable(const Binding& b) {
  if (b.is_match_cast()) return false;
  switch (b.value.kind()) {
    case ExprKind::kCall:
      // Operators are pure (relax.call_tir included); the memory operators
      // of a planned module are not, and calls of functions may not be.
      return b.value.as<CallNode>()->op.kind() == ExprKind::kOp &&
             CalledOpName(b.value).substr(0, 13) != "relax.memory." &&
             CalledOpName(b.value) != "relax.builtin.alloc_tensor";
    case ExprKind::kIf:
    case ExprKind::kSeqExpr:
    case ExprKind::kFunction:
      return false;
    default:
      return true;
  }
}

Expr Sweep(const Expr& body) {
  const auto* seq = body.as<SeqExprNode>();
  absl::flat_hash_set<const VarNode*> live;
  auto mark = [&](const VarNode* v) { live.insert(v); };
  ForEachVarUse(seq->body, mark);
  std::vector<BindingBlock> blocks = seq->blocks;
  bool changed = false;
  for (auto block = blocks.rbegin(); block != blocks.rend(); ++block) {
    std::vector<Binding> kept;
    for (auto b = block->bindings.rbegin(); b != block->bindings.rend(); ++b) {
      if (!live.count(b->var.as<VarNode>()) && IsRemovable(*b)) {
        changed = true;
        continue;
      }
      ForEachVarUse(b->value, mark);
      kept.push_back(*b);
    }
    block->bindings.assign(kept.rbegin(), kept.rend());
  }
  if (!changed) return body;
  std::vector<BindingBlock> non_empty;
  for (BindingBlock& block : blocks) {
    if (!block.bindings.empty()) non_empty.push_back(std::move(block));
  }
  return MakeSeqExprOf(std::move(non_empty), seq->body);
}

}  // namespace

absl::StatusOr<IRModule> DeadCodeElimination(IRModule module) {
  return RewriteFunctionBodies(std::move(module),
                               [](const std::string&, const Expr& body,
                                  IRModule*) -> absl::StatusOr<Expr> { return Sweep(body); });
}

}  // namespace tether::compiler
