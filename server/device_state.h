// The state of the daemon's machine when a measurement ends — CPU model,
// frequency policies (governor, clocks), boost, temperatures, load, and each
// GPU's name, driver, clocks, and (through NVML, server/nvml.h) temperature,
// current clocks, power and clock limits — read where the device is and returned with
// the result (v1::DeviceState, docs/design/rpc-protocol.md "Device state"),
// so a stored benchmark says which machine, in which condition, produced it.
// Everything comes from /proc, /sys and the device API; what a machine does
// not expose (no cpufreq in a VM, no thermal zones) stays empty.
//
// Thread contract: thread-safe (reads files; no shared state).
#ifndef TETHER_SERVER_DEVICE_STATE_H_
#define TETHER_SERVER_DEVICE_STATE_H_

#include <string>

#include "tether/v1/tether.pb.h"

namespace tether::server {

// Fills `out`. `root` prefixes every /proc and /sys path ("" for the real
// ones; tests pass a fake tree). Never fails: unreadable files are skipped.
void ReadDeviceState(v1::DeviceState* out, const std::string& root = "");

// "0-3,6" for the CPUs 0 1 2 3 6 (as sysfs lists them, space-separated).
std::string CompressCpuList(const std::string& cpus);

}  // namespace tether::server

#endif  // TETHER_SERVER_DEVICE_STATE_H_
