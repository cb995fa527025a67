// TensorProto -> Tensor (tensor_proto.cc): every supported dtype from
// raw_data and from its typed field, size mismatches, unsupported types,
// external data, and the .pb files of the ONNX test suites.
#include "compiler/frontend/onnx/tensor_proto.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)
using ::onnx::TensorProto;

TensorProto Proto(int type, std::vector<int64_t> dims) {
  TensorProto p;
  p.set_name("t");
  p.set_data_type(type);
  for (int64_t d : dims) p.add_dims(d);
  return p;
}

struct DTypeCase {
  int onnx_type;
  DataType dtype;
};

class TensorProtoDTypeTest : public ::testing::TestWithParam<DTypeCase> {};

TEST_P(TensorProtoDTypeTest, RawDataRoundTripsThroughToTensorProto) {
  const DTypeCase& c = GetParam();
  Tensor want = MakeTensorOf(c.dtype, {2, 2}, {0, 1, 2, 3});
  absl::StatusOr<Tensor> got = TensorFromProto(ToTensorProto("t", want));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(TensorsNear(*got, want));
  absl::StatusOr<int> back = DataTypeToOnnx(c.dtype);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, c.onnx_type);
  absl::StatusOr<DataType> forth = DataTypeFromOnnx(c.onnx_type);
  ASSERT_TRUE(forth.ok());
  EXPECT_EQ(*forth, c.dtype);
}

TEST_P(TensorProtoDTypeTest, TypedFieldGivesTheSameValues) {
  const DTypeCase& c = GetParam();
  TensorProto p = Proto(c.onnx_type, {3});
  const std::vector<double> values = {0, 1, 3};
  for (double v : values) {
    switch (c.onnx_type) {
      case TensorProto::FLOAT:
        p.add_float_data(static_cast<float>(v));
        break;
      case TensorProto::DOUBLE:
        p.add_double_data(v);
        break;
      case TensorProto::INT64:
        p.add_int64_data(static_cast<int64_t>(v));
        break;
      case TensorProto::UINT32:
      case TensorProto::UINT64:
        p.add_uint64_data(static_cast<uint64_t>(v));
        break;
      case TensorProto::FLOAT16:
      case TensorProto::BFLOAT16: {
        // The bits of the half value, widened into int32_data.
        Tensor h = MakeTensorOf(c.dtype, {}, {v});
        p.add_int32_data(*static_cast<const uint16_t*>(h->element_data()));
        break;
      }
      default:
        p.add_int32_data(static_cast<int32_t>(v));
        break;
    }
  }
  absl::StatusOr<Tensor> got = TensorFromProto(p);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(TensorsNear(*got, MakeTensorOf(c.dtype, {3}, values)));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, TensorProtoDTypeTest,
                         ::testing::Values(DTypeCase{TensorProto::FLOAT, DataType::Float(32)},
                                           DTypeCase{TensorProto::DOUBLE, DataType::Float(64)},
                                           DTypeCase{TensorProto::FLOAT16, DataType::Float(16)},
                                           DTypeCase{TensorProto::BFLOAT16, DataType::BFloat16()},
                                           DTypeCase{TensorProto::INT8, DataType::Int(8)},
                                           DTypeCase{TensorProto::INT16, DataType::Int(16)},
                                           DTypeCase{TensorProto::INT32, DataType::Int(32)},
                                           DTypeCase{TensorProto::INT64, DataType::Int(64)},
                                           DTypeCase{TensorProto::UINT8, DataType::UInt(8)},
                                           DTypeCase{TensorProto::UINT16, DataType::UInt(16)},
                                           DTypeCase{TensorProto::UINT32, DataType::UInt(32)},
                                           DTypeCase{TensorProto::UINT64, DataType::UInt(64)},
                                           DTypeCase{TensorProto::BOOL, DataType::Bool()}));

TEST(TensorProtoTest, NegativeInt8FromInt32DataKeepsSign) {
  TensorProto p = Proto(TensorProto::INT8, {2});
  p.add_int32_data(-5);
  p.add_int32_data(127);
  absl::StatusOr<Tensor> got = TensorFromProto(p);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ReadTensor<int8_t>(*got), (std::vector<int8_t>{-5, 127}));
}

TEST(TensorProtoTest, ScalarHasRankZero) {
  TensorProto p = Proto(TensorProto::FLOAT, {});
  p.add_float_data(2.5f);
  absl::StatusOr<Tensor> got = TensorFromProto(p);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->ndim(), 0);
  EXPECT_EQ(ReadTensor<float>(*got), std::vector<float>{2.5f});
}

TEST(TensorProtoTest, SizeMismatchNamesTensorAndCounts) {
  TensorProto p = Proto(TensorProto::FLOAT, {2, 3});
  p.set_name("weights");
  p.add_float_data(1.0f);
  absl::StatusOr<Tensor> got = TensorFromProto(p);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("tensor 'weights'"));
  EXPECT_THAT(got.status().message(), HasSubstr("needs 24 bytes of data, got 4"));
}

TEST(TensorProtoTest, RawDataSizeMismatchIsInvalid) {
  TensorProto p = Proto(TensorProto::INT64, {2});
  p.set_raw_data(std::string(12, '\0'));
  EXPECT_EQ(TensorFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorProtoTest, NegativeDimIsInvalid) {
  TensorProto p = Proto(TensorProto::FLOAT, {-1});
  EXPECT_EQ(TensorFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorProtoTest, StringAndComplexAreUnimplementedNamingType) {
  for (int type :
       {static_cast<int>(TensorProto::STRING), static_cast<int>(TensorProto::COMPLEX64)}) {
    TensorProto p = Proto(type, {1});
    absl::StatusOr<Tensor> got = TensorFromProto(p);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(got.status().message(),
                HasSubstr(TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type))));
  }
}

TEST(TensorProtoTest, ExternalDataNeedsBaseDirAndStaysInside) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tether_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<float> values = {1, 2, 3, 4};
  std::ofstream(dir / "w.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), 16);
  TensorProto p = Proto(TensorProto::FLOAT, {2});
  p.set_data_location(TensorProto::EXTERNAL);
  auto* loc = p.add_external_data();
  loc->set_key("location");
  loc->set_value("w.bin");
  auto* off = p.add_external_data();
  off->set_key("offset");
  off->set_value("8");
  auto* len = p.add_external_data();
  len->set_key("length");
  len->set_value("8");

  EXPECT_EQ(TensorFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Tensor> got = TensorFromProto(p, dir.string());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(ReadTensor<float>(*got), (std::vector<float>{3, 4}));

  loc->set_value("../../etc/passwd");
  absl::StatusOr<Tensor> escaped = TensorFromProto(p, dir.string());
  EXPECT_EQ(escaped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(escaped.status().message(), HasSubstr("escapes"));
  fs::remove_all(dir);
}

TEST(TensorProtoTest, ReadsSuiteInputFile) {
  const char* path = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0/input_0.pb";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "libonnx-testdata not installed";
  absl::StatusOr<Tensor> t = ReadTensorProtoFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->get()->dtype(), DataType::Float(32));
  EXPECT_EQ(ShapeOf(*t), (std::vector<int64_t>{3, 4, 5}));
}

TEST(TensorProtoTest, ReadFileErrors) {
  EXPECT_EQ(ReadTensorProtoFile("/nonexistent.pb").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
