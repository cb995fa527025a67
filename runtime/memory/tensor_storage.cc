// The Tensor members that allocate storage or copy device memory
// (runtime/core/tensor.h): they use the allocators of this folder and the
// device APIs, which the core layer below them does not know.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device_api.h"
#include "runtime/memory/allocator.h"

namespace tether {

absl::StatusOr<Tensor> Tensor::Empty(std::span<const int64_t> shape, DataType dtype, Device device,
                                     memory::Allocator* allocator) {
  if (!dtype.IsValidStorageType())
    return ValueError("cannot allocate a tensor of data type ", dtype.ToString());
  TETHER_ASSIGN_OR_RETURN(int64_t nbytes, CheckedNumBytes(shape, dtype));
  if (allocator == nullptr) allocator = memory::DefaultAllocator(device);
  if (allocator->device() != device) {
    return ValueError("allocator of ", allocator->device().ToString(), " cannot allocate on ",
                      device.ToString());
  }
  TETHER_ASSIGN_OR_RETURN(Ref<memory::StorageObj> storage,
                          memory::StorageObj::Allocate(allocator, static_cast<size_t>(nbytes),
                                                       memory::TensorAlignment(dtype)));
  return storage->AllocTensor(0, shape, dtype);
}

absl::StatusOr<Tensor> Tensor::FromBytes(std::span<const int64_t> shape, DataType dtype,
                                         const void* bytes, size_t nbytes) {
  TETHER_ASSIGN_OR_RETURN(Tensor t, Empty(shape, dtype, Device::Cpu()));
  TETHER_RETURN_IF_ERROR(t.CopyFromBytes(bytes, nbytes));
  return t;
}

absl::Status Tensor::CopyFromBytes(const void* bytes, size_t nbytes) {
  if (!obj_->IsContiguous()) return ValueError("cannot copy into a non-contiguous tensor");
  if (static_cast<int64_t>(nbytes) != obj_->NumBytes()) {
    return ValueError("copy of ", nbytes, " bytes into tensor ", ToString(), " of ",
                      obj_->NumBytes(), " bytes");
  }
  if (nbytes == 0) return absl::OkStatus();
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(obj_->device().type));
  TETHER_RETURN_IF_ERROR(
      api->Copy(bytes, Device::Cpu(), obj_->element_data(), obj_->device(), nbytes, nullptr));
  return api->Sync(obj_->device(), nullptr);
}

absl::Status Tensor::CopyToBytes(void* bytes, size_t nbytes) const {
  if (!obj_->IsContiguous()) return ValueError("cannot copy out of a non-contiguous tensor");
  if (static_cast<int64_t>(nbytes) != obj_->NumBytes()) {
    return ValueError("copy of tensor ", ToString(), " of ", obj_->NumBytes(), " bytes into ",
                      nbytes, " bytes");
  }
  if (nbytes == 0) return absl::OkStatus();
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(obj_->device().type));
  TETHER_RETURN_IF_ERROR(
      api->Copy(obj_->element_data(), obj_->device(), bytes, Device::Cpu(), nbytes, nullptr));
  return api->Sync(obj_->device(), nullptr);
}

absl::Status Tensor::CopyFrom(const Tensor& other) {
  if (!obj_->IsContiguous() || !other->IsContiguous())
    return ValueError("copy between non-contiguous tensors");
  if (obj_->dtype() != other->dtype() ||
      !std::equal(obj_->shape().begin(), obj_->shape().end(), other->shape().begin(),
                  other->shape().end())) {
    return ValueError("copy from ", other.ToString(), " into ", ToString(),
                      ": shapes or data types differ");
  }
  size_t nbytes = static_cast<size_t>(obj_->NumBytes());
  if (nbytes == 0) return absl::OkStatus();
  // The non-CPU side's API does the copy (it understands both kinds of pointer).
  Device api_device = obj_->device().type != kDLCPU ? obj_->device() : other->device();
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(api_device.type));
  TETHER_RETURN_IF_ERROR(api->Copy(other->element_data(), other->device(), obj_->element_data(),
                                   obj_->device(), nbytes, nullptr));
  return api->Sync(api_device, nullptr);
}

absl::StatusOr<Tensor> Tensor::CopyTo(Device device, memory::Allocator* allocator) const {
  TETHER_ASSIGN_OR_RETURN(Tensor out, Empty(obj_->shape(), obj_->dtype(), device, allocator));
  TETHER_RETURN_IF_ERROR(out.CopyFrom(*this));
  return out;
}

}  // namespace tether
