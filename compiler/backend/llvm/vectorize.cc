// The analysis behind explicit vectorization (see vectorize.h).
#include "compiler/backend/llvm/vectorize.h"

#include <functional>

#include "compiler/backend/llvm/math_f32.h"
#include "compiler/tir/arith.h"

namespace tether::compiler::codegen {
namespace {

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
  std::optional<int64_t> stride = ElementStride(buffer, indices, loop_var);
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

std::optional<TransposeTile> AsTransposeTile(const ForNode& outer) {
  auto square = [](const ForNode& loop) -> std::optional<int64_t> {
    if (loop.for_kind != ForKind::kVectorized) return std::nullopt;
    if (loop.var.dtype() != DataType::Int(64) && loop.var.dtype() != DataType::Int(32)) {
      return std::nullopt;
    }
    std::optional<int64_t> n = AsConstInt(loop.extent);
    if (!n.has_value() || *n < 2 || *n > kMaxTransposeLanes || (*n & (*n - 1)) != 0) {
      return std::nullopt;
    }
    return n;
  };
  std::optional<int64_t> n = square(outer);
  const ForNode* inner = outer.body.as<ForNode>();
  if (!n.has_value() || inner == nullptr || square(*inner) != n) return std::nullopt;
  const StoreNode* store = inner->body.as<StoreNode>();
  if (store == nullptr || !PlainDType(store->buffer->dtype)) return std::nullopt;
  PrimExpr v = store->value;
  while (const CastNode* c = v.as<CastNode>()) {
    if (!PlainDType(v.dtype())) return std::nullopt;
    v = c->value;
  }
  const LoadNode* load = v.as<LoadNode>();
  // Within one buffer the loads, all before the stores, could read what the
  // loops would have overwritten.
  if (load == nullptr || !PlainDType(load->buffer->dtype) ||
      load->buffer.get() == store->buffer.get()) {
    return std::nullopt;
  }
  // Each access along one var, the other held (a symbol there).
  auto along = [](const Buffer& b, const std::vector<PrimExpr>& idx, const Var& var) {
    return ClassifyAccess(b, idx, var, {var.get()}) == LaneAccess::kContiguous;
  };
  TransposeTile t{*n, inner, store, load, false, std::nullopt, std::nullopt};
  if (along(load->buffer, load->indices, outer.var) &&
      along(store->buffer, store->indices, inner->var)) {
    t.load_along_outer = true;
  } else if (!along(load->buffer, load->indices, inner->var) ||
             !along(store->buffer, store->indices, outer.var)) {
    return std::nullopt;
  }
  const Var& load_steps = t.load_along_outer ? inner->var : outer.var;
  const Var& store_steps = t.load_along_outer ? outer.var : inner->var;
  t.load_stride = ElementStride(load->buffer, load->indices, load_steps);
  t.store_stride = ElementStride(store->buffer, store->indices, store_steps);
  return t;
}

}  // namespace tether::compiler::codegen
