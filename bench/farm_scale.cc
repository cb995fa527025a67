// farm_scale: the device farm at scale against one local etcd — a
// benchmark, not a test (docs/design/farm.md, "Scale"). It registers
// --daemons lightweight daemons (a lease and a record each, renewed every
// TTL/3 by 16 threads, as tetherd would, registered again when found expired; no real processes),
// then runs
// --clients concurrent clients for --seconds, each acquiring a device
// (farm::DeviceLease, the code `tether farm acquire` runs), holding it for
// --hold-ms and releasing it, in a loop. It reports the acquire latency
// (p50/p90/p99/max, from the call to holding the device, queueing included),
// acquisitions per second, etcd writes per second (the store revision's
// growth: every put, delete and write transaction is one) and errors.
//
// That closed loop keeps every client busy, so it measures the farm
// saturated: the latency is then about clients / throughput. --rates R,...
// adds open-loop rows: for each total rate R the same clients acquire at
// Poisson arrivals (R / clients per second each), and each latency counts
// from when the acquisition was due, so a client still busy when its next
// one is due is charged the wait (no coordinated omission). The rows show the
// latency a farm gives below saturation, and the rate where it breaks.
//
//   build/bench/farm_scale [--daemons 1000] [--clients 200] [--seconds 20]
//                          [--hold-ms 20] [--rates 50,100,200,400]
//                          [--etcd etcd://HOST:PORT] [--etcd-binary PATH]
//
// Without --etcd it starts its own etcd (Debian's etcd-server) on free
// loopback ports with a temporary data dir, and stops it at the end.
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "farm/acquisition.h"
#include "farm/etcd_client.h"
#include "farm/records.h"

extern char** environ;

namespace {

using tether::farm::DeviceLease;
using tether::farm::EtcdClient;
using tether::farm::EtcdOptions;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

int64_t Revision(EtcdClient& etcd) {
  etcdserverpb::RangeRequest range;
  range.set_key("/tether/farm-scale-revision-probe");
  auto response = etcd.Range(range);
  return response.ok() ? response->header().revision() : -1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// One run of the clients: a row of the table.
struct Row {
  std::string load;  // "closed loop" or "open, R/s"
  size_t acquisitions = 0;
  double seconds = 0;
  std::vector<double> latencies_ms;
  int64_t writes = 0;
  std::vector<std::string> failures;
  int keepalive_errors = 0;  // the simulated daemons' keep-alives that failed
  int expired = 0;           // their leases found expired (then registered again)
};

// The clients for `seconds`: closed loop (acquire, hold, release, again)
// when `rate` is 0, else Poisson arrivals at `rate` per second in all.
Row RunClients(const EtcdOptions& options, EtcdClient& etcd, const std::string& key, int clients,
               int seconds, int hold_ms, double rate) {
  Row row;
  row.load = rate > 0 ? absl::StrCat("open, ", rate, "/s") : "closed loop";
  std::mutex mu;
  const int64_t revision_before = Revision(etcd);
  const absl::Time run_start = absl::Now();
  const absl::Time run_end = run_start + absl::Seconds(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto own = EtcdClient::Create(options);  // one connection per client, as processes have
      if (!own.ok()) return;
      std::mt19937 rng(c + static_cast<int>(rate) * 7919);
      std::exponential_distribution<double> gap(rate > 0 ? rate / clients : 1);
      absl::Time due = run_start;
      while (true) {
        if (rate > 0) {
          due += absl::Seconds(gap(rng));
          if (due >= run_end) break;
          absl::SleepFor(due - absl::Now());  // nothing when already late
        } else {
          due = absl::Now();
          if (due >= run_end) break;
        }
        tether::farm::AcquireOptions want;
        want.key = key;
        want.priority = static_cast<int32_t>(rng() % 3);
        want.ttl = absl::Seconds(10);
        want.wait = absl::Seconds(30);
        auto lease = DeviceLease::Acquire(own->get(), want);
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - due);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (lease.ok()) {
            row.latencies_ms.push_back(ms);
          } else {
            row.failures.push_back(std::string(lease.status().message()));
          }
        }
        if (lease.ok()) absl::SleepFor(absl::Milliseconds(hold_ms));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  row.seconds = absl::ToDoubleSeconds(absl::Now() - run_start);
  row.writes = Revision(etcd) - revision_before;
  row.acquisitions = row.latencies_ms.size();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  int daemons = 1000, clients = 200, seconds = 20, hold_ms = 20;
  std::vector<double> rates;
  std::string url, etcd_binary = "/usr/bin/etcd";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--daemons") {
      (void)absl::SimpleAtoi(value, &daemons);
    } else if (flag == "--clients") {
      (void)absl::SimpleAtoi(value, &clients);
    } else if (flag == "--seconds") {
      (void)absl::SimpleAtoi(value, &seconds);
    } else if (flag == "--hold-ms") {
      (void)absl::SimpleAtoi(value, &hold_ms);
    } else if (flag == "--rates") {
      for (absl::string_view r : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        double rate = 0;
        if (!absl::SimpleAtod(r, &rate) || rate <= 0) {
          std::fprintf(stderr, "farm_scale: --rates takes positive numbers, not %s\n",
                       std::string(r).c_str());
          return 2;
        }
        rates.push_back(rate);
      }
    } else if (flag == "--etcd") {
      url = value;
    } else if (flag == "--etcd-binary") {
      etcd_binary = value;
    } else {
      std::fprintf(stderr, "farm_scale: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  pid_t etcd_pid = -1;
  std::filesystem::path dir;
  if (url.empty()) {
    dir = std::filesystem::temp_directory_path() / absl::StrCat("farm-scale-", ::getpid());
    std::filesystem::create_directories(dir);
    const std::string client = absl::StrCat("http://127.0.0.1:", FreePort());
    const std::string peer = absl::StrCat("http://127.0.0.1:", FreePort());
    std::vector<std::string> args = {etcd_binary,
                                     "--data-dir",
                                     (dir / "data").string(),
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peer,
                                     "--initial-advertise-peer-urls",
                                     peer,
                                     "--initial-cluster",
                                     "default=" + peer,
                                     "--log-level",
                                     "error"};
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    if (posix_spawn(&etcd_pid, cargs[0], nullptr, nullptr, cargs.data(), environ) != 0) {
      std::fprintf(stderr, "farm_scale: cannot start %s\n", etcd_binary.c_str());
      return 1;
    }
    url = "etcd://" + client.substr(7);
  }
  EtcdOptions options;
  if (absl::Status s = tether::farm::ParseFarmUrl(url, &options); !s.ok()) {
    std::fprintf(stderr, "farm_scale: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  auto etcd = EtcdClient::Create(options);
  if (!etcd.ok()) return 1;
  for (int i = 0; i < 100 && Revision(**etcd) < 0; ++i) absl::SleepFor(absl::Milliseconds(100));
  const std::string key = absl::StrCat("scale-", ::getpid());

  // 1. Registrations: a lease and a record per daemon, from 16 threads.
  const absl::Duration ttl = absl::Seconds(10);
  std::vector<int64_t> leases(daemons);
  std::atomic<int> register_errors{0};
  // Counted while the clients run: keep-alive calls that failed (etcd too
  // slow to answer in time) and leases found expired, whose daemon then
  // registers again, as tetherd does.
  std::atomic<int> keepalive_errors{0}, expired{0};
  auto register_daemon = [&](int d) {
    auto lease = (*etcd)->GrantLease(ttl);
    if (!lease.ok()) {
      ++register_errors;
      return;
    }
    leases[d] = *lease;
    tether::farm::v1::DeviceRecord record;
    record.set_id(absl::StrCat("board-", d));
    record.set_address(absl::StrCat("10.0.", d / 250, ".", d % 250, ":9190"));
    record.set_protocol("1.4");
    record.mutable_target()->set_triple("aarch64-linux-gnu");
    (*record.mutable_labels())["board"] = d % 2 ? "rpi4" : "jetson";
    record.add_devices()->set_name("cpu:0");
    etcdserverpb::PutRequest put;
    put.set_key(tether::farm::DeviceKey(key, record.id()));
    put.set_value(tether::farm::ToJson(record));
    put.set_lease(*lease);
    if (!(*etcd)->Put(put).ok()) ++register_errors;
  };
  const absl::Time register_start = absl::Now();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        for (int d = t; d < daemons; d += 16) register_daemon(d);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  const double register_seconds = absl::ToDoubleSeconds(absl::Now() - register_start);
  // Keep-alives for every registration, every TTL/3, as the daemons would.
  std::atomic<bool> stop{false};
  std::vector<std::thread> keepers;
  // 16 threads, so that one slow answer delays few daemons' renewals (each
  // real daemon renews on its own).
  constexpr int kKeepers = 16;
  for (int t = 0; t < kKeepers; ++t) {
    keepers.emplace_back([&, t] {
      while (!stop) {
        const absl::Time round = absl::Now();
        for (int d = t; d < daemons && !stop; d += kKeepers) {
          absl::StatusOr<int64_t> left = (*etcd)->KeepAliveOnce(leases[d]);
          if (left.ok()) continue;
          if (absl::IsNotFound(left.status())) {
            ++expired;
            register_daemon(d);
          } else {
            ++keepalive_errors;
          }
        }
        absl::SleepFor(std::max(absl::ZeroDuration(), ttl / 3 - (absl::Now() - round)));
      }
    });
  }

  // 2. Clients: the closed loop, then each open-loop rate.
  std::vector<Row> rows;
  std::vector<double> run_rates = {0};
  run_rates.insert(run_rates.end(), rates.begin(), rates.end());
  for (double rate : run_rates) {
    const int errors_before = keepalive_errors, expired_before = expired;
    rows.push_back(RunClients(options, **etcd, key, clients, seconds, hold_ms, rate));
    rows.back().keepalive_errors = keepalive_errors - errors_before;
    rows.back().expired = expired - expired_before;
  }
  stop = true;
  for (std::thread& t : keepers) t.join();

  std::printf("farm_scale on %s (%u hardware threads), etcd at %s\n", CpuName().c_str(),
              std::thread::hardware_concurrency(), url.c_str());
  std::printf("%d daemons registered in %.2f s (%.0f registrations/s)\n", daemons, register_seconds,
              daemons / register_seconds);
  std::printf("%d clients, %d s a row, hold %d ms:\n", clients, seconds, hold_ms);
  std::printf(
      "| load | acquisitions | per second | p50 ms | p90 ms | p99 ms | max ms | etcd writes/s "
      "| acquire errors | keep-alive errors | leases expired |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %zu | %.0f | %.1f | %.1f | %.1f | %.1f | %.0f | %zu | %d | %d |\n",
                r.load.c_str(), r.acquisitions, r.acquisitions / r.seconds,
                Percentile(r.latencies_ms, 0.5), Percentile(r.latencies_ms, 0.9),
                Percentile(r.latencies_ms, 0.99), Percentile(r.latencies_ms, 1.0),
                r.writes / r.seconds, r.failures.size(), r.keepalive_errors, r.expired);
  }
  if (register_errors > 0) std::printf("registration errors: %d\n", register_errors.load());
  for (const Row& r : rows) {
    if (!r.failures.empty())
      std::printf("first error (%s): %s\n", r.load.c_str(), r.failures[0].c_str());
  }

  for (int64_t lease : leases) {
    if (lease != 0) (void)(*etcd)->RevokeLease(lease);
  }
  etcd->reset();
  if (etcd_pid > 0) {
    ::kill(etcd_pid, SIGTERM);
    ::waitpid(etcd_pid, nullptr, 0);
    std::filesystem::remove_all(dir);
  }
  return 0;
}
