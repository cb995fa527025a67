// BlockBuilder: builds and normalizes Relax IR, as TVM's relax.BlockBuilder.
//
// Normal form (A-normal form): call arguments, tuple fields, tuple_get_item
// operands and If conditions are leaves (vars, constants, shapes, prim
// values, string/dtype immediates, ops, global vars, extern funcs) or
// tuples of leaves; nested calls are bound to fresh vars in the current
// block. If branches and function bodies are SeqExprs. Every expression has
// its struct info, inferred bottom-up: op calls through FindOp(name)->infer
// (compiler/relax/op_registry.h), calls to GlobalVars through the callee's
// FuncStructInfo in the module (its symbolic param dims matched against the
// arguments), ExternFunc calls through sinfo_args[0]; tuples, tuple items,
// If (the least upper bound of the branches), SeqExprs, shapes, prim values
// and constants here. A MatchCast declares the symbolic vars of its struct
// info that are not yet defined.
//
// Errors are INVALID_ARGUMENT, prefixed with the span of the offending
// expression or binding when known ("model.rx:12:5: relax.add: ..."). API
// misuse (EmitOutput outside a dataflow block, EndBlock with no block) is
// FAILED_PRECONDITION.
//
// Thread contract: thread-hostile (one builder per thread; the module it
// points to must not be changed by others while it builds).
#ifndef TETHER_COMPILER_RELAX_BLOCK_BUILDER_H_
#define TETHER_COMPILER_RELAX_BLOCK_BUILDER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

class BlockBuilder {
 public:
  // `module` (not owned, may be null) is used for GlobalVar lookups and
  // AddKernel; it must outlive the builder.
  explicit BlockBuilder(IRModule* module = nullptr);

  // `e` in normal form with struct info. Does not emit into the current
  // block except the bindings its nested calls need; with no block open, an
  // expression that needs bindings comes back wrapped in a SeqExpr.
  [[nodiscard]] absl::StatusOr<Expr> Normalize(const Expr& e);

  void BeginDataflowBlock();
  void BeginBindingBlock();
  // The bindings emitted since the matching Begin*. With no open block, an
  // empty binding block.
  BindingBlock EndBlock();
  bool InDataflowBlock() const;

  // Normalizes `value` and binds it to a fresh var (a DataflowVar inside a
  // dataflow block), returned. FAILED_PRECONDITION with no open block.
  [[nodiscard]] absl::StatusOr<Expr> Emit(const Expr& value, absl::string_view name_hint = "lv");
  // var = R.match_cast(value, sinfo): the var has `sinfo`; symbolic vars of
  // `sinfo` not yet defined become defined. INVALID_ARGUMENT when the value
  // can never match.
  [[nodiscard]] absl::StatusOr<Expr> EmitMatchCast(const Expr& value, const StructInfo& sinfo,
                                                   absl::string_view name_hint = "lv");
  // In a dataflow block: binds to a non-dataflow Var, visible after the
  // block (R.output). FAILED_PRECONDITION outside a dataflow block.
  [[nodiscard]] absl::StatusOr<Expr> EmitOutput(const Expr& value,
                                                absl::string_view name_hint = "gv");
  // Appends an existing binding with its value normalized; the var keeps
  // its identity, gets the value's struct info when it has none, and is
  // checked against it when it has one.
  [[nodiscard]] absl::Status EmitBinding(const Binding& binding);

  IRModule* module() const { return module_; }
  // Adds `kernel` to the module under its name, or a fresh one when taken
  // (the kernel is then renamed), and returns the name. Requires a module;
  // returns "" without one.
  std::string AddKernel(KernelFunc kernel);

  // Whether a symbolic var is defined in the current scope (by a function
  // param or a match cast so far).
  bool IsSymbolicVarDefined(const PrimVarNode* var) const { return sym_vars_.contains(var); }

 private:
  absl::StatusOr<Expr> NormalizeExpr(const Expr& e);  // any expression, result not emitted
  absl::StatusOr<Expr> NormalizeArg(const Expr& e);   // a leaf or tuple of leaves (emits)
  absl::StatusOr<Expr> NormalizeBody(const Expr& e);  // a SeqExpr in its own scope
  absl::StatusOr<Expr> NormalizeCall(const Expr& e);
  absl::StatusOr<Expr> NormalizeFunction(const Expr& e);
  absl::StatusOr<StructInfo> CalleeStructInfo(const Expr& op, const Expr& call);
  absl::Status EmitNormalized(Binding binding);
  Expr FreshVar(absl::string_view name_hint, StructInfo sinfo, bool dataflow);

  IRModule* module_;
  std::vector<BindingBlock> blocks_;  // open blocks, innermost last
  absl::flat_hash_set<const PrimVarNode*> sym_vars_;
};

// Every function of `module` normalized, then checked for well-formedness:
// vars defined before use, dataflow vars used only in their block and bound
// only in dataflow blocks, global vars naming a function or kernel of the
// module, and symbolic vars of params defined by some param dim.
// INVALID_ARGUMENT naming the function and the var.
[[nodiscard]] absl::StatusOr<IRModule> NormalizeModule(IRModule module);

// The well-formedness check of NormalizeModule on one normalized function
// (`module` may be null: global vars are then not checked).
[[nodiscard]] absl::Status CheckWellFormed(const Expr& function, const std::string& name,
                                           const IRModule* module);

// The struct info of `e` after normalization with a builder without module.
[[nodiscard]] absl::StatusOr<StructInfo> InferStructInfo(const Expr& e);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_BLOCK_BUILDER_H_
