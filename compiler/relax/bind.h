// Binding values into a function, as TVM's relax.transform.BindParams and
// BindSymbolicVars: parameters become Constants (their symbolic dims are
// inferred from the tensors' shapes and substituted everywhere), or
// symbolic vars become constants. Both return a new normalized function
// with updated struct info; the input is not changed.
//
// Thread contract: stateless functions; thread-safe.
#ifndef TETHER_COMPILER_RELAX_BIND_H_
#define TETHER_COMPILER_RELAX_BIND_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"
#include "runtime/core/tensor.h"

namespace tether::compiler {

// A parameter of a function by name or by position (0-based), as TVM's
// bind_params takes a name or the Var itself.
using ParamKey = std::variant<std::string, int64_t>;

// `function` with the params named in `params` replaced by Constants of the
// tensors. INVALID_ARGUMENT when `function` is not a function, a name is no
// param (the message lists the params), two params share the name, or a
// tensor does not match its param's struct info (dtype, rank, constant
// dims, or one symbolic var bound to two sizes; both are named).
[[nodiscard]] absl::StatusOr<Expr> BindParams(const Expr& function,
                                              const std::map<std::string, Tensor>& params);
// The same with params by name or by position, in any mix. Also
// INVALID_ARGUMENT for a position out of range and for a param given twice
// (by its name and its position, or twice either way).
[[nodiscard]] absl::StatusOr<Expr> BindParamsByKey(
    const Expr& function, const std::vector<std::pair<ParamKey, Tensor>>& params);

// `function` with the symbolic vars named in `values` (as they appear in its
// param struct info) replaced by the constants. INVALID_ARGUMENT when a name
// is not a symbolic var of the params.
[[nodiscard]] absl::StatusOr<Expr> BindSymbolicVars(const Expr& function,
                                                    const std::map<std::string, int64_t>& values);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_BIND_H_
