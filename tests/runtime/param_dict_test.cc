// Tests of the param dict format: the exact reference byte layout, round trips
// of every dtype, and clean failures for truncated, corrupt and hostile input.
#include "runtime/module/param_dict.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

Tensor MakeTensor(std::vector<int64_t> shape, DataType dtype, uint8_t seed = 1) {
  absl::StatusOr<int64_t> n = CheckedNumBytes(shape, dtype);
  EXPECT_TRUE(n.ok());
  std::string bytes(static_cast<size_t>(*n), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(seed + i * 7);
  if (dtype.is_bool()) {
    for (char& c : bytes) c = static_cast<char>(c & 1);
  }
  absl::StatusOr<Tensor> t = Tensor::FromBytes(shape, dtype, bytes.data(), bytes.size());
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

std::string Bytes(const Tensor& t) {
  std::string out(static_cast<size_t>(*CheckedNumBytes(t->shape(), t->dtype())), '\0');
  EXPECT_TRUE(t.CopyToBytes(out.data(), out.size()).ok());
  return out;
}

void ExpectSame(const ParamList& a, const ParamList& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second->dtype(), b[i].second->dtype()) << a[i].first;
    EXPECT_THAT(std::vector<int64_t>(b[i].second->shape().begin(), b[i].second->shape().end()),
                ::testing::ElementsAreArray(a[i].second->shape()))
        << a[i].first;
    EXPECT_EQ(Bytes(a[i].second), Bytes(b[i].second)) << a[i].first;
    EXPECT_EQ(b[i].second->device(), Device::Cpu());
  }
}

std::string U64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

TEST(ParamDictTest, MatchesTheReferenceByteLayout) {
  float values[] = {1.0f, 2.0f};
  const int64_t shape[] = {2};
  absl::StatusOr<Tensor> t = Tensor::FromBytes(shape, DataType::Float(32), values, sizeof(values));
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> bytes = SaveParamDict({{"x", *t}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::string expected = U64(0xF7E58D4F05049CB7ULL) + U64(0) + U64(1) + U64(1) + "x" + U64(1) +
                         U64(0xDD5E40F096B4A13FULL) + U64(0) +
                         std::string("\x01\0\0\0\0\0\0\0", 8) +  // device cpu:0
                         std::string("\x01\0\0\0", 4) +          // ndim
                         std::string("\x02\x20\x01\0", 4) +      // float32
                         U64(2) + U64(8) + std::string("\0\0\x80\x3f\0\0\0\x40", 8);
  EXPECT_EQ(*bytes, expected);
  absl::StatusOr<ParamList> back = LoadParamDict(expected);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame({{"x", *t}}, *back);
}

TEST(ParamDictTest, RoundTripsEveryDtypeAndShape) {
  ParamList params;
  const DataType dtypes[] = {
      DataType::Float(16), DataType::Float(32),    DataType::Float(64), DataType::BFloat16(),
      DataType::Int(8),    DataType::Int(16),      DataType::Int(32),   DataType::Int(64),
      DataType::UInt(8),   DataType::UInt(16),     DataType::UInt(32),  DataType::UInt(64),
      DataType::Bool(),    DataType::Float(32, 4),
  };
  uint8_t seed = 3;
  for (DataType dt : dtypes) {
    params.emplace_back(absl::StrCat("p_", dt.ToString()), MakeTensor({2, 3}, dt, seed++));
  }
  params.emplace_back("scalar", MakeTensor({}, DataType::Float(32)));   // 0-d
  params.emplace_back("empty", MakeTensor({0, 4}, DataType::Int(32)));  // no elements
  params.emplace_back("", MakeTensor({1}, DataType::Int(8)));           // empty name
  params.emplace_back("name with \"quotes\"\n and \xC3\xA9",
                      MakeTensor({5, 1, 2}, DataType::Int(16)));
  absl::StatusOr<std::string> bytes = SaveParamDict(params);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ParamList> back = LoadParamDict(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(params, *back);
  EXPECT_EQ((*back)[params.size() - 4].second->ndim(), 0);

  // And an empty dict.
  bytes = SaveParamDict({});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 32u);
  back = LoadParamDict(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
}

TEST(ParamDictTest, FileRoundTripAndMissingFile) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(dir ? dir : "/tmp", "/tether_params_", getpid(), ".bin");
  ParamList params = {{"w", MakeTensor({4, 4}, DataType::Float(32))}};
  ASSERT_TRUE(SaveParamDictToFile(path, params).ok());
  absl::StatusOr<ParamList> back = LoadParamDictFromFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(params, *back);
  unlink(path.c_str());
  EXPECT_EQ(LoadParamDictFromFile(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(ParamDictTest, EveryTruncationFailsCleanly) {
  ParamList params = {{"alpha", MakeTensor({3, 2}, DataType::Float(32))},
                      {"beta", MakeTensor({4}, DataType::Int(64))}};
  absl::StatusOr<std::string> bytes = SaveParamDict(params);
  ASSERT_TRUE(bytes.ok());
  for (size_t n = 0; n < bytes->size(); ++n) {
    absl::StatusOr<ParamList> r = LoadParamDict(absl::string_view(*bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes loaded";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  std::string longer = *bytes + "x";
  absl::StatusOr<ParamList> r = LoadParamDict(longer);
  EXPECT_THAT(r.status().message(), HasSubstr("1 trailing bytes"));
}

// Offsets in a one-tensor dict named "x" with ndim 1 (see the layout test).
constexpr size_t kNameCountAt = 16;
constexpr size_t kNameLenAt = 24;
constexpr size_t kTensorCountAt = 33;
constexpr size_t kRecordAt = 41;
constexpr size_t kDeviceAt = kRecordAt + 16;
constexpr size_t kNdimAt = kRecordAt + 24;
constexpr size_t kDtypeAt = kRecordAt + 28;
constexpr size_t kShapeAt = kRecordAt + 32;
constexpr size_t kByteSizeAt = kRecordAt + 40;

std::string OneTensorDict() {
  absl::StatusOr<std::string> bytes = SaveParamDict({{"x", MakeTensor({2}, DataType::Float(32))}});
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

absl::Status LoadPatched(size_t at, absl::string_view patch) {
  std::string bytes = OneTensorDict();
  bytes.replace(at, patch.size(), patch.data(), patch.size());
  return LoadParamDict(bytes).status();
}

TEST(ParamDictTest, HugeCountsAreRejectedWithoutAllocating) {
  absl::Status s = LoadPatched(kNameCountAt, U64(uint64_t{1} << 60));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("name count 1152921504606846976 cannot fit"));
  s = LoadPatched(kNameLenAt, U64(~uint64_t{0}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("truncated"));
  s = LoadPatched(kByteSizeAt, U64(uint64_t{1} << 62));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // A shape whose byte size overflows int64.
  s = LoadPatched(kShapeAt, U64(uint64_t{1} << 62));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParamDictTest, CorruptFieldsAreRejected) {
  struct Case {
    size_t at;
    std::string patch;
    const char* fragment;
  };
  const Case cases[] = {
      {0, U64(0x1234), "not a param dict"},
      {kTensorCountAt, U64(2), "tensor count 2 differs from name count 1"},
      {kRecordAt, U64(0x99), "has magic"},
      {kDeviceAt, std::string("\x02\0\0\0", 4), "device type 2, expected 1 (cpu)"},
      {kNdimAt, std::string("\x21\0\0\0", 4), "ndim 33"},
      {kNdimAt, std::string("\xff\xff\xff\xff", 4), "ndim -1"},
      {kDtypeAt, std::string("\x02\x07\x01\0", 4), "invalid dtype"},
      {kDtypeAt, std::string("\x09\x20\x01\0", 4), "invalid dtype"},
      {kDtypeAt, std::string("\x02\x20\x00\0", 4), "invalid dtype"},  // 0 lanes
      {kDtypeAt, std::string("\x03\x40\x01\0", 4), "invalid dtype"},  // handle
      {kShapeAt, U64(~uint64_t{0}), "negative dimension"},
      {kByteSizeAt, U64(4), "has 4 data bytes, expected 8"},
  };
  for (const Case& c : cases) {
    absl::Status s = LoadPatched(c.at, c.patch);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.fragment;
    EXPECT_THAT(s.message(), HasSubstr(c.fragment));
  }
}

TEST(ParamDictTest, EveryByteFlipLoadsOrFailsCleanly) {
  ParamList params = {{"a", MakeTensor({2, 2}, DataType::Float(16))},
                      {"bc", MakeTensor({3}, DataType::Int(32))}};
  absl::StatusOr<std::string> bytes = SaveParamDict(params);
  ASSERT_TRUE(bytes.ok());
  for (size_t i = 0; i < bytes->size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string corrupt = *bytes;
      corrupt[i] = static_cast<char>(corrupt[i] ^ mask);
      absl::StatusOr<ParamList> r = LoadParamDict(corrupt);
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << i;
      }
    }
  }
}

TEST(ParamDictTest, DuplicateNamesAreRejected) {
  ParamList params = {{"w", MakeTensor({1}, DataType::Int(8))},
                      {"w", MakeTensor({1}, DataType::Int(8))}};
  absl::StatusOr<std::string> saved = SaveParamDict(params);
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kInvalidArgument);

  // Hand-build a file with a duplicate by renaming "v" to "w".
  ParamList distinct = {{"w", MakeTensor({1}, DataType::Int(8))},
                        {"v", MakeTensor({1}, DataType::Int(8))}};
  absl::StatusOr<std::string> bytes = SaveParamDict(distinct);
  ASSERT_TRUE(bytes.ok());
  size_t at = bytes->find('v', 24);
  ASSERT_NE(at, std::string::npos);
  (*bytes)[at] = 'w';
  absl::StatusOr<ParamList> r = LoadParamDict(*bytes);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("duplicate param name w"));
}

TEST(ParamDictTest, SaveRejectsNullTensors) {
  absl::StatusOr<std::string> saved = SaveParamDict({{"null", Tensor()}});
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(saved.status().message(), HasSubstr("param null is null"));
}

}  // namespace
}  // namespace tether
