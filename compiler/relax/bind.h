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

#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"
#include "runtime/core/tensor.h"

namespace tether::compiler {

// `function` with the params named in `params` replaced by Constants of the
// tensors. INVALID_ARGUMENT when `function` is not a function, a name is no
// param, or a tensor does not match its param's struct info (dtype, rank,
// constant dims, or one symbolic var bound to two sizes).
[[nodiscard]] absl::StatusOr<Expr> BindParams(const Expr& function,
                                              const std::map<std::string, Tensor>& params);

// `function` with the symbolic vars named in `values` (as they appear in its
// param struct info) replaced by the constants. INVALID_ARGUMENT when a name
// is not a symbolic var of the params.
[[nodiscard]] absl::StatusOr<Expr> BindSymbolicVars(const Expr& function,
                                                    const std::map<std::string, int64_t>& values);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_BIND_H_
