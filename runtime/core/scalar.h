// Scalar element types: the C++ storage type of each scalar DataType, one
// dispatch from a DataType to it (instead of an if-ladder per use), and
// conversions to and from double, including IEEE half and bfloat16 (round
// to nearest even, NaN kept a NaN, overflow to infinity).
//
//   DispatchScalarType(dtype, [&](auto tag) {
//     using T = decltype(tag);  // int8_t ... uint64_t, float, double, Bool, Float16, BFloat16
//     static_cast<T*>(data)[i] = ScalarFromDouble<T>(v);
//   });
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_RUNTIME_CORE_SCALAR_H_
#define TETHER_RUNTIME_CORE_SCALAR_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/core/data_type.h"

namespace tether {

// Storage of the scalar types C++ has no arithmetic type for: one byte 0/1
// (bool and uint1), and the bits of a 16-bit float.
struct Bool {
  uint8_t bits;
};
struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      const float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);  // nan, inf
  if (abs >= 0x477ff000u) return sign | 0x7c00;                                 // overflow
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    float a;
    std::memcpy(&a, &abs, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

inline float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Calls f(T{}) with T the storage type of the scalar `dtype` and returns
// true; false, without calling f, for a vector dtype or one with no storage
// type here (sub-byte integers other than uint1, float8, ...).
template <typename F>
bool DispatchScalarType(DataType dtype, F&& f) {
  if (dtype.lanes() != 1) return false;
  if (dtype.is_bool()) return f(Bool{}), true;
  if (dtype.is_bfloat16()) return f(BFloat16{}), true;
  switch (dtype.bits()) {
    case 8:
      if (dtype.is_int()) return f(int8_t{}), true;
      if (dtype.is_uint()) return f(uint8_t{}), true;
      return false;
    case 16:
      if (dtype.is_int()) return f(int16_t{}), true;
      if (dtype.is_uint()) return f(uint16_t{}), true;
      if (dtype.is_float()) return f(Float16{}), true;
      return false;
    case 32:
      if (dtype.is_int()) return f(int32_t{}), true;
      if (dtype.is_uint()) return f(uint32_t{}), true;
      if (dtype.is_float()) return f(float{}), true;
      return false;
    case 64:
      if (dtype.is_int()) return f(int64_t{}), true;
      if (dtype.is_uint()) return f(uint64_t{}), true;
      if (dtype.is_float()) return f(double{}), true;
      return false;
    default:
      return false;
  }
}

// `v` as a T: a C++ conversion for the arithmetic types (the caller keeps
// integers in range), nonzero for Bool, rounded for the 16-bit floats.
template <typename T>
T ScalarFromDouble(double v) {
  if constexpr (std::is_same_v<T, Bool>) {
    return Bool{static_cast<uint8_t>(v != 0)};
  } else if constexpr (std::is_same_v<T, Float16>) {
    return Float16{FloatToHalf(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{FloatToBFloat16(static_cast<float>(v))};
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double ScalarToDouble(T v) {
  if constexpr (std::is_same_v<T, Bool>) {
    return v.bits != 0 ? 1.0 : 0.0;
  } else if constexpr (std::is_same_v<T, Float16>) {
    return HalfToFloat(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16ToFloat(v.bits);
  } else {
    return static_cast<double>(v);
  }
}

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_SCALAR_H_
