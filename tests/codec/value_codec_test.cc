// The wire codec: every value kind round-trips; every malformed message is
// INVALID_ARGUMENT naming the problem; errors keep code and kind.
#include "proto/codec/value_codec.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/codec/sha256.h"
#include "proto/codec/status_codec.h"
#include "tests/testing/test_functions.h"

namespace tether::rpc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

Value RoundTrip(const Value& v, const EncodeOptions& enc = {}, const DecodeOptions& dec = {}) {
  v1::Value wire;
  absl::Status s = EncodeValue(v, enc, &wire);
  EXPECT_TRUE(s.ok()) << s;
  // Through bytes too, as on a real connection.
  v1::Value parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  auto out = DecodeValue(parsed, dec);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Value();
}

TEST(ValueCodecTest, ScalarsRoundTrip) {
  EXPECT_TRUE(RoundTrip(Value()).is_none());
  EXPECT_EQ(RoundTrip(Value(int64_t{-42})).int_value(), -42);
  EXPECT_EQ(RoundTrip(Value(2.5)).float_value(), 2.5);
  EXPECT_TRUE(RoundTrip(Value(true)).bool_value());
  EXPECT_EQ(RoundTrip(Value("héllo")).string_value(), "héllo");
  EXPECT_EQ(RoundTrip(Value(DataType::BFloat16())).dtype_value(), DataType::BFloat16());
  EXPECT_EQ(RoundTrip(Value(Device::Cuda(3))).device_value(), Device::Cuda(3));
  EXPECT_THAT(RoundTrip(MakeShape({2, 0, 7})).AsRef<ShapeObj>()->dims, ElementsAre(2, 0, 7));
}

TEST(ValueCodecTest, NestedTuplesRoundTripInOneMessage) {
  Tensor x = MakeFloatTensor({2}, {1, 2});
  Value nested = MakeTuple({MakeTuple({x, MakeTuple({x})}), x, Value(int64_t{7})});
  Value out = RoundTrip(nested);
  ASSERT_TRUE(out.is_tuple());
  const auto& top = out.AsRef<TupleObj>()->fields;
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[2].int_value(), 7);
  const auto& inner = top[0].AsRef<TupleObj>()->fields;
  EXPECT_THAT(ReadFloats(Tensor(inner[0].AsRef<TensorObj>())), ElementsAre(1, 2));
  EXPECT_EQ(inner[1].AsRef<TupleObj>()->fields.size(), 1u);
}

TEST(ValueCodecTest, LargeTensorsBecomeHandlesWhenARegistrarIsGiven) {
  Tensor big = MakeFloatTensor({4}, {1, 2, 3, 4});
  EncodeOptions enc;
  enc.max_inline_bytes = 8;
  std::vector<Tensor> registered;
  enc.make_tensor_handle = [&](const Tensor& t) -> absl::StatusOr<uint64_t> {
    registered.push_back(t);
    return 77;
  };
  v1::Value wire;
  ASSERT_TRUE(EncodeValue(big, enc, &wire).ok());
  ASSERT_TRUE(wire.has_tensor_handle());
  EXPECT_EQ(wire.tensor_handle().id(), 77u);
  EXPECT_THAT(wire.tensor_handle().header().shape(), ElementsAre(4));
  Tensor small = MakeFloatTensor({1}, {1});
  v1::Value inline_wire;
  ASSERT_TRUE(EncodeValue(small, enc, &inline_wire).ok());
  EXPECT_TRUE(inline_wire.has_tensor());
  DecodeOptions dec;
  dec.resolve_tensor_handle = [&](uint64_t id) -> absl::StatusOr<Value> {
    if (id != 77) return absl::NotFoundError("no tensor");
    return Value(registered[0]);
  };
  auto back = DecodeValue(wire, dec);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->AsRef<TensorObj>().get(), big.get());
  v1::Value unknown = wire;
  unknown.mutable_tensor_handle()->set_id(5);
  EXPECT_EQ(DecodeValue(unknown, dec).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(DecodeValue(wire, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValueCodecTest, EveryDtypeRoundTripsExactly) {
  for (const char* name : {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
                           "int64", "uint8", "uint16", "uint32", "uint64", "bool"}) {
    DataType dtype = *DataType::Parse(name);
    int64_t shape[] = {3, 5};
    std::vector<unsigned char> bytes(static_cast<size_t>(15 * dtype.bytes()));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
    if (dtype.is_bool())
      for (auto& b : bytes) b &= 1;
    auto t = Tensor::FromBytes(shape, dtype, bytes.data(), bytes.size());
    ASSERT_TRUE(t.ok());
    Value out = RoundTrip(*t);
    Tensor back(out.AsRef<TensorObj>());
    EXPECT_EQ(back->dtype(), dtype) << name;
    std::vector<unsigned char> got(bytes.size());
    ASSERT_TRUE(back.CopyToBytes(got.data(), got.size()).ok());
    EXPECT_EQ(got, bytes) << name;
  }
}

TEST(ValueCodecTest, StridedCpuTensorsAreCompacted) {
  // A 2x3 view with transposed strides over a 3x2 buffer.
  std::vector<float> storage = {1, 2, 3, 4, 5, 6};  // rows of the 3x2 original
  DLManagedTensor* managed = new DLManagedTensor{};
  static int64_t shape[] = {2, 3};
  static int64_t strides[] = {1, 2};
  managed->dl_tensor.data = storage.data();
  managed->dl_tensor.device = {kDLCPU, 0};
  managed->dl_tensor.ndim = 2;
  managed->dl_tensor.dtype = DataType::Float(32).dl();
  managed->dl_tensor.shape = shape;
  managed->dl_tensor.strides = strides;
  managed->deleter = [](DLManagedTensor* self) { delete self; };
  auto t = Tensor::FromDLPack(managed);
  ASSERT_TRUE(t.ok()) << t.status();
  Value out = RoundTrip(*t);
  EXPECT_THAT(ReadFloats(Tensor(out.AsRef<TensorObj>())), ElementsAre(1, 3, 5, 2, 4, 6));
}

v1::InlineTensor FloatTensorMessage(std::vector<int64_t> shape, size_t bytes) {
  v1::InlineTensor t;
  EncodeTensorHeader(DataType::Float(32), shape, Device::Cpu(), t.mutable_header());
  t.set_data(std::string(bytes, '\0'));
  return t;
}

TEST(ValueCodecTest, RejectsPayloadsThatDoNotMatchTheHeader) {
  auto short_payload = DecodeInlineTensor(FloatTensorMessage({2, 3}, 23));
  EXPECT_EQ(short_payload.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_payload.status().message()),
              HasSubstr("23 bytes but float32[2, 3] needs 24"));
  EXPECT_EQ(DecodeInlineTensor(FloatTensorMessage({2, 3}, 25)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DecodeInlineTensor(FloatTensorMessage({2, 3}, 24)).ok());
}

TEST(ValueCodecTest, RejectsBadHeaders) {
  auto negative = DecodeInlineTensor(FloatTensorMessage({2, -3}, 0));
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("negative dimension"));
  auto overflow = DecodeInlineTensor(FloatTensorMessage({int64_t{1} << 40, int64_t{1} << 40}, 0));
  EXPECT_THAT(std::string(overflow.status().message()), HasSubstr("overflows"));
  v1::InlineTensor many_dims = FloatTensorMessage(std::vector<int64_t>(40, 1), 4);
  EXPECT_THAT(std::string(DecodeInlineTensor(many_dims).status().message()), HasSubstr("40 dims"));
  v1::InlineTensor bad_dtype = FloatTensorMessage({1}, 4);
  bad_dtype.mutable_header()->mutable_dtype()->set_bits(7);
  EXPECT_EQ(DecodeInlineTensor(bad_dtype).status().code(), absl::StatusCode::kInvalidArgument);
  v1::InlineTensor huge_code = FloatTensorMessage({1}, 4);
  huge_code.mutable_header()->mutable_dtype()->set_code(100000);
  EXPECT_EQ(DecodeInlineTensor(huge_code).status().code(), absl::StatusCode::kInvalidArgument);
  v1::InlineTensor bad_device = FloatTensorMessage({1}, 4);
  bad_device.mutable_header()->mutable_device()->set_type(4242);
  EXPECT_THAT(std::string(DecodeInlineTensor(bad_device).status().message()),
              HasSubstr("unknown device type 4242"));
  v1::InlineTensor no_dtype;
  EXPECT_EQ(DecodeInlineTensor(no_dtype).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValueCodecTest, RejectsHostileNesting) {
  v1::Value deep;
  v1::Value* cur = &deep;
  for (int i = 0; i < kMaxValueDepth + 5; ++i) cur = cur->mutable_tuple()->add_fields();
  cur->set_int_value(1);
  auto out = DecodeValue(deep, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("nests deeper"));
}

TEST(ValueCodecTest, RawPointersAndUnregisteredObjectsCannotCross) {
  v1::Value wire;
  EXPECT_EQ(EncodeValue(Value::OpaquePtr(nullptr), {}, &wire).code(),
            absl::StatusCode::kInvalidArgument);
  Function f = Function::FromPacked("f", [](ArgSpan) -> absl::StatusOr<Value> { return Value(); });
  EXPECT_EQ(EncodeValue(Value(f), {}, &wire).code(), absl::StatusCode::kInvalidArgument);
  EncodeOptions enc;
  enc.make_object_handle = [](const Value&) -> absl::StatusOr<uint64_t> { return 9; };
  ASSERT_TRUE(EncodeValue(Value(f), enc, &wire).ok());
  EXPECT_EQ(wire.object().id(), 9u);
  EXPECT_EQ(wire.object().type_key(), "Function");
}

TEST(ValueCodecTest, ErrorsKeepCodeKindAndMessage) {
  absl::Status original = TypeError("argument 0 of f: expected Tensor, got int");
  v1::Error wire;
  EncodeError(original, &wire);
  absl::Status back = DecodeError(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetErrorKind(back), ErrorKind::kType);
  EXPECT_EQ(back.message(), original.message());
  grpc::Status g = ToGrpcStatus(PreconditionError("no inputs set"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  absl::Status from = FromGrpcStatus(g, "ValueError");
  EXPECT_EQ(from.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetErrorKind(from), ErrorKind::kValue);
  v1::Error bogus;
  bogus.set_code(999);
  bogus.set_kind("NoSuchKind");
  EXPECT_EQ(DecodeError(bogus).code(), absl::StatusCode::kUnknown);
}

TEST(ValueCodecTest, ReportsAndBenchmarksRoundTrip) {
  profiling::ReportBuilder builder;
  builder.AddCall("matmul", 12.5, Device::Cpu(), "float32[1, 64]");
  builder.SetConfiguration("Executor", std::string("VM"));
  profiling::Report report = builder.Build();
  v1::Report wire;
  EncodeReport(report, &wire);
  auto back = DecodeReport(wire);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, report);
  profiling::BenchmarkResult r = profiling::BenchmarkResult::FromSamples({1, 2, 2, 5}, 13, 3);
  v1::BenchmarkResult wr;
  EncodeBenchmarkResult(r, &wr);
  profiling::BenchmarkResult rb = DecodeBenchmarkResult(wr);
  EXPECT_EQ(rb.results, r.results);
  EXPECT_EQ(rb.total_calls, 13);
  EXPECT_DOUBLE_EQ(rb.std, 1.5);
}

TEST(ValueCodecTest, TimeEvaluatorAbsentMeansDefaultAndZeroSurvives) {
  v1::TimeEvaluatorOptions wire;
  profiling::TimeEvaluatorOptions o = DecodeTimeEvaluatorOptions(wire);
  EXPECT_EQ(o.number, 10);
  EXPECT_EQ(o.repeat, 1);
  EXPECT_EQ(o.limit_zero_time_iterations, 100);
  EXPECT_TRUE(o.Validate().ok());
  wire.set_number(-1);
  EXPECT_FALSE(DecodeTimeEvaluatorOptions(wire).Validate().ok());
  // Encoded and decoded, a 0 is a 0 (the audit's limit_zero_time_iterations=0).
  profiling::TimeEvaluatorOptions zero;
  zero.limit_zero_time_iterations = 0;
  EncodeTimeEvaluatorOptions(zero, &wire);
  EXPECT_EQ(DecodeTimeEvaluatorOptions(wire).limit_zero_time_iterations, 0);
  zero.number = 0;
  EncodeTimeEvaluatorOptions(zero, &wire);
  EXPECT_EQ(DecodeTimeEvaluatorOptions(wire).number, 0);
  EXPECT_FALSE(DecodeTimeEvaluatorOptions(wire).Validate().ok());
}

TEST(ValueCodecTest, Sha256) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("")));
  EXPECT_FALSE(IsSha256Hex("../../etc/passwd"));
  EXPECT_FALSE(IsSha256Hex(std::string(64, 'G')));
}

}  // namespace
}  // namespace tether::rpc
