// ExprVisitor and ExprMutator: the traversal bases every Relax pass builds
// on, as TVM's relax.ExprVisitor / relax.ExprMutator. Dispatch is one
// virtual method per expression kind, plus hooks for binding blocks,
// bindings, variable definitions (params and bound vars), struct info and
// the PrimExprs inside shapes, prim values and struct info.
//
// The mutator rebuilds a node only when one of its children changed, keeps
// the span of the node it replaces and, unless keep_struct_info_ is false,
// its struct info (so a pass that changes struct info re-normalizes with a
// BlockBuilder, or clears keep_struct_info_ and normalizes the result).
// Vars redefined by VisitVarDef (a var whose struct info changed) are
// recorded in var_remap_ and every later use is replaced.
//
// Thread contract: thread-hostile (instances hold traversal state); use one
// per thread.
#ifndef TETHER_COMPILER_RELAX_VISITOR_H_
#define TETHER_COMPILER_RELAX_VISITOR_H_

#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "compiler/relax/expr.h"

namespace tether::compiler {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;

  // Dispatches on e.kind() to the Visit* method below (nothing for undefined).
  virtual void VisitExpr(const Expr& e);

  // Uses of vars (definitions go to VisitVarDef).
  virtual void VisitVar(const Expr& var) {}
  virtual void VisitConstant(const Expr& e) {}
  virtual void VisitPrimValue(const Expr& e);
  virtual void VisitStringImm(const Expr& e) {}
  virtual void VisitDataTypeImm(const Expr& e) {}
  virtual void VisitShapeExpr(const Expr& e);
  virtual void VisitTuple(const Expr& e);
  virtual void VisitTupleGetItem(const Expr& e);
  virtual void VisitCall(const Expr& e);
  virtual void VisitIf(const Expr& e);
  virtual void VisitSeqExpr(const Expr& e);
  virtual void VisitFunction(const Expr& e);
  virtual void VisitExternFunc(const Expr& e) {}
  virtual void VisitGlobalVar(const Expr& e) {}
  virtual void VisitOp(const Expr& e) {}

  virtual void VisitBindingBlock(const BindingBlock& block);
  // The value, then the match-cast struct info, then VisitVarDef(var).
  virtual void VisitBinding(const Binding& binding);
  // A function parameter or a binding's var.
  virtual void VisitVarDef(const Expr& var) {}
  // Struct info in call sinfo_args, match casts and function return
  // annotations; by default visits its PrimExprs with VisitPrimExpr.
  virtual void VisitStructInfo(const StructInfo& sinfo);
  virtual void VisitPrimExpr(const PrimExpr& e) {}
};

class ExprMutator {
 public:
  virtual ~ExprMutator() = default;

  // Dispatches on e.kind(); undefined stays undefined.
  virtual Expr VisitExpr(const Expr& e);

  // A use of a var: its replacement in var_remap_, else the var.
  virtual Expr VisitVar(const Expr& var);
  virtual Expr VisitConstant(const Expr& e) { return e; }
  virtual Expr VisitPrimValue(const Expr& e);
  virtual Expr VisitStringImm(const Expr& e) { return e; }
  virtual Expr VisitDataTypeImm(const Expr& e) { return e; }
  virtual Expr VisitShapeExpr(const Expr& e);
  virtual Expr VisitTuple(const Expr& e);
  virtual Expr VisitTupleGetItem(const Expr& e);
  virtual Expr VisitCall(const Expr& e);
  virtual Expr VisitIf(const Expr& e);
  virtual Expr VisitSeqExpr(const Expr& e);
  virtual Expr VisitFunction(const Expr& e);
  virtual Expr VisitExternFunc(const Expr& e) { return e; }
  virtual Expr VisitGlobalVar(const Expr& e) { return e; }
  virtual Expr VisitOp(const Expr& e) { return e; }

  // Bindings in order through VisitBinding; the block keeps its kind.
  virtual BindingBlock VisitBindingBlock(const BindingBlock& block);
  // Appends the rewritten binding(s) to `out` (none to drop it, several to
  // expand it). Default: the value through VisitExpr, the match-cast struct
  // info through VisitStructInfo, the var through VisitVarDef.
  virtual void VisitBinding(const Binding& binding, std::vector<Binding>* out);
  // A parameter or a bound var. Default: when VisitStructInfo changes its
  // struct info, a new var of the same name and kind with the new struct
  // info, recorded in var_remap_; else the var.
  virtual Expr VisitVarDef(const Expr& var);
  // Struct info with its PrimExprs rewritten by VisitPrimExpr; the same
  // object when none changed.
  virtual StructInfo VisitStructInfo(const StructInfo& sinfo);
  virtual PrimExpr VisitPrimExpr(const PrimExpr& e) { return e; }

 protected:
  // Copies span and (when keep_struct_info_) struct info of `old` onto the
  // freshly built `fresh`, and returns it.
  Expr Finish(const Expr& old, Expr fresh) const;

  // Replacement of var nodes (uses), filled by VisitVarDef and by subclasses.
  absl::flat_hash_map<const ExprNode*, Expr> var_remap_;
  // Whether rebuilt nodes keep the struct info of the node they replace.
  bool keep_struct_info_ = true;
};

// Calls `fn` on every expression below and including `e`, in post order
// (children first), each node visit once per occurrence.
void PostOrderVisit(const Expr& e, const std::function<void(const Expr&)>& fn);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_VISITOR_H_
