// Tests of DataType: parsing and printing every supported element type, lanes,
// the rejected spellings, and element sizes.
#include "runtime/core/data_type.h"

#include <string>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

class DataTypeRoundTripTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DataTypeRoundTripTest, ParseThenPrintGivesTheSameText) {
  absl::StatusOr<DataType> t = DataType::Parse(GetParam());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ToString(), GetParam());
  EXPECT_TRUE(t->IsValidStorageType());
  absl::StatusOr<DataType> again = DataType::Parse(t->ToString());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *t);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DataTypeRoundTripTest,
                         ::testing::Values("float16", "float32", "float64", "bfloat16", "int8",
                                           "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                           "uint64", "bool", "handle", "float32x4", "int8x16",
                                           "bfloat16x2", "uint64x3", "boolx4", "float16x65535"));

TEST(DataTypeTest, ParsesFieldsOfEachCode) {
  struct Case {
    const char* text;
    uint8_t code;
    int bits;
    int lanes;
  };
  const Case cases[] = {
      {"float16", DataType::kFloat, 16, 1},   {"float32", DataType::kFloat, 32, 1},
      {"float64", DataType::kFloat, 64, 1},   {"bfloat16", DataType::kBFloat, 16, 1},
      {"int8", DataType::kInt, 8, 1},         {"int16", DataType::kInt, 16, 1},
      {"int32", DataType::kInt, 32, 1},       {"int64", DataType::kInt, 64, 1},
      {"uint8", DataType::kUInt, 8, 1},       {"uint16", DataType::kUInt, 16, 1},
      {"uint32", DataType::kUInt, 32, 1},     {"uint64", DataType::kUInt, 64, 1},
      {"bool", DataType::kBool, 8, 1},        {"handle", DataType::kOpaqueHandle, 64, 1},
      {"float32x4", DataType::kFloat, 32, 4}, {"int64x2", DataType::kInt, 64, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<DataType> t = DataType::Parse(c.text);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->code(), c.code);
    EXPECT_EQ(t->bits(), c.bits);
    EXPECT_EQ(t->lanes(), c.lanes);
  }
}

TEST(DataTypeTest, FactoriesMatchParsedTypes) {
  EXPECT_EQ(*DataType::Parse("float32"), DataType::Float(32));
  EXPECT_EQ(*DataType::Parse("float16x8"), DataType::Float(16, 8));
  EXPECT_EQ(*DataType::Parse("int32"), DataType::Int(32));
  EXPECT_EQ(*DataType::Parse("uint8"), DataType::UInt(8));
  EXPECT_EQ(*DataType::Parse("bfloat16"), DataType::BFloat16());
  EXPECT_EQ(*DataType::Parse("bool"), DataType::Bool());
  EXPECT_EQ(DataType(), DataType::Float(32));
}

class DataTypeRejectTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DataTypeRejectTest, RejectsWithValueErrorQuotingTheText) {
  absl::StatusOr<DataType> t = DataType::Parse(GetParam());
  ASSERT_FALSE(t.ok()) << GetParam() << " parsed as " << t->ToString();
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetErrorKind(t.status()), ErrorKind::kValue);
  EXPECT_THAT(t.status().message(), HasSubstr(absl::StrCat("\"", GetParam(), "\"")));
}

INSTANTIATE_TEST_SUITE_P(BadSpellings, DataTypeRejectTest,
                         ::testing::Values("float7", "int3", "foo", "float32x0", "", "float",
                                           "float32x", "floatx4", "int128", "uint0", "float8",
                                           "bfloat32", "float32x65536", "float32x-1", "Float32",
                                           "int32xfour", "x4", "float 32", "float32x+4",
                                           "float32x 4", "int+8", "uint1x8", "uint1x2"));

TEST(DataTypeTest, ErrorsNameTheProblem) {
  EXPECT_THAT(DataType::Parse("foo").status().message(), HasSubstr("unknown data type"));
  EXPECT_THAT(DataType::Parse("int3").status().message(), HasSubstr("unsupported data type"));
  EXPECT_THAT(DataType::Parse("float32x0").status().message(), HasSubstr("invalid lanes"));
  EXPECT_THAT(DataType::Parse("float").status().message(), HasSubstr("invalid bit width"));
}

TEST(DataTypeTest, BytesCountLanesAndRoundBoolUp) {
  EXPECT_EQ(DataType::Float(16).bytes(), 2);
  EXPECT_EQ(DataType::Float(32).bytes(), 4);
  EXPECT_EQ(DataType::Float(64).bytes(), 8);
  EXPECT_EQ(DataType::BFloat16().bytes(), 2);
  EXPECT_EQ(DataType::Int(8).bytes(), 1);
  EXPECT_EQ(DataType::Int(64).bytes(), 8);
  EXPECT_EQ(DataType::UInt(16).bytes(), 2);
  EXPECT_EQ(DataType::Bool().bytes(), 1);
  EXPECT_EQ(DataType::UInt(1).bytes(), 1);
  EXPECT_EQ(DataType::Float(32, 4).bytes(), 16);
  EXPECT_EQ(DataType::Int(8, 3).bytes(), 3);
  EXPECT_EQ(DataType::UInt(1, 8).bytes(), 1);
  EXPECT_EQ(DataType::UInt(1, 9).bytes(), 2);
}

TEST(DataTypeTest, PredicatesFollowTheCode) {
  EXPECT_TRUE(DataType::Float(32).is_float());
  EXPECT_FALSE(DataType::BFloat16().is_float());
  EXPECT_TRUE(DataType::BFloat16().is_bfloat16());
  EXPECT_TRUE(DataType::Int(32).is_int());
  EXPECT_FALSE(DataType::Int(32).is_uint());
  EXPECT_TRUE(DataType::UInt(8).is_uint());
  EXPECT_TRUE(DataType::Bool().is_bool());
  EXPECT_TRUE(DataType::UInt(1).is_bool());
  EXPECT_FALSE(DataType::UInt(8).is_bool());
}

TEST(DataTypeTest, OneBitUnsignedPrintsAsBool) {
  EXPECT_TRUE(DataType::UInt(1).IsValidStorageType());
  EXPECT_EQ(DataType::UInt(1).ToString(), "bool");
  EXPECT_EQ(DataType::UInt(1, 4).ToString(), "boolx4");
}

TEST(DataTypeTest, InvalidStorageTypesAreDetected) {
  EXPECT_FALSE(DataType(DataType::kFloat, 7).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kInt, 1).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kInt, 24).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kInt, 128).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kBFloat, 32).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kBool, 1).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kFloat, 32, 0).IsValidStorageType());
  EXPECT_FALSE(DataType(DataType::kComplex, 64).IsValidStorageType());
  EXPECT_FALSE(DataType(99, 32).IsValidStorageType());
}

TEST(DataTypeTest, PrintsUnusualCodesWithoutFailing) {
  EXPECT_EQ(DataType(DataType::kComplex, 64).ToString(), "complex64");
  EXPECT_EQ(DataType(99, 32, 2).ToString(), "code99_32x2");
}

TEST(DataTypeTest, ConvertsToAndFromDLDataType) {
  DataType t = DataType::Float(16, 4);
  DLDataType dl = t;
  EXPECT_EQ(dl.code, kDLFloat);
  EXPECT_EQ(dl.bits, 16);
  EXPECT_EQ(dl.lanes, 4);
  EXPECT_EQ(DataType(dl), t);
  EXPECT_NE(DataType::Float(16), t);
}

TEST(DataTypeTest, EqualTypesHashEqually) {
  EXPECT_EQ(absl::HashOf(DataType::Int(32)), absl::HashOf(*DataType::Parse("int32")));
}

}  // namespace
}  // namespace tether
