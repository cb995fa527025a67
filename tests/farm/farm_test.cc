// The device farm against a real etcd and real tetherd processes
// (docs/design/farm.md): registration and expiry, mutual exclusion and the
// priority queue, release on client exit and on SIGKILL, fencing, an etcd
// restarted mid-run, quarantine, and the farm's state in the daemon's
// Prometheus metrics. Leases are 2 s so the whole suite runs in well under a
// minute.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/remote_session.h"
#include "farm/acquisition.h"
#include "gmock/gmock.h"
#include "runtime/profiling/json.h"
#include "server/farm_probe.h"
#include "tests/farm/farm_fixture.h"
#include "tests/testing/certificates.h"
#include "tests/testing/status_matchers.h"

namespace tether::farm::testing {
namespace {

using ::testing::HasSubstr;
using ::tether::testing::StatusIs;

AcquireOptions Want(const std::string& key, absl::Duration wait = absl::Seconds(20)) {
  AcquireOptions options;
  options.key = key;
  options.wait = wait;
  options.ttl = absl::Seconds(2);
  return options;
}

// The fencing token a `tether farm acquire` child printed (0: not yet).
int64_t PrintedToken(const Child& child) {
  const std::string out = child.out();
  const size_t at = out.find("TETHER_FENCING_TOKEN=");
  if (at == std::string::npos) return 0;
  int64_t token = 0;
  const size_t end = out.find('\n', at);
  if (end == std::string::npos) return 0;
  return absl::SimpleAtoi(out.substr(at + 21, end - at - 21), &token) ? token : 0;
}

// GET http://127.0.0.1:PORT/metrics; the body, or "" when the scrape failed.
std::string Scrape(const std::string& address) {
  std::vector<std::string> host_port = absl::StrSplit(address, ':');
  int port = 0;
  if (host_port.size() != 2 || !absl::SimpleAtoi(host_port[1], &port)) return "";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", address, "\r\nConnection: close\r\n\r\n");
  std::string response;
  if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buffer[8192];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  }
  ::close(fd);
  if (!absl::StartsWith(response, "HTTP/1.") || response.find(" 200 ") == std::string::npos) {
    return "";
  }
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The value of sample `name` (with its labels, as the text format writes
// them) in a scrape; nullopt when absent.
std::optional<double> Sample(const std::string& scrape, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size() || line[name.size()] != ' ') {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(name.size() + 1), &value)) return value;
  }
  return std::nullopt;
}

TEST_F(FarmTest, DaemonRegistersAndItsRecordExpiresWhenKilled) {
  StartDaemon("board-a", "ci", {"--label", "board=rpi4", "--label", "rack=2"});
  StartDaemon("board-b", "ci", {"--label", "board=x86"});
  ASSERT_TRUE(WaitFor([&] { return Registered("ci", "board-a") && Registered("ci", "board-b"); }))
      << daemons_["board-a"]->err();
  FarmSnapshot farm = Snapshot("ci");
  const v1::DeviceRecord& a = *farm.devices.at("board-a").record;
  EXPECT_EQ(a.labels().at("board"), "rpi4");
  EXPECT_EQ(a.labels().at("rack"), "2");
  EXPECT_EQ(a.protocol(), "1.6");
  EXPECT_FALSE(a.target().triple().empty());
  ASSERT_GE(a.devices_size(), 1);
  EXPECT_EQ(a.devices(0).name(), "cpu:0");
  EXPECT_TRUE(absl::StartsWith(a.address(), "127.0.0.1:")) << a.address();

  // SIGKILL: nothing deregisters; the record goes with the lease (TTL 2 s).
  daemons_["board-a"]->Kill(SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return !Registered("ci", "board-a"); }, std::chrono::seconds(5)));
  EXPECT_TRUE(Registered("ci", "board-b"));
  // Restarted, it is back.
  StartDaemon("board-a", "ci", {"--label", "board=rpi4"});
  EXPECT_TRUE(WaitFor([&] { return Registered("ci", "board-a"); }));
  // SIGTERM deregisters at once (revoked, not expired).
  daemons_["board-b"]->Kill(SIGTERM);
  EXPECT_FALSE(Registered("ci", "board-b"));
}

TEST_F(FarmTest, ConcurrentAcquirersNeverShareADevice) {
  StartDaemon("d1", "pool");
  StartDaemon("d2", "pool");
  ASSERT_TRUE(WaitFor([&] { return Registered("pool", "d1") && Registered("pool", "d2"); }));
  constexpr int kClients = 6;
  constexpr int kRounds = 3;
  std::mutex mu;
  std::map<std::string, int> holders;  // device -> clients holding it now
  int max_holders = 0;
  std::vector<std::string> errors;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        absl::StatusOr<std::unique_ptr<DeviceLease>> lease =
            DeviceLease::Acquire(etcd_.get(), Want("pool"));
        std::lock_guard<std::mutex> lock(mu);
        if (!lease.ok()) {
          errors.push_back(lease.status().ToString());
          return;
        }
        max_holders = std::max(max_holders, ++holders[(*lease)->device_id()]);
        mu.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the work
        mu.lock();
        --holders[(*lease)->device_id()];
        // Released (revoked) after the count drops, so a second holder
        // would have to come before the release: it would be counted.
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  EXPECT_EQ(max_holders, 1);
  EXPECT_TRUE(Snapshot("pool").waiters.empty());
}

TEST_F(FarmTest, WaitersAreServedInPriorityOrder) {
  StartDaemon("only", "q");
  ASSERT_TRUE(WaitFor([&] { return Registered("q", "only"); }));
  auto first = DeviceLease::Acquire(etcd_.get(), Want("q"));
  ASSERT_TRUE(first.ok()) << first.status();
  std::mutex mu;
  std::vector<int> served;
  std::vector<std::thread> waiters;
  int queued = 0;
  for (int priority : {1, 5, 3, 5}) {
    waiters.emplace_back([&, priority] {
      AcquireOptions options = Want("q");
      options.priority = priority;
      auto lease = DeviceLease::Acquire(etcd_.get(), options);
      std::lock_guard<std::mutex> lock(mu);
      served.push_back(lease.ok() ? priority : -1);
    });
    // One at a time into the queue, so arrival order is known.
    ++queued;
    ASSERT_TRUE(
        WaitFor([&] { return Snapshot("q").waiters.size() == static_cast<size_t>(queued); }));
  }
  // No waiter got the held device.
  EXPECT_TRUE(served.empty());
  ASSERT_TRUE((*first)->Release().ok());
  for (std::thread& t : waiters) t.join();
  // Priority first (5, 5 in arrival order), then 3, then 1.
  EXPECT_THAT(served, ::testing::ElementsAre(5, 5, 3, 1));
}

TEST_F(FarmTest, AClientsHoldEndsWhenItExitsOrIsKilled) {
  StartDaemon("dev", "k");
  ASSERT_TRUE(WaitFor([&] { return Registered("k", "dev"); }));
  auto held = [&] { return Snapshot("k").devices.at("dev").holder.has_value(); };
  for (int sig : {SIGTERM, SIGKILL}) {
    Child client(
        {TETHER_CLI_PATH, "farm", "acquire", "--farm", url(), "--key", "k", "--farm-ttl", "2"},
        (dir_ / absl::StrCat("acquire-", sig)).string());
    ASSERT_TRUE(WaitFor([&] { return PrintedToken(client) > 0; })) << client.err();
    EXPECT_EQ(PrintedToken(client), Snapshot("k").devices.at("dev").fencing_token);
    EXPECT_TRUE(held());
    client.Kill(sig);
    if (sig == SIGTERM) {
      // Released (revoked) before the client exited, not expired.
      EXPECT_FALSE(held());
    }
    // SIGKILL: the lease runs out (TTL 2 s).
    ASSERT_TRUE(WaitFor([&] { return !held(); }, std::chrono::seconds(6))) << sig;
  }
}

TEST_F(FarmTest, TheDaemonRefusesAStaleFencingToken) {
  StartDaemon("fenced", "f");
  ASSERT_TRUE(WaitFor([&] { return Registered("f", "fenced"); }));
  const std::string address = Snapshot("f").devices.at("fenced").record->address();
  // Client A holds the device, then freezes (SIGSTOP): its lease expires.
  Child a({TETHER_CLI_PATH, "farm", "acquire", "--farm", url(), "--key", "f", "--farm-ttl", "2"},
          (dir_ / "client-a").string());
  ASSERT_TRUE(WaitFor([&] { return PrintedToken(a) > 0; })) << a.err();
  const int64_t token_a = PrintedToken(a);
  client::ConnectOptions as_a;
  as_a.fencing_token = token_a;
  auto session_a = client::RemoteSession::Connect(address, as_a);
  ASSERT_TRUE(session_a.ok()) << session_a.status();
  const int64_t shape[] = {4};
  EXPECT_TRUE((*session_a)->AllocTensor(shape, DataType::Float(32), Device::Cpu()).ok());
  // A's tensors over unary calls travel in UploadTensor/DownloadTensor streams.
  client::ConnectOptions as_a_unary = as_a;
  as_a_unary.transport = client::TransportKind::kUnary;
  auto streams_a = client::RemoteSession::Connect(address, as_a_unary);
  ASSERT_TRUE(streams_a.ok()) << streams_a.status();
  const std::vector<float> four = {1, 2, 3, 4};
  Tensor local = *Tensor::FromBytes(shape, DataType::Float(32), four.data(), 16);
  auto uploaded = (*streams_a)->UploadTensor(local);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  ASSERT_TRUE((*streams_a)->DownloadTensor(*uploaded).ok());
  // Without a token, nobody may use a held device.
  EXPECT_THAT(client::RemoteSession::Connect(address, {}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is held by another")));

  a.Signal(SIGSTOP);
  // B acquires once A's lease has run out.
  auto b = DeviceLease::Acquire(etcd_.get(), Want("f", absl::Seconds(10)));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT((*b)->fencing_token(), token_a);
  // B's token works, right after the acquisition (the daemon, whose watch
  // may not have brought B's hold yet, asks etcd).
  client::ConnectOptions as_b;
  as_b.fencing_token = (*b)->fencing_token();
  auto session_b = client::RemoteSession::Connect(address, as_b);
  ASSERT_TRUE(session_b.ok()) << session_b.status();
  EXPECT_TRUE((*session_b)->AllocTensor(shape, DataType::Float(32), Device::Cpu()).ok());
  // Now that the daemon knows B holds the device, A's open session, and a
  // new one with A's token, are refused as stale (until it knew, they could
  // be refused as a hold that ended: the message raced the watch).
  EXPECT_THAT((*session_a)->AllocTensor(shape, DataType::Float(32), Device::Cpu()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is stale")));
  EXPECT_THAT(client::RemoteSession::Connect(address, as_a),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is stale")));
  // The tensor streams are fenced as the calls are.
  EXPECT_THAT((*streams_a)->UploadTensor(local),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is stale")));
  EXPECT_THAT((*streams_a)->DownloadTensor(*uploaded),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is stale")));
  a.Kill(SIGKILL);
  session_a->reset();
}

// A daemon that keeps crashing quarantines itself when it starts again; a
// clean stop (SIGTERM: drain, deregister) is no crash.
TEST_F(FarmTest, ADaemonThatKeepsCrashingIsQuarantined) {
  const std::vector<std::string> flags = {"--farm-crash-quarantine", "2"};
  auto start = [&] {
    Child& d = StartDaemon("crashy", "c", flags);
    EXPECT_TRUE(WaitFor([&] { return Registered("c", "crashy"); })) << d.err();
    return &d;
  };
  EXPECT_EQ(start()->Kill(SIGTERM), 0);
  start()->Kill(SIGTERM);
  EXPECT_FALSE(Snapshot("c").devices.contains("crashy"));  // deregistered, nothing kept
  // After a crash the record stays until its lease runs out (2 s): wait for
  // that, so the next run's registration is its own.
  auto gone = [&] { return WaitFor([&] { return !Registered("c", "crashy"); }); };
  start()->Kill(SIGKILL);  // crash 1
  ASSERT_TRUE(gone());
  Child* third = start();
  EXPECT_FALSE(Snapshot("c").devices.at("crashy").quarantine.has_value()) << "one crash of two";
  third->Kill(SIGKILL);  // crash 2
  ASSERT_TRUE(gone());
  Child* fourth = start();
  ASSERT_TRUE(WaitFor([&] { return Snapshot("c").devices.at("crashy").quarantine.has_value(); }))
      << fourth->err();
  const FarmSnapshot farm = Snapshot("c");
  EXPECT_EQ(farm.devices.at("crashy").quarantine->by(), "crashes");
  EXPECT_THAT(farm.devices.at("crashy").quarantine->reason(), HasSubstr("crashed 2 times"));
  // Not handed out while quarantined.
  EXPECT_THAT(DeviceLease::Acquire(etcd_.get(), Want("c", absl::Seconds(1))),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("quarantined")));
}

TEST_F(FarmTest, DaemonsComeBackAfterEtcdRestarts) {
  Child& daemon = StartDaemon("survivor", "r");
  ASSERT_TRUE(WaitFor([&] { return Registered("r", "survivor"); }));
  auto lease = DeviceLease::Acquire(etcd_.get(), Want("r"));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // etcd restarts with its data: leases survive (etcd renews them all by
  // their TTL when it comes back), so the record and the hold do too.
  StopEtcd();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // an outage, not a blip
  StartEtcd();
  ASSERT_TRUE(WaitFor([&] { return Registered("r", "survivor"); })) << daemon.err();
  EXPECT_TRUE((*lease)->status().ok());
  EXPECT_EQ(Snapshot("r").devices.at("survivor").fencing_token, (*lease)->fencing_token());
  // etcd loses its data (a new cluster): the daemon's lease is gone; it
  // registers again with a new one. The client's hold is gone too.
  StopEtcd(SIGKILL);
  std::filesystem::remove_all(data_dir());
  StartEtcd();
  ASSERT_TRUE(WaitFor([&] { return Registered("r", "survivor"); }, std::chrono::seconds(15)))
      << daemon.err();
  EXPECT_TRUE(WaitFor([&] { return !(*lease)->status().ok(); }));
  EXPECT_FALSE(daemon.Exited()) << daemon.err();
  EXPECT_THAT(daemon.err(), HasSubstr("event=farm-lease-lost"));
  auto again = DeviceLease::Acquire(etcd_.get(), Want("r"));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(FarmTest, AFailingDaemonIsQuarantinedUntilItPassesOrIsReleased) {
  const std::string canary = (dir_ / "canary.tx").string();
  { std::ofstream(canary) << "not an executable"; }
  Child& daemon = StartDaemon(
      "flaky", "h",
      {"--farm-probe-interval", "0.2", "--farm-quarantine-after", "2", "--farm-canary", canary});
  ASSERT_TRUE(WaitFor([&] { return Registered("h", "flaky"); })) << daemon.err();
  ASSERT_TRUE(WaitFor([&] { return Snapshot("h").devices.at("flaky").quarantine.has_value(); }))
      << daemon.err();
  FarmSnapshot farm = Snapshot("h");
  EXPECT_EQ(farm.devices.at("flaky").quarantine->by(), "probe");
  EXPECT_EQ(farm.devices.at("flaky").record->health().state(), v1::FarmHealth::STATE_FAILING);
  EXPECT_THAT(DeviceLease::Acquire(etcd_.get(), Want("h", absl::Milliseconds(300))),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("quarantined")));
  // A canary that runs: the probe passes and lifts the quarantine.
  absl::StatusOr<std::string> good = server::BuildCanaryExecutable();
  ASSERT_TRUE(good.ok());
  { std::ofstream(canary + ".tmp", std::ios::binary) << *good; }
  std::filesystem::rename(canary + ".tmp", canary);
  ASSERT_TRUE(WaitFor([&] { return !Snapshot("h").devices.at("flaky").quarantine.has_value(); }))
      << daemon.err();
  EXPECT_TRUE(DeviceLease::Acquire(etcd_.get(), Want("h")).ok());

  // An operator's quarantine, through the CLI, holds until released.
  auto run_cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {TETHER_CLI_PATH, "farm"});
    Child cli(args, (dir_ / absl::StrCat("cli-", args[2])).string());
    const int status = cli.Reap();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(run_cli({"quarantine", "--farm", url(), "--key", "h", "flaky", "--reason", "fan"}), 0);
  EXPECT_THAT(DeviceLease::Acquire(etcd_.get(), Want("h", absl::Milliseconds(300))),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("quarantined (fan)")));
  ASSERT_EQ(run_cli({"release", "--farm", url(), "--key", "h", "flaky"}), 0);
  EXPECT_TRUE(DeviceLease::Acquire(etcd_.get(), Want("h")).ok());
}

TEST_F(FarmTest, TheDaemonsMetricsShowItsFarmState) {
  if (!TETHER_METRICS_BUILT) GTEST_SKIP() << "tetherd was built without prometheus-cpp";
  Child& daemon = StartDaemon("scraped", "m", {"--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(WaitFor([&] { return Registered("m", "scraped"); })) << daemon.err();
  const std::string err = daemon.err();
  const size_t at = err.find("metrics=127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << err;
  const std::string address = err.substr(at + 8, err.find_first_of(" \n", at) - at - 8);
  const std::string registered = "tetherd_farm_registered";
  auto state = [](const std::string& s) {
    return absl::StrCat("tetherd_farm_device_state{device=\"scraped\",state=\"", s, "\"}");
  };
  const std::string token = "tetherd_farm_fencing_token{device=\"scraped\"}";
  // The gauges follow etcd through the daemon's watches: poll until they do.
  auto shows = [&](const std::string& name, double value) {
    return WaitFor([&] { return Sample(Scrape(address), name) == value; });
  };
  EXPECT_TRUE(shows(registered, 1)) << Scrape(address);
  EXPECT_TRUE(shows(state("free"), 1)) << Scrape(address);
  EXPECT_EQ(Sample(Scrape(address), state("leased")), 0);
  EXPECT_EQ(Sample(Scrape(address), token), 0);

  // Held: leased, with the holder's fencing token.
  auto lease = DeviceLease::Acquire(etcd_.get(), Want("m"));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(shows(state("leased"), 1)) << Scrape(address);
  EXPECT_TRUE(shows(token, static_cast<double>((*lease)->fencing_token()))) << Scrape(address);
  EXPECT_EQ(Sample(Scrape(address), state("free")), 0);
  ASSERT_TRUE((*lease)->Release().ok());
  EXPECT_TRUE(shows(state("free"), 1)) << Scrape(address);
  EXPECT_TRUE(shows(token, 0)) << Scrape(address);

  // An operator's quarantine (written by the CLI, not the daemon) shows too.
  Child quarantine({TETHER_CLI_PATH, "farm", "quarantine", "--farm", url(), "--key", "m", "scraped",
                    "--reason", "fan"},
                   (dir_ / "quarantine").string());
  ASSERT_EQ(quarantine.Reap(), 0) << quarantine.err();
  EXPECT_TRUE(shows(state("quarantined"), 1)) << Scrape(address);
  Child release({TETHER_CLI_PATH, "farm", "release", "--farm", url(), "--key", "m", "scraped"},
                (dir_ / "release").string());
  ASSERT_EQ(release.Reap(), 0) << release.err();
  EXPECT_TRUE(shows(state("free"), 1)) << Scrape(address);
  EXPECT_TRUE(shows(registered, 1)) << Scrape(address);
}

TEST_F(FarmTest, BenchThroughTheFarmRecordsItsDeviceAndJudgesABaseline) {
  StartDaemon("bench-box", "b");
  ASSERT_TRUE(WaitFor([&] { return Registered("b", "bench-box"); }));
  const std::vector<std::string> bench = {TETHER_CLI_PATH,
                                          "bench",
                                          std::string(TETHER_SOURCE_DIR) + "/examples/mlp.rx",
                                          "--farm",
                                          url(),
                                          "--key",
                                          "b",
                                          "--seed",
                                          "7",
                                          "--number",
                                          "2",
                                          "--repeat",
                                          "6",
                                          "--random-inputs",
                                          "--shape",
                                          "x=8x784",
                                          "--shape",
                                          "w0=784x128",
                                          "--shape",
                                          "b0=128",
                                          "--shape",
                                          "w1=128x10",
                                          "--shape",
                                          "b1=10"};
  std::vector<std::string> first = bench;
  first.push_back("--json");
  Child stored(first, (dir_ / "stored").string());
  ASSERT_EQ(stored.Reap(), 0) << stored.err();
  // The provenance names the farm device, its key and the hold's token.
  absl::StatusOr<profiling::JsonValue> doc = profiling::ParseJson(stored.out());
  ASSERT_TRUE(doc.ok()) << doc.status() << stored.out();
  const profiling::JsonValue* daemon = doc->Find("provenance")->Find("daemon");
  ASSERT_NE(daemon, nullptr) << stored.out();
  const profiling::JsonValue* farm = daemon->Find("farm");
  ASSERT_NE(farm, nullptr) << stored.out();
  ASSERT_EQ(farm->kind, profiling::JsonValue::Kind::kObject) << stored.out();
  EXPECT_EQ(farm->Find("key")->text, "b");
  EXPECT_EQ(farm->Find("device")->text, "bench-box");
  int64_t token = 0;
  EXPECT_TRUE(absl::SimpleAtoi(farm->Find("fencing_token")->text, &token) && token > 0)
      << stored.out();
  EXPECT_EQ(daemon->Find("address")->text, Snapshot("b").devices.at("bench-box").record->address());
  // Released when the command ended.
  EXPECT_FALSE(Snapshot("b").devices.at("bench-box").held());

  // --farm, --baseline and --junit together: a verdict (real timings may
  // say anything: only that it says one is asserted), the XML names the
  // device, and the device is released again.
  const std::string stored_json = (dir_ / "stored.out").string();
  const std::string junit = (dir_ / "bench.xml").string();
  std::vector<std::string> second = bench;
  second.insert(second.end(), {"--baseline", stored_json, "--junit", junit});
  Child judged(second, (dir_ / "judged").string());
  const int status = judged.Reap();
  ASSERT_TRUE(WIFEXITED(status)) << judged.err();
  EXPECT_THAT(WEXITSTATUS(status), ::testing::AnyOf(0, 3, 4)) << judged.out() << judged.err();
  EXPECT_THAT(judged.out() + judged.err(), ::testing::ContainsRegex("verdict +[a-z]+: "));
  const std::string xml = ReadAll(junit);
  EXPECT_THAT(xml, HasSubstr("<property name=\"farm_device\" value=\"bench-box\"/>")) << xml;
  EXPECT_THAT(xml, HasSubstr("<property name=\"verdict\"")) << xml;
  EXPECT_FALSE(Snapshot("b").devices.at("bench-box").held());
}

TEST_F(FarmTest, WhereSelectsByLabelAndListShowsTheFarm) {
  StartDaemon("gpu-box", "w", {"--label", "gpu=h100"});
  StartDaemon("cpu-box", "w", {"--label", "gpu=none"});
  ASSERT_TRUE(WaitFor([&] { return Registered("w", "gpu-box") && Registered("w", "cpu-box"); }));
  AcquireOptions options = Want("w");
  options.where = {{"gpu", "h100"}};
  auto lease = DeviceLease::Acquire(etcd_.get(), options);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*lease)->device_id(), "gpu-box");
  options.where = {{"gpu", "a100"}};
  options.wait = absl::Milliseconds(200);
  EXPECT_THAT(DeviceLease::Acquire(etcd_.get(), options),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("no registered device")));
  Child list({TETHER_CLI_PATH, "farm", "list", "--farm", url(), "--key", "w", "--json"},
             (dir_ / "list").string());
  ASSERT_EQ(list.Reap(), 0) << list.err();
  EXPECT_THAT(list.out(), HasSubstr("\"id\": \"gpu-box\", \"state\": \"held\""));
  EXPECT_THAT(list.out(), HasSubstr("\"id\": \"cpu-box\", \"state\": \"free\""));
  // A bad farm URL says what is wrong with it.
  Child bad({TETHER_CLI_PATH, "farm", "list", "--farm", "http://127.0.0.1:1"},
            (dir_ / "bad").string());
  EXPECT_NE(bad.Reap(), 0);
  EXPECT_THAT(bad.err(), HasSubstr("should be etcd://HOST:PORT"));
}

// etcd serving clients over TLS only, requiring their certificates, with
// password authentication on (set up with etcdctl): a daemon given the CA,
// a client certificate and a user registers, and `tether farm list` with the
// same flags lists it; a wrong password, no password and no certificate are
// refused with errors that say so, and a daemon with a wrong password says
// why it is not registered.
TEST_F(FarmTest, SecuredEtcdWithMutualTlsAndAPassword) {
  if (!std::filesystem::exists(ETCDCTL_PATH)) {
    GTEST_SKIP() << "no etcdctl at " << ETCDCTL_PATH << " (apt-get install etcd-client)";
  }
  tether::testing::Certificates certs;
  ASSERT_EQ(certs.Generate(), "");
  StopEtcd();
  StartEtcd({"--cert-file", certs.path("server.pem"), "--key-file", certs.path("server.key"),
             "--client-cert-auth", "--trusted-ca-file", certs.path("ca.pem")},
            /*tls=*/true);
  auto etcdctl = [&](std::vector<std::string> args, const std::string& log) {
    std::vector<std::string> argv = {ETCDCTL_PATH,
                                     "--endpoints",
                                     absl::StrCat("https://", etcd_address()),
                                     "--cacert",
                                     certs.path("ca.pem"),
                                     "--cert",
                                     certs.path("client.pem"),
                                     "--key",
                                     certs.path("client.key"),
                                     "--dial-timeout",
                                     "2s"};
    argv.insert(argv.end(), args.begin(), args.end());
    Child c(argv, (dir_ / log).string());
    const int status = c.Reap();
    return std::make_pair(status, c.err());
  };
  ASSERT_TRUE(WaitFor([&] {
    return etcdctl({"endpoint", "health"}, "health").first == 0;
  })) << etcd_process_->err();
  auto [added, add_err] = etcdctl({"user", "add", "root:s3cret"}, "user-add");
  ASSERT_EQ(added, 0) << add_err;
  auto [enabled, enable_err] = etcdctl({"auth", "enable"}, "auth-enable");
  ASSERT_EQ(enabled, 0) << enable_err;
  const std::string password = (dir_ / "password").string();
  const std::string wrong = (dir_ / "wrong-password").string();
  std::ofstream(password) << "s3cret\n";
  std::ofstream(wrong) << "guess\n";
  const std::string secure_url = absl::StrCat("etcds://", etcd_address());

  EtcdOptions secured;
  ASSERT_TRUE(ParseFarmUrl(secure_url, &secured).ok());
  secured.ca_file = certs.path("ca.pem");
  secured.cert_file = certs.path("client.pem");
  secured.key_file = certs.path("client.key");
  secured.user = "root";
  secured.password_file = password;
  secured.call_timeout = absl::Seconds(2);
  auto client = [](const EtcdOptions& options) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Create(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  };
  std::unique_ptr<EtcdClient> etcd = client(secured);
  ASSERT_NE(etcd, nullptr);

  const std::vector<std::string> flags = {"--farm-tls-ca",        certs.path("ca.pem"),
                                          "--farm-tls-cert",      certs.path("client.pem"),
                                          "--farm-tls-key",       certs.path("client.key"),
                                          "--farm-user",          "root",
                                          "--farm-password-file", password};
  std::vector<std::string> extra = {"--farm", secure_url};
  extra.insert(extra.end(), flags.begin(), flags.end());
  Child& daemon = StartDaemon("secure-box", "s", extra);
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<FarmSnapshot> s = ReadFarm(*etcd, "s");
    return s.ok() && s->devices.contains("secure-box") && s->devices.at("secure-box").registered();
  })) << daemon.err();
  std::vector<std::string> list = {TETHER_CLI_PATH, "farm",  "list", "--farm",
                                   secure_url,      "--key", "s",    "--json"};
  list.insert(list.end(), flags.begin(), flags.end());
  Child lister(list, (dir_ / "list").string());
  ASSERT_EQ(lister.Reap(), 0) << lister.err();
  EXPECT_THAT(lister.out(), HasSubstr("\"id\": \"secure-box\""));

  // A wrong password.
  EtcdOptions bad = secured;
  bad.password_file = wrong;
  std::unique_ptr<EtcdClient> guessing = client(bad);
  ASSERT_NE(guessing, nullptr);
  absl::Status refused = ReadFarm(*guessing, "s").status();
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.message(), HasSubstr("authenticating as root"));
  // No user: etcd takes the certificate's name (tether-client), no user of its.
  bad = secured;
  bad.user.clear();
  bad.password_file.clear();
  std::unique_ptr<EtcdClient> anonymous = client(bad);
  ASSERT_NE(anonymous, nullptr);
  EXPECT_FALSE(ReadFarm(*anonymous, "s").ok());
  // No client certificate: the TLS handshake fails.
  bad = secured;
  bad.cert_file.clear();
  bad.key_file.clear();
  std::unique_ptr<EtcdClient> no_cert = client(bad);
  ASSERT_NE(no_cert, nullptr);
  EXPECT_THAT(ReadFarm(*no_cert, "s").status(), StatusIs(absl::StatusCode::kUnavailable));

  // A daemon with the wrong password is not registered and says why.
  for (std::string& f : extra) {
    if (f == password) f = wrong;
  }
  Child& guesser = StartDaemon("guessing-box", "s", extra);
  EXPECT_TRUE(WaitFor([&] { return absl::StrContains(guesser.err(), "authenticating as root"); }))
      << guesser.err();
  absl::StatusOr<FarmSnapshot> snapshot = ReadFarm(*etcd, "s");
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_FALSE(snapshot->devices.contains("guessing-box"));
}

// The prober probes each free device at the address its record advertises:
// a daemon advertising an address that reaches nothing passes its own probe
// (over its private socket) but fails the prober's, and is quarantined by
// the prober after --failures rounds; restarted at a good address it passes
// and the prober lifts its own quarantine, never an operator's.
TEST_F(FarmTest, TheProberQuarantinesADeviceItCannotReach) {
  StartDaemon("good", "p");
  StartDaemon("unreachable", "p", {"--farm-address", absl::StrCat("127.0.0.1:", FreePort())});
  ASSERT_TRUE(WaitFor([&] { return Registered("p", "good") && Registered("p", "unreachable"); }));
  auto probe = [&](const std::string& log, std::vector<std::string> extra) {
    std::vector<std::string> argv = {TETHER_CLI_PATH, "farm", "probe",      "--farm", url(),
                                     "--key",         "p",    "--interval", "0.1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto child = std::make_unique<Child>(argv, (dir_ / log).string());
    const int status = child->Reap();
    return std::make_pair(status, child->out() + child->err());
  };
  auto [failed, failed_out] = probe("probe-1", {"--rounds", "2", "--failures", "2"});
  EXPECT_TRUE(WIFEXITED(failed) && WEXITSTATUS(failed) == 1) << failed_out;
  EXPECT_THAT(failed_out, HasSubstr("good 127.0.0.1:"));
  EXPECT_THAT(failed_out, HasSubstr(": ok ("));
  EXPECT_THAT(failed_out, HasSubstr("unreachable 127.0.0.1:"));
  EXPECT_THAT(failed_out, HasSubstr("FAILED (2 of 2): health check"));
  EXPECT_THAT(failed_out, HasSubstr("unreachable: quarantined by the prober"));
  FarmSnapshot snapshot = Snapshot("p");
  ASSERT_TRUE(snapshot.devices["unreachable"].quarantine.has_value());
  EXPECT_EQ(snapshot.devices["unreachable"].quarantine->by(), "prober");
  EXPECT_FALSE(snapshot.devices["good"].quarantine.has_value());
  // Acquisition passes the quarantined device over.
  auto lease = DeviceLease::Acquire(etcd_.get(), Want("p"));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ((*lease)->device_id(), "good");
  ASSERT_TRUE((*lease)->Release().ok());

  // Back at an address that reaches it: the prober lifts its quarantine. An
  // operator's quarantine of the good device stays.
  daemons_["unreachable"]->Kill(SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !Registered("p", "unreachable"); }));
  StartDaemon("unreachable", "p");
  ASSERT_TRUE(WaitFor([&] { return Registered("p", "unreachable"); }));
  Child operator_quarantine({TETHER_CLI_PATH, "farm", "quarantine", "--farm", url(), "--key", "p",
                             "good", "--reason", "maintenance"},
                            (dir_ / "operator").string());
  ASSERT_EQ(operator_quarantine.Reap(), 0) << operator_quarantine.err();
  auto [passed, passed_out] = probe("probe-2", {});
  EXPECT_TRUE(WIFEXITED(passed) && WEXITSTATUS(passed) == 0) << passed_out;
  EXPECT_THAT(passed_out, HasSubstr("unreachable: released from the prober's quarantine"));
  snapshot = Snapshot("p");
  EXPECT_FALSE(snapshot.devices["unreachable"].quarantine.has_value());
  ASSERT_TRUE(snapshot.devices["good"].quarantine.has_value());
  EXPECT_EQ(snapshot.devices["good"].quarantine->by(), "operator");
}

}  // namespace
}  // namespace tether::farm::testing
