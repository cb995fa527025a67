// The `tether` command line: one subcommand per file, dispatched here.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/cli/commands.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: tether <command> [options]\n"
      "\n"
      "commands:\n"
      "  demo [--output FILE] [--device DEV] [--memory-cfg CFG]\n"
      "      build an executable in C++, save it, load it back, and run it through\n"
      "      set_input / invoke_stateful / get_outputs, time_evaluator and profile\n"
      "  compile MODEL.rx -o OUT.tx [--target T] [--emit ir|bytecode|asm] [--pipeline P]\n"
      "      compile a Relax text model into an executable for a target\n"
      "  inspect FILE [--text] [--stats]\n"
      "      load and validate an executable file and print its listing\n"
      "  run-demo FILE [--device DEV] [--memory-cfg CFG]\n"
      "      run an executable written by `tether demo` in this process\n"
      "  info [--remote HOST:PORT]\n"
      "      the daemon's protocol, limits and devices with all their attributes\n"
      "  run EXEC|MODEL.rx [--remote HOST:PORT] [--input NAME=@x.npy] [--output-dir DIR] ...\n"
      "      upload EXEC, run it through set_input / invoke_stateful / get_outputs\n"
      "  bench EXEC [...] [--number N] [--repeat R] [--min-repeat-ms M] [--json]\n"
      "        [--baseline OLD.json] [--regression-threshold PCT] [--junit FILE]\n"
      "      time it on the daemon with time_evaluator; judge it against a stored result\n"
      "  profile EXEC [...] [--format table|csv|json|chrome-trace]\n"
      "      per-call profile, measured on the daemon\n"
      "  compare BASELINE.json RESULT.json [--regression-threshold PCT] [--junit FILE]\n"
      "      the verdict of two stored bench results: faster, slower, same or unstable\n"
      "  farm list|acquire|quarantine|release|probe --farm etcd://HOST:PORT [--key KEY] ...\n"
      "      the device farm: list devices, hold one (fencing token), quarantine one,\n"
      "      probe them from outside\n"
      "\n"
      "Without --remote, run/bench/profile/info start an embedded daemon on a private unix "
      "socket;\nwith --farm URL --key KEY, run/bench/profile acquire a farm device for the "
      "command.\n"
      "\n"
      "Run `tether <command> --help` for the options of one command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "demo") return tether::cli::RunDemo(args);
  if (command == "compile") return tether::cli::RunCompile(args);
  if (command == "compare") return tether::cli::RunCompare(args);
  if (command == "inspect") return tether::cli::RunInspect(args);
  if (command == "run-demo") return tether::cli::RunDemoFile(args);
  if (command == "info") return tether::cli::RunInfo(args);
  if (command == "run") return tether::cli::RunRun(args);
  if (command == "bench") return tether::cli::RunBench(args);
  if (command == "profile") return tether::cli::RunProfile(args);
  if (command == "farm") return tether::cli::RunFarm(args);
  std::fprintf(stderr, "tether: unknown command \"%s\"\n\n", command.c_str());
  PrintUsage(stderr);
  return 2;
}
