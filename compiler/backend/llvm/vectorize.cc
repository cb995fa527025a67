// The analysis behind explicit vectorization (see vectorize.h).
#include "compiler/backend/llvm/vectorize.h"

#include <functional>

#include "compiler/backend/llvm/math_f32.h"
#include "compiler/tir/arith.h"

namespace tether::compiler::codegen {
namespace {

// Calls `f` on `e` and every subexpression (loads' indices included) until
// `f` returns false.
bool AllOf(const PrimExpr& e, const std::function<bool(const PrimExpr&)>& f) {
  if (!e.defined()) return true;
  if (!f(e)) return false;
  if (const BinaryNode* n = e.as<BinaryNode>()) return AllOf(n->a, f) && AllOf(n->b, f);
  if (const NotNode* n = e.as<NotNode>()) return AllOf(n->a, f);
  if (const SelectNode* n = e.as<SelectNode>()) {
    return AllOf(n->cond, f) && AllOf(n->true_value, f) && AllOf(n->false_value, f);
  }
  if (const CastNode* n = e.as<CastNode>()) return AllOf(n->value, f);
  if (const LoadNode* n = e.as<LoadNode>()) {
    for (const PrimExpr& i : n->indices) {
      if (!AllOf(i, f)) return false;
    }
    return true;
  }
  if (const PrimCallNode* n = e.as<PrimCallNode>()) {
    for (const PrimExpr& a : n->args) {
      if (!AllOf(a, f)) return false;
    }
  }
  return true;
}

// float16, bfloat16 and bool values are stored in another type than they
// are computed in; the vector path handles neither conversion.
bool PlainDType(DataType t) { return !t.is_bool() && !t.is_bfloat16() && t.bits() != 16; }

// Whether the expression can be emitted lane-wise.
bool VectorizableExpr(const PrimExpr& e) {
  return AllOf(e, [](const PrimExpr& x) {
    if (const PrimCallNode* c = x.as<PrimCallNode>()) {
      return c->args.size() == 1 && HasFloat32Math(c->op) && x.dtype() == DataType::Float(32);
    }
    if (const LoadNode* l = x.as<LoadNode>()) return PlainDType(l->buffer->dtype);
    if (x.as<CastNode>() != nullptr) return PlainDType(x.dtype());
    if ((x.kind() == PrimKind::kFloorDiv || x.kind() == PrimKind::kFloorMod) &&
        (x.dtype().is_float() || x.dtype().is_bfloat16())) {
      return false;
    }
    return true;
  });
}

bool VectorizableBody(const Stmt& s, const Var& var, VaryingVars* varying) {
  switch (s.kind()) {
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) {
        if (!VectorizableBody(c, var, varying)) return false;
      }
      return true;
    case StmtKind::kLet: {
      const LetStmtNode* n = s.as<LetStmtNode>();
      if (!VectorizableExpr(n->value) || !PlainDType(n->var.dtype())) return false;
      if (IsVarying(n->value, *varying)) varying->insert(n->var.get());
      return VectorizableBody(n->body, var, varying);
    }
    case StmtKind::kStore: {
      const StoreNode* n = s.as<StoreNode>();
      if (!PlainDType(n->buffer->dtype) || !VectorizableExpr(n->value)) return false;
      for (const PrimExpr& i : n->indices) {
        if (!VectorizableExpr(i)) return false;
      }
      return ClassifyAccess(n->buffer, n->indices, var, *varying) == LaneAccess::kContiguous;
    }
    default:
      return false;
  }
}

}  // namespace

bool IsVarying(const PrimExpr& e, const VaryingVars& varying) {
  return !AllOf(e, [&](const PrimExpr& x) {
    const PrimVarNode* v = x.as<PrimVarNode>();
    return v == nullptr || !varying.contains(v);
  });
}

LaneAccess ClassifyAccess(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                          const Var& loop_var, const VaryingVars& varying) {
  bool any = false;
  for (const PrimExpr& i : indices) any = any || IsVarying(i, varying);
  if (!any) return LaneAccess::kUniform;
  // Let vars derived from the loop var are opaque to the stride test.
  VaryingVars only_loop_var = {loop_var.get()};
  for (const PrimExpr& i : indices) {
    if (IsVarying(i, varying) && !IsVarying(i, only_loop_var)) return LaneAccess::kGather;
  }
  if (indices.size() != buffer->shape.size()) return LaneAccess::kGather;
  PrimExpr flat(int64_t{0});
  for (size_t d = 0; d < indices.size(); ++d) flat = flat * buffer->shape[d] + indices[d];
  VarMap next = {{loop_var.get(), loop_var + PrimExpr(int64_t{1})}};
  std::optional<int64_t> stride = AsConstInt(Substitute(flat, next) - flat);
  if (stride == 1) return LaneAccess::kContiguous;
  if (stride == 0) return LaneAccess::kUniform;
  return LaneAccess::kGather;
}

std::optional<int64_t> VectorizableLanes(const ForNode& loop) {
  if (loop.for_kind != ForKind::kVectorized) return std::nullopt;
  std::optional<int64_t> lanes = AsConstInt(loop.extent);
  if (!lanes.has_value() || *lanes < 2 || *lanes > kMaxVectorLanes) return std::nullopt;
  if (loop.var.dtype() != DataType::Int(64) && loop.var.dtype() != DataType::Int(32)) {
    return std::nullopt;
  }
  VaryingVars varying = {loop.var.get()};
  if (!VectorizableBody(loop.body, loop.var, &varying)) return std::nullopt;
  return lanes;
}

}  // namespace tether::compiler::codegen
