// The pooled allocator: device buffers are rounded up to a size class and, when
// freed, kept in a free list per class for the next request of that class.
// Unlike the reference (exact 4 KiB-rounded sizes, never freed), classes bound
// the waste to 25%, frees are accounted, Clear() gives the cache back to the
// device, and a device out-of-memory first releases the cache and retries.
#ifndef TETHER_RUNTIME_MEMORY_POOLED_ALLOCATOR_H_
#define TETHER_RUNTIME_MEMORY_POOLED_ALLOCATOR_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device/device_api.h"
#include "runtime/memory/allocator.h"

namespace tether::memory {

// Thread contract: thread-safe. The destructor returns cached buffers to the
// device; buffers still held by callers are left alone.
class PooledAllocator final : public Allocator {
 public:
  static constexpr size_t kPageSize = size_t{4} << 10;         // 4 KiB
  static constexpr size_t kHugeThreshold = size_t{64} << 20;   // 64 MiB
  static constexpr size_t kHugeGranularity = size_t{2} << 20;  // 2 MiB
  // Every device buffer is at least this aligned, so cached buffers fit any
  // tensor alignment up to it.
  static constexpr size_t kMinAlignment = 256;

  explicit PooledAllocator(Device device);
  ~PooledAllocator() override;

  // The size class of a request: a multiple of 4 KiB below 16 KiB; above it,
  // four classes per power of two (step 2^k / 4 for sizes in (2^k, 2^(k+1)]),
  // never finer than a page; from 64 MiB on, a multiple of 2 MiB.
  // A request too large to round is its own class.
  static size_t SizeClass(size_t nbytes);

  // As NaiveAllocator::Alloc. On device out-of-memory the cache is released and
  // the allocation retried once before RESOURCE_EXHAUSTED is returned.
  absl::StatusOr<Buffer> Alloc(size_t nbytes, size_t alignment) override;
  // Keeps the buffer for reuse. Ignores (and reports on stderr) a buffer this
  // allocator did not hand out or that was already freed.
  void Free(const Buffer& buffer) override;
  void Clear() override;
  AllocatorStats Stats() const override;

 private:
  struct Block {
    size_t class_size;
    size_t requested;
  };

  void ReleaseCacheLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<DeviceAPI*> api_;
  mutable absl::Mutex mu_;
  // class size → cached buffers of that class, most recently freed last.
  absl::flat_hash_map<size_t, std::vector<void*>> free_lists_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<void*, Block> live_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tether::memory

#endif  // TETHER_RUNTIME_MEMORY_POOLED_ALLOCATOR_H_
