// Result output of the CLI: the device state as JSON, timestamps, the
// daemon's provenance, JUnit files.
#include "client/cli/result_output.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/commands.h"
#include "client/results/json_writer.h"

namespace tether::cli {
namespace {

// `key`: the value, or null where the daemon could not read it.
void OptionalDouble(results::JsonWriter& w, const char* key, bool has, double value) {
  w.Key(key);
  if (has) {
    w.Double(value);
  } else {
    w.Null();
  }
}

}  // namespace

std::string DeviceStateJson(const v1::DeviceState& s) {
  results::JsonWriter w;
  w.BeginObject();
  w.Key("read_at").String(absl::FormatTime(
      "%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(s.read_unix_ms()), absl::UTCTimeZone()));
  w.Key("hostname").String(s.hostname()).Key("kernel").String(s.kernel());
  w.Key("cpu_model").String(s.cpu_model());
  w.Key("online_cpus").Int(s.online_cpus());
  w.Key("cpu_frequency").BeginArray();
  for (const v1::CpuFrequencyPolicy& p : s.cpu_frequency()) {
    w.BeginObject().Key("cpus").String(p.cpus()).Key("governor").String(p.governor());
    w.Key("driver").String(p.driver());
    w.Key("current_khz").Int(static_cast<int64_t>(p.current_khz()));
    w.Key("min_khz").Int(static_cast<int64_t>(p.min_khz()));
    w.Key("max_khz").Int(static_cast<int64_t>(p.max_khz()));
    w.EndObject();
  }
  w.EndArray();
  w.Key("cpu_boost").String(s.cpu_boost());
  w.Key("temperatures").BeginArray();
  for (const v1::TemperatureReading& t : s.temperatures()) {
    w.BeginObject().Key("sensor").String(t.sensor()).Key("celsius").Double(t.celsius());
    w.EndObject();
  }
  w.EndArray();
  w.Key("gpus").BeginArray();
  for (const v1::GpuState& g : s.gpus()) {
    w.BeginObject().Key("device").String(g.device()).Key("name").String(g.name());
    w.Key("compute_version").String(g.compute_version());
    w.Key("driver_version").String(g.driver_version());
    w.Key("max_clock_khz").Int(g.max_clock_khz());
    w.Key("memory_clock_khz").Int(g.memory_clock_khz());
    w.Key("total_memory_bytes").Int(static_cast<int64_t>(g.total_memory_bytes()));
    w.Key("pci_bus_id").String(g.pci_bus_id());
    w.Key("driver_release").String(g.driver_release());
    OptionalDouble(w, "temperature_celsius", g.has_temperature_celsius(), g.temperature_celsius());
    w.Key("sm_clock_khz").Int(g.sm_clock_khz());
    w.Key("memory_clock_current_khz").Int(g.memory_clock_current_khz());
    OptionalDouble(w, "power_watts", g.has_power_watts(), g.power_watts());
    w.Key("performance_state").String(g.performance_state());
    w.Key("clock_limits").String(g.clock_limits());
    w.EndObject();
  }
  w.EndArray();
  w.Key("load_average_1m").Double(s.load_average_1m());
  w.EndObject();
  std::string json = w.text();
  if (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

std::string TimestampNow() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

void AddDaemonProvenance(const client::RemoteSession& session, const std::string& address,
                         results::Provenance* p) {
  const v1::HandshakeResponse& h = session.handshake();
  p->daemon_address = address.empty() ? "embedded" : address;
  p->daemon_version = h.runtime_version();
  p->protocol = absl::StrCat(h.protocol().major(), ".", h.protocol().minor());
  p->daemon_triple = h.target().triple();
  p->daemon_cpu = h.target().cpu();
  p->daemon_cpu_description = h.target().description();
  p->daemon_features.assign(h.target().features().begin(), h.target().features().end());
}

results::TimingSettings TimingOf(const profiling::TimeEvaluatorOptions& o, bool concurrent) {
  results::TimingSettings t;
  t.number = o.number;
  t.repeat = o.repeat;
  t.min_repeat_ms = o.min_repeat_ms;
  t.limit_zero_time_iterations = o.limit_zero_time_iterations;
  t.cooldown_interval_ms = o.cooldown_interval_ms;
  t.repeats_to_cooldown = o.repeats_to_cooldown;
  t.cache_flush_bytes = o.cache_flush_bytes;
  t.f_preproc = o.f_preproc;
  t.concurrent = concurrent;
  return t;
}

results::JunitCase ErrorCase(results::JunitCase c, const absl::Status& status) {
  c.outcome = results::JunitCase::Outcome::kError;
  c.type = absl::StatusCodeToString(status.code());
  c.message = std::string(status.message());
  return c;
}

int WriteJunit(const std::string& path, const results::JunitSuite& suite) {
  if (absl::Status s = results::WriteTextFile(path, results::JunitXml(suite)); !s.ok()) {
    return Fail("--junit", s);
  }
  return 0;
}

}  // namespace tether::cli
