// `tether inspect FILE`: load, validate and list an executable, or describe
// a static library (the system library archive `tether compile --system-lib`
// writes beside the executable): its prefix, machine and kernels.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "runtime/core/error.h"
#include "runtime/kernel/ar_archive.h"
#include "runtime/kernel/static_library.h"
#include "runtime/vm/executable.h"

namespace tether::cli {
namespace {

// Whether the file at `path` starts as an ar archive does (false when it
// cannot be read: loading it says why).
bool StartsAsArchive(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char head[8];
  const size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  return IsArArchive(absl::string_view(head, n));
}

std::string ParamText(const KernelParamInfo& p) {
  return p.is_tensor ? absl::StrCat("tensor(", p.dtype.ToString(), ", ndim=", p.ndim, ")")
                     : "int64";
}

int InspectStaticLibrary(const std::string& path) {
  auto library = LoadStaticLibraryFile(path);
  if (!library.ok()) return Fail("", library.status());
  const StaticLibraryModule& lib = **library;
  std::printf("static library %s\n", path.c_str());
  std::printf("  format: %s (ar archive; kernels in %s)\n", std::string(lib.format()).c_str(),
              lib.object_name().c_str());
  std::printf("  prefix: %s (tether_system_lib_register_%s)\n", lib.prefix().c_str(),
              lib.prefix().c_str());
  std::printf("  machine: %s\n", lib.machine_name().c_str());
  std::printf("  kernels (#%zu):\n", lib.kernels().size());
  for (const KernelInfo& k : lib.kernels()) {
    std::vector<std::string> params;
    for (const KernelParamInfo& p : k.params) params.push_back(ParamText(p));
    std::printf("    %s(%s)\n", k.name.c_str(), absl::StrJoin(params, ", ").c_str());
  }
  std::printf(
      "a static library is linked, not loaded: link it whole into the program or daemon that "
      "runs executables compiled with --system-lib %s (tether_add_daemon in "
      "cmake/TetherSystemLib.cmake; docs/design/boards.md)\n",
      lib.prefix().c_str());
  return 0;
}

}  // namespace

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
          "the bytecode listing (--text) and/or a summary (--stats); both by default.\n"
          "A static library (OUT.a of tether compile --system-lib) is described instead:\n"
          "its prefix, machine and kernels.\n");
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
  if (StartsAsArchive(path)) return InspectStaticLibrary(path);
  auto exec = vm::Executable::LoadFromFile(path);
  if (!exec.ok()) return Fail("", exec.status());
  if (stats) std::printf("%s\n", (*exec)->Stats().c_str());
  if (text) std::printf("%s", (*exec)->AsText().c_str());
  return 0;
}

}  // namespace tether::cli
