// StagingBuffer: bounded, lazily committed host memory for bytes in transit.
#include "server/staging_buffer.h"

#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"

namespace tether::server {

uint64_t HostMemoryAvailable() {
  FILE* f = std::fopen("/proc/meminfo", "re");
  if (f == nullptr) return UINT64_MAX;
  char line[256];
  uint64_t kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long long value = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &value) == 1) {
      kib = value;
      found = true;
    }
  }
  std::fclose(f);
  return found ? kib * 1024 : UINT64_MAX;
}

absl::StatusOr<StagingBuffer> StagingBuffer::Allocate(uint64_t bytes, absl::string_view what) {
  StagingBuffer buffer;
  if (bytes == 0) return buffer;
  const uint64_t available = HostMemoryAvailable();
  char* p = bytes <= available && bytes <= SIZE_MAX
                ? static_cast<char*>(std::malloc(static_cast<size_t>(bytes)))
                : nullptr;
  if (p == nullptr) {
    return WithErrorKind(
        absl::ResourceExhaustedError(absl::StrCat(
            "cannot stage ", what, " of ", bytes, " bytes in the daemon: ",
            available == UINT64_MAX ? std::string("allocation failed")
                                    : absl::StrCat(available, " bytes of memory are available"))),
        ErrorKind::kOutOfMemory);
  }
  buffer.data_.reset(p);
  buffer.size_ = bytes;
  return buffer;
}

}  // namespace tether::server
