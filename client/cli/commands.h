// The subcommands of the `tether` CLI. Each takes the arguments after its name
// and returns the process exit code: 0 on success, 1 on a failure of the work,
// 2 on bad usage.
#ifndef TETHER_CLIENT_CLI_COMMANDS_H_
#define TETHER_CLIENT_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tether::cli {

int RunDemo(const std::vector<std::string>& args);
int RunDemoFile(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunInfo(const std::vector<std::string>& args);
int RunRun(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunProfile(const std::vector<std::string>& args);
int RunCompile(const std::vector<std::string>& args);

// The bytes of the executable at `path`; a Relax text model (.rx) is
// compiled for this host first (compile_command.cc).
absl::StatusOr<std::string> LoadOrCompileExecutable(const std::string& path);

// Registers the demo's C++ kernels (demo.dense, demo.relu) in this process, so
// the embedded daemon of `tether run/bench/profile` can run demo executables.
void RegisterDemoKernels();

// Prints "tether: <what>: <status>" to stderr and returns 1.
int Fail(const std::string& what, const absl::Status& status);

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_COMMANDS_H_
