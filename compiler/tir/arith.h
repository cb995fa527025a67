// The arithmetic simplifier for PrimExprs: a canonical form for integer
// expressions (symbolic shape dimensions, loop bounds and indices), proofs
// of equality between them, substitution of variables and free-variable
// collection. The counterpart of TVM's tvm.arith (Analyzer::Simplify and
// CanProveEqual) restricted to what shapes and indices need.
//
// Canonical form of an integer expression: a sum of monomials, each a
// product of atoms (variables, or opaque terms such as floordiv(n, 3),
// min(n, m), A[i] or casts) with a constant coefficient, plus a constant.
// Monomials are ordered by their atoms, so n * 4 and 4 * n print and compare
// the same, (n + 1) - 1 is n and 2 * n - n is n. floordiv/floormod by a
// constant c split off the part of the dividend that is a multiple of c
// (floordiv(4 * n + 2, 2) is 2 * n + 1, floormod(4 * n + 3, 4) is 3), and
// min/max of two terms whose difference is a constant pick one. Float
// expressions are only constant-folded; comparisons fold when the
// difference of their sides is a constant.
//
// Thread contract: stateless functions over immutable nodes; thread-safe.
#ifndef TETHER_COMPILER_TIR_ARITH_H_
#define TETHER_COMPILER_TIR_ARITH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "compiler/tir/kernel_ir.h"
#include "compiler/tir/prim_expr.h"

namespace tether::compiler {

// Variables to expressions, by variable node.
using VarMap = absl::flat_hash_map<const PrimVarNode*, PrimExpr>;

// The canonical form of `e` (see the file comment). An undefined expression
// is returned as is.
PrimExpr Simplify(const PrimExpr& e);

// Whether a and b are provably equal for every value of their variables:
// Simplify(a - b) is the constant 0. False is "not proven", not "different".
bool ProveEqual(const PrimExpr& a, const PrimExpr& b);

// The integer value of `e` after Simplify, when it is a constant.
std::optional<int64_t> AsConstInt(const PrimExpr& e);

// A factor that every value of the integer `e` has, from its form (sums,
// products, constants): 0 when e is 0, 1 when none is known.
int64_t KnownFactor(const PrimExpr& e);

// `e` with every free occurrence of a variable in `map` replaced by its
// image, constants folded by the constructors. Nodes without a replaced
// variable below them are returned as is (same node).
PrimExpr Substitute(const PrimExpr& e, const VarMap& map);

// The same over a kernel statement: every expression in it, including loop
// bounds, store indices and values. Loads and stores keep their buffers (a
// buffer's shape is not rewritten). Binders (For and LetStmt vars) shadow:
// a binder mapped to another Var is renamed together with its uses, a
// binder mapped to any other expression is left alone inside its scope.
Stmt Substitute(const Stmt& s, const VarMap& map);

// Rebuilds `e` over f(child) for each direct child; `e` itself (same node)
// when no child changed.
PrimExpr MapChildren(const PrimExpr& e, const std::function<PrimExpr(const PrimExpr&)>& f);

// Calls `f` on `e` and every subexpression (loads' indices included) until
// `f` returns false; whether it never did.
bool AllOf(const PrimExpr& e, const std::function<bool(const PrimExpr&)>& f);

// The distance in elements between buffer[indices] at `var` + 1 and at
// `var` (the other vars held), when it is a constant.
std::optional<int64_t> ElementStride(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                                     const Var& var);

// Appends to `out` the free variables of `e` in first-occurrence order
// (left to right, depth first), each once; variables already in `out` are
// not appended again.
void CollectVars(const PrimExpr& e, std::vector<Var>* out);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TIR_ARITH_H_
