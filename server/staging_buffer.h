// StagingBuffer: host memory for tensor bytes in transit through the daemon
// (an isolated session's tensor on its way to or from its worker, or a
// device tensor's host copy). The size comes from a client, so the buffer is
// refused up front when the host could not hold it, and allocated without
// being touched: pages are committed only as data arrives.
#ifndef TETHER_SERVER_STAGING_BUFFER_H_
#define TETHER_SERVER_STAGING_BUFFER_H_

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether::server {

// Thread contract: thread-compatible; movable, not copyable.
class StagingBuffer {
 public:
  StagingBuffer() = default;

  // A buffer of `bytes` bytes. RESOURCE_EXHAUSTED naming `what` and the size
  // when it exceeds the memory the host has available (MemAvailable in
  // /proc/meminfo, where readable) or the allocation fails.
  static absl::StatusOr<StagingBuffer> Allocate(uint64_t bytes, absl::string_view what);

  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  uint64_t size() const { return size_; }
  absl::string_view view() const { return absl::string_view(data_.get(), size_); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  uint64_t size_ = 0;
};

// Bytes of memory the host can give without swapping (MemAvailable), or
// UINT64_MAX when /proc/meminfo cannot be read.
uint64_t HostMemoryAvailable();

}  // namespace tether::server

#endif  // TETHER_SERVER_STAGING_BUFFER_H_
