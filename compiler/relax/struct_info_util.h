// Struct info algebra: subtyping with symbolic shapes (IsBaseOf), the least
// upper bound used for If (StructInfoLCA), erasure to rank-only, shape
// accessors, substitution of symbolic vars, and matching a pattern with
// symbolic dims against a concrete struct info (how a call to a function
// with R.Tensor(("n", 4)) params binds n). As TVM's struct_info_analysis.
//
// Thread contract: stateless functions over immutable nodes; thread-safe.
#ifndef TETHER_COMPILER_RELAX_STRUCT_INFO_UTIL_H_
#define TETHER_COMPILER_RELAX_STRUCT_INFO_UTIL_H_

#include <optional>
#include <vector>

#include "compiler/relax/struct_info.h"
#include "compiler/tir/arith.h"
#include "runtime/core/value.h"

namespace tether::compiler {

// Whether every value described by `derived` is described by `base`
// (R.Object is the base of all; R.Tensor(ndim=2) of R.Tensor((n, 4));
// shape dims compared with ProveEqual). Undefined is the base of nothing.
bool IsBaseOf(const StructInfo& base, const StructInfo& derived);

// The most precise struct info that is a base of both: same shape where the
// dims are provably equal, else rank only, else R.Object.
StructInfo StructInfoLCA(const StructInfo& a, const StructInfo& b);

// `s` with tensor and shape values erased to their rank, recursively in
// tuples and function returns; prim values dropped.
StructInfo EraseToRank(const StructInfo& s);

// The shape of a tensor struct info when known, else nullptr (also for
// non-tensors). Points into `s`.
const std::vector<PrimExpr>* TensorShape(const StructInfo& s);

// The struct info of a runtime value: tensors by shape, dtype and device,
// ints/floats/bools as R.Prim with their value, everything else R.Object.
StructInfo StructInfoFromValue(const Value& value);

// `s` with its symbolic vars replaced per `map` and dims simplified; the
// same object when nothing changes.
StructInfo SubstituteStructInfo(const StructInfo& s, const VarMap& map);

// The symbolic vars appearing in `s` (dims, prim values), first occurrence
// first, appended to `out` without duplicates.
void CollectStructInfoVars(const StructInfo& s, std::vector<Var>* out);

// Matches `pattern` against `value`: a pattern dim that is a bare Var not yet
// in `bindings` is bound to the value's dim; other dims are compared after
// substitution. False when provably incompatible (another kind, dtype or
// rank, or dims that simplify to different constants); true otherwise (a
// mismatch that is only possible is left to the run time check).
bool MatchStructInfo(const StructInfo& pattern, const StructInfo& value, VarMap* bindings);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_STRUCT_INFO_UTIL_H_
