// Device: a (device type, index) pair as DLDevice, with "cpu:0" / "cuda:1" parse
// and print.
#ifndef TETHER_RUNTIME_CORE_DEVICE_H_
#define TETHER_RUNTIME_CORE_DEVICE_H_

#include <dlpack/dlpack.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether {

// Thread contract: a value type; thread-compatible.
struct Device {
  DLDeviceType type = kDLCPU;
  int id = 0;

  static constexpr Device Cpu(int id = 0) { return Device{kDLCPU, id}; }
  static constexpr Device Cuda(int id = 0) { return Device{kDLCUDA, id}; }
  static Device FromDL(DLDevice d) { return Device{d.device_type, d.device_id}; }

  // Parses "cpu", "cpu:0", "cuda:1", "cuda_host:0", "gpu:0" (an alias of cuda).
  static absl::StatusOr<Device> Parse(absl::string_view text);

  DLDevice dl() const { return DLDevice{type, id}; }
  // "cpu:0", "cuda:1".
  std::string ToString() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.id == b.id;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), static_cast<int>(d.type), d.id);
  }
};

// "cpu", "cuda", "cuda_host", ... for a device type; "dev<N>" for unknown ones.
std::string DeviceTypeName(DLDeviceType type);

// Whether `type` (e.g. read from a file) is a device type DLPack defines.
bool IsKnownDeviceType(int type);

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_DEVICE_H_
