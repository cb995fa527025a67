// farm_scale: the device farm at scale against one local etcd — a
// benchmark, not a test (docs/design/farm.md, "Scale"). It registers
// --daemons lightweight daemons (a lease and a record each, renewed every
// TTL/3 by a few threads, as tetherd would; no real processes), then runs
// --clients concurrent clients for --seconds, each acquiring a device
// (farm::DeviceLease, the code `tether farm acquire` runs), holding it for
// --hold-ms and releasing it, in a loop. It reports the acquire latency
// (p50/p90/p99/max, from the call to holding the device, queueing included),
// acquisitions per second, etcd writes per second (the store revision's
// growth: every put, delete and write transaction is one) and errors.
//
//   build/bench/farm_scale [--daemons 1000] [--clients 200] [--seconds 20]
//                          [--hold-ms 20] [--etcd etcd://HOST:PORT] [--etcd-binary PATH]
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

}  // namespace

int main(int argc, char** argv) {
  int daemons = 1000, clients = 200, seconds = 20, hold_ms = 20;
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
  std::atomic<int> errors{0};
  const absl::Time register_start = absl::Now();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        for (int d = t; d < daemons; d += 16) {
          auto lease = (*etcd)->GrantLease(ttl);
          if (!lease.ok()) {
            ++errors;
            continue;
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
          if (!(*etcd)->Put(put).ok()) ++errors;
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  const double register_seconds = absl::ToDoubleSeconds(absl::Now() - register_start);
  // Keep-alives for every registration, every TTL/3, as the daemons would.
  std::atomic<bool> stop{false};
  std::vector<std::thread> keepers;
  for (int t = 0; t < 4; ++t) {
    keepers.emplace_back([&, t] {
      while (!stop) {
        const absl::Time round = absl::Now();
        for (int d = t; d < daemons && !stop; d += 4) {
          if (leases[d] != 0 && !(*etcd)->KeepAliveOnce(leases[d]).ok()) ++errors;
        }
        absl::SleepFor(std::max(absl::ZeroDuration(), ttl / 3 - (absl::Now() - round)));
      }
    });
  }

  // 2. Clients: acquire, hold, release, until the time is up.
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::vector<std::string> failures;
  const int64_t revision_before = Revision(**etcd);
  const absl::Time run_start = absl::Now();
  const absl::Time run_end = run_start + absl::Seconds(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto own = EtcdClient::Create(options);  // one connection per client, as processes have
      if (!own.ok()) return;
      std::mt19937 rng(c);
      while (absl::Now() < run_end) {
        tether::farm::AcquireOptions want;
        want.key = key;
        want.priority = static_cast<int32_t>(rng() % 3);
        want.ttl = absl::Seconds(10);
        want.wait = absl::Seconds(30);
        const absl::Time start = absl::Now();
        auto lease = DeviceLease::Acquire(own->get(), want);
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (lease.ok()) {
            latencies_ms.push_back(ms);
          } else {
            failures.push_back(std::string(lease.status().message()));
          }
        }
        if (lease.ok()) absl::SleepFor(absl::Milliseconds(hold_ms));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double run_seconds = absl::ToDoubleSeconds(absl::Now() - run_start);
  const int64_t revision_after = Revision(**etcd);
  stop = true;
  for (std::thread& t : keepers) t.join();

  std::printf("farm_scale on %s (%u hardware threads), etcd at %s\n", CpuName().c_str(),
              std::thread::hardware_concurrency(), url.c_str());
  std::printf("%d daemons registered in %.2f s (%.0f registrations/s)\n", daemons, register_seconds,
              daemons / register_seconds);
  std::printf("%d clients for %.1f s, hold %d ms:\n", clients, run_seconds, hold_ms);
  std::printf(
      "| acquisitions | per second | p50 ms | p90 ms | p99 ms | max ms | etcd writes/s "
      "| errors |\n|---|---|---|---|---|---|---|---|\n");
  std::printf("| %zu | %.0f | %.1f | %.1f | %.1f | %.1f | %.0f | %zu |\n", latencies_ms.size(),
              latencies_ms.size() / run_seconds, Percentile(latencies_ms, 0.5),
              Percentile(latencies_ms, 0.9), Percentile(latencies_ms, 0.99),
              Percentile(latencies_ms, 1.0), (revision_after - revision_before) / run_seconds,
              failures.size() + static_cast<size_t>(errors.load()));
  if (!failures.empty()) std::printf("first error: %s\n", failures[0].c_str());

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
