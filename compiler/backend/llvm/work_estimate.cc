// Static size and work estimates over kernel IR (see work_estimate.h).
#include "compiler/backend/llvm/work_estimate.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "compiler/tir/arith.h"

namespace tether::compiler::codegen {
namespace {

// a * b, saturating (estimates of deep nests must not overflow).
int64_t SatMul(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}

template <typename LoopWeight>
int64_t Walk(const Stmt& s, const LoopWeight& loop_weight) {
  if (!s.defined()) return 0;
  switch (s.kind()) {
    case StmtKind::kSeq: {
      int64_t c = 0;
      for (const Stmt& x : s.as<SeqStmtNode>()->seq) c += Walk(x, loop_weight);
      return c;
    }
    case StmtKind::kFor: {
      const ForNode* n = s.as<ForNode>();
      return 1 + SatMul(loop_weight(*n), Walk(n->body, loop_weight));
    }
    case StmtKind::kLet:
      return 1 + Walk(s.as<LetStmtNode>()->body, loop_weight);
    case StmtKind::kAllocate:
      return 1 + Walk(s.as<AllocateNode>()->body, loop_weight);
    case StmtKind::kIf: {
      const IfThenElseNode* n = s.as<IfThenElseNode>();
      return 1 + std::max(Walk(n->then_case, loop_weight), Walk(n->else_case, loop_weight));
    }
    case StmtKind::kAssert:
      return 1 + Walk(s.as<AssertStmtNode>()->body, loop_weight);
    default:
      return 1;
  }
}

}  // namespace

int64_t CodeSize(const Stmt& s) {
  return Walk(s, [](const ForNode& n) -> int64_t {
    std::optional<int64_t> e = AsConstInt(n.extent);
    return n.for_kind == ForKind::kUnrolled && e.has_value() ? std::max<int64_t>(*e, 1) : 1;
  });
}

int64_t WorkEstimate(const Stmt& s) {
  return Walk(s, [](const ForNode& n) -> int64_t {
    std::optional<int64_t> e = AsConstInt(n.extent);
    return e.has_value() ? std::max<int64_t>(*e, 0) : kUnknownTrips;
  });
}

}  // namespace tether::compiler::codegen
