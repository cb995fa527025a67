// Small pieces shared by the Relax-to-lowered-Relax passes of this folder
// (legalize, fuse, constant folding, memory planning): finding the uses of
// variables, substituting variables, rebuilding a function around a new body,
// and reading static shapes out of struct info. Passes here keep the
// identity of the variables they keep, so most need no substitution at all.
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_RELAX_REWRITE_H_
#define TETHER_COMPILER_TRANSFORM_RELAX_REWRITE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/module.h"
#include "compiler/tir/kernel_ir.h"

namespace tether::compiler {

using VarSubstitution = absl::flat_hash_map<const VarNode*, Expr>;

// Calls `fn` for every reference to a Var or DataflowVar inside `e` (binding
// sites and function parameters are definitions, not uses). Nested SeqExprs,
// If branches and Functions are visited.
void ForEachVarUse(const Expr& e, const std::function<void(const VarNode*)>& fn);

// How many times each variable is referenced in `e` (usually a function body).
absl::flat_hash_map<const VarNode*, int> CountVarUses(const Expr& e);

// `e` with every variable of `map` replaced. Unchanged subtrees are shared;
// rebuilt nodes keep the struct info and span of the node they replace.
Expr SubstituteVars(const Expr& e, const VarSubstitution& map);

// A SeqExpr with `blocks` and `body` whose struct info is `body`'s.
Expr MakeSeqExprOf(std::vector<BindingBlock> blocks, Expr body);

// A copy of `func` (a FunctionNode) with a new body; params, return struct
// info, purity and attributes are kept.
Expr WithFunctionBody(const Expr& func, Expr body);

// Rebuilds every Relax function of `module` whose body is a SeqExpr by
// passing its body (a SeqExpr) to `rewrite` with the function's name; a
// returned expression that is the same node keeps the function. Functions that
// are not FunctionNodes (ExternFuncs) are kept as they are.
absl::StatusOr<IRModule> RewriteFunctionBodies(
    IRModule module,
    const std::function<absl::StatusOr<Expr>(const std::string& name, const Expr& body,
                                             IRModule* module)>& rewrite);

// R.call_tir(kernel_name, (tensors...), out_sinfo) with struct info
// `out_sinfo`, and the kernel's scalar parameters (the symbolic vars it takes
// by value, compiler/lower/lower.h) as tir_vars when it has any.
Expr MakeCallTIR(const std::string& kernel_name, const KernelFunc& kernel,
                 std::vector<Expr> tensors, const StructInfo& out_sinfo);

// The dims of a tensor struct info when every one is a constant, else nullopt.
std::optional<std::vector<int64_t>> StaticShape(const StructInfo& sinfo);
// Bytes of a tensor struct info with a static shape and a known dtype.
std::optional<int64_t> StaticBytes(const StructInfo& sinfo);

// "relax.nn.relu" -> "relu", "relax.matmul" -> "matmul": the readable part of
// an operator name, used for kernel names.
std::string ShortOpName(absl::string_view op_name);

// The name of the operator `e` calls when `e` is a Call of an Op, else "".
absl::string_view CalledOpName(const Expr& e);

// Whether every dimension of the shapes `a` and `b` is the same expression
// (equal constants, the same var, or provably equal expressions).
bool SameShape(const std::vector<PrimExpr>& a, const std::vector<PrimExpr>& b);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_RELAX_REWRITE_H_
