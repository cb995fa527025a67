// .npy interoperability with real NumPy: files NumPy wrote decode exactly, and
// files we write for every dtype load in /usr/bin/python3's NumPy with the
// right dtype, shape and values.
#include "client/npy.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_functions.h"

namespace tether::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// np.save(np.arange(6, dtype=np.float32).reshape(2, 3)) from NumPy 1.24.
constexpr char kNumpyFloat32[] =
    "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a2046616c"
    "73"
    "652c20277368617065273a2028322c2033292c207d2020202020202020202020202020202020202020202020202020"
    "20"
    "202020202020202020202020202020202020202020202020202020202020200a000000000000803f00000040000040"
    "40"
    "000080400000a040";
// np.save(np.array([1, 258], dtype='>i4')): big-endian.
constexpr char kNumpyBigEndianInt32[] =
    "934e554d5059010076007b276465736372273a20273e6934272c2027666f727472616e5f6f72646572273a2046616c"
    "73"
    "652c20277368617065273a2028322c292c207d20202020202020202020202020202020202020202020202020202020"
    "20"
    "202020202020202020202020202020202020202020202020202020202020200a0000000100000102";

TEST(NpyTest, DecodesWhatNumpyWrote) {
  auto t = DecodeNpy(absl::HexStringToBytes(kNumpyFloat32));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->dtype(), DataType::Float(32));
  EXPECT_THAT(std::vector<int64_t>((*t)->shape().begin(), (*t)->shape().end()), ElementsAre(2, 3));
  EXPECT_THAT(tether::testing::ReadFloats(*t), ElementsAre(0, 1, 2, 3, 4, 5));
  auto be = DecodeNpy(absl::HexStringToBytes(kNumpyBigEndianInt32));
  ASSERT_TRUE(be.ok()) << be.status();
  const int32_t* v = static_cast<const int32_t*>((*be)->element_data());
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], 258);
}

TEST(NpyTest, RoundTripsEveryDtypeAndShape) {
  for (const char* name : {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
                           "int64", "uint8", "uint16", "uint32", "uint64", "bool"}) {
    DataType dtype = *DataType::Parse(name);
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {0}, {3}, {2, 3, 4}, {1, 0, 5}}) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::string bytes(static_cast<size_t>(n * dtype.bytes()), '\0');
      for (size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<char>(dtype.is_bool() ? (i % 2) : i * 7 + 3);
      auto t = Tensor::FromBytes(shape, dtype, bytes.data(), bytes.size());
      ASSERT_TRUE(t.ok());
      auto encoded = EncodeNpy(*t);
      ASSERT_TRUE(encoded.ok()) << encoded.status();
      EXPECT_EQ((encoded->size() - bytes.size()) % 64, 0u) << "header must align data to 64 bytes";
      auto back = DecodeNpy(*encoded);
      ASSERT_TRUE(back.ok()) << name << ": " << back.status();
      EXPECT_EQ((*back)->dtype(), dtype);
      EXPECT_EQ(std::vector<int64_t>((*back)->shape().begin(), (*back)->shape().end()), shape);
      std::string got(bytes.size(), '\0');
      ASSERT_TRUE(back->CopyToBytes(got.data(), got.size()).ok());
      EXPECT_EQ(got, bytes) << name;
    }
  }
}

TEST(NpyTest, MalformedFilesAreClearErrors) {
  std::string good = absl::HexStringToBytes(kNumpyFloat32);
  EXPECT_THAT(std::string(DecodeNpy("hello").status().message()), HasSubstr("not a .npy file"));
  for (size_t n = 0; n < good.size(); ++n) {
    auto t = DecodeNpy(good.substr(0, n));
    EXPECT_FALSE(t.ok()) << "truncated to " << n;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  }
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_THAT(std::string(DecodeNpy(fortran).status().message()), HasSubstr("Fortran"));
  std::string complex = good;
  complex.replace(complex.find("<f4"), 3, "<c8");
  EXPECT_THAT(std::string(DecodeNpy(complex).status().message()),
              HasSubstr("unsupported .npy data type"));
  std::string negative = good;
  negative.replace(negative.find("(2, 3)"), 6, "(2,-3)");
  EXPECT_EQ(DecodeNpy(negative).status().code(), absl::StatusCode::kInvalidArgument);
  std::string huge_header = good;
  huge_header[8] = '\xff';
  huge_header[9] = '\xff';
  EXPECT_THAT(std::string(DecodeNpy(huge_header).status().message()),
              HasSubstr("runs past the end"));
}

TEST(NpyTest, NumpyLoadsWhatWeWrite) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("tether_npy_", getpid());
  std::filesystem::create_directories(dir);
  std::string checks;
  for (const char* name : {"float16", "float32", "float64", "int8", "int16", "int32", "int64",
                           "uint8", "uint16", "uint32", "uint64", "bool", "bfloat16"}) {
    DataType dtype = *DataType::Parse(name);
    int64_t shape[] = {2, 3};
    std::string bytes(static_cast<size_t>(6 * dtype.bytes()), '\0');
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>(dtype.is_bool() ? (i % 2) : i + 1);
    auto t = Tensor::FromBytes(shape, dtype, bytes.data(), bytes.size());
    ASSERT_TRUE(t.ok());
    std::string path = (dir / absl::StrCat(name, ".npy")).string();
    ASSERT_TRUE(WriteNpyFile(path, *t).ok());
    std::string expected_dtype = dtype.is_bfloat16() ? "|V2" : (dtype.is_bool() ? "bool" : name);
    absl::StrAppend(&checks, "a = np.load('", path, "'); assert a.shape == (2, 3), a.shape; ",
                    "assert (str(a.dtype) == '", expected_dtype, "' or a.dtype.str == '",
                    expected_dtype, "'), a.dtype; assert a.tobytes() == bytes.fromhex('",
                    absl::BytesToHexString(bytes), "'), '", name, "'\n");
  }
  std::string script = (dir / "check.py").string();
  std::ofstream(script) << "import numpy as np\n" << checks << "print('numpy loaded every file')\n";
  int rc = std::system(absl::StrCat("/usr/bin/python3 ", script).c_str());
  EXPECT_EQ(rc, 0)
      << "NumPy (python3-numpy, installed by deploy/install-deps.sh) rejected our .npy files";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tether::client
