// The ONNX importer: an ONNX ModelProto (opsets 1 to 17 of the default
// domain) to a Relax IRModule whose function "main" has as parameters the
// graph inputs that are not initializers, in graph order, and as result the
// graph's outputs (a tuple when there are several, the tensor itself when
// one); each Loop and Scan adds a function of its own. The module then goes
// through Build() like a parsed .rx file.
//
// - Initializers become constants of main (default) or, with
//   keep_params_in_input, trailing parameters of main named after the
//   initializer (their values are returned in ImportedModel::params, so
//   BuildOptions::params can bind them later).
// - Dynamic dimensions: a dim_param becomes a symbolic var of that name
//   (shared by every input that names it); an unknown dim (neither value nor
//   param) becomes a fresh var "<input>_d<axis>". `input_shapes` fixes them.
// - Shape computations (Shape, Gather, Concat, Slice, arithmetic on the
//   result, Reshape of it) are evaluated at import time, symbolically when
//   dims are symbolic, as TVM's frontend does. A shape or bound that is a
//   run-time tensor (a Reshape's shape fed from a graph input) is read when
//   the model runs into symbolic vars (ConvertContext::KnownOrRunTimeInts).
// - Attributes follow each operator's opset semantics (the converter for an
//   op is picked by the model's opset import).
// - Control flow: If becomes a Relax If (or, with a condition known at
//   import time, the chosen branch inline); Loop and Scan become a loop
//   function of the module ("<node>_loop", tail-recursive) called from main.
//   See control_flow.cc.
//
// Errors: a file that cannot be read is NOT_FOUND; bytes that do not parse as
// a ModelProto, a graph that is not well formed (a node reading an undefined
// value) and bad attribute values are INVALID_ARGUMENT; an operator, an
// attribute value or an opset the importer does not support is UNIMPLEMENTED.
// Every node error names the operator, the opset and the node:
//   "onnx: node 'conv_3' (Conv, opset 13): auto_pad 'VALID' with pads ..."
//
// Thread contract: thread-safe (the converter registry is immutable after
// first use).
#ifndef TETHER_COMPILER_FRONTEND_ONNX_IMPORTER_H_
#define TETHER_COMPILER_FRONTEND_ONNX_IMPORTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/module.h"
#include "runtime/core/tensor.h"

namespace tether::compiler::onnx_frontend {

struct OnnxImportOptions {
  // Initializers stay parameters of main (after the graph inputs) instead of
  // becoming constants.
  bool keep_params_in_input = false;
  // Fixes the shape of a graph input by name (`tether --shape x=1x3x224x224`);
  // the rank must match the model's, and fixed dims must agree.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs fixed to these values at import time: they become constants
  // instead of parameters of main (and leave ImportedModel::input_names), so
  // converters see them as known values -- a Reshape's shape or a Slice's
  // starts given as a graph input. Each must name a graph input and agree
  // with its declared dtype and shape (INVALID_ARGUMENT otherwise).
  std::map<std::string, Tensor> frozen_inputs;
};

struct ImportedModel {
  IRModule module;
  // With keep_params_in_input: the initializer values by parameter name.
  std::map<std::string, Tensor> params;
  // The graph inputs (non-initializer) and outputs, in order, by ONNX name.
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  int64_t opset = 0;  // of the default domain
};

// Serialized ModelProto bytes. `base_dir` resolves external-data tensors
// ("" : external data is refused with INVALID_ARGUMENT).
absl::StatusOr<ImportedModel> ImportOnnxBytes(absl::string_view bytes,
                                              const OnnxImportOptions& options = {},
                                              const std::string& base_dir = "");
// A model file (external data resolved next to it).
absl::StatusOr<ImportedModel> ImportOnnxFile(const std::string& path,
                                             const OnnxImportOptions& options = {});

// A graph input of a model, as the model declares it (model_info.cc).
struct OnnxInputInfo {
  std::string name;
  DataType dtype;
  // One entry per dim: the size, or -1 for a dynamic dim (dim_param or unknown).
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;  // the dim_param of each dim, or ""
};
// The graph inputs that are not initializers, in order, without importing
// the model. Errors as ImportOnnxBytes's for unreadable or non-ONNX bytes;
// an input that is not a tensor is UNIMPLEMENTED.
absl::StatusOr<std::vector<OnnxInputInfo>> ReadOnnxInputs(absl::string_view bytes);
// The graph outputs' names, in order (the order of the fields of the
// imported function's result), without importing the model. Errors as
// ReadOnnxInputs's.
absl::StatusOr<std::vector<std::string>> ReadOnnxOutputNames(absl::string_view bytes);

// Every (op_type) the importer has a converter for, sorted.
std::vector<std::string> SupportedOnnxOps();

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_IMPORTER_H_
