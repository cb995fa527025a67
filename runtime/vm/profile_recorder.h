// ProfileRecorder: what LocalVirtualMachine::Profile gathers while the
// interpreter runs one profiled call — a row per packed call, timed by the
// device timer of the call's last tensor argument. Internal to runtime/vm.
#ifndef TETHER_RUNTIME_VM_PROFILE_RECORDER_H_
#define TETHER_RUNTIME_VM_PROFILE_RECORDER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device_api.h"

namespace tether::vm {

// "float32[1, 64], float32[64, 64], 64" for the tensor and int arguments of
// a call, in order (a kernel's int arguments are mostly its shape vars), so
// `tether bench --kernel` can rebuild a kernel's arguments from a profile.
inline std::string ArgumentShapes(ArgSpan args) {
  std::string out;
  for (const Value& v : args) {
    if (v.is_tensor()) {
      auto t = v.AsRef<TensorObj>();
      absl::StrAppend(&out, out.empty() ? "" : ", ", t->dtype().ToString(),
                      ShapeToString(t->shape()));
    } else if (v.is_int()) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", v.int_value());
    }
  }
  return out;
}

// Thread contract: thread-hostile (owned by one profiled call).
class ProfileRecorder {
 public:
  struct Row {
    std::string name;
    double duration_us;
    Device device;
    std::string shapes;
    double start_us;  // when the call began, after `origin` (host clock)
  };
  std::vector<Row> rows;
  // The start of the profiled call: rows' start_us count from here.
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  absl::flat_hash_map<Device, std::unique_ptr<DeviceTimer>> timers;

  absl::StatusOr<DeviceTimer*> TimerFor(Device device) {
    auto it = timers.find(device);
    if (it != timers.end()) return it->second.get();
    TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(device.type));
    TETHER_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTimer> timer, api->CreateTimer(device));
    DeviceTimer* raw = timer.get();
    timers.emplace(device, std::move(timer));
    return raw;
  }
};

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_PROFILE_RECORDER_H_
