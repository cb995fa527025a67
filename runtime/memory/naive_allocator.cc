// NaiveAllocator: a pass-through to the device with ownership checks and
// statistics.
#include "runtime/memory/naive_allocator.h"

#include <algorithm>
#include <cstdio>

#include "runtime/core/error.h"

namespace tether::memory {

NaiveAllocator::NaiveAllocator(Device device)
    : Allocator(device, AllocatorType::kNaive), api_(DeviceAPI::Get(device.type)) {}

absl::StatusOr<Buffer> NaiveAllocator::Alloc(size_t nbytes, size_t alignment) {
  if (!api_.ok()) return api_.status();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return ValueError("alignment ", alignment, " is not a power of two");
  }
  TETHER_ASSIGN_OR_RETURN(void* data, (*api_)->Alloc(device(), nbytes, alignment));
  absl::MutexLock lock(&mu_);
  live_[data] = nbytes;
  const auto n = static_cast<int64_t>(nbytes);
  stats_.bytes_in_use += n;
  stats_.bytes_reserved += n;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  ++stats_.num_allocs;
  ++stats_.num_device_allocs;
  return Buffer{data, nbytes, device()};
}

void NaiveAllocator::Free(const Buffer& buffer) {
  if (buffer.data == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(buffer.data);
    if (it == live_.end() || buffer.device != device()) {
      std::fprintf(stderr,
                   "tether: naive allocator of %s ignored a free of %p (%s): not its buffer\n",
                   device().ToString().c_str(), buffer.data, buffer.device.ToString().c_str());
      return;
    }
    const auto n = static_cast<int64_t>(it->second);
    live_.erase(it);
    stats_.bytes_in_use -= n;
    stats_.bytes_reserved -= n;
    ++stats_.num_frees;
    ++stats_.num_device_frees;
  }
  (*api_)->Free(device(), buffer.data);
}

AllocatorStats NaiveAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tether::memory
