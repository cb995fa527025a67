// Tensor: an n-dimensional array on a device, over a DLTensor.
//
// A TensorObj owns its shape and strides and keeps its data alive through an
// owner object (the allocator storage it was carved from, or the DLPack tensor it
// was imported from). Tensors import and export DLManagedTensor without copying.
#ifndef TETHER_RUNTIME_CORE_TENSOR_H_
#define TETHER_RUNTIME_CORE_TENSOR_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "runtime/core/data_type.h"
#include "runtime/core/device.h"
#include "runtime/core/object.h"
#include "runtime/core/value.h"

namespace tether {
namespace memory {
class Allocator;
}  // namespace memory

// Thread contract: metadata is immutable after construction; the data may be
// read concurrently, written by one thread at a time (the caller's duty).
class TensorObj final : public Object {
 public:
  using Dims = absl::InlinedVector<int64_t, 6>;

  // `owner` keeps `data` alive; strides empty means compact row-major.
  TensorObj(void* data, Device device, DataType dtype, Dims shape, Dims strides,
            uint64_t byte_offset, Ref<Object> owner);
  ~TensorObj() override = default;
  absl::string_view type_key() const override { return "Tensor"; }

  const DLTensor& dl() const { return dl_; }
  // The DLTensor with a mutable view of the data, for kernels.
  DLTensor* mutable_dl() { return &dl_; }
  Device device() const { return Device::FromDL(dl_.device); }
  DataType dtype() const { return DataType(dl_.dtype); }
  int ndim() const { return dl_.ndim; }
  std::span<const int64_t> shape() const { return {shape_.data(), shape_.size()}; }
  std::span<const int64_t> strides() const { return {strides_.data(), strides_.size()}; }
  void* data() const { return dl_.data; }
  uint64_t byte_offset() const { return dl_.byte_offset; }
  // The first element: data + byte_offset.
  void* element_data() const { return static_cast<char*>(dl_.data) + dl_.byte_offset; }
  int64_t NumElements() const;
  int64_t NumBytes() const;
  bool IsContiguous() const;
  const Ref<Object>& owner() const { return owner_; }

 private:
  DLTensor dl_;
  Dims shape_;
  Dims strides_;
  Ref<Object> owner_;
};

// A nullable handle to a TensorObj with the operations users need.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Ref<TensorObj> obj) : obj_(std::move(obj)) {}

  // Empty, FromBytes and the Copy* members allocate or copy device memory:
  // they are defined in runtime/memory/tensor_storage.cc, above the device
  // APIs and allocators they use.
  // A new compact tensor on `device`. With no allocator, memory comes from the
  // process-wide naive allocator of that device.
  static absl::StatusOr<Tensor> Empty(std::span<const int64_t> shape, DataType dtype, Device device,
                                      memory::Allocator* allocator = nullptr);
  // A CPU tensor holding a copy of `bytes` (which must be shape x dtype bytes).
  static absl::StatusOr<Tensor> FromBytes(std::span<const int64_t> shape, DataType dtype,
                                          const void* bytes, size_t nbytes);
  // Takes ownership of `managed` without copying; its deleter runs when the last
  // reference goes. Fails (and leaves `managed` to the caller) on a malformed tensor.
  static absl::StatusOr<Tensor> FromDLPack(DLManagedTensor* managed);

  // Exports without copying; the tensor stays alive until the returned
  // tensor's deleter is called.
  DLManagedTensor* ToDLPack() const;

  // Copies between this tensor and host memory; sizes must match exactly.
  absl::Status CopyFromBytes(const void* bytes, size_t nbytes);
  absl::Status CopyToBytes(void* bytes, size_t nbytes) const;
  // Copies the data of `other` (same shape and dtype, any device) into this one.
  absl::Status CopyFrom(const Tensor& other);
  // A copy on `device`, allocated with `allocator` (or the default one).
  absl::StatusOr<Tensor> CopyTo(Device device, memory::Allocator* allocator = nullptr) const;
  // A zero-copy view with another shape/dtype starting `byte_offset` bytes
  // further in; fails if the view would read past this tensor's data.
  absl::StatusOr<Tensor> CreateView(std::span<const int64_t> shape, DataType dtype,
                                    uint64_t byte_offset = 0) const;

  TensorObj* get() const { return obj_.get(); }
  TensorObj* operator->() const { return obj_.get(); }
  explicit operator bool() const { return static_cast<bool>(obj_); }
  const Ref<TensorObj>& ref() const { return obj_; }
  operator Value() const { return Value(obj_); }  // NOLINT(google-explicit-constructor)

  // "float32[2, 3]@cpu:0".
  std::string ToString() const;

 private:
  Ref<TensorObj> obj_;
};

// Number of elements of a shape; fails on a negative dimension or overflow.
absl::StatusOr<int64_t> CheckedNumElements(std::span<const int64_t> shape);
// Bytes of a compact tensor of this shape and dtype, with the same checks.
absl::StatusOr<int64_t> CheckedNumBytes(std::span<const int64_t> shape, DataType dtype);

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_TENSOR_H_
