// Param dict encoding and the bounds-checked decoder.
#include "runtime/module/param_dict.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/byte_io.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/module/module.h"

namespace tether {
namespace {

constexpr int32_t kCpuDeviceType = 1;  // kDLCPU; records are always written as CPU

// Converts tensor data between host order and the file's little-endian order
// (a no-op on little-endian hosts).
void SwapToLittleEndian(char* data, size_t nbytes, DataType dtype) {
  if constexpr (std::endian::native == std::endian::little) {
    (void)data;
    (void)nbytes;
    (void)dtype;
  } else {
    const size_t width = dtype.bits() / 8;
    if (width <= 1) return;
    for (size_t i = 0; i + width <= nbytes; i += width) std::reverse(data + i, data + i + width);
  }
}

// INVALID_ARGUMENT "corrupt param dict at offset <pos>: <what>".
absl::Status Corrupt(const ByteReader& r, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("corrupt param dict at offset ", r.pos(), ": ", std::string(what)));
}

absl::Status AppendRecord(ByteWriter& w, absl::string_view name, const Tensor& t) {
  if (!t) return absl::InvalidArgumentError(absl::StrCat("param ", std::string(name), " is null"));
  DataType dtype = t->dtype();
  if (!dtype.IsValidStorageType() || dtype.code() == DataType::kOpaqueHandle) {
    return absl::InvalidArgumentError(absl::StrCat("param ", std::string(name), " has dtype ",
                                                   dtype.ToString(), ", which cannot be saved"));
  }
  if (t->ndim() > kMaxParamDims) {
    return absl::InvalidArgumentError(absl::StrCat("param ", std::string(name), " has ", t->ndim(),
                                                   " dims, more than ", kMaxParamDims));
  }
  if (!t->IsContiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat("param ", std::string(name), " is not contiguous"));
  }
  TETHER_ASSIGN_OR_RETURN(int64_t nbytes, CheckedNumBytes(t->shape(), dtype));

  w.U64(kTensorRecordMagic);
  w.U64(0);  // reserved
  w.I32(kCpuDeviceType);
  w.I32(0);  // device id
  w.I32(t->ndim());
  w.U8(dtype.code());
  w.U8(dtype.bits());
  w.U16(dtype.lanes());
  for (int64_t d : t->shape()) w.I64(d);
  w.I64(nbytes);
  std::string* out = &w.out();
  size_t at = out->size();
  out->resize(at + static_cast<size_t>(nbytes));
  if (nbytes > 0) {
    // CopyToBytes copies from any device to the host.
    TETHER_RETURN_IF_ERROR(t.CopyToBytes(out->data() + at, static_cast<size_t>(nbytes)));
    SwapToLittleEndian(out->data() + at, static_cast<size_t>(nbytes), dtype);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ReadRecord(ByteReader& r, absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(uint64_t magic, r.U64("a tensor magic"));
  if (magic != kTensorRecordMagic) {
    return Corrupt(r, absl::StrCat("tensor ", std::string(name), " has magic 0x",
                                   absl::Hex(magic, absl::kZeroPad16), ", expected 0x",
                                   absl::Hex(kTensorRecordMagic, absl::kZeroPad16)));
  }
  TETHER_ASSIGN_OR_RETURN(uint64_t reserved, r.U64("a tensor's reserved field"));
  (void)reserved;
  TETHER_ASSIGN_OR_RETURN(uint64_t device_type, r.U32("a tensor device type"));
  TETHER_ASSIGN_OR_RETURN(uint64_t device_id, r.U32("a tensor device id"));
  (void)device_id;
  if (static_cast<int32_t>(device_type) != kCpuDeviceType) {
    return Corrupt(r, absl::StrCat("tensor ", std::string(name), " has device type ",
                                   static_cast<int32_t>(device_type), ", expected 1 (cpu)"));
  }
  TETHER_ASSIGN_OR_RETURN(uint64_t ndim_raw, r.U32("a tensor ndim"));
  int32_t ndim = static_cast<int32_t>(ndim_raw);
  if (ndim < 0 || ndim > kMaxParamDims) {
    return Corrupt(r, absl::StrCat("tensor ", std::string(name), " has ndim ", ndim,
                                   ", expected 0 to ", kMaxParamDims));
  }
  TETHER_ASSIGN_OR_RETURN(uint64_t code, r.U8("a dtype code"));
  TETHER_ASSIGN_OR_RETURN(uint64_t bits, r.U8("dtype bits"));
  TETHER_ASSIGN_OR_RETURN(uint64_t lanes, r.U16("dtype lanes"));
  DataType dtype(static_cast<uint8_t>(code), static_cast<uint8_t>(bits),
                 static_cast<uint16_t>(lanes));
  if (!dtype.IsValidStorageType() || dtype.code() == DataType::kOpaqueHandle) {
    return Corrupt(r, absl::StrCat("tensor ", std::string(name), " has invalid dtype (code ", code,
                                   ", bits ", bits, ", lanes ", lanes, ")"));
  }
  TensorObj::Dims shape;
  for (int32_t i = 0; i < ndim; ++i) {
    TETHER_ASSIGN_OR_RETURN(uint64_t d, r.U64("a tensor dimension"));
    if (static_cast<int64_t>(d) < 0) {
      return Corrupt(r, absl::StrCat("tensor ", std::string(name), " has negative dimension ",
                                     static_cast<int64_t>(d)));
    }
    shape.push_back(static_cast<int64_t>(d));
  }
  absl::StatusOr<int64_t> expected = CheckedNumBytes(shape, dtype);
  if (!expected.ok()) {
    return Corrupt(r,
                   absl::StrCat("tensor ", std::string(name), ": ", expected.status().message()));
  }
  TETHER_ASSIGN_OR_RETURN(uint64_t nbytes, r.U64("a tensor byte size"));
  if (nbytes != static_cast<uint64_t>(*expected)) {
    return Corrupt(r, absl::StrCat("tensor ", std::string(name), " of ", dtype.ToString(),
                                   ShapeToString(shape), " has ", static_cast<int64_t>(nbytes),
                                   " data bytes, expected ", *expected));
  }
  TETHER_ASSIGN_OR_RETURN(absl::string_view data, r.Bytes(nbytes, "tensor data"));
  if constexpr (std::endian::native == std::endian::little) {
    return Tensor::FromBytes(shape, dtype, data.data(), data.size());
  } else {
    std::string host(data);
    SwapToLittleEndian(host.data(), host.size(), dtype);
    return Tensor::FromBytes(shape, dtype, host.data(), host.size());
  }
}

}  // namespace

absl::StatusOr<std::string> SaveParamDict(const ParamList& params) {
  absl::flat_hash_set<absl::string_view> seen;
  for (const auto& [name, tensor] : params) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate param name ", name));
    }
  }
  ByteWriter w;
  w.U64(kParamDictMagic);
  w.U64(0);  // reserved
  w.U64(params.size());
  for (const auto& [name, tensor] : params) {
    w.U64(name.size());  // names carry a u64 length, as TVM writes them
    w.Bytes(name);
  }
  w.U64(params.size());
  for (const auto& [name, tensor] : params) {
    TETHER_RETURN_IF_ERROR(AppendRecord(w, name, tensor));
  }
  return std::move(w.out());
}

absl::StatusOr<ParamList> LoadParamDict(absl::string_view bytes) {
  ByteReader r(bytes, "param dict");
  TETHER_ASSIGN_OR_RETURN(uint64_t magic, r.U64("the param dict magic"));
  if (magic != kParamDictMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a param dict: magic 0x", absl::Hex(magic, absl::kZeroPad16),
                     ", expected 0x", absl::Hex(kParamDictMagic, absl::kZeroPad16)));
  }
  TETHER_ASSIGN_OR_RETURN(uint64_t reserved, r.U64("the reserved field"));
  (void)reserved;
  TETHER_ASSIGN_OR_RETURN(uint64_t num_names, r.U64("the name count"));
  // Each name takes at least its 8-byte length, so this bounds the count
  // before anything is reserved.
  if (num_names > r.remaining() / 8) {
    return Corrupt(r, absl::StrCat("name count ", num_names, " cannot fit in the ", r.remaining(),
                                   " bytes left"));
  }
  std::vector<std::string> names;
  names.reserve(num_names);
  absl::flat_hash_set<std::string> seen;
  for (uint64_t i = 0; i < num_names; ++i) {
    TETHER_ASSIGN_OR_RETURN(uint64_t len, r.U64("a name length"));
    TETHER_ASSIGN_OR_RETURN(absl::string_view name, r.Bytes(len, "a name"));
    if (!seen.insert(std::string(name)).second) {
      return Corrupt(r, absl::StrCat("duplicate param name ", std::string(name)));
    }
    names.emplace_back(name);
  }
  TETHER_ASSIGN_OR_RETURN(uint64_t num_tensors, r.U64("the tensor count"));
  if (num_tensors != num_names) {
    return Corrupt(
        r, absl::StrCat("tensor count ", num_tensors, " differs from name count ", num_names));
  }
  ParamList params;
  params.reserve(num_names);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    TETHER_ASSIGN_OR_RETURN(Tensor t, ReadRecord(r, names[i]));
    params.emplace_back(std::move(names[i]), std::move(t));
  }
  if (r.remaining() != 0) {
    return Corrupt(r, absl::StrCat(r.remaining(), " trailing bytes after the last tensor"));
  }
  return params;
}

absl::Status SaveParamDictToFile(const std::string& path, const ParamList& params) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, SaveParamDict(params));
  return WriteStringToFileAtomic(path, bytes);
}

absl::StatusOr<ParamList> LoadParamDictFromFile(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<ParamList> params = LoadParamDict(bytes);
  if (!params.ok()) {
    return Annotate(params.status(), path, ": ");
  }
  return params;
}

}  // namespace tether
