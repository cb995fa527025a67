// DataType parsing and printing.
#include "runtime/core/data_type.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/core/error.h"
#include "runtime/core/number_parsing.h"

namespace tether {
namespace {

bool IsPowerOfTwo(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

absl::StatusOr<DataType> DataType::Parse(absl::string_view text) {
  absl::string_view rest = text;
  int lanes = 1;
  if (size_t x = rest.rfind('x'); x != absl::string_view::npos && x + 1 < rest.size()) {
    int64_t parsed = 0;
    if (!ParseDecimal(rest.substr(x + 1), 65535, &parsed) || parsed < 1) {
      return ValueError("invalid lanes in data type \"", text, "\"");
    }
    lanes = static_cast<int>(parsed);
    rest = rest.substr(0, x);
  }
  if (rest == "bool") return DataType(kBool, 8, lanes);
  if (rest == "handle") return DataType(kOpaqueHandle, 64, lanes);
  uint8_t code;
  if (absl::ConsumePrefix(&rest, "bfloat")) {
    code = kBFloat;
  } else if (absl::ConsumePrefix(&rest, "float")) {
    code = kFloat;
  } else if (absl::ConsumePrefix(&rest, "uint")) {
    code = kUInt;
  } else if (absl::ConsumePrefix(&rest, "int")) {
    code = kInt;
  } else {
    return ValueError("unknown data type \"", text, "\"");
  }
  int64_t bits = 0;
  if (!ParseDecimal(rest, 128, &bits) || bits < 1) {
    return ValueError("invalid bit width in data type \"", text, "\"");
  }
  DataType t(code, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes));
  if (!t.IsValidStorageType()) return ValueError("unsupported data type \"", text, "\"");
  return t;
}

bool DataType::IsValidStorageType() const {
  if (dl_.lanes < 1) return false;
  switch (dl_.code) {
    case kInt:
    case kUInt:
      // uint1 is a bool stored one byte per element; a multi-lane uint1
      // would pack bits, which nothing in the runtime or on the wire does.
      return (dl_.bits == 1 && dl_.code == kUInt && dl_.lanes == 1) ||
             (dl_.bits % 8 == 0 && IsPowerOfTwo(dl_.bits) && dl_.bits <= 64);
    case kFloat:
      return dl_.bits == 16 || dl_.bits == 32 || dl_.bits == 64;
    case kBFloat:
      return dl_.bits == 16;
    case kBool:
      return dl_.bits == 8;
    case kOpaqueHandle:
      return dl_.bits == 64;
    default:
      return false;
  }
}

std::string DataType::ToString() const {
  std::string base;
  switch (dl_.code) {
    case kInt:
      base = absl::StrCat("int", dl_.bits);
      break;
    case kUInt:
      base = dl_.bits == 1 ? "bool" : absl::StrCat("uint", dl_.bits);
      break;
    case kFloat:
      base = absl::StrCat("float", dl_.bits);
      break;
    case kBFloat:
      base = absl::StrCat("bfloat", dl_.bits);
      break;
    case kBool:
      base = "bool";
      break;
    case kOpaqueHandle:
      base = "handle";
      break;
    case kComplex:
      base = absl::StrCat("complex", dl_.bits);
      break;
    default:
      base = absl::StrCat("code", int{dl_.code}, "_", dl_.bits);
      break;
  }
  if (dl_.lanes != 1) absl::StrAppend(&base, "x", dl_.lanes);
  return base;
}

}  // namespace tether
