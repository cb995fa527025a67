// Tests of runtime/core/scalar.h: the dtype -> storage type dispatch and the
// 16-bit float conversions every part of the tree shares.
#include "runtime/core/scalar.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "gtest/gtest.h"

namespace tether {
namespace {

// The storage type DispatchScalarType picks for `dtype`, by name.
std::string StorageOf(DataType dtype) {
  std::string name = "none";
  DispatchScalarType(dtype, [&](auto tag) {
    using T = decltype(tag);
    EXPECT_EQ(sizeof(T), static_cast<size_t>(dtype.bytes())) << dtype.ToString();
    if constexpr (std::is_same_v<T, Bool>) name = "Bool";
    if constexpr (std::is_same_v<T, Float16>) name = "Float16";
    if constexpr (std::is_same_v<T, BFloat16>) name = "BFloat16";
    if constexpr (std::is_same_v<T, float>) name = "float";
    if constexpr (std::is_same_v<T, double>) name = "double";
    if constexpr (std::is_integral_v<T>) {
      name = (std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
    }
  });
  return name;
}

TEST(ScalarTest, EveryScalarDTypeHasItsStorageType) {
  EXPECT_EQ(StorageOf(DataType::Bool()), "Bool");
  EXPECT_EQ(StorageOf(DataType::UInt(1)), "Bool");
  EXPECT_EQ(StorageOf(DataType::Int(8)), "int8");
  EXPECT_EQ(StorageOf(DataType::Int(16)), "int16");
  EXPECT_EQ(StorageOf(DataType::Int(32)), "int32");
  EXPECT_EQ(StorageOf(DataType::Int(64)), "int64");
  EXPECT_EQ(StorageOf(DataType::UInt(8)), "uint8");
  EXPECT_EQ(StorageOf(DataType::UInt(16)), "uint16");
  EXPECT_EQ(StorageOf(DataType::UInt(32)), "uint32");
  EXPECT_EQ(StorageOf(DataType::UInt(64)), "uint64");
  EXPECT_EQ(StorageOf(DataType::Float(16)), "Float16");
  EXPECT_EQ(StorageOf(DataType::BFloat16()), "BFloat16");
  EXPECT_EQ(StorageOf(DataType::Float(32)), "float");
  EXPECT_EQ(StorageOf(DataType::Float(64)), "double");
}

TEST(ScalarTest, VectorsAndTypesWithoutStorageAreRefused) {
  bool called = false;
  auto f = [&](auto) { called = true; };
  EXPECT_FALSE(DispatchScalarType(DataType::Float(32, 4), f));
  EXPECT_FALSE(DispatchScalarType(DataType::Int(4), f));
  EXPECT_FALSE(DispatchScalarType(DataType::Float(8), f));
  EXPECT_FALSE(called);
}

TEST(ScalarTest, HalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);               // the largest half
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);               // rounds past it: infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // below half of it: zero
  // Ties go to the even mantissa: 1 + 2^-11 is halfway between 0x3c00 and 0x3c01.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

TEST(ScalarTest, HalfToFloatIsExact) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives a round trip
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h);
  }
}

TEST(ScalarTest, BFloat16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 0x3f80 and 0x3f81: the even one.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(ScalarTest, DoublesConvertThroughEveryStorageType) {
  EXPECT_EQ(ScalarFromDouble<Bool>(2.5).bits, 1);
  EXPECT_EQ(ScalarFromDouble<Bool>(0.0).bits, 0);
  EXPECT_EQ(ScalarToDouble(Bool{1}), 1.0);
  EXPECT_EQ(ScalarFromDouble<Float16>(1.0).bits, 0x3c00);
  EXPECT_EQ(ScalarToDouble(Float16{0xc000}), -2.0);
  EXPECT_EQ(ScalarFromDouble<BFloat16>(1.0).bits, 0x3f80);
  EXPECT_EQ(ScalarFromDouble<int8_t>(-7.0), -7);
  EXPECT_EQ(ScalarToDouble(uint64_t{1} << 40), std::ldexp(1.0, 40));
}

}  // namespace
}  // namespace tether
