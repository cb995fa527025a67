// What the farm tests run: a real etcd (Debian's etcd-server) on 127.0.0.1
// with free ports and a temporary data dir, real tetherd processes
// registering into it, and the real `tether` CLI, each a child process that
// the fixture stops. Waits poll with deadlines (a registration, an expiry);
// nothing sleeps a fixed time.
#ifndef TETHER_TESTS_FARM_FARM_FIXTURE_H_
#define TETHER_TESTS_FARM_FARM_FIXTURE_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "farm/etcd_client.h"
#include "farm/snapshot.h"
#include "gtest/gtest.h"

extern char** environ;

namespace tether::farm::testing {

// A free TCP port on 127.0.0.1 (bound, read back and released).
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Polls `done` every 20 ms until it holds or `limit` passes.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A child process with stdout and stderr in files; killed (SIGKILL) and
// reaped when destroyed if still running.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& log_prefix) : log_prefix_(log_prefix) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (log_prefix + ".out").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (log_prefix + ".err").c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() { Kill(SIGKILL); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Sends `sig` and reaps; returns the wait status (-1 when none).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    return Reap();
  }
  int Reap() {
    if (pid_ <= 0) return -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }
  std::string out() const { return ReadAll(log_prefix_ + ".out"); }
  std::string err() const { return ReadAll(log_prefix_ + ".err"); }

 private:
  std::string log_prefix_;
  pid_t pid_ = -1;
};

// The test's own directory, etcd and daemons.
class FarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ETCD_PATH)) {
      GTEST_SKIP() << "no etcd at " << ETCD_PATH << " (apt-get install etcd-server)";
    }
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("tether-farm-test-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    etcd_port_ = FreePort();
    peer_port_ = FreePort();
    StartEtcd();
    EtcdOptions options;
    options.endpoints = {etcd_address()};
    options.call_timeout = absl::Seconds(2);
    etcd_ = *EtcdClient::Create(options);
    absl::Status last;
    ASSERT_TRUE(WaitFor([&] {
      last = ReadFarm(*etcd_, "probe").status();
      return last.ok();
    })) << "etcd did not start: "
        << last << "\n"
        << etcd_process_->err();
  }

  void TearDown() override {
    daemons_.clear();
    etcd_.reset();
    if (etcd_process_) etcd_process_->Kill(SIGTERM);
    std::error_code ignored;
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string etcd_address() const { return absl::StrCat("127.0.0.1:", etcd_port_); }
  std::string url() const { return absl::StrCat("etcd://", etcd_address()); }
  std::string data_dir() const { return (dir_ / "etcd-data").string(); }

  // Starts etcd on the test's ports and data dir (again after StopEtcd),
  // with `extra` flags; `tls`: its clients' URL is https (the certificate
  // flags are in `extra`).
  void StartEtcd(std::vector<std::string> extra = {}, bool tls = false) {
    const std::string client = absl::StrCat(tls ? "https://" : "http://", etcd_address());
    const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
    std::vector<std::string> argv = {ETCD_PATH,
                                     "--name",
                                     "farm-test",
                                     "--data-dir",
                                     data_dir(),
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peer,
                                     "--initial-advertise-peer-urls",
                                     peer,
                                     "--initial-cluster",
                                     absl::StrCat("farm-test=", peer),
                                     "--log-level",
                                     "warn"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    etcd_process_ =
        std::make_unique<Child>(argv, (dir_ / absl::StrCat("etcd-", ++etcd_starts_)).string());
  }
  void StopEtcd(int sig = SIGTERM) {
    if (etcd_process_) etcd_process_->Kill(sig);
    etcd_process_.reset();
  }

  // Starts a tetherd registering as `id` under `key`, with a 2 s lease.
  Child& StartDaemon(const std::string& id, const std::string& key,
                     std::vector<std::string> extra = {}) {
    const std::string log = (dir_ / absl::StrCat("tetherd-", id, "-", ++daemon_starts_)).string();
    std::vector<std::string> argv = {
        TETHERD_PATH, "--listen",   "127.0.0.1:0", "--insecure",  "--farm",
        url(),        "--farm-key", key,           "--farm-id",   id,
        "--farm-ttl", "2",          "--port-file", log + ".port", "--farm-probe-interval",
        "0"};
    for (size_t i = 0; i + 1 < extra.size(); i += 2) {
      // A flag given again replaces the default above.
      bool replaced = false;
      for (size_t j = 0; j + 1 < argv.size(); ++j) {
        if (argv[j] == extra[i] && extra[i] != "--label") {
          argv[j + 1] = extra[i + 1];
          replaced = true;
        }
      }
      if (!replaced) {
        argv.push_back(extra[i]);
        argv.push_back(extra[i + 1]);
      }
    }
    daemons_[id] = std::make_unique<Child>(argv, log);
    return *daemons_[id];
  }

  // Whether `id` is registered under `key` now.
  bool Registered(const std::string& key, const std::string& id) {
    absl::StatusOr<FarmSnapshot> s = ReadFarm(*etcd_, key);
    return s.ok() && s->devices.contains(id) && s->devices.at(id).registered();
  }
  FarmSnapshot Snapshot(const std::string& key) {
    absl::StatusOr<FarmSnapshot> s = ReadFarm(*etcd_, key);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : FarmSnapshot();
  }

  std::filesystem::path dir_;
  int etcd_port_ = 0;
  int peer_port_ = 0;
  int etcd_starts_ = 0;
  int daemon_starts_ = 0;
  std::unique_ptr<Child> etcd_process_;
  std::unique_ptr<EtcdClient> etcd_;
  std::map<std::string, std::unique_ptr<Child>> daemons_;
};

}  // namespace tether::farm::testing

#endif  // TETHER_TESTS_FARM_FARM_FIXTURE_H_
