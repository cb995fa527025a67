// DataType: an element type (code, bits, lanes) with parse and print.
// It is layout-compatible with DLDataType, so it converts for free.
#ifndef TETHER_RUNTIME_CORE_DATA_TYPE_H_
#define TETHER_RUNTIME_CORE_DATA_TYPE_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether {

// DLPack 0.6 has no bool code; this is the value newer DLPack gives kDLBool.
inline constexpr uint8_t kDLBoolCode = 6;

// Thread contract: a value type; thread-compatible.
class DataType {
 public:
  enum Code : uint8_t {
    kInt = kDLInt,
    kUInt = kDLUInt,
    kFloat = kDLFloat,
    kOpaqueHandle = kDLOpaqueHandle,
    kBFloat = kDLBfloat,
    kComplex = kDLComplex,
    kBool = kDLBoolCode,
  };

  constexpr DataType() : dl_{kDLFloat, 32, 1} {}
  constexpr DataType(uint8_t code, uint8_t bits, uint16_t lanes = 1) : dl_{code, bits, lanes} {}
  constexpr explicit DataType(DLDataType dl) : dl_(dl) {}

  static constexpr DataType Float(int bits, int lanes = 1) { return DataType(kFloat, bits, lanes); }
  static constexpr DataType Int(int bits, int lanes = 1) { return DataType(kInt, bits, lanes); }
  static constexpr DataType UInt(int bits, int lanes = 1) { return DataType(kUInt, bits, lanes); }
  static constexpr DataType BFloat16() { return DataType(kBFloat, 16, 1); }
  static constexpr DataType Bool() { return DataType(kBool, 8, 1); }

  // Parses "float32", "float16", "bfloat16", "int8".."int64", "uint8".."uint64",
  // "bool", "handle", and any of them with lanes ("float32x4").
  static absl::StatusOr<DataType> Parse(absl::string_view text);

  uint8_t code() const { return dl_.code; }
  uint8_t bits() const { return dl_.bits; }
  uint16_t lanes() const { return dl_.lanes; }
  // Bytes of one element, lanes included; bool is one byte.
  int64_t bytes() const { return (int64_t{dl_.bits} * dl_.lanes + 7) / 8; }
  bool is_float() const { return dl_.code == kFloat; }
  bool is_bfloat16() const { return dl_.code == kBFloat && dl_.bits == 16; }
  bool is_int() const { return dl_.code == kInt; }
  bool is_uint() const { return dl_.code == kUInt; }
  bool is_bool() const { return dl_.code == kBool || (dl_.code == kUInt && dl_.bits == 1); }

  // Whether this is a type tensors may hold: a known code, bits a power of two
  // that is a multiple of 8 (or uint1, a bool of one lane, stored in a byte),
  // lanes >= 1. Sub-byte types with several lanes are refused: bytes() would
  // pack them, and no kernel, codec or file reader does.
  bool IsValidStorageType() const;

  std::string ToString() const;
  DLDataType dl() const { return dl_; }
  operator DLDataType() const { return dl_; }  // NOLINT(google-explicit-constructor)

  friend bool operator==(const DataType& a, const DataType& b) {
    return a.dl_.code == b.dl_.code && a.dl_.bits == b.dl_.bits && a.dl_.lanes == b.dl_.lanes;
  }
  friend bool operator!=(const DataType& a, const DataType& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const DataType& t) {
    return H::combine(std::move(h), t.dl_.code, t.dl_.bits, t.dl_.lanes);
  }

 private:
  DLDataType dl_;
};

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_DATA_TYPE_H_
