// The naive allocator: every Alloc goes to the device and every Free returns the
// buffer at once. Useful for debugging memory errors and for tensors made
// outside any VM.
#ifndef TETHER_RUNTIME_MEMORY_NAIVE_ALLOCATOR_H_
#define TETHER_RUNTIME_MEMORY_NAIVE_ALLOCATOR_H_

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device/device_api.h"
#include "runtime/memory/allocator.h"

namespace tether::memory {

// Thread contract: thread-safe. Buffers still held when the allocator is
// destroyed are left alone (their holders may still use them).
class NaiveAllocator final : public Allocator {
 public:
  explicit NaiveAllocator(Device device);

  // RESOURCE_EXHAUSTED naming the size when the device is out of memory;
  // INVALID_ARGUMENT for an alignment that is not a power of two; UNAVAILABLE
  // or UNIMPLEMENTED when the device cannot be used.
  absl::StatusOr<Buffer> Alloc(size_t nbytes, size_t alignment) override;
  // Ignores (and reports on stderr) a buffer this allocator did not hand out.
  void Free(const Buffer& buffer) override;
  // Nothing is cached, so there is nothing to return.
  void Clear() override {}
  AllocatorStats Stats() const override;

 private:
  absl::StatusOr<DeviceAPI*> api_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<void*, size_t> live_ ABSL_GUARDED_BY(mu_);  // pointer → bytes
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tether::memory

#endif  // TETHER_RUNTIME_MEMORY_NAIVE_ALLOCATOR_H_
