// What tests look at in /proc about their own process.
#ifndef TETHER_TESTS_TESTING_PROCESSES_H_
#define TETHER_TESTS_TESTING_PROCESSES_H_

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace tether::testing {

// The pids of this process's children (an in-process daemon's workers).
inline std::set<pid_t> ChildPids() {
  std::set<pid_t> pids;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    pid_t pid;
    while (in >> pid) pids.insert(pid);
  }
  return pids;
}

// How many descriptors this process has open.
inline int OpenDescriptorCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_PROCESSES_H_
