// ReadOnnxInputs and ReadOnnxOutputNames: the declared graph inputs and
// outputs of a model, for tools that need them without an import (`tether
// run --random-inputs` and `--carry` on an ONNX file).
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {

namespace {

absl::StatusOr<onnx::ModelProto> ParseModel(absl::string_view bytes) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an ONNX model: ", bytes.size(), " bytes do not parse as a ModelProto"));
  }
  return model;
}

}  // namespace

absl::StatusOr<std::vector<OnnxInputInfo>> ReadOnnxInputs(absl::string_view bytes) {
  TETHER_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes));
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<OnnxInputInfo> out;
  for (const onnx::ValueInfoProto& in : model.graph().input()) {
    if (initializers.contains(in.name())) continue;
    if (!in.type().has_tensor_type()) {
      const bool sequence_or_optional =
          in.type().has_sequence_type() || in.type().has_optional_type();
      return absl::UnimplementedError(absl::StrCat(
          "onnx: graph input '", in.name(), "' is not a tensor",
          sequence_or_optional
              ? " but a sequence or an optional: the CLI feeds .npy tensors only; feed it from "
                "Python (a list, or None) or the client library (a Tuple, or None)"
              : ""));
    }
    const onnx::TypeProto::Tensor& tt = in.type().tensor_type();
    OnnxInputInfo info;
    info.name = in.name();
    TETHER_ASSIGN_OR_RETURN(info.dtype, DataTypeFromOnnx(tt.elem_type()));
    for (const onnx::TensorShapeProto::Dimension& d : tt.shape().dim()) {
      info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
      info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadOnnxOutputNames(absl::string_view bytes) {
  TETHER_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModel(bytes));
  std::vector<std::string> names;
  for (const onnx::ValueInfoProto& out : model.graph().output()) names.push_back(out.name());
  return names;
}

}  // namespace tether::compiler::onnx_frontend
