// Nvml: libnvidia-ml.so.1 through dlopen. The entry points' signatures are
// NVML's (nvml.h), written here so nothing needs the header: every call
// returns nvmlReturn_t (0 is NVML_SUCCESS) and a device is an opaque pointer.
#include "server/nvml.h"

#include <dlfcn.h>

#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/error.h"

namespace tether::server {
namespace {

using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kSuccess = 0;
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;         // NVML_CLOCK_SM
constexpr int kClockMem = 2;        // NVML_CLOCK_MEM
constexpr int kPstateUnknown = 32;  // NVML_PSTATE_UNKNOWN

template <typename Fn>
void Resolve(void* library, const char* name, Fn*& fn) {
  fn = reinterpret_cast<Fn*>(dlsym(library, name));
}

}  // namespace

// The entry points. Those after `get_handle_by_pci_bus_id` may be missing
// from an old driver's library: their readings are then left empty.
struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*get_handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*system_driver_version)(char*, unsigned int) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*performance_state)(NvmlDevice, int*) = nullptr;
  NvmlReturn (*clock_reasons)(NvmlDevice, unsigned long long*) = nullptr;
};

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Open(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return UnavailableError("no NVML: ", library, " could not be loaded (",
                            why != nullptr ? why : "unknown dlopen error", ")");
  }
  auto api = std::make_unique<Api>();
  Resolve(lib, "nvmlInit_v2", api->init);
  Resolve(lib, "nvmlShutdown", api->shutdown);
  Resolve(lib, "nvmlErrorString", api->error_string);
  Resolve(lib, "nvmlDeviceGetHandleByPciBusId_v2", api->get_handle_by_pci_bus_id);
  Resolve(lib, "nvmlSystemGetDriverVersion", api->system_driver_version);
  Resolve(lib, "nvmlDeviceGetTemperature", api->temperature);
  Resolve(lib, "nvmlDeviceGetClockInfo", api->clock_info);
  Resolve(lib, "nvmlDeviceGetPowerUsage", api->power_usage);
  Resolve(lib, "nvmlDeviceGetPerformanceState", api->performance_state);
  // Renamed in CUDA 12.2's NVML ("clock events"); the old name stays.
  Resolve(lib, "nvmlDeviceGetCurrentClocksEventReasons", api->clock_reasons);
  if (api->clock_reasons == nullptr) {
    Resolve(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", api->clock_reasons);
  }
  if (api->init == nullptr || api->shutdown == nullptr ||
      api->get_handle_by_pci_bus_id == nullptr) {
    dlclose(lib);
    return UnavailableError("no NVML: ", library,
                            " lacks nvmlInit_v2, nvmlShutdown or "
                            "nvmlDeviceGetHandleByPciBusId_v2");
  }
  if (NvmlReturn r = api->init(); r != kSuccess) {
    std::string why = api->error_string != nullptr ? api->error_string(r) : "";
    dlclose(lib);
    return UnavailableError("no NVML: nvmlInit_v2 failed (", r, why.empty() ? "" : ": ", why, ")");
  }
  return std::unique_ptr<Nvml>(new Nvml(lib, std::move(api)));
}

const Nvml* Nvml::System() {
  // Loaded once and kept: the daemon asks after every measurement.
  static const Nvml* const nvml = [] {
    absl::StatusOr<std::unique_ptr<Nvml>> opened = Open("libnvidia-ml.so.1");
    return opened.ok() ? opened->release() : nullptr;
  }();
  return nvml;
}

Nvml::Nvml(void* library, std::unique_ptr<Api> api) : library_(library), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(library_);
}

void Nvml::Read(const std::string& pci_bus_id, v1::GpuState* gpu) const {
  const Api& a = *api_;
  if (a.system_driver_version != nullptr) {
    char version[96] = {};
    if (a.system_driver_version(version, sizeof(version) - 1) == kSuccess) {
      gpu->set_driver_release(version);
    }
  }
  NvmlDevice device = nullptr;
  if (pci_bus_id.empty() || a.get_handle_by_pci_bus_id(pci_bus_id.c_str(), &device) != kSuccess) {
    return;
  }
  unsigned int value = 0;
  if (a.temperature != nullptr && a.temperature(device, kTemperatureGpu, &value) == kSuccess) {
    gpu->set_temperature_celsius(value);
  }
  if (a.clock_info != nullptr && a.clock_info(device, kClockSm, &value) == kSuccess) {
    gpu->set_sm_clock_khz(int64_t{value} * 1000);
  }
  if (a.clock_info != nullptr && a.clock_info(device, kClockMem, &value) == kSuccess) {
    gpu->set_memory_clock_current_khz(int64_t{value} * 1000);
  }
  if (a.power_usage != nullptr && a.power_usage(device, &value) == kSuccess) {
    gpu->set_power_watts(value / 1000.0);
  }
  int pstate = kPstateUnknown;
  if (a.performance_state != nullptr && a.performance_state(device, &pstate) == kSuccess &&
      pstate >= 0 && pstate < 16) {
    gpu->set_performance_state(absl::StrCat("P", pstate));
  }
  unsigned long long reasons = 0;
  if (a.clock_reasons != nullptr && a.clock_reasons(device, &reasons) == kSuccess) {
    gpu->set_clock_limits(ClockLimitNames(reasons));
  }
}

std::string Nvml::ClockLimitNames(unsigned long long reasons) {
  // nvml.h's nvmlClocksEventReason* bits, in bit order.
  static constexpr const char* kNames[] = {
      "idle",           "applications_clocks", "sw_power_cap",        "hw_slowdown",
      "sync_boost",     "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake",
      "display_clocks",
  };
  std::string out;
  for (int bit = 0; bit < 64; ++bit) {
    const unsigned long long mask = 1ULL << bit;
    if ((reasons & mask) == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",",
                    bit < static_cast<int>(std::size(kNames)) ? std::string(kNames[bit])
                                                              : absl::StrFormat("0x%x", mask));
  }
  return out;
}

}  // namespace tether::server
