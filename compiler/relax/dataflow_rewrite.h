// DataflowBlockRewrite: statement-level edits of one dataflow block of a
// Relax function, as TVM's relax.analysis.DataflowBlockRewrite. Bindings are
// added, uses of a var are redirected to another var (in the block and in
// the rest of the function: later blocks, nested functions and the body),
// and unused bindings are removed. Nodes are immutable, so the rewriter
// keeps its own copy of the function's blocks and builds a new, normalized
// function (MutatedRootFn) or module (MutateIRModule); the input is never
// changed.
//
// Every edit is checked on the spot: the edited function is re-normalized
// and checked for well-formedness (CheckWellFormed), and an edit that would
// break it is refused and leaves the rewriter unchanged. Within the edited
// block, bindings are put back in definition-before-use order when an edit
// makes an earlier binding use a later var (add, then replace uses with the
// added var); impure bindings keep their relative order.
#ifndef TETHER_COMPILER_RELAX_DATAFLOW_REWRITE_H_
#define TETHER_COMPILER_RELAX_DATAFLOW_REWRITE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

// Thread contract: thread-hostile (one rewriter per thread). The function
// given to Create is shared, not copied, and is never modified.
class DataflowBlockRewrite {
 public:
  // Edits block `block_index` (among the blocks of the function's SeqExpr
  // body; it must be a dataflow block) of `function`, a normalized relax
  // Function. INVALID_ARGUMENT when `function` is not a normalized function,
  // the index is out of range or the block is not a dataflow block.
  [[nodiscard]] static absl::StatusOr<DataflowBlockRewrite> Create(const Expr& function,
                                                                   size_t block_index);

  // Normalizes `value` (struct info inferred; nested calls get bindings of
  // their own, placed before it) and appends `var = value` to the block. The
  // var is, as TVM's add(expr, name, is_dfvar=False), an output of the
  // block (a Var) unless `is_dataflow_var` is true (a DataflowVar, usable
  // only inside the block); an empty `name` becomes "tmp0", "tmp1", ...
  // Returns the new var. INVALID_ARGUMENT when `value` does not normalize or
  // uses a var not defined at the end of the block.
  [[nodiscard]] absl::StatusOr<Expr> Add(const Expr& value, absl::string_view name = "",
                                         bool is_dataflow_var = false);

  // Appends `binding` (its var keeps its identity; its value is
  // normalized). INVALID_ARGUMENT when the var is already bound in the
  // function, or the binding does not normalize or is ill-formed there.
  [[nodiscard]] absl::Status AddBinding(const Binding& binding);

  // Replaces every use of `old_var` by `new_var`, in the block and in the
  // rest of the function (later blocks, nested functions, the body).
  // INVALID_ARGUMENT when either is not a var, when the struct info of
  // `new_var` is not compatible with that of `old_var` (IsBaseOf(old, new)
  // fails), or when the result is ill-formed (`new_var` undefined at a use,
  // a DataflowVar used outside the block, a cyclic definition).
  [[nodiscard]] absl::Status ReplaceAllUses(const Expr& old_var, const Expr& new_var);

  // Removes the binding of `var` from the block. NOT_FOUND when `var` is not
  // bound in the block (OK and nothing done when `allow_undef`);
  // FAILED_PRECONDITION when `var` is still used anywhere in the function
  // (or, for a match cast, when a symbolic var it defines still is);
  // INVALID_ARGUMENT when `var` is not a var.
  [[nodiscard]] absl::Status RemoveUnused(const Expr& var, bool allow_undef = false);

  // Removes every binding of the block whose var is unused, to a fixed
  // point (removing one binding may leave the bindings it used unused).
  // Only DataflowVars bound to pure values are removed: leaves, tuples,
  // tuple items, function literals and calls to operators or to functions
  // whose struct info says they are pure. Calls of extern functions, impure
  // operators (relax.memory.*, relax.builtin.alloc_tensor, relax.print,
  // relax.assert_op), If, SeqExpr and match casts are kept, and so are the
  // block's outputs (non-dataflow vars).
  void RemoveAllUnused();

  // The edited function, normalized. Always OK after a successful Create
  // (each edit is checked when made); the status is kept for callers that
  // chain.
  [[nodiscard]] absl::StatusOr<Expr> MutatedRootFn() const;

  // The edited block, as it appears in MutatedRootFn's body before
  // normalization (the normalizer drops empty blocks).
  const BindingBlock& mutated_block() const { return blocks_[block_index_]; }

  // `module` with function `function_name` replaced by MutatedRootFn().
  // NOT_FOUND when the module has no relax function of that name.
  [[nodiscard]] absl::StatusOr<IRModule> MutateIRModule(IRModule module,
                                                        const std::string& function_name) const;

 private:
  DataflowBlockRewrite(const Expr& function, std::vector<BindingBlock> blocks, Expr body,
                       size_t block_index);

  // Orders the edited block, rebuilds and normalizes the function from
  // `blocks` and `body`, checks it, and on success adopts it as the new
  // state. The state is unchanged on failure.
  absl::Status Commit(std::vector<BindingBlock> blocks, Expr body);
  // FAILED_PRECONDITION when the match cast at `pos` of the block defines a
  // symbolic var that the rest of the function uses.
  absl::Status CheckMatchCastRemovable(size_t pos) const;

  Expr original_;                     // the FunctionNode given to Create
  std::vector<BindingBlock> blocks_;  // the edited body's blocks (none dropped)
  Expr body_;                         // the edited body's result expression
  size_t block_index_;
  Expr mutated_;  // blocks_ + body_ as a normalized function
  int name_counter_ = 0;
};

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_DATAFLOW_REWRITE_H_
