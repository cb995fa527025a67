// The `tether` command line: one subcommand per file, dispatched here.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/cli/commands.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: tether <command> [options]\n"
               "\n"
               "commands:\n"
               "  demo [--output FILE] [--device DEV] [--memory-cfg CFG]\n"
               "      build an executable in C++, save it, load it back, and run it through\n"
               "      set_input / invoke_stateful / get_outputs, time_evaluator and profile\n"
               "  inspect FILE [--text] [--stats]\n"
               "      load and validate an executable file and print its listing\n"
               "  run-demo FILE [--device DEV]\n"
               "      run an executable written by `tether demo` (its kernels are built in)\n"
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
  if (command == "inspect") return tether::cli::RunInspect(args);
  if (command == "run-demo") return tether::cli::RunDemoFile(args);
  std::fprintf(stderr, "tether: unknown command \"%s\"\n\n", command.c_str());
  PrintUsage(stderr);
  return 2;
}
