// ServeMetrics in a tetherd built without prometheus-cpp (CMake did not
// find it; TETHER_ENABLE_METRICS): the daemon runs, --metrics-listen is
// refused with what to install.
#include "server/metrics.h"

namespace tether::server {

bool MetricsAvailable() { return false; }

absl::StatusOr<std::unique_ptr<ServedMetrics>> ServeMetrics(const std::string& address) {
  return absl::UnimplementedError(
      "this tetherd was built without prometheus-cpp, so it cannot serve metrics; install "
      "prometheus-cpp-dev (deploy/install-deps.sh) and rebuild");
}

}  // namespace tether::server
