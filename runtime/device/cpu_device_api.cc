// The host CPU as a device: aligned heap memory, memcpy copies, no streams, and
// attributes read from the OS (/proc/cpuinfo, /proc/meminfo, sysinfo).
#include <sys/sysinfo.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/core/error.h"
#include "runtime/device/device_api.h"
#include "runtime/device/device_api_internal.h"

namespace tether {
namespace {

// Host-memory device types this API copies between.
bool IsHost(Device device) { return device.type == kDLCPU || device.type == kDLCUDAHost; }

// The value of `key` ("model name") in a "key : value" file, if present.
std::optional<std::string> ReadProcField(const char* path, absl::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (absl::StripAsciiWhitespace(absl::string_view(line).substr(0, colon)) != key) continue;
    return std::string(absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1)));
  }
  return std::nullopt;
}

// A /proc/meminfo size ("16318504 kB") in bytes.
std::optional<int64_t> ReadMeminfoBytes(absl::string_view key) {
  std::optional<std::string> text = ReadProcField("/proc/meminfo", key);
  if (!text) return std::nullopt;
  absl::string_view digits = *text;
  if (size_t space = digits.find(' '); space != absl::string_view::npos) {
    digits = digits.substr(0, space);
  }
  int64_t kib = 0;
  if (!absl::SimpleAtoi(digits, &kib) || kib < 0) return std::nullopt;
  return kib * 1024;
}

// Thread contract: thread-hostile, like every DeviceTimer.
class CpuTimer final : public DeviceTimer {
 public:
  absl::Status Start() override {
    start_ = std::chrono::steady_clock::now();
    started_ = true;
    return absl::OkStatus();
  }
  absl::Status Stop() override {
    if (!started_) return PreconditionError("timer stopped before it was started");
    stop_ = std::chrono::steady_clock::now();
    stopped_ = true;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> ElapsedNanos() override {
    if (!stopped_) return PreconditionError("timer read before it was stopped");
    return std::chrono::duration_cast<std::chrono::nanoseconds>(stop_ - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point stop_;
  bool started_ = false;
  bool stopped_ = false;
};

// Thread contract: thread-safe (stateless apart from the OS).
class HostDeviceAPI final : public DeviceAPI {
 public:
  absl::StatusOr<Value> GetAttr(int device_id, DeviceAttr attr) override {
    switch (attr) {
      case DeviceAttr::kExist:
        return Value(device_id >= 0);
      case DeviceAttr::kDeviceName: {
        std::optional<std::string> name = ReadProcField("/proc/cpuinfo", "model name");
        return name ? Value(*name) : Value();
      }
      case DeviceAttr::kMultiProcessorCount: {
        unsigned n = std::thread::hardware_concurrency();
        return n > 0 ? Value(static_cast<int64_t>(n)) : Value();
      }
      case DeviceAttr::kTotalGlobalMemory: {
        if (std::optional<int64_t> bytes = ReadMeminfoBytes("MemTotal")) return Value(*bytes);
        struct sysinfo info;
        if (sysinfo(&info) != 0) return Value();
        return Value(static_cast<int64_t>(info.totalram) * info.mem_unit);
      }
      case DeviceAttr::kAvailableGlobalMemory: {
        if (std::optional<int64_t> bytes = ReadMeminfoBytes("MemAvailable")) return Value(*bytes);
        struct sysinfo info;
        if (sysinfo(&info) != 0) return Value();
        return Value(static_cast<int64_t>(info.freeram) * info.mem_unit);
      }
      default:
        return Value();
    }
  }

  absl::StatusOr<void*> Alloc(Device device, size_t nbytes, size_t alignment) override {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return ValueError("alignment ", alignment, " is not a power of two");
    }
    alignment = std::max(alignment, sizeof(void*));
    // posix_memalign may return null for zero bytes; callers expect a pointer.
    size_t size = nbytes == 0 ? alignment : nbytes;
    void* ptr = nullptr;
    int rc = posix_memalign(&ptr, alignment, size);
    if (rc != 0 || ptr == nullptr) {
      return OutOfMemoryError("cannot allocate ", nbytes, " bytes on ", device.ToString(), " (",
                              std::strerror(rc), ")");
    }
    return ptr;
  }

  void Free(Device device, void* ptr) override { std::free(ptr); }

  absl::Status Copy(const void* from, Device from_device, void* to, Device to_device, size_t nbytes,
                    StreamHandle stream) override {
    if (!IsHost(from_device) || !IsHost(to_device)) {
      return ValueError("the cpu device api cannot copy from ", from_device.ToString(), " to ",
                        to_device.ToString());
    }
    if (nbytes == 0) return absl::OkStatus();
    if (from == nullptr || to == nullptr) {
      return ValueError("copy of ", nbytes, " bytes with a null pointer");
    }
    std::memmove(to, from, nbytes);
    return absl::OkStatus();
  }

  absl::StatusOr<StreamHandle> CreateStream(Device device) override { return nullptr; }
  void FreeStream(Device device, StreamHandle stream) override {}
  absl::Status Sync(Device device, StreamHandle stream) override { return absl::OkStatus(); }

  absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(Device device) override {
    return std::unique_ptr<DeviceTimer>(std::make_unique<CpuTimer>());
  }

  absl::Status Memset(Device device, void* ptr, int value, size_t nbytes) override {
    if (nbytes == 0) return absl::OkStatus();
    if (ptr == nullptr) return ValueError("memset of ", nbytes, " bytes at a null pointer");
    std::memset(ptr, value, nbytes);
    return absl::OkStatus();
  }
};

}  // namespace

namespace device_internal {

DeviceAPI* CpuDeviceAPI() {
  static HostDeviceAPI* const kApi = new HostDeviceAPI();
  return kApi;
}

}  // namespace device_internal
}  // namespace tether
