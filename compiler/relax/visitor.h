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
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"

namespace tether::compiler {

// The dispatch on an expression's kind that both bases share, as TVM's
// ExprFunctor: VisitExpr calls the Visit* method of e's kind. R is void for
// a visitor and Expr for a mutator; leaves do nothing (void) or return the
// expression itself unless overridden.
template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;

  // Dispatches on e.kind(); an undefined expression gives R() (nothing, or
  // the undefined Expr).
  virtual R VisitExpr(const Expr& e) {
    if (!e.defined()) return R();
    switch (e.kind()) {
      case ExprKind::kVar:
      case ExprKind::kDataflowVar:
        return VisitVar(e);
      case ExprKind::kConstant:
        return VisitConstant(e);
      case ExprKind::kPrimValue:
        return VisitPrimValue(e);
      case ExprKind::kStringImm:
        return VisitStringImm(e);
      case ExprKind::kDataTypeImm:
        return VisitDataTypeImm(e);
      case ExprKind::kShapeExpr:
        return VisitShapeExpr(e);
      case ExprKind::kTuple:
        return VisitTuple(e);
      case ExprKind::kTupleGetItem:
        return VisitTupleGetItem(e);
      case ExprKind::kCall:
        return VisitCall(e);
      case ExprKind::kIf:
        return VisitIf(e);
      case ExprKind::kSeqExpr:
        return VisitSeqExpr(e);
      case ExprKind::kFunction:
        return VisitFunction(e);
      case ExprKind::kExternFunc:
        return VisitExternFunc(e);
      case ExprKind::kGlobalVar:
        return VisitGlobalVar(e);
      case ExprKind::kOp:
        return VisitOp(e);
    }
    return Leaf(e);
  }

  // Leaves. A var here is a use (definitions go to the bases' VisitVarDef).
  virtual R VisitVar(const Expr& var) { return Leaf(var); }
  virtual R VisitConstant(const Expr& e) { return Leaf(e); }
  virtual R VisitStringImm(const Expr& e) { return Leaf(e); }
  virtual R VisitDataTypeImm(const Expr& e) { return Leaf(e); }
  virtual R VisitExternFunc(const Expr& e) { return Leaf(e); }
  virtual R VisitGlobalVar(const Expr& e) { return Leaf(e); }
  virtual R VisitOp(const Expr& e) { return Leaf(e); }
  // Nodes with children: each base says how it walks or rebuilds them.
  virtual R VisitPrimValue(const Expr& e) = 0;
  virtual R VisitShapeExpr(const Expr& e) = 0;
  virtual R VisitTuple(const Expr& e) = 0;
  virtual R VisitTupleGetItem(const Expr& e) = 0;
  virtual R VisitCall(const Expr& e) = 0;
  virtual R VisitIf(const Expr& e) = 0;
  virtual R VisitSeqExpr(const Expr& e) = 0;
  virtual R VisitFunction(const Expr& e) = 0;

 protected:
  static R Leaf(const Expr& e) {
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      return e;
    }
  }
};

// Walks every child, in order; subclasses override the kinds they look at.
class ExprVisitor : public ExprFunctor<void> {
 public:
  // A PrimValue's and a ShapeExpr's PrimExprs go to VisitPrimExpr.
  void VisitPrimValue(const Expr& e) override;
  void VisitShapeExpr(const Expr& e) override;
  // Fields, the tuple, the op then the arguments then the sinfo_args, the
  // condition then both branches.
  void VisitTuple(const Expr& e) override;
  void VisitTupleGetItem(const Expr& e) override;
  void VisitCall(const Expr& e) override;
  void VisitIf(const Expr& e) override;
  // Blocks then the body; params (VisitVarDef), body, return struct info.
  void VisitSeqExpr(const Expr& e) override;
  void VisitFunction(const Expr& e) override;

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

// Rebuilds a node when a child changed (see the top of this file).
class BlockBuilder;

class ExprMutator : public ExprFunctor<Expr> {
 public:
  ExprMutator();
  ~ExprMutator() override;

  // A use of a var: its replacement in var_remap_, else the var.
  Expr VisitVar(const Expr& var) override;
  // PrimExprs through VisitPrimExpr.
  Expr VisitPrimValue(const Expr& e) override;
  Expr VisitShapeExpr(const Expr& e) override;
  // Children through VisitExpr (and sinfo_args through VisitStructInfo).
  Expr VisitTuple(const Expr& e) override;
  Expr VisitTupleGetItem(const Expr& e) override;
  Expr VisitCall(const Expr& e) override;
  Expr VisitIf(const Expr& e) override;
  // Blocks through VisitBindingBlock; params through VisitVarDef.
  Expr VisitSeqExpr(const Expr& e) override;
  Expr VisitFunction(const Expr& e) override;

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

  // TVM's visit_expr_post_order: `e`'s children rewritten by this mutator
  // (the default visit of its kind, not an override of it), then the node
  // normalized by builder() (its struct info inferred). INVALID_ARGUMENT
  // when it does not normalize.
  [[nodiscard]] absl::StatusOr<Expr> VisitExprPostOrder(const Expr& e);
  // TVM's with_struct_info: `e` when it already has `sinfo`; for a var, a
  // new var of the same name and kind with `sinfo` (its uses remapped, as
  // VisitVarDef does); for another expression, a copy carrying `sinfo`.
  Expr WithStructInfo(const Expr& e, const StructInfo& sinfo);
  // The mutator's BlockBuilder (TVM's builder_), created on first use:
  // normalizes what a pass builds and infers struct info.
  BlockBuilder* builder();

 protected:
  // Copies span and (when keep_struct_info_) struct info of `old` onto the
  // freshly built `fresh`, and returns it.
  Expr Finish(const Expr& old, Expr fresh) const;

  // Replacement of var nodes (uses), filled by VisitVarDef and by subclasses.
  absl::flat_hash_map<const ExprNode*, Expr> var_remap_;
  // Whether rebuilt nodes keep the struct info of the node they replace.
  bool keep_struct_info_ = true;

 private:
  std::unique_ptr<BlockBuilder> builder_;
};

// Calls `fn` on every expression below and including `e`, in post order
// (children first), each node visit once per occurrence.
void PostOrderVisit(const Expr& e, const std::function<void(const Expr&)>& fn);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_VISITOR_H_
