// ServeMetrics with Debian's prometheus-cpp: counters and histograms in a
// prometheus::Registry, the sampled gauges and the farm's state as a
// Collectable read at each scrape, all served by prometheus::Exposer
// (civetweb). Built when CMake finds prometheus-cpp
// (TETHER_ENABLE_METRICS); prometheus_absent.cc otherwise.
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "server/metrics.h"

namespace tether::server {
namespace {

// Call latencies: 25 us (a direct-channel call) to a minute (a long
// measurement), about three buckets a decade.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      25e-6, 50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1,      2.5,  5,      10,   30,    60};
  return *buckets;
}

// Timing-gate waits: a millisecond to the daemon's 10-minute hold limit.
const prometheus::Histogram::BucketBoundaries& WaitBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      1e-3, 5e-3, 10e-3, 50e-3, 100e-3, 500e-3, 1, 5, 10, 30, 60, 300, 600};
  return *buckets;
}

prometheus::MetricFamily GaugeFamily(const std::string& name, const std::string& help) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void AddGauge(prometheus::MetricFamily* f, double value,
              std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f->metric.push_back(std::move(m));
}

const char* StateName(FarmDeviceState state) {
  switch (state) {
    case FarmDeviceState::kFree:
      return "free";
    case FarmDeviceState::kLeased:
      return "leased";
    case FarmDeviceState::kQuarantined:
      break;
  }
  return "quarantined";
}

// What a scrape reads at that moment: the daemon's sample and the farm's
// state. Thread contract: thread-safe.
class SampledState final : public prometheus::Collectable {
 public:
  void SetSampler(std::function<MetricsSample()> sampler) {
    absl::MutexLock lock(&mu_);
    sampler_ = std::move(sampler);
  }
  void SetFarmRegistered(bool registered) {
    absl::MutexLock lock(&mu_);
    farm_registered_ = registered ? 1 : 0;
  }
  void SetFarmDevice(absl::string_view device, FarmDeviceState state, int64_t token) {
    absl::MutexLock lock(&mu_);
    farm_devices_[std::string(device)] = {state, token};
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    absl::MutexLock lock(&mu_);
    if (sampler_) {
      const MetricsSample s = sampler_();
      auto one = [&](const char* name, const char* help, double value) {
        out.push_back(GaugeFamily(name, help));
        AddGauge(&out.back(), value);
      };
      one("tetherd_sessions_open", "Sessions open now.", static_cast<double>(s.sessions_open));
      one("tetherd_session_tensor_bytes", "Bytes of remote tensors the open sessions hold.",
          static_cast<double>(s.session_tensor_bytes));
      one("tetherd_session_objects",
          "VMs, tensor and object handles the open sessions hold (isolated sessions' not "
          "counted).",
          static_cast<double>(s.session_objects));
      one("tetherd_store_used_bytes", "Bytes of modules in the module store.",
          static_cast<double>(s.store_used_bytes));
      one("tetherd_store_quota_bytes", "The module store's quota.",
          static_cast<double>(s.store_quota_bytes));
      prometheus::MetricFamily total =
          GaugeFamily("tetherd_device_memory_total_bytes", "Memory of each device.");
      prometheus::MetricFamily available = GaugeFamily("tetherd_device_memory_available_bytes",
                                                       "Memory each device has free (host: "
                                                       "MemAvailable; GPUs are not sampled).");
      for (const MetricsSample::DeviceMemory& d : s.devices) {
        AddGauge(&total, static_cast<double>(d.total_bytes), {{"device", d.device}});
        if (d.available_bytes > 0) {
          AddGauge(&available, static_cast<double>(d.available_bytes), {{"device", d.device}});
        }
      }
      out.push_back(std::move(total));
      out.push_back(std::move(available));
    }
    if (farm_registered_ >= 0) {
      out.push_back(GaugeFamily("tetherd_farm_registered",
                                "1 while this daemon's record is registered in the farm."));
      AddGauge(&out.back(), farm_registered_);
    }
    if (!farm_devices_.empty()) {
      prometheus::MetricFamily state = GaugeFamily(
          "tetherd_farm_device_state", "1 for each device's current farm state, else 0.");
      prometheus::MetricFamily token = GaugeFamily(
          "tetherd_farm_fencing_token", "The fencing token of each device's current lease.");
      for (const auto& [device, info] : farm_devices_) {
        for (FarmDeviceState s :
             {FarmDeviceState::kFree, FarmDeviceState::kLeased, FarmDeviceState::kQuarantined}) {
          AddGauge(&state, info.first == s ? 1 : 0, {{"device", device}, {"state", StateName(s)}});
        }
        AddGauge(&token, static_cast<double>(info.second), {{"device", device}});
      }
      out.push_back(std::move(state));
      out.push_back(std::move(token));
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::function<MetricsSample()> sampler_ ABSL_GUARDED_BY(mu_);
  int farm_registered_ ABSL_GUARDED_BY(mu_) = -1;  // -1: the farm never said
  std::map<std::string, std::pair<FarmDeviceState, int64_t>> farm_devices_ ABSL_GUARDED_BY(mu_);
};

class PrometheusMetrics final : public ServedMetrics {
 public:
  PrometheusMetrics()
      : registry_(std::make_shared<prometheus::Registry>()),
        sampled_(std::make_shared<SampledState>()),
        sessions_opened_(prometheus::BuildCounter()
                             .Name("tetherd_sessions_opened_total")
                             .Help("Sessions opened.")
                             .Register(*registry_)
                             .Add({})),
        sessions_closed_(prometheus::BuildCounter()
                             .Name("tetherd_sessions_closed_total")
                             .Help("Sessions closed, by reason.")
                             .Register(*registry_)),
        calls_(prometheus::BuildCounter()
                   .Name("tetherd_calls_total")
                   .Help("Calls run (Call, CallStream, direct channel), by operation and status.")
                   .Register(*registry_)),
        latency_(prometheus::BuildHistogram()
                     .Name("tetherd_call_duration_seconds")
                     .Help("Time from a call's start on the daemon to its reply, by operation.")
                     .Register(*registry_)),
        received_(prometheus::BuildCounter()
                      .Name("tetherd_received_bytes_total")
                      .Help("Bytes of requests and tensor data received, by method.")
                      .Register(*registry_)),
        sent_(prometheus::BuildCounter()
                  .Name("tetherd_sent_bytes_total")
                  .Help("Bytes of replies and tensor data sent, by method.")
                  .Register(*registry_)),
        gate_waits_(prometheus::BuildHistogram()
                        .Name("tetherd_timing_gate_wait_seconds")
                        .Help("Waits for the timing gate: a measurement for running calls "
                              "(exclusive), a call for a measurement (shared).")
                        .Register(*registry_)),
        workers_started_(prometheus::BuildCounter()
                             .Name("tetherd_session_workers_started_total")
                             .Help("Worker processes started for isolated sessions.")
                             .Register(*registry_)),
        workers_lost_(prometheus::BuildCounter()
                          .Name("tetherd_session_workers_lost_total")
                          .Help("Session workers that ended without the daemon asking, by how.")
                          .Register(*registry_)) {}

  absl::Status Serve(const std::string& address) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(address, 2);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
    }
    std::vector<int> ports = exposer_->GetListeningPorts();
    if (ports.empty()) return absl::UnavailableError(absl::StrCat("cannot bind ", address));
    const size_t colon = address.rfind(':');
    address_ = absl::StrCat(colon == std::string::npos ? address : address.substr(0, colon), ":",
                            ports.front());
    exposer_->RegisterCollectable(registry_);
    exposer_->RegisterCollectable(sampled_);
    return absl::OkStatus();
  }

  std::string address() const override { return address_; }

  void SessionOpened() override { sessions_opened_.Increment(); }
  void SessionClosed(absl::string_view reason) override {
    sessions_closed_.Add({{"reason", std::string(reason)}}).Increment();
  }
  void CallFinished(absl::string_view kind, absl::StatusCode code,
                    absl::Duration latency) override {
    const std::string k(kind);
    calls_.Add({{"kind", k}, {"code", absl::StatusCodeToString(code)}}).Increment();
    latency_.Add({{"kind", k}}, LatencyBuckets()).Observe(absl::ToDoubleSeconds(latency));
  }
  void BytesReceived(absl::string_view path, uint64_t bytes) override {
    received_.Add({{"method", std::string(path)}}).Increment(static_cast<double>(bytes));
  }
  void BytesSent(absl::string_view path, uint64_t bytes) override {
    sent_.Add({{"method", std::string(path)}}).Increment(static_cast<double>(bytes));
  }
  void TimingGateWaited(bool exclusive, absl::Duration wait) override {
    gate_waits_.Add({{"mode", exclusive ? "exclusive" : "shared"}}, WaitBuckets())
        .Observe(absl::ToDoubleSeconds(wait));
  }
  void WorkerStarted() override { workers_started_.Add({{"result", "started"}}).Increment(); }
  void WorkerFailedToStart() override { workers_started_.Add({{"result", "failed"}}).Increment(); }
  void WorkerLost(absl::string_view how) override {
    workers_lost_.Add({{"how", std::string(how)}}).Increment();
  }
  void SetFarmRegistered(bool registered) override { sampled_->SetFarmRegistered(registered); }
  void SetFarmDeviceState(absl::string_view device, FarmDeviceState state,
                          int64_t fencing_token) override {
    sampled_->SetFarmDevice(device, state, fencing_token);
  }
  void SetSampler(std::function<MetricsSample()> sampler) override {
    sampled_->SetSampler(std::move(sampler));
  }

 private:
  // Co-owned with the exposer, which keeps weak pointers to them.
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<SampledState> sampled_;
  prometheus::Counter& sessions_opened_;
  prometheus::Family<prometheus::Counter>& sessions_closed_;
  prometheus::Family<prometheus::Counter>& calls_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Counter>& received_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Histogram>& gate_waits_;
  prometheus::Family<prometheus::Counter>& workers_started_;
  prometheus::Family<prometheus::Counter>& workers_lost_;
  std::string address_;
  // Last: stopped (its threads joined) before the metrics it reads go.
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace

bool MetricsAvailable() { return true; }

absl::StatusOr<std::unique_ptr<ServedMetrics>> ServeMetrics(const std::string& address) {
  auto metrics = std::make_unique<PrometheusMetrics>();
  if (absl::Status s = metrics->Serve(address); !s.ok()) return s;
  return std::unique_ptr<ServedMetrics>(std::move(metrics));
}

}  // namespace tether::server
