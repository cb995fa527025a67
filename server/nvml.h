// What only NVML knows of a GPU — its temperature, current clocks, power, the
// performance state and why the clocks are held down — read from
// libnvidia-ml.so.1 with dlopen, so the daemon builds and runs where the
// library is absent (then nothing is read). The CUDA driver gives the card's
// fixed attributes (device_state.cc); this gives its condition at the end of a
// measurement. A GPU is found by its PCI address (DeviceAttr::kPciBusId), the
// name CUDA and NVML share whatever order each enumerates the cards in.
//
// Thread contract: a loaded Nvml is immutable, and NVML's calls are
// thread-safe, so Read may be called from any thread.
#ifndef TETHER_SERVER_NVML_H_
#define TETHER_SERVER_NVML_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tether/v1/tether.pb.h"

namespace tether::server {

class Nvml {
 public:
  // The system's NVML (libnvidia-ml.so.1), loaded and initialised on the
  // first call; nullptr when it is absent or fails to initialise.
  static const Nvml* System();

  // `library` loaded and initialised: UNAVAILABLE when it cannot be loaded,
  // lacks an entry point, or nvmlInit fails (its message then).
  static absl::StatusOr<std::unique_ptr<Nvml>> Open(const std::string& library);

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Fills the NVML fields of `gpu` (driver_release, temperature_celsius,
  // sm_clock_khz, memory_clock_current_khz, power_watts, performance_state,
  // clock_limits) for the card at `pci_bus_id`; leaves them empty when NVML
  // does not know that card or cannot read a value. Never fails.
  void Read(const std::string& pci_bus_id, v1::GpuState* gpu) const;

  // NVML's clock-limiting reasons (a bit mask) as names joined by ",".
  static std::string ClockLimitNames(unsigned long long reasons);

 private:
  struct Api;
  Nvml(void* library, std::unique_ptr<Api> api);
  void* library_;
  std::unique_ptr<Api> api_;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_NVML_H_
