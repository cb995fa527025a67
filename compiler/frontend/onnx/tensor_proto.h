// ONNX TensorProto <-> Tether tensors: initializers, Constant values, and the
// input_N.pb / output_N.pb files of the ONNX test suites.
//
// dtypes: FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8/16/32/64, UINT8/16/32/64 and
// BOOL map to the Tether DataType of the same name; STRING, COMPLEX and the
// float8 types are UNIMPLEMENTED naming the type. Data comes from raw_data
// (little endian) or the typed repeated fields; a size that does not match
// the shape is INVALID_ARGUMENT naming the tensor. External data is read from
// `base_dir` (refused when it is empty or the location escapes it).
//
// Thread contract: thread-safe (pure functions).
#ifndef TETHER_COMPILER_FRONTEND_ONNX_TENSOR_PROTO_H_
#define TETHER_COMPILER_FRONTEND_ONNX_TENSOR_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/data_type.h"
#include "runtime/core/tensor.h"

namespace onnx {
class TensorProto;
}  // namespace onnx

namespace tether::compiler::onnx_frontend {

// The Tether dtype of an ONNX TensorProto_DataType value.
absl::StatusOr<DataType> DataTypeFromOnnx(int onnx_type);
// The ONNX TensorProto_DataType value of a Tether dtype.
absl::StatusOr<int> DataTypeToOnnx(DataType dtype);

// A CPU tensor with the proto's shape, dtype and values.
absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto,
                                       const std::string& base_dir = "");
// Reads a serialized TensorProto file (the test suites' input_0.pb).
absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path);

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_TENSOR_PROTO_H_
