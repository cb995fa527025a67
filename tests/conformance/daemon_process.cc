// Starting and stopping tetherd as a child process. The port file is written
// by the daemon with a rename once bound, so reading it whole is safe.
#include "tests/conformance/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "proto/codec/auth_token.h"

namespace tether::conformance {
namespace {

namespace fs = std::filesystem;

// Waits for `pid` up to `seconds`; true if it exited (and was reaped).
bool WaitFor(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const std::string& tetherd_path,
                                                                    const std::string& work_dir) {
  std::error_code ec;
  if (!fs::exists(tetherd_path, ec)) {
    return absl::NotFoundError(absl::StrCat("tetherd binary ", tetherd_path, " does not exist"));
  }
  fs::create_directories(work_dir, ec);
  const std::string port_file = (fs::path(work_dir) / "tetherd.port").string();
  const std::string store_dir = (fs::path(work_dir) / "store").string();
  const std::string log_file = (fs::path(work_dir) / "tetherd.log").string();
  fs::remove(port_file, ec);
  // A token of this run only, so the daemon is closed to other local users
  // and needs nothing from $HOME.
  const std::string token = rpc::RandomToken();
  const std::string token_file = (fs::path(work_dir) / "tetherd.token").string();
  {
    int fd = ::open(token_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, token.data(), token.size()) != static_cast<ssize_t>(token.size())) {
      if (fd >= 0) ::close(fd);
      return absl::UnavailableError(absl::StrCat("cannot write ", token_file));
    }
    ::close(fd);
  }

  std::vector<std::string> argv_strings = {tetherd_path,  "--listen",          "127.0.0.1:0",
                                           "--port-file", port_file,           "--store-dir",
                                           store_dir,     "--auth-token-file", token_file};
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork failed: ", std::strerror(errno)));
  if (pid == 0) {
    FILE* log = std::fopen(log_file.c_str(), "w");
    if (log != nullptr) {
      dup2(fileno(log), STDOUT_FILENO);
      dup2(fileno(log), STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      std::ifstream log(log_file);
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      return absl::UnavailableError(
          absl::StrCat("tetherd exited before listening (status ", status, "): ", text));
    }
    std::ifstream in(port_file);
    std::string text;
    int port = 0;
    if (in && std::getline(in, text) && absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) &&
        port > 0) {
      return std::unique_ptr<DaemonProcess>(
          new DaemonProcess(pid, absl::StrCat("127.0.0.1:", port), token));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  WaitFor(pid, 5);
  return absl::UnavailableError(
      absl::StrCat("tetherd did not write its port file ", port_file, " within 30 s"));
}

DaemonProcess::~DaemonProcess() {
  kill(pid_, SIGTERM);
  if (!WaitFor(pid_, 10)) {
    kill(pid_, SIGKILL);
    WaitFor(pid_, 5);
  }
}

}  // namespace tether::conformance
