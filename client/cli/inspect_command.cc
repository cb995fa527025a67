// `tether inspect FILE`: load, validate and list an executable.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "runtime/core/error.h"
#include "runtime/vm/executable.h"

namespace tether::cli {

int Fail(const std::string& what, const absl::Status& status) {
  std::string prefix = what.empty() ? "" : what + ": ";
  std::fprintf(stderr, "tether: %s%s (%s)\n", prefix.c_str(), std::string(status.message()).c_str(),
               absl::StatusCodeToString(status.code()).c_str());
  return 1;
}

int RunInspect(const std::vector<std::string>& args) {
  std::string path;
  bool text = false, stats = false;
  for (const std::string& a : args) {
    if (a == "--help") {
      std::printf(
          "usage: tether inspect FILE [--text] [--stats]\n"
          "Loads FILE, checks its checksum, version and every instruction, and prints\n"
          "the bytecode listing (--text) and/or a summary (--stats); both by default.\n");
      return 0;
    } else if (a == "--text") {
      text = true;
    } else if (a == "--stats") {
      stats = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tether inspect: unknown option %s\n", a.c_str());
      return 2;
    } else if (path.empty()) {
      path = a;
    } else {
      std::fprintf(stderr, "tether inspect: more than one file given\n");
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: tether inspect FILE [--text] [--stats]\n");
    return 2;
  }
  if (!text && !stats) text = stats = true;
  auto exec = vm::Executable::LoadFromFile(path);
  if (!exec.ok()) return Fail("", exec.status());
  if (stats) std::printf("%s\n", (*exec)->Stats().c_str());
  if (text) std::printf("%s", (*exec)->AsText().c_str());
  return 0;
}

}  // namespace tether::cli
