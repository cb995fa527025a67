// Tests of runtime/core/byte_io.h: what the executable, param-dict and CUDA
// blob readers rely on when the bytes are hostile.
#include "runtime/core/byte_io.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

TEST(ByteIoTest, WhatIsWrittenReadsBack) {
  ByteWriter w;
  w.U8(0xab);
  w.U16(0x1234);
  w.U32(0xdeadbeef);
  w.U64(uint64_t{1} << 40);
  w.I32(-5);
  w.I64(std::numeric_limits<int64_t>::min());
  w.F64(-2.5);
  w.String("hello");
  w.PadTo(8);
  EXPECT_EQ(w.out().size() % 8, 0u);
  EXPECT_EQ(w.out().substr(0, 3), std::string("\xab\x34\x12"));  // little-endian

  ByteReader r(w.out(), "test bytes");
  EXPECT_EQ(*r.U8("a"), 0xab);
  EXPECT_EQ(*r.U16("b"), 0x1234);
  EXPECT_EQ(*r.U32("c"), 0xdeadbeef);
  EXPECT_EQ(*r.U64("d"), uint64_t{1} << 40);
  EXPECT_EQ(*r.I32("e"), -5);
  EXPECT_EQ(*r.I64("f"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*r.F64("g"), -2.5);
  EXPECT_EQ(*r.String(16, "h"), "hello");
}

TEST(ByteIoTest, AShortReadNamesTheRegionOffsetAndFieldAndMovesNothing) {
  const std::string bytes("\x01\x02\x03", 3);
  ByteReader r(bytes, "executable header");
  ASSERT_TRUE(r.U16("magic").ok());
  absl::StatusOr<uint32_t> v = r.U32("section count");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(),
              HasSubstr("truncated executable header at offset 2: section count needs 4 bytes "
                        "but only 1 remain"));
  EXPECT_EQ(r.pos(), 2u);
  EXPECT_EQ(*r.U8("last"), 3);
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(r.Bytes(1, "more").ok());
}

TEST(ByteIoTest, StringsLongerThanTheirLimitAreRefusedBeforeTheyAreRead) {
  ByteWriter w;
  w.U32(std::numeric_limits<uint32_t>::max());  // a hostile length, no bytes behind it
  ByteReader r(w.out(), "names");
  absl::StatusOr<std::string> s = r.String(255, "function name");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("names: function name is 4294967295 bytes, at most 255 allowed"));
}

TEST(ByteIoTest, ACountIsBelievedOnlyWhenItsElementsFit) {
  const std::string bytes(16, '\0');
  ByteReader r(bytes, "constants");
  EXPECT_TRUE(r.CheckCount(2, 8, "constants").ok());
  absl::Status s = r.CheckCount(3, 8, "constants");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("3 constants cannot fit in the 16 bytes that remain"));
  EXPECT_FALSE(r.CheckCount(std::numeric_limits<uint64_t>::max(), 1, "x").ok());
}

}  // namespace
}  // namespace tether
