// Allocators and storage. An Allocator hands out device buffers for one device;
// a Storage is one buffer with a strong reference to its allocator, returned on
// destruction; tensors are views carved from storage.
//
// Unlike the reference, allocators are objects owned by whoever creates them (a
// VM, a session), not process-global singletons, so closing a session gives its
// memory back, and their statistics reflect frees.
#ifndef TETHER_RUNTIME_MEMORY_ALLOCATOR_H_
#define TETHER_RUNTIME_MEMORY_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/device.h"
#include "runtime/core/object.h"
#include "runtime/core/tensor.h"

namespace tether::memory {

// Values as in the reference (NAIVE_ALLOCATOR=1, POOLED_ALLOCATOR=2).
enum class AllocatorType : int { kNaive = 1, kPooled = 2 };

absl::StatusOr<AllocatorType> ParseAllocatorType(absl::string_view text);
absl::string_view AllocatorTypeName(AllocatorType type);

struct Buffer {
  void* data = nullptr;
  size_t size = 0;  // bytes the caller may use (the request, not the class size)
  Device device;
};

struct AllocatorStats {
  int64_t bytes_in_use = 0;  // requested bytes currently held by callers
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_reserved = 0;  // bytes currently held from the device (in use + cached)
  int64_t peak_bytes_reserved = 0;
  int64_t num_allocs = 0;  // Alloc calls that succeeded
  int64_t num_frees = 0;
  int64_t num_device_allocs = 0;  // allocations that reached the device
  int64_t num_device_frees = 0;
  int64_t num_reuses = 0;  // allocations served from the cache
};

// Thread contract: thread-safe.
class Allocator : public Object {
 public:
  absl::string_view type_key() const override { return "memory.Allocator"; }
  Device device() const { return device_; }
  AllocatorType type() const { return type_; }

  // A buffer of at least `nbytes`, aligned to `alignment` (a power of two).
  virtual absl::StatusOr<Buffer> Alloc(size_t nbytes, size_t alignment) = 0;
  virtual void Free(const Buffer& buffer) = 0;
  // Returns every cached (free) buffer to the device. Buffers in use stay valid.
  virtual void Clear() = 0;
  virtual AllocatorStats Stats() const = 0;

 protected:
  Allocator(Device device, AllocatorType type) : device_(device), type_(type) {}

 private:
  Device device_;
  AllocatorType type_;
};

Ref<Allocator> CreateAllocator(Device device, AllocatorType type);

// A process-wide naive allocator per device, for tensors made outside any VM.
Allocator* DefaultAllocator(Device device);

// One device buffer, returned to its allocator when the last reference goes.
class StorageObj final : public Object {
 public:
  StorageObj(Buffer buffer, Ref<Allocator> allocator);
  ~StorageObj() override;
  absl::string_view type_key() const override { return "memory.Storage"; }

  static absl::StatusOr<Ref<StorageObj>> Allocate(Allocator* allocator, size_t nbytes,
                                                  size_t alignment);

  const Buffer& buffer() const { return buffer_; }
  // A tensor view at `offset` bytes; fails when it would not fit:
  // "storage allocation failure: tensor of 96 bytes at offset 8 in a 64-byte storage".
  absl::StatusOr<Tensor> AllocTensor(int64_t offset, std::span<const int64_t> shape,
                                     DataType dtype);

 private:
  Buffer buffer_;
  Ref<Allocator> allocator_;
};

// memory_cfg: which allocator type each device gets. Parsed from "naive",
// "pooled", or per device "cpu:0=naive,cuda:0=pooled"; devices not named use the
// default (pooled).
struct MemoryConfig {
  AllocatorType default_type = AllocatorType::kPooled;
  absl::flat_hash_map<Device, AllocatorType> per_device;

  static absl::StatusOr<MemoryConfig> Parse(absl::string_view text);
  AllocatorType TypeFor(Device device) const;
};

// The alignment tensors get: max(64, element bytes).
size_t TensorAlignment(DataType dtype);

}  // namespace tether::memory

#endif  // TETHER_RUNTIME_MEMORY_ALLOCATOR_H_
