// What tests look at in /proc about their own process.
#ifndef TETHER_TESTS_TESTING_PROCESSES_H_
#define TETHER_TESTS_TESTING_PROCESSES_H_

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

namespace tether::testing {

// The contents of a /proc file, empty where it cannot be read. A process
// can exit between opening its file and reading it (ESRCH): an ifstream's
// read then throws from basic_filebuf::underflow, so /proc is read with
// read(2) here.
inline std::string ReadProcFile(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The pids of this process's children (an in-process daemon's workers),
// from the parent pid in /proc/*/stat: that needs nothing of the kernel
// beyond /proc (/proc/self/task/*/children needs CONFIG_PROC_CHILDREN, which
// some kernels, a GPU machine's say, lack).
inline std::set<pid_t> ChildPids() {
  std::set<pid_t> pids;
  const pid_t self = ::getpid();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    const std::string stat = ReadProcFile(entry.path() / "stat");
    const size_t comm_end = stat.rfind(')');  // the command may hold spaces and parentheses
    if (comm_end == std::string::npos) continue;
    std::istringstream fields(stat.substr(comm_end + 1));
    std::string state;
    pid_t ppid = 0;
    if (fields >> state >> ppid && ppid == self) pids.insert(std::atoi(name.c_str()));
  }
  return pids;
}

// Whether `pid` is gone — reaped, no zombie left — within `limit`.
inline bool Gone(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::filesystem::exists("/proc/" + std::to_string(pid))) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::usleep(10000);
  }
  return true;
}

// How many descriptors this process has open.
inline int OpenDescriptorCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_PROCESSES_H_
