// .npy encoding and decoding; see npy.h for the type mapping.
#include "client/npy.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/module/module.h"

namespace tether::client {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";
constexpr size_t kMaxHeaderBytes = 1 << 20;

struct DescrEntry {
  absl::string_view descr;  // without the byte-order character
  DataType dtype;
};
const DescrEntry kDescrs[] = {
    {"f2", DataType::Float(16)},  {"f4", DataType::Float(32)}, {"f8", DataType::Float(64)},
    {"i1", DataType::Int(8)},     {"i2", DataType::Int(16)},   {"i4", DataType::Int(32)},
    {"i8", DataType::Int(64)},    {"u1", DataType::UInt(8)},   {"u2", DataType::UInt(16)},
    {"u4", DataType::UInt(32)},   {"u8", DataType::UInt(64)},  {"b1", DataType::Bool()},
    {"V2", DataType::BFloat16()},
};

// The value of key `key` in the header dict, e.g. "'<f4'" or "(2, 3)".
absl::StatusOr<std::string> HeaderField(absl::string_view header, absl::string_view key) {
  std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return ValueError(".npy header has no ", quoted, " entry");
  size_t colon = header.find(':', at + quoted.size());
  if (colon == absl::string_view::npos)
    return ValueError(".npy header entry ", quoted, " has no value");
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(colon + 1));
  size_t end;
  if (!rest.empty() && rest[0] == '(') {
    end = rest.find(')');
    if (end == absl::string_view::npos) return ValueError(".npy shape is not closed");
    ++end;
  } else if (!rest.empty() && (rest[0] == '\'' || rest[0] == '"')) {
    end = rest.find(rest[0], 1);
    if (end == absl::string_view::npos) return ValueError(".npy header string is not closed");
    ++end;
  } else {
    end = rest.find_first_of(",}");
    if (end == absl::string_view::npos) end = rest.size();
  }
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

void SwapBytes(char* data, int64_t count, int64_t elem) {
  for (int64_t i = 0; i < count; ++i) std::reverse(data + i * elem, data + (i + 1) * elem);
}

}  // namespace

absl::StatusOr<std::string> NpyDescr(DataType dtype) {
  if (dtype.lanes() != 1) return ValueError(".npy cannot hold vector type ", dtype.ToString());
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) {
      char order = dtype.bytes() == 1 || e.descr[0] == 'V' ? '|' : '<';
      return absl::StrCat(std::string(1, order), e.descr);
    }
  }
  if (dtype == DataType::UInt(1)) return std::string("|b1");
  return ValueError(".npy cannot hold data type ", dtype.ToString());
}

absl::StatusOr<std::string> EncodeNpy(const Tensor& tensor) {
  TETHER_ASSIGN_OR_RETURN(std::string descr, NpyDescr(tensor->dtype()));
  std::string shape = "(";
  for (size_t i = 0; i < tensor->shape().size(); ++i)
    absl::StrAppend(&shape, tensor->shape()[i], ", ");
  if (tensor->shape().size() > 1)
    shape.resize(shape.size() - 2);
  else if (tensor->shape().size() == 1)
    shape.resize(shape.size() - 1);
  absl::StrAppend(&shape, ")");
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Version 1.0: magic, 2 version bytes, u16 header length; total a multiple of 64.
  size_t unpadded = kMagic.size() + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 65535) return ValueError("tensor shape too long for a .npy header");
  std::string out(kMagic);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  size_t offset = out.size();
  out.resize(offset + static_cast<size_t>(tensor->NumBytes()));
  if (!tensor->IsContiguous()) return ValueError("cannot write a non-contiguous tensor as .npy");
  TETHER_RETURN_IF_ERROR(
      tensor.CopyToBytes(out.data() + offset, static_cast<size_t>(tensor->NumBytes())));
  return out;
}

absl::StatusOr<Tensor> DecodeNpy(absl::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return ValueError("not a .npy file (bad magic)");
  }
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len;
  size_t pos;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    pos = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return ValueError(".npy file is truncated in its header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    pos = 12;
  } else {
    return ValueError("unsupported .npy version ", major, ".",
                      static_cast<int>(static_cast<unsigned char>(bytes[7])));
  }
  if (header_len > kMaxHeaderBytes || pos + header_len > bytes.size()) {
    return ValueError(".npy header of ", header_len, " bytes runs past the end of the file");
  }
  absl::string_view header = bytes.substr(pos, header_len);
  pos += header_len;

  TETHER_ASSIGN_OR_RETURN(std::string descr, HeaderField(header, "descr"));
  TETHER_ASSIGN_OR_RETURN(std::string fortran, HeaderField(header, "fortran_order"));
  TETHER_ASSIGN_OR_RETURN(std::string shape_text, HeaderField(header, "shape"));
  if (fortran != "False")
    return ValueError(
        ".npy arrays in Fortran order are not supported; save with np.ascontiguousarray");
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"'))
    return ValueError("bad .npy descr ", descr);
  descr = descr.substr(1, descr.size() - 2);
  if (descr.size() != 3) return ValueError("unsupported .npy data type '", descr, "'");
  char order = descr[0];
  absl::string_view code = absl::string_view(descr).substr(1);
  const DescrEntry* entry = nullptr;
  for (const DescrEntry& e : kDescrs) {
    if (e.descr == code) entry = &e;
  }
  if (entry == nullptr || (order != '<' && order != '>' && order != '|' && order != '=')) {
    return ValueError("unsupported .npy data type '", descr, "'");
  }
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')') {
    return ValueError("bad .npy shape ", shape_text);
  }
  TensorObj::Dims shape;
  for (absl::string_view part : absl::StrSplit(shape_text.substr(1, shape_text.size() - 2), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    absl::ConsumeSuffix(&part, "L");
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0)
      return ValueError("bad .npy dimension \"", part, "\"");
    shape.push_back(d);
  }
  TETHER_ASSIGN_OR_RETURN(int64_t nbytes,
                          CheckedNumBytes({shape.data(), shape.size()}, entry->dtype));
  if (bytes.size() - pos != static_cast<size_t>(nbytes)) {
    return ValueError(".npy data has ", bytes.size() - pos, " bytes but ", entry->dtype.ToString(),
                      ShapeToString({shape.data(), shape.size()}), " needs ", nbytes);
  }
  TETHER_ASSIGN_OR_RETURN(
      Tensor t, Tensor::FromBytes({shape.data(), shape.size()}, entry->dtype, bytes.data() + pos,
                                  static_cast<size_t>(nbytes)));
  int64_t elem = entry->dtype.bytes();
  if (order == '>' && elem > 1 && entry->descr[0] != 'V') {
    SwapBytes(static_cast<char*>(t->element_data()), t->NumElements(), elem);
  }
  return t;
}

absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, EncodeNpy(tensor));
  return WriteStringToFileAtomic(path, bytes);
}

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<Tensor> t = DecodeNpy(bytes);
  if (!t.ok()) return Annotate(t.status(), path, ": ");
  return t;
}

}  // namespace tether::client
