// ONNX TensorProto -> Tether CPU tensors: dtype mapping, raw_data (little
// endian, which is the host order on every target Tether builds for) and the
// typed repeated fields, and external data resolved under a base directory.
#include "compiler/frontend/onnx/tensor_proto.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/file.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::onnx::TensorProto;

std::string TensorLabel(const TensorProto& proto) {
  return proto.name().empty() ? std::string("tensor") : absl::StrCat("tensor '", proto.name(), "'");
}

std::string OnnxTypeName(int onnx_type) {
  if (TensorProto::DataType_IsValid(onnx_type)) {
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(onnx_type));
  }
  return absl::StrCat("type ", onnx_type);
}

// Copies `n` values of a repeated field into `out` as `T` (narrowing as the
// ONNX spec stores small types widened in int32_data).
template <typename T, typename Field>
void CopyField(const Field& field, std::vector<uint8_t>* out) {
  out->resize(static_cast<size_t>(field.size()) * sizeof(T));
  T* dst = reinterpret_cast<T*>(out->data());
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<T>(field.Get(i));
}

// The external data of `proto` read from `base_dir`.
absl::StatusOr<std::string> ReadExternal(const TensorProto& proto, const std::string& base_dir) {
  if (base_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(TensorLabel(proto), " has external data, which needs the model's directory"));
  }
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      int64_t v = 0;
      std::istringstream in(entry.value());
      if (!(in >> v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(TensorLabel(proto), ": bad external data ",
                                                       entry.key(), " '", entry.value(), "'"));
      }
      (entry.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(TensorLabel(proto), ": external data without a location"));
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  fs::path file = fs::weakly_canonical(base / location, ec);
  auto [b, f] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  if (ec || b != base.end() || fs::path(location).is_absolute()) {
    return absl::InvalidArgumentError(absl::StrCat(TensorLabel(proto), ": external data location '",
                                                   location, "' escapes ", base_dir));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(TensorLabel(proto), ": cannot read external data '", file.string(), "'"));
  }
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (offset > size || (length >= 0 && offset + length > size)) {
    return absl::InvalidArgumentError(absl::StrCat(TensorLabel(proto), ": external data range ",
                                                   offset, "+", length, " past the end of '",
                                                   location, "' (", size, " bytes)"));
  }
  if (length < 0) length = size - offset;
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  if (!in) return absl::DataLossError(absl::StrCat("short read of '", file.string(), "'"));
  return data;
}

}  // namespace

absl::StatusOr<DataType> DataTypeFromOnnx(int onnx_type) {
  switch (onnx_type) {
    case TensorProto::FLOAT:
      return DataType::Float(32);
    case TensorProto::DOUBLE:
      return DataType::Float(64);
    case TensorProto::FLOAT16:
      return DataType::Float(16);
    case TensorProto::BFLOAT16:
      return DataType::BFloat16();
    case TensorProto::INT8:
      return DataType::Int(8);
    case TensorProto::INT16:
      return DataType::Int(16);
    case TensorProto::INT32:
      return DataType::Int(32);
    case TensorProto::INT64:
      return DataType::Int(64);
    case TensorProto::UINT8:
      return DataType::UInt(8);
    case TensorProto::UINT16:
      return DataType::UInt(16);
    case TensorProto::UINT32:
      return DataType::UInt(32);
    case TensorProto::UINT64:
      return DataType::UInt(64);
    case TensorProto::BOOL:
      return DataType::Bool();
    default:
      return absl::UnimplementedError(
          absl::StrCat("onnx: element type ", OnnxTypeName(onnx_type), " is not supported"));
  }
}

absl::StatusOr<int> DataTypeToOnnx(DataType dtype) {
  if (dtype.lanes() == 1) {
    if (dtype.is_bool()) return TensorProto::BOOL;
    if (dtype.is_bfloat16()) return TensorProto::BFLOAT16;
    const int bits = dtype.bits();
    if (dtype.is_float()) {
      if (bits == 16) return TensorProto::FLOAT16;
      if (bits == 32) return TensorProto::FLOAT;
      if (bits == 64) return TensorProto::DOUBLE;
    } else if (dtype.is_int()) {
      if (bits == 8) return TensorProto::INT8;
      if (bits == 16) return TensorProto::INT16;
      if (bits == 32) return TensorProto::INT32;
      if (bits == 64) return TensorProto::INT64;
    } else if (dtype.is_uint()) {
      if (bits == 8) return TensorProto::UINT8;
      if (bits == 16) return TensorProto::UINT16;
      if (bits == 32) return TensorProto::UINT32;
      if (bits == 64) return TensorProto::UINT64;
    }
  }
  return absl::UnimplementedError(
      absl::StrCat("onnx: dtype ", dtype.ToString(), " has no ONNX element type"));
}

absl::StatusOr<Tensor> TensorFromProto(const TensorProto& proto, const std::string& base_dir) {
  absl::StatusOr<DataType> dtype = DataTypeFromOnnx(proto.data_type());
  if (!dtype.ok()) {
    return absl::Status(dtype.status().code(),
                        absl::StrCat(TensorLabel(proto), ": ",
                                     absl::StripPrefix(dtype.status().message(), "onnx: ")));
  }
  if (proto.has_segment()) {
    return absl::UnimplementedError(absl::StrCat(TensorLabel(proto), ": segmented tensors"));
  }
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  absl::StatusOr<int64_t> count = CheckedNumElements(shape);
  if (!count.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(TensorLabel(proto), ": bad shape: ", count.status().message()));
  }
  const int64_t want_bytes = *count * dtype->bytes();

  std::vector<uint8_t> typed;
  const std::string* raw = nullptr;
  std::string external;
  if (proto.data_location() == TensorProto::EXTERNAL) {
    absl::StatusOr<std::string> data = ReadExternal(proto, base_dir);
    if (!data.ok()) return data.status();
    external = std::move(*data);
    raw = &external;
  } else if (proto.has_raw_data()) {
    raw = &proto.raw_data();
  } else {
    switch (proto.data_type()) {
      case TensorProto::FLOAT:
        CopyField<float>(proto.float_data(), &typed);
        break;
      case TensorProto::DOUBLE:
        CopyField<double>(proto.double_data(), &typed);
        break;
      case TensorProto::INT64:
        CopyField<int64_t>(proto.int64_data(), &typed);
        break;
      case TensorProto::UINT32:
        CopyField<uint32_t>(proto.uint64_data(), &typed);
        break;
      case TensorProto::UINT64:
        CopyField<uint64_t>(proto.uint64_data(), &typed);
        break;
      case TensorProto::INT32:
        CopyField<int32_t>(proto.int32_data(), &typed);
        break;
      case TensorProto::INT16:
        CopyField<int16_t>(proto.int32_data(), &typed);
        break;
      case TensorProto::INT8:
        CopyField<int8_t>(proto.int32_data(), &typed);
        break;
      case TensorProto::UINT16:
      case TensorProto::FLOAT16:   // the bits of each half in an int32
      case TensorProto::BFLOAT16:  // likewise
        CopyField<uint16_t>(proto.int32_data(), &typed);
        break;
      case TensorProto::UINT8:
        CopyField<uint8_t>(proto.int32_data(), &typed);
        break;
      case TensorProto::BOOL: {
        typed.resize(static_cast<size_t>(proto.int32_data_size()));
        for (int i = 0; i < proto.int32_data_size(); ++i) typed[i] = proto.int32_data(i) != 0;
        break;
      }
      default:
        break;
    }
  }
  const int64_t got_bytes =
      raw != nullptr ? static_cast<int64_t>(raw->size()) : static_cast<int64_t>(typed.size());
  if (got_bytes != want_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(TensorLabel(proto), " of shape [", absl::StrJoin(shape, ", "), "] ",
                     dtype->ToString(), " needs ", want_bytes, " bytes of data, got ", got_bytes));
  }
  const void* bytes = raw != nullptr ? static_cast<const void*>(raw->data())
                                     : static_cast<const void*>(typed.data());
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, *dtype, bytes, static_cast<size_t>(want_bytes));
  if (!t.ok()) return t.status();
  if (dtype->is_bool() && raw != nullptr) {
    // Normalize bools to 0/1 (raw bytes from outside may hold any value).
    auto* p = static_cast<uint8_t*>(t->get()->element_data());
    for (int64_t i = 0; i < *count; ++i) p[i] = p[i] != 0;
  }
  return t;
}

absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat("onnx: cannot read tensor file '", path,
                                                            "': ", bytes.status().message()));
  }
  TensorProto proto;
  if (!proto.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("onnx: '", path, "' is not a serialized TensorProto"));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return TensorFromProto(proto, dir.empty() ? std::string(".") : dir.string());
}

}  // namespace tether::compiler::onnx_frontend
