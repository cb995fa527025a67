// DaemonMetrics: what tetherd counts for an operator's Prometheus
// (`tetherd --metrics-listen ADDR`, docs/design/metrics.md): sessions, calls
// and their latency by kind, bytes moved, timing-gate waits, session
// workers started and lost, and — sampled at each scrape — the module
// store, open sessions, tensor bytes held and device memory.
//
// The base class records nothing: a daemon without --metrics-listen, or one
// built without prometheus-cpp, uses it, so call sites never check.
// ServeMetrics (server/prometheus_metrics.cc, with Debian's
// prometheus-cpp) serves the real one over HTTP at /metrics.
//
// The farm (farm/, docs/design/farm.md) reports its state through
// SetFarmRegistered and SetFarmDeviceState; until it first does, no farm
// metric exists.
//
// Thread contract: thread-safe; recording is a few atomic operations.
#ifndef TETHER_SERVER_METRICS_H_
#define TETHER_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tether::server {

// What a scrape samples from the daemon (DaemonMetrics::SetSampler).
struct MetricsSample {
  uint64_t sessions_open = 0;
  uint64_t session_tensor_bytes = 0;  // bytes of remote tensors the sessions hold
  uint64_t session_objects = 0;       // VMs, tensor and object handles the sessions hold
  uint64_t store_used_bytes = 0;
  uint64_t store_quota_bytes = 0;
  struct DeviceMemory {
    std::string device;  // "cpu:0", "cuda:0"
    uint64_t total_bytes = 0;
    uint64_t available_bytes = 0;  // 0 when the device does not say (GPUs)
  };
  std::vector<DeviceMemory> devices;
};

// A device's state in the farm, one-hot in tetherd_farm_device_state.
enum class FarmDeviceState { kFree, kLeased, kQuarantined };

class DaemonMetrics {
 public:
  virtual ~DaemonMetrics() = default;

  virtual void SessionOpened() {}
  // `reason` as the event log says it: client, client-gone, idle, shutdown, ...
  virtual void SessionClosed(absl::string_view reason) {}
  // A Call, CallStream request or direct-channel request that ran: `kind`
  // is its operation ("invoke_stateful", "time_evaluator", ...).
  virtual void CallFinished(absl::string_view kind, absl::StatusCode code, absl::Duration latency) {
  }
  // Bytes of messages (and raw tensor payloads) by `path`: a gRPC method
  // ("UploadModule", "CallStream", ...) or "direct".
  virtual void BytesReceived(absl::string_view path, uint64_t bytes) {}
  virtual void BytesSent(absl::string_view path, uint64_t bytes) {}
  // A call that had to wait for the timing gate: a measurement (`exclusive`)
  // for the calls running, or a call for a measurement.
  virtual void TimingGateWaited(bool exclusive, absl::Duration wait) {}
  // Session worker processes (isolated sessions): started, and ended
  // without the daemon asking (`how`: "signal", "exit", "gpu-fault",
  // "vanished"); a lost worker ends its session.
  virtual void WorkerStarted() {}
  virtual void WorkerFailedToStart() {}
  virtual void WorkerLost(absl::string_view how) {}

  // The farm's hook: whether this daemon's record is registered in etcd,
  // and each of its devices' lease state with the fencing token of the
  // current lease (0 when free).
  virtual void SetFarmRegistered(bool registered) {}
  virtual void SetFarmDeviceState(absl::string_view device, FarmDeviceState state,
                                  int64_t fencing_token) {}

  // What each scrape samples; empty (the default) samples nothing. The
  // daemon clears it before what it reads goes away.
  virtual void SetSampler(std::function<MetricsSample()> sampler) {}
};

// A DaemonMetrics served over HTTP at `address` ("127.0.0.1:9464",
// "0.0.0.0:9464", port 0 for a free one), path /metrics, in Prometheus'
// text format. UNAVAILABLE when the address cannot be bound; UNIMPLEMENTED
// in a tetherd built without prometheus-cpp.
class ServedMetrics : public DaemonMetrics {
 public:
  // The bound address, "127.0.0.1:PORT".
  virtual std::string address() const = 0;
};
absl::StatusOr<std::unique_ptr<ServedMetrics>> ServeMetrics(const std::string& address);

// Whether this build can serve metrics (it found prometheus-cpp).
bool MetricsAvailable();

}  // namespace tether::server

#endif  // TETHER_SERVER_METRICS_H_
