// soak: many clients doing everything at once against one real tetherd, to
// show that the daemon survives load without errors or growth. Not a timed
// test: it reports what it saw.
//
//   build/bench/soak [--clients 64] [--ops 10000] [--isolate-every 8]
//                    [--session-ops 50] [--rounds 2] [--tetherd PATH]
//
// Each client repeats sessions of --session-ops operations: open a session
// (every --isolate-every-th client's sessions are isolated, in a worker
// process), upload the module (skipped once the daemon has it), create a VM,
// then a mix of calls, tensor uploads and downloads, allocations filled on
// the daemon and frees, and close. The daemon is the tetherd binary in a
// child process with a token; its RSS is sampled every 50 ms. The load runs
// --rounds times against the same daemon: memory that grows in the first
// round and stays level after is what the allocator and gRPC keep (thread
// stacks, arenas); growth in every round would be a leak. Per round: the
// operations, errors, rates, and the daemon's RSS, descriptors and worker
// processes after it; at the end, errors by message and the worker
// directories left behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "proto/codec/auth_token.h"
#include "tests/testing/session_program.h"
#include "tests/testing/test_functions.h"

namespace tether {
namespace {

namespace fs = std::filesystem;

struct Flags {
  int clients = 64;
  int ops = 10000;
  int isolate_every = 8;
  int session_ops = 50;
  int rounds = 2;
  std::string tetherd = TETHERD_PATH;
};

// A /proc/<pid>/status field in KiB (VmRSS, VmHWM); 0 when unreadable.
int64_t StatusKib(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      return absl::SimpleAtoi(digits, &kib) ? kib : 0;
    }
  }
  return 0;
}

int CountEntries(const std::string& dir) {
  std::error_code ec;
  int n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it) ++n;
  return n;
}

// The daemon's child processes (session workers).
int Children(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(task.path() / "children");
    pid_t child;
    while (in >> child) ++n;
  }
  return n;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

class Errors {
 public:
  void Add(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++by_message_[absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                               status.message().substr(0, 120))];
  }
  int64_t total() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (const auto& [message, count] : by_message_) n += count;
    return n;
  }
  void Print() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [message, count] : by_message_)
      std::printf("  %6lld  %s\n", static_cast<long long>(count), message.c_str());
  }

 private:
  std::mutex mu_;
  std::map<std::string, int64_t> by_message_;
};

// One client: sessions of flags.session_ops operations until flags.ops.
void RunClient(int index, const Flags& flags, const std::string& target, const std::string& token,
               const std::string& module, std::atomic<int64_t>* ops, std::atomic<int64_t>* calls,
               Errors* errors) {
  const bool isolate = flags.isolate_every > 0 && index % flags.isolate_every == 0;
  int done = 0;
  auto count = [&](const absl::Status& status) {
    ++done;
    ops->fetch_add(1);
    if (!status.ok()) errors->Add(status);
    return status.ok();
  };
  Tensor a = testing::MakeFloatTensor({4, 16}, std::vector<float>(64, 1.5f));
  Tensor b = testing::MakeFloatTensor({16}, std::vector<float>(16, -2.0f));
  while (done < flags.ops) {
    client::ConnectOptions options;
    options.client_name = absl::StrCat("soak-", index);
    options.auth_token = token;
    options.isolate = isolate;
    auto session = client::RemoteSession::Connect(target, options);
    if (!count(session.status())) continue;
    auto sha = (*session)->UploadModule(module);
    if (!count(sha.status())) continue;
    auto vm = client::RemoteVM::Create(session->get(), *sha);
    if (!count(vm.status())) continue;
    for (int i = 3; i < flags.session_ops - 1 && done < flags.ops; ++i) {
      switch (i % 5) {
        case 0:
        case 1: {
          Value args[] = {Value(a), Value(b)};
          auto out = (*vm)->Invoke("swap", args);
          if (count(out.status())) calls->fetch_add(1);
          break;
        }
        case 2: {
          auto remote = (*session)->UploadTensor(a);
          if (!count(remote.status())) break;
          auto back = (*session)->DownloadTensor(*remote);
          if (count(back.status()) && (*back)->NumBytes() != a->NumBytes()) {
            errors->Add(absl::DataLossError("downloaded tensor differs in size"));
          }
          break;
        }
        case 3: {
          const int64_t shape[] = {32, 32};
          auto remote = (*session)->AllocTensor(shape, DataType::Float(32), Device::Cpu());
          if (!count(remote.status())) break;
          count((*session)->FillRandom(*remote, static_cast<uint64_t>(i), -1, 1));
          break;
        }
        case 4: {
          auto remote = (*session)->UploadTensor(b);
          if (!count(remote.status())) break;
          client::RemoteHandleObj* handle = client::AsRemoteHandle(*remote);
          if (handle != nullptr) count((*session)->FreeObjects({handle->id()}));
          break;
        }
      }
    }
    vm->reset();
    count((*session)->Close());
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    std::string value = argv[i + 1];
    int* target = flag == "--clients"         ? &flags.clients
                  : flag == "--ops"           ? &flags.ops
                  : flag == "--isolate-every" ? &flags.isolate_every
                  : flag == "--session-ops"   ? &flags.session_ops
                  : flag == "--rounds"        ? &flags.rounds
                                              : nullptr;
    if (flag == "--tetherd") {
      flags.tetherd = value;
    } else if (target == nullptr || !absl::SimpleAtoi(value, target) || *target < 0) {
      std::fprintf(stderr, "soak: bad flag %s %s\n", flag.c_str(), value.c_str());
      return 2;
    }
  }
  flags.session_ops = std::max(flags.session_ops, 5);

  std::string dir = (fs::temp_directory_path() / "tether-soak-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return 1;
  const std::string token = rpc::RandomToken();
  {
    std::ofstream(dir + "/token") << token;
    fs::permissions(dir + "/token", fs::perms::owner_read | fs::perms::owner_write);
  }
  const std::string port_file = dir + "/port";
  pid_t daemon = ::fork();
  if (daemon == 0) {
    FILE* log = std::freopen((dir + "/tetherd.log").c_str(), "w", stderr);
    (void)log;
    std::vector<std::string> args = {
        flags.tetherd,  "--listen",       "127.0.0.1:0",  "--port-file",
        port_file,      "--store-dir",    dir + "/store", "--auth-token-file",
        dir + "/token", "--max-sessions", "256"};
    std::vector<char*> argv_c;
    for (auto& a : args) argv_c.push_back(a.data());
    argv_c.push_back(nullptr);
    ::execv(argv_c[0], argv_c.data());
    ::_exit(127);
  }
  for (int i = 0; i < 600 && !fs::exists(port_file); ++i) absl::SleepFor(absl::Milliseconds(50));
  int port = 0;
  std::ifstream(port_file) >> port;
  if (port == 0) {
    std::fprintf(stderr, "soak: tetherd did not start (see %s/tetherd.log)\n", dir.c_str());
    return 1;
  }
  const std::string target = absl::StrCat("127.0.0.1:", port);
  const std::string module = testing::BuiltinsTestExecutable();
  // Warm up: one session, so the start figures include the module and threads.
  {
    Errors none;
    std::atomic<int64_t> ops{0}, calls{0};
    Flags one = flags;
    one.ops = flags.session_ops;
    RunClient(1, one, target, token, module, &ops, &calls, &none);
  }
  const std::string fd_dir = absl::StrCat("/proc/", daemon, "/fd");
  const int64_t rss_start = StatusKib(daemon, "VmRSS");
  const int fds_start = CountEntries(fd_dir);

  std::atomic<bool> running{true};
  std::atomic<int64_t> rss_peak{rss_start};
  std::thread sampler([&] {
    while (running.load()) {
      rss_peak.store(std::max(rss_peak.load(), StatusKib(daemon, "VmRSS")));
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  std::printf(
      "soak on %s, %u cores: %d clients x %d operations, sessions of %d, every %d-th "
      "client isolated, %d rounds\n",
      CpuModel().c_str(), std::thread::hardware_concurrency(), flags.clients, flags.ops,
      flags.session_ops, flags.isolate_every, flags.rounds);
  std::printf(
      "| round | operations | errors | seconds | operations/s | calls/s | daemon RSS after "
      "(MiB) | peak so far (MiB) | descriptors after | workers after |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf("| start | | | | | | %.1f | %.1f | %d | %d |\n", rss_start / 1024.0,
              rss_start / 1024.0, fds_start, Children(daemon));
  Errors errors;
  for (int round = 1; round <= flags.rounds; ++round) {
    std::atomic<int64_t> ops{0}, calls{0};
    const int64_t errors_before = errors.total();
    const absl::Time start = absl::Now();
    std::vector<std::thread> clients;
    for (int i = 0; i < flags.clients; ++i) {
      clients.emplace_back(RunClient, i, std::cref(flags), std::cref(target), std::cref(token),
                           std::cref(module), &ops, &calls, &errors);
    }
    for (auto& t : clients) t.join();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    // Workers are reaped and sessions released asynchronously: give them a
    // moment, bounded, before the figures.
    for (int i = 0; i < 100 && Children(daemon) > 0; ++i) absl::SleepFor(absl::Milliseconds(50));
    absl::SleepFor(absl::Milliseconds(500));
    std::printf("| %d | %lld | %lld | %.1f | %.0f | %.0f | %.1f | %.1f | %d | %d |\n", round,
                static_cast<long long>(ops.load()),
                static_cast<long long>(errors.total() - errors_before), seconds,
                ops.load() / seconds, calls.load() / seconds, StatusKib(daemon, "VmRSS") / 1024.0,
                rss_peak.load() / 1024.0, CountEntries(fd_dir), Children(daemon));
    std::fflush(stdout);
  }
  running.store(false);
  sampler.join();
  ::kill(daemon, SIGTERM);
  int status = 0;
  ::waitpid(daemon, &status, 0);
  int leftover_worker_dirs = 0;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    if (e.path().filename().string().rfind("tetherd-worker-", 0) == 0) ++leftover_worker_dirs;
  }
  std::printf("daemon exit: %s %d; worker directories left in %s: %d\n",
              WIFEXITED(status) ? "code" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
              fs::temp_directory_path().c_str(), leftover_worker_dirs);
  if (errors.total() > 0) {
    std::printf("errors by message:\n");
    errors.Print();
  }
  fs::remove_all(dir);
  return errors.total() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) { return tether::Main(argc, argv); }
