// Tensor construction, views and DLPack exchange. The members that allocate
// or copy device memory are in runtime/memory/tensor_storage.cc.
#include "runtime/core/tensor.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

constexpr int kMaxDims = 32;

// Keeps an imported DLManagedTensor alive; calls its deleter at the end.
class DLPackOwner final : public Object {
 public:
  explicit DLPackOwner(DLManagedTensor* managed) : managed_(managed) {}
  ~DLPackOwner() override {
    if (managed_->deleter) managed_->deleter(managed_);
  }
  absl::string_view type_key() const override { return "DLPackOwner"; }

 private:
  DLManagedTensor* managed_;
};

// What a DLManagedTensor we export points to: it holds the tensor.
struct ExportContext {
  Ref<TensorObj> tensor;
  DLManagedTensor managed;
};

}  // namespace

absl::StatusOr<int64_t> CheckedNumElements(std::span<const int64_t> shape) {
  if (shape.size() > kMaxDims)
    return ValueError("tensor has ", shape.size(), " dims, at most ", kMaxDims, " supported");
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d < 0)
      return ValueError("negative dimension ", d, " at axis ", i, " of shape ",
                        ShapeToString(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return ValueError("shape ", ShapeToString(shape), " overflows int64 elements");
    }
    n *= d;
  }
  return n;
}

absl::StatusOr<int64_t> CheckedNumBytes(std::span<const int64_t> shape, DataType dtype) {
  TETHER_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  int64_t elem = dtype.bytes();
  if (elem != 0 && n > std::numeric_limits<int64_t>::max() / elem) {
    return ValueError("shape ", ShapeToString(shape), " of ", dtype.ToString(),
                      " overflows int64 bytes");
  }
  return n * elem;
}

TensorObj::TensorObj(void* data, Device device, DataType dtype, Dims shape, Dims strides,
                     uint64_t byte_offset, Ref<Object> owner)
    : Object(TypeIndex::kTensor),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      owner_(std::move(owner)) {
  dl_.data = data;
  dl_.device = device.dl();
  dl_.ndim = static_cast<int>(shape_.size());
  dl_.dtype = dtype.dl();
  dl_.shape = shape_.data();
  dl_.strides = strides_.empty() ? nullptr : strides_.data();
  dl_.byte_offset = byte_offset;
}

int64_t TensorObj::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

int64_t TensorObj::NumBytes() const { return NumElements() * dtype().bytes(); }

bool TensorObj::IsContiguous() const {
  if (strides_.empty()) return true;
  int64_t expected = 1;
  for (int i = static_cast<int>(shape_.size()) - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

absl::StatusOr<Tensor> Tensor::FromDLPack(DLManagedTensor* managed) {
  if (managed == nullptr) return ValueError("null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;
  if (dl.ndim < 0 || dl.ndim > kMaxDims) return ValueError("DLPack tensor has ", dl.ndim, " dims");
  if (dl.ndim > 0 && dl.shape == nullptr) return ValueError("DLPack tensor has no shape");
  DataType dtype(dl.dtype);
  if (!dtype.IsValidStorageType())
    return ValueError("DLPack tensor has unsupported data type ", dtype.ToString());
  TensorObj::Dims shape(dl.shape, dl.shape + dl.ndim);
  // Bytes, not just elements: NumBytes() must not overflow later.
  TETHER_RETURN_IF_ERROR(CheckedNumBytes({shape.data(), shape.size()}, dtype).status());
  TensorObj::Dims strides;
  if (dl.strides != nullptr) strides.assign(dl.strides, dl.strides + dl.ndim);
  Ref<Object> owner = MakeRef<DLPackOwner>(managed);
  return Tensor(MakeRef<TensorObj>(dl.data, Device::FromDL(dl.device), dtype, std::move(shape),
                                   std::move(strides), dl.byte_offset, std::move(owner)));
}

DLManagedTensor* Tensor::ToDLPack() const {
  auto* ctx = new ExportContext{obj_, {}};
  ctx->managed.dl_tensor = obj_->dl();
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
  };
  return &ctx->managed;
}

absl::StatusOr<Tensor> Tensor::CreateView(std::span<const int64_t> shape, DataType dtype,
                                          uint64_t byte_offset) const {
  if (!obj_->IsContiguous()) return ValueError("cannot create a view of a non-contiguous tensor");
  if (!dtype.IsValidStorageType()) return ValueError("invalid view data type ", dtype.ToString());
  TETHER_ASSIGN_OR_RETURN(int64_t view_bytes, CheckedNumBytes(shape, dtype));
  int64_t have = obj_->NumBytes();
  if (byte_offset > static_cast<uint64_t>(have) ||
      view_bytes > have - static_cast<int64_t>(byte_offset)) {
    return ValueError("view ", dtype.ToString(), ShapeToString(shape), " at byte offset ",
                      byte_offset, " needs ", view_bytes, " bytes but tensor ", ToString(), " has ",
                      have);
  }
  Ref<Object> owner(obj_.get());
  return Tensor(MakeRef<TensorObj>(obj_->data(), obj_->device(), dtype,
                                   TensorObj::Dims(shape.begin(), shape.end()), TensorObj::Dims{},
                                   obj_->byte_offset() + byte_offset, std::move(owner)));
}

std::string Tensor::ToString() const {
  if (!obj_) return "Tensor(null)";
  return absl::StrCat(obj_->dtype().ToString(), ShapeToString(obj_->shape()), "@",
                      obj_->device().ToString());
}

}  // namespace tether
