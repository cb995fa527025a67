// Structural equality and hashing of Relax expressions, struct info,
// PrimExprs, functions and modules, as TVM's StructuralEqual/Hash.
//
// Variables bound inside the compared definitions (function params, binding
// vars, symbolic vars first seen in param or binding struct info and match
// casts) are compared up to a consistent renaming. Free variables are equal
// only when they are the same node, unless map_free_vars is true (then
// they too may be renamed consistently). Ops compare by name, global vars
// and extern funcs by name, constants by dtype, shape and bytes. Spans are
// ignored.
//
// StructuralHash is consistent with StructuralEqual(map_free_vars=false):
// equal values hash equal. Vars hash by their order of first occurrence.
//
// Thread contract: stateless functions; thread-safe.
#ifndef TETHER_COMPILER_RELAX_STRUCTURAL_EQUAL_H_
#define TETHER_COMPILER_RELAX_STRUCTURAL_EQUAL_H_

#include <cstdint>

#include "compiler/relax/expr.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

bool StructuralEqual(const Expr& a, const Expr& b, bool map_free_vars = false);
bool StructuralEqual(const StructInfo& a, const StructInfo& b, bool map_free_vars = false);
bool StructuralEqual(const PrimExpr& a, const PrimExpr& b, bool map_free_vars = false);
// Same function names, each pair of functions equal, same kernel names
// (kernels compared by their printed form) and equal attrs.
bool StructuralEqual(const IRModule& a, const IRModule& b);

uint64_t StructuralHash(const Expr& e);
uint64_t StructuralHash(const StructInfo& s);
uint64_t StructuralHash(const PrimExpr& e);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_STRUCTURAL_EQUAL_H_
