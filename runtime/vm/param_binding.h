// Weights bound into a VM (TVM's keep_params_in_input flow, done on the
// device): a param dict (runtime/module/param_dict.h) fills the parameters of
// an executable's bytecode functions by name, once, so callers pass the data
// inputs only. Also the parameter types an executable records for that check
// (metadata "param_types.<function>", docs/design/executable-format.md).
//
// Thread contract: ParamType and the free functions are thread-safe;
// ParamBinding is immutable after Create (thread-safe to read).
#ifndef TETHER_RUNTIME_VM_PARAM_BINDING_H_
#define TETHER_RUNTIME_VM_PARAM_BINDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/executable.h"

namespace tether::vm {

// The metadata key of a function's parameter types: "param_types." + name.
inline constexpr absl::string_view kParamTypesMetadataPrefix = "param_types.";

// What a parameter accepts, as far as a tensor can be checked against it.
// Text form: "float32[784,256]" ("?" for a dim that is not a constant,
// "float32[*]" for an unknown rank, "?" for the dtype when unknown),
// "-" for a parameter that is no tensor (a tuple, a shape, an object).
struct ParamType {
  bool is_tensor = true;
  std::optional<DataType> dtype;                            // nullopt: any
  std::optional<std::vector<std::optional<int64_t>>> dims;  // nullopt: any rank

  std::string ToString() const;
  // Whether `tensor` fits (dtype, rank and constant dims).
  bool Accepts(const Tensor& tensor) const;
  // INVALID_ARGUMENT for text that is not of the form above.
  static absl::StatusOr<ParamType> Parse(absl::string_view text);
};

// The types of a function's parameters as metadata text (one per line, in
// parameter order), and back. Parse: INVALID_ARGUMENT when a line does not
// parse or the count is not `num_params`.
std::string FormatParamTypes(const std::vector<ParamType>& types);
absl::StatusOr<std::vector<ParamType>> ParseParamTypes(absl::string_view text, size_t num_params);

// Which parameters of which bytecode functions a param dict fills. A
// function's parameter is bound when the dict has a tensor of its name;
// every function that has a parameter of that name gets it. The others
// stay the caller's, in their order.
class ParamBinding {
 public:
  struct Function {
    // One entry per parameter: the bound tensor, or None for the caller's.
    std::vector<Value> values;
    std::vector<size_t> open;  // the caller's parameters, by position
    std::vector<std::string> bound_names;
    std::vector<std::string> open_names;
  };

  // Checks `params` against `exec`: INVALID_ARGUMENT (kind value) naming
  // the tensor and the parameter when a tensor's dtype or shape does not
  // fit a parameter's recorded type (metadata "param_types.<f>"; without it
  // only the names are checked, and the function's own checks run at call
  // time), or when no bytecode function has a parameter of a tensor's name.
  // `params_name` and `module_name` name the two in messages ("param dict
  // 3f2a1b9c0d12", "module 9ab1...").
  static absl::StatusOr<ParamBinding> Create(const Executable& exec, const ParamList& params,
                                             absl::string_view params_name,
                                             absl::string_view module_name);

  // The binding of function `func_index`, or null when none of its
  // parameters is bound.
  const Function* Find(Index func_index) const;
  // Every bound function; the VM replaces the tensors by its device's copies.
  std::vector<std::pair<Index, Function>>& functions() { return functions_; }
  const std::vector<std::pair<Index, Function>>& functions() const { return functions_; }

 private:
  std::vector<std::pair<Index, Function>> functions_;
};

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_PARAM_BINDING_H_
