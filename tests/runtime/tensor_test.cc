// Tests of Tensor: allocation of every data type and shape, shape checks,
// copies to, from and between tensors, views, and zero-copy DLPack exchange.
#include "runtime/core/tensor.h"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/value.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

Tensor EmptyOrDie(const Shape& shape, DataType dtype = DataType::Float(32)) {
  absl::StatusOr<Tensor> t = Tensor::Empty(shape, dtype, Device::Cpu());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// A float32 tensor holding 0, 1, 2, ...
Tensor IotaOrDie(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> data(n);
  std::iota(data.begin(), data.end(), 0.0f);
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, DataType::Float(32), data.data(), data.size() * sizeof(float));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

std::vector<float> ReadFloats(const Tensor& t) {
  std::vector<float> out(t->NumElements());
  absl::Status s = t.CopyToBytes(out.data(), out.size() * sizeof(float));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// A hand-made DLManagedTensor over caller-owned storage whose deleter counts
// its calls.
struct HandMadeTensor {
  explicit HandMadeTensor(Shape s, DataType dtype = DataType::Float(32))
      : shape(std::move(s)), data(1024, 0) {
    managed.dl_tensor.data = data.data();
    managed.dl_tensor.device = Device::Cpu().dl();
    managed.dl_tensor.ndim = static_cast<int>(shape.size());
    managed.dl_tensor.dtype = dtype.dl();
    managed.dl_tensor.shape = shape.data();
    managed.dl_tensor.strides = nullptr;
    managed.dl_tensor.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<HandMadeTensor*>(self->manager_ctx)->deleter_calls;
    };
  }

  Shape shape;
  Shape strides;
  std::vector<uint8_t> data;
  DLManagedTensor managed{};
  int deleter_calls = 0;
};

// --- Empty --------------------------------------------------------------------

class TensorEmptyDtypeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TensorEmptyDtypeTest, AllocatesCompactCpuTensors) {
  DataType dtype = *DataType::Parse(GetParam());
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{1}, Shape{7}, Shape{2, 3}, Shape{2, 0, 5},
                             Shape{1, 2, 3, 4, 5, 6, 1}}) {
    SCOPED_TRACE(ShapeToString(shape));
    absl::StatusOr<Tensor> t = Tensor::Empty(shape, dtype, Device::Cpu());
    ASSERT_TRUE(t.ok()) << t.status();
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    EXPECT_EQ((*t)->dtype(), dtype);
    EXPECT_EQ((*t)->device(), Device::Cpu());
    EXPECT_EQ((*t)->ndim(), static_cast<int>(shape.size()));
    EXPECT_THAT((*t)->shape(), ::testing::ElementsAreArray(shape));
    EXPECT_TRUE((*t)->strides().empty());
    EXPECT_EQ((*t)->dl().strides, nullptr);
    EXPECT_EQ((*t)->dl().shape, (*t)->shape().data());
    EXPECT_TRUE((*t)->IsContiguous());
    EXPECT_EQ((*t)->NumElements(), n);
    EXPECT_EQ((*t)->NumBytes(), n * dtype.bytes());
    if (n > 0) {
      EXPECT_NE((*t)->data(), nullptr);
      const uintptr_t scalar_bytes = (dtype.bits() + 7) / 8;
      EXPECT_EQ(reinterpret_cast<uintptr_t>((*t)->element_data()) % scalar_bytes, 0u)
          << "misaligned element data";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, TensorEmptyDtypeTest,
                         ::testing::Values("float16", "float32", "float64", "bfloat16", "int8",
                                           "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                           "uint64", "bool", "float32x4", "int8x3"));

TEST(TensorTest, ZeroDimensionalTensorHoldsOneElement) {
  Tensor t = EmptyOrDie({}, DataType::Int(64));
  EXPECT_EQ(t->ndim(), 0);
  EXPECT_EQ(t->NumElements(), 1);
  int64_t in = -77;
  ASSERT_TRUE(t.CopyFromBytes(&in, sizeof(in)).ok());
  int64_t out = 0;
  ASSERT_TRUE(t.CopyToBytes(&out, sizeof(out)).ok());
  EXPECT_EQ(out, -77);
  EXPECT_EQ(t.ToString(), "int64[]@cpu:0");
}

TEST(TensorTest, ZeroSizeTensorCopiesNothing) {
  Tensor t = EmptyOrDie({3, 0});
  EXPECT_EQ(t->NumBytes(), 0);
  EXPECT_TRUE(t.CopyFromBytes(nullptr, 0).ok());
  EXPECT_TRUE(t.CopyToBytes(nullptr, 0).ok());
  Tensor other = EmptyOrDie({3, 0});
  EXPECT_TRUE(t.CopyFrom(other).ok());
  // Same (zero) bytes, another shape: refused like any shape mismatch.
  EXPECT_EQ(t.CopyFrom(EmptyOrDie({0, 3})).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, RejectsNegativeDimension) {
  absl::StatusOr<Tensor> t = Tensor::Empty(Shape{2, -3}, DataType::Float(32), Device::Cpu());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("[2, -3]"));
  EXPECT_THAT(t.status().message(), HasSubstr("negative dimension -3 at axis 1"));
}

TEST(TensorTest, RejectsShapeWhoseElementCountOverflows) {
  const int64_t big = int64_t{1} << 32;
  absl::StatusOr<Tensor> t = Tensor::Empty(Shape{big, big}, DataType::Int(8), Device::Cpu());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("[4294967296, 4294967296]"));
  EXPECT_THAT(t.status().message(), HasSubstr("overflows"));
}

TEST(TensorTest, RejectsShapeWhoseByteCountOverflows) {
  const int64_t n = int64_t{1} << 62;
  absl::StatusOr<Tensor> t = Tensor::Empty(Shape{n}, DataType::Float(32), Device::Cpu());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("[4611686018427387904]"));
  EXPECT_THAT(t.status().message(), HasSubstr("overflows int64 bytes"));
}

TEST(TensorTest, RejectsTooManyDims) {
  Shape shape(33, 1);
  absl::StatusOr<Tensor> t = Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("33 dims"));
}

TEST(TensorTest, RejectsInvalidDataType) {
  absl::StatusOr<Tensor> t = Tensor::Empty(Shape{2}, DataType(DataType::kFloat, 7), Device::Cpu());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("float7"));
}

TEST(TensorTest, CheckedNumBytesCountsLanes) {
  EXPECT_EQ(*CheckedNumBytes(Shape{2, 3}, DataType::Float(32, 4)), 96);
  EXPECT_EQ(*CheckedNumBytes(Shape{}, DataType::Float(64)), 8);
  EXPECT_EQ(*CheckedNumElements(Shape{0, int64_t{1} << 62, 4}), 0);
}

// --- Copies to and from host memory -------------------------------------------

TEST(TensorTest, FromBytesThenCopyToBytesRoundTrips) {
  const std::vector<int32_t> in = {1, -2, 3, -4, 5, -6};
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(Shape{2, 3}, DataType::Int(32), in.data(), in.size() * sizeof(int32_t));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->device(), Device::Cpu());
  std::vector<int32_t> out(6);
  ASSERT_TRUE(t->CopyToBytes(out.data(), out.size() * sizeof(int32_t)).ok());
  EXPECT_EQ(out, in);
  EXPECT_NE((*t)->element_data(), static_cast<const void*>(in.data())) << "FromBytes copies";
}

TEST(TensorTest, FromBytesRejectsSizeMismatch) {
  std::vector<float> in(5);
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(Shape{2, 3}, DataType::Float(32), in.data(), in.size() * sizeof(float));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("20 bytes"));
  EXPECT_THAT(t.status().message(), HasSubstr("24 bytes"));
}

TEST(TensorTest, CopyToBytesRejectsSizeMismatch) {
  Tensor t = IotaOrDie({4});
  std::vector<float> out(8);
  absl::Status s = t.CopyToBytes(out.data(), 32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("float32[4]@cpu:0"));
  EXPECT_THAT(s.message(), HasSubstr("32 bytes"));
  EXPECT_EQ(t.CopyToBytes(out.data(), 15).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, CopyFromBytesOverwritesData) {
  Tensor t = IotaOrDie({3});
  const float in[] = {9, 8, 7};
  ASSERT_TRUE(t.CopyFromBytes(in, sizeof(in)).ok());
  EXPECT_THAT(ReadFloats(t), ::testing::ElementsAre(9, 8, 7));
  EXPECT_EQ(t.CopyFromBytes(in, sizeof(in) - 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ReadFloats(t), ::testing::ElementsAre(9, 8, 7)) << "a failed copy writes nothing";
}

// --- Copies between tensors ---------------------------------------------------

TEST(TensorTest, CopyFromCopiesBetweenTensors) {
  Tensor src = IotaOrDie({2, 3});
  Tensor dst = EmptyOrDie({2, 3});
  ASSERT_TRUE(dst.CopyFrom(src).ok());
  EXPECT_THAT(ReadFloats(dst), ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_NE(dst->data(), src->data());
}

TEST(TensorTest, CopyToMakesAnIndependentCopy) {
  Tensor src = IotaOrDie({4});
  absl::StatusOr<Tensor> copy = src.CopyTo(Device::Cpu());
  ASSERT_TRUE(copy.ok()) << copy.status();
  const float zeros[4] = {};
  ASSERT_TRUE(src.CopyFromBytes(zeros, sizeof(zeros)).ok());
  EXPECT_THAT(ReadFloats(*copy), ::testing::ElementsAre(0, 1, 2, 3));
}

TEST(TensorTest, CopyFromRejectsDataTypeMismatch) {
  Tensor src = IotaOrDie({4});
  Tensor dst = EmptyOrDie({4}, DataType::Int(32));
  absl::Status s = dst.CopyFrom(src);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("float32[4]@cpu:0"));
  EXPECT_THAT(s.message(), HasSubstr("int32[4]@cpu:0"));
}

TEST(TensorTest, CopyFromRejectsSizeMismatch) {
  Tensor src = IotaOrDie({4});
  Tensor dst = EmptyOrDie({5});
  absl::Status s = dst.CopyFrom(src);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("float32[5]@cpu:0"));
  EXPECT_EQ(src.CopyFrom(dst).code(), absl::StatusCode::kInvalidArgument);
}

// --- Views --------------------------------------------------------------------

TEST(TensorTest, ViewSharesDataAndKeepsTheBaseAlive) {
  Tensor view;
  void* base_data = nullptr;
  {
    Tensor base = IotaOrDie({2, 4});
    base_data = base->data();
    absl::StatusOr<Tensor> v = base.CreateView(Shape{3}, DataType::Float(32), 4 * sizeof(float));
    ASSERT_TRUE(v.ok()) << v.status();
    view = *v;
    EXPECT_EQ(base->use_count(), 2) << "the view owns a reference to its base";
  }
  EXPECT_EQ(view->data(), base_data);
  EXPECT_EQ(view->byte_offset(), 16u);
  EXPECT_THAT(ReadFloats(view), ::testing::ElementsAre(4, 5, 6));
}

TEST(TensorTest, ViewWritesAreSeenByTheBase) {
  Tensor base = IotaOrDie({4});
  absl::StatusOr<Tensor> v = base.CreateView(Shape{1}, DataType::Float(32), 3 * sizeof(float));
  ASSERT_TRUE(v.ok()) << v.status();
  const float x = 42;
  ASSERT_TRUE(v->CopyFromBytes(&x, sizeof(x)).ok());
  EXPECT_THAT(ReadFloats(base), ::testing::ElementsAre(0, 1, 2, 42));
}

TEST(TensorTest, ViewMayExactlyReachTheEnd) {
  Tensor base = IotaOrDie({4});
  EXPECT_TRUE(base.CreateView(Shape{2, 2}, DataType::Float(32), 0).ok());
  EXPECT_TRUE(base.CreateView(Shape{2}, DataType::Float(32), 8).ok());
  EXPECT_TRUE(base.CreateView(Shape{0}, DataType::Float(32), 16).ok());
}

TEST(TensorTest, ViewCanChangeTheDataType) {
  const uint32_t word = 0x01020304;
  absl::StatusOr<Tensor> base = Tensor::FromBytes(Shape{1}, DataType::UInt(32), &word, 4);
  ASSERT_TRUE(base.ok());
  absl::StatusOr<Tensor> bytes = base->CreateView(Shape{4}, DataType::UInt(8));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)->dtype(), DataType::UInt(8));
  uint8_t out[4];
  ASSERT_TRUE(bytes->CopyToBytes(out, 4).ok());
  EXPECT_EQ(std::memcmp(out, &word, 4), 0);
}

TEST(TensorTest, ViewOfAViewAddsOffsets) {
  Tensor base = IotaOrDie({8});
  absl::StatusOr<Tensor> v1 = base.CreateView(Shape{6}, DataType::Float(32), 8);
  ASSERT_TRUE(v1.ok());
  absl::StatusOr<Tensor> v2 = v1->CreateView(Shape{2}, DataType::Float(32), 12);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_THAT(ReadFloats(*v2), ::testing::ElementsAre(5, 6));
  EXPECT_EQ(v1->CreateView(Shape{2}, DataType::Float(32), 20).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "a view is bounded by its own size, not its base's";
}

TEST(TensorTest, RejectsViewPastTheEnd) {
  Tensor base = IotaOrDie({4});
  absl::StatusOr<Tensor> v = base.CreateView(Shape{2}, DataType::Float(32), 12);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("byte offset 12"));
  EXPECT_THAT(v.status().message(), HasSubstr("needs 8 bytes"));
  EXPECT_EQ(base.CreateView(Shape{5}, DataType::Float(32)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(base.CreateView(Shape{2}, DataType::Float(64), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(base.CreateView(Shape{0}, DataType::Float(32), 17).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(base.CreateView(Shape{1}, DataType::Float(32), std::numeric_limits<uint64_t>::max())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, RejectsViewWithBadShapeOrDataType) {
  Tensor base = IotaOrDie({4});
  absl::StatusOr<Tensor> neg = base.CreateView(Shape{-1}, DataType::Float(32));
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(neg.status().message(), HasSubstr("[-1]"));
  EXPECT_EQ(base.CreateView(Shape{1}, DataType(DataType::kInt, 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Strides ------------------------------------------------------------------

TEST(TensorTest, DetectsNonContiguousStrides) {
  HandMadeTensor hand({2, 3});
  hand.strides = {1, 2};  // column-major
  hand.managed.dl_tensor.strides = hand.strides.data();
  {
    absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE((*t)->IsContiguous());
    EXPECT_THAT((*t)->strides(), ::testing::ElementsAre(1, 2));
    std::vector<float> buf(6);
    absl::Status s = t->CopyToBytes(buf.data(), 24);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("non-contiguous"));
    EXPECT_EQ(t->CopyFromBytes(buf.data(), 24).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(t->CreateView(Shape{6}, DataType::Float(32)).status().code(),
              absl::StatusCode::kInvalidArgument);
    Tensor compact = EmptyOrDie({2, 3});
    EXPECT_EQ(compact.CopyFrom(*t).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(t->CopyFrom(compact).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(hand.deleter_calls, 1);
}

TEST(TensorTest, RowMajorStridesAreContiguous) {
  HandMadeTensor hand({2, 1, 3});
  hand.strides = {3, 99, 1};  // the stride of a size-1 axis does not matter
  hand.managed.dl_tensor.strides = hand.strides.data();
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)->IsContiguous());
  std::vector<float> buf(6);
  EXPECT_TRUE(t->CopyToBytes(buf.data(), 24).ok());
}

// --- DLPack -------------------------------------------------------------------

TEST(TensorTest, DLPackRoundTripDoesNotCopy) {
  Tensor t = IotaOrDie({2, 3});
  DLManagedTensor* managed = t.ToDLPack();
  ASSERT_NE(managed, nullptr);
  EXPECT_EQ(managed->dl_tensor.data, t->data());
  EXPECT_EQ(managed->dl_tensor.ndim, 2);
  EXPECT_EQ(managed->dl_tensor.shape[0], 2);
  EXPECT_EQ(managed->dl_tensor.shape[1], 3);
  EXPECT_EQ(DataType(managed->dl_tensor.dtype), DataType::Float(32));
  absl::StatusOr<Tensor> back = Tensor::FromDLPack(managed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->data(), t->data());
  EXPECT_EQ((*back)->element_data(), t->element_data());
  EXPECT_EQ((*back)->dtype(), t->dtype());
  EXPECT_THAT((*back)->shape(), ::testing::ElementsAre(2, 3));
  EXPECT_THAT(ReadFloats(*back), ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(TensorTest, DLPackOfAViewKeepsItsOffset) {
  Tensor base = IotaOrDie({4});
  absl::StatusOr<Tensor> view = base.CreateView(Shape{2}, DataType::Float(32), 8);
  ASSERT_TRUE(view.ok());
  absl::StatusOr<Tensor> back = Tensor::FromDLPack(view->ToDLPack());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->element_data(), (*view)->element_data());
  EXPECT_THAT(ReadFloats(*back), ::testing::ElementsAre(2, 3));
}

TEST(TensorTest, ExportKeepsTheTensorAliveUntilTheDeleterRuns) {
  DLManagedTensor* managed = nullptr;
  TensorObj* obj = nullptr;
  {
    Tensor t = IotaOrDie({3});
    obj = t.get();
    managed = t.ToDLPack();
    EXPECT_EQ(obj->use_count(), 2);
  }
  EXPECT_EQ(obj->use_count(), 1) << "only the export holds the tensor now";
  // The data is still readable through the exported DLTensor.
  const float* data = static_cast<const float*>(managed->dl_tensor.data);
  EXPECT_EQ(data[2], 2.0f);
  EXPECT_EQ(managed->dl_tensor.shape[0], 3);
  managed->deleter(managed);  // frees the export and the tensor (ASan checks)
}

TEST(TensorTest, ImportedExportRunsTheDeleterOnceWhenTheLastReferenceGoes) {
  Tensor original = IotaOrDie({3});
  TensorObj* obj = original.get();
  absl::StatusOr<Tensor> imported = Tensor::FromDLPack(original.ToDLPack());
  ASSERT_TRUE(imported.ok());
  EXPECT_EQ(obj->use_count(), 2);
  Tensor copy = *imported;
  imported = Tensor();
  EXPECT_EQ(obj->use_count(), 2) << "a copy of the import still holds the export";
  copy = Tensor();
  EXPECT_EQ(obj->use_count(), 1) << "the deleter released the export's reference";
}

TEST(TensorTest, FromDLPackCallsTheDeleterWhenTheLastReferenceGoes) {
  HandMadeTensor hand({2, 2});
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->data(), hand.data.data());
  Value as_value = *t;
  Tensor view = *t->CreateView(Shape{2}, DataType::Float(32), 8);
  t = absl::StatusOr<Tensor>(Tensor());
  EXPECT_EQ(hand.deleter_calls, 0);
  as_value = Value();
  EXPECT_EQ(hand.deleter_calls, 0) << "the view still holds the import";
  view = Tensor();
  EXPECT_EQ(hand.deleter_calls, 1);
}

TEST(TensorTest, FromDLPackAcceptsANullDeleter) {
  HandMadeTensor hand({4});
  hand.managed.deleter = nullptr;
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->NumElements(), 4);
}

TEST(TensorTest, FromDLPackKeepsByteOffsetAndDevice) {
  HandMadeTensor hand({2}, DataType::Int(16));
  hand.managed.dl_tensor.byte_offset = 6;
  const int16_t values[] = {11, -12};
  std::memcpy(hand.data.data() + 6, values, sizeof(values));
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->byte_offset(), 6u);
  EXPECT_EQ((*t)->dtype(), DataType::Int(16));
  int16_t out[2];
  ASSERT_TRUE(t->CopyToBytes(out, sizeof(out)).ok());
  EXPECT_EQ(out[0], 11);
  EXPECT_EQ(out[1], -12);
}

TEST(TensorTest, FromDLPackRejectsNull) {
  EXPECT_EQ(Tensor::FromDLPack(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, FromDLPackRejectsTooManyDimsWithoutCallingTheDeleter) {
  HandMadeTensor hand({2});
  hand.managed.dl_tensor.ndim = 40;
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("40 dims"));
  hand.managed.dl_tensor.ndim = -1;
  EXPECT_EQ(Tensor::FromDLPack(&hand.managed).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hand.deleter_calls, 0);
}

TEST(TensorTest, FromDLPackRejectsNullShapeWithoutCallingTheDeleter) {
  HandMadeTensor hand({2, 2});
  hand.managed.dl_tensor.shape = nullptr;
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("no shape"));
  EXPECT_EQ(hand.deleter_calls, 0);
}

TEST(TensorTest, FromDLPackRejectsBadDataTypeWithoutCallingTheDeleter) {
  HandMadeTensor hand({2}, DataType(DataType::kFloat, 7));
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&hand.managed);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("float7"));
  hand.managed.dl_tensor.dtype = DataType(DataType::kFloat, 32, 0).dl();
  EXPECT_EQ(Tensor::FromDLPack(&hand.managed).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hand.deleter_calls, 0);
}

TEST(TensorTest, FromDLPackRejectsBadShapeWithoutCallingTheDeleter) {
  HandMadeTensor hand({3, -1});
  absl::StatusOr<Tensor> negative = Tensor::FromDLPack(&hand.managed);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("[3, -1]"));

  // Few enough elements for int64, but too many bytes.
  hand.shape = {int64_t{1} << 62};
  hand.managed.dl_tensor.shape = hand.shape.data();
  hand.managed.dl_tensor.ndim = 1;
  absl::StatusOr<Tensor> too_big = Tensor::FromDLPack(&hand.managed);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("overflows"));
  EXPECT_EQ(hand.deleter_calls, 0);
}

// --- Printing and handles -----------------------------------------------------

TEST(TensorTest, ToStringShowsDataTypeShapeAndDevice) {
  EXPECT_EQ(EmptyOrDie({2, 3}).ToString(), "float32[2, 3]@cpu:0");
  EXPECT_EQ(EmptyOrDie({5}, DataType::Float(32, 4)).ToString(), "float32x4[5]@cpu:0");
  EXPECT_EQ(Tensor().ToString(), "Tensor(null)");
}

TEST(TensorTest, ConvertsToAValueSharingTheObject) {
  Tensor t = EmptyOrDie({1});
  Value v = t;
  EXPECT_TRUE(v.is_tensor());
  EXPECT_EQ(v.object(), t.get());
  EXPECT_EQ(t->use_count(), 2);
  EXPECT_FALSE(static_cast<bool>(Tensor()));
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

TEST(TensorTest, CopyFromRequiresTheSameShapeNotJustTheSameBytes) {
  int64_t flat_shape[] = {6};
  int64_t grid_shape[] = {2, 3};
  auto flat = Tensor::Empty(flat_shape, DataType::Float(32), Device::Cpu());
  auto grid = Tensor::Empty(grid_shape, DataType::Float(32), Device::Cpu());
  ASSERT_TRUE(flat.ok() && grid.ok());
  absl::Status s = flat->CopyFrom(*grid);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("shapes or data types differ"));
}

}  // namespace
}  // namespace tether
