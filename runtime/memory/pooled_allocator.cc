// PooledAllocator: size classes, per-class free lists, accounted frees and a
// release-and-retry on device out-of-memory.
#include "runtime/memory/pooled_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/core/error.h"

namespace tether::memory {
namespace {

size_t RoundUp(size_t n, size_t step) { return (n + step - 1) / step * step; }

// `status` with `note` appended to its message, code and payloads kept.
absl::Status Annotate(const absl::Status& status, absl::string_view note) {
  absl::Status out(status.code(), absl::StrCat(status.message(), note));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

PooledAllocator::PooledAllocator(Device device)
    : Allocator(device, AllocatorType::kPooled), api_(DeviceAPI::Get(device.type)) {}

PooledAllocator::~PooledAllocator() {
  absl::MutexLock lock(&mu_);
  ReleaseCacheLocked();
}

size_t PooledAllocator::SizeClass(size_t nbytes) {
  if (nbytes <= kPageSize) return kPageSize;
  if (nbytes > std::numeric_limits<size_t>::max() - kHugeGranularity) return nbytes;
  if (nbytes >= kHugeThreshold) return RoundUp(nbytes, kHugeGranularity);
  // nbytes lies in (2^k, 2^(k+1)]; four classes per doubling.
  const size_t pow2 = size_t{1} << (std::bit_width(nbytes - 1) - 1);
  return RoundUp(nbytes, std::max(kPageSize, pow2 / 4));
}

absl::StatusOr<Buffer> PooledAllocator::Alloc(size_t nbytes, size_t alignment) {
  if (!api_.ok()) return api_.status();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return ValueError("alignment ", alignment, " is not a power of two");
  }
  const size_t class_size = SizeClass(nbytes);
  absl::MutexLock lock(&mu_);
  void* data = nullptr;
  if (auto it = free_lists_.find(class_size); it != free_lists_.end()) {
    std::vector<void*>& list = it->second;
    // Most recently freed first: it is likeliest to be warm in cache.
    for (size_t i = list.size(); i-- > 0;) {
      if (reinterpret_cast<uintptr_t>(list[i]) % alignment == 0) {
        data = list[i];
        list[i] = list.back();
        list.pop_back();
        break;
      }
    }
    if (list.empty()) free_lists_.erase(it);
  }
  if (data != nullptr) {
    ++stats_.num_reuses;
  } else {
    const size_t device_alignment = std::max(alignment, kMinAlignment);
    absl::StatusOr<void*> fresh = (*api_)->Alloc(device(), class_size, device_alignment);
    if (!fresh.ok() && absl::IsResourceExhausted(fresh.status()) && !free_lists_.empty()) {
      ReleaseCacheLocked();
      fresh = (*api_)->Alloc(device(), class_size, device_alignment);
    }
    if (!fresh.ok()) {
      return Annotate(fresh.status(), absl::StrCat(" (pooled allocator: request of ", nbytes,
                                                   " bytes, size class ", class_size, " bytes)"));
    }
    data = *fresh;
    ++stats_.num_device_allocs;
    stats_.bytes_reserved += static_cast<int64_t>(class_size);
    stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  }
  live_[data] = Block{class_size, nbytes};
  ++stats_.num_allocs;
  stats_.bytes_in_use += static_cast<int64_t>(nbytes);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return Buffer{data, nbytes, device()};
}

void PooledAllocator::Free(const Buffer& buffer) {
  if (buffer.data == nullptr) return;
  absl::MutexLock lock(&mu_);
  auto it = live_.find(buffer.data);
  if (it == live_.end() || buffer.device != device()) {
    std::fprintf(stderr,
                 "tether: pooled allocator of %s ignored a free of %p (%s): not a live buffer "
                 "of this allocator\n",
                 device().ToString().c_str(), buffer.data, buffer.device.ToString().c_str());
    return;
  }
  const Block block = it->second;
  live_.erase(it);
  free_lists_[block.class_size].push_back(buffer.data);
  stats_.bytes_in_use -= static_cast<int64_t>(block.requested);
  ++stats_.num_frees;
}

void PooledAllocator::Clear() {
  absl::MutexLock lock(&mu_);
  ReleaseCacheLocked();
}

void PooledAllocator::ReleaseCacheLocked() {
  if (!api_.ok()) return;
  for (auto& [class_size, list] : free_lists_) {
    for (void* data : list) {
      (*api_)->Free(device(), data);
      stats_.bytes_reserved -= static_cast<int64_t>(class_size);
      ++stats_.num_device_frees;
    }
  }
  free_lists_.clear();
}

AllocatorStats PooledAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tether::memory
