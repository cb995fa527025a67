// tether_conformance: runs the ONNX test suites (Debian's libonnx-testdata)
// through the importer, the compiler and a VM, local or behind a real
// tetherd, and compares every output with the suite's reference. Prints a
// table and a summary line per suite, optionally writes the table to a file,
// and checks the result against checked-in lists of cases that must pass.
// docs/design/onnx-conformance.md is the user's guide.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/remote_session.h"
#include "runtime/device/device_api.h"
#include "tests/conformance/case_pool.h"
#include "tests/conformance/case_runner.h"
#include "tests/conformance/daemon_process.h"
#include "tests/conformance/report.h"

namespace tether::conformance {
namespace {

namespace fs = std::filesystem;

constexpr char kDefaultDataDir[] = "/usr/share/libonnx-testdata/data";
#ifdef TETHERD_PATH
constexpr char kDefaultTetherd[] = TETHERD_PATH;
#else
constexpr char kDefaultTetherd[] = "tetherd";
#endif

constexpr char kUsage[] =
    "usage: tether_conformance --suite DIR [flags]\n"
    "  --suite DIR            a suite directory, or a name under "
    "/usr/share/libonnx-testdata/data\n"
    "                         (node, simple, pytorch-converted, pytorch-operator); repeatable\n"
    "  --filter REGEX         only cases whose name matches (ECMAScript, searched)\n"
    "  --cases FILE           only the cases listed in FILE (expected-list format)\n"
    "  --report FILE          write the table (tab-separated) and summaries to FILE\n"
    "  --expected FILE        cases that must pass; exit 1 listing regressions. Repeatable:\n"
    "                         given once per --suite, the i-th list belongs to the i-th suite\n"
    "  --update-expected FILE write the passing cases (per suite as --expected)\n"
    "  --remote               run through a tetherd started here on 127.0.0.1:0\n"
    "  --tetherd PATH         the tetherd binary for --remote\n"
    "  --jobs N               cases run at once, each in its own process (default 1)\n"
    "  --timeout SECS         per-case time limit (default 300; 0: none)\n"
    "  --pipeline NAME        compiler pipeline (default \"default\")\n"
    "  --device DEV           run every case on DEV (default cpu:0); for cuda:N the models are\n"
    "                         built for that GPU's architecture (its compute capability);\n"
    "                         exits 77 (skipped) when the device does not exist\n"
    "  --simulate-gpu N       lower every model for a cuda GPU and run its device launches on\n"
    "                         the CPU as N simulated threads (checks the GPU lowering without\n"
    "                         a GPU; compiler::BuildOptions::simulate_gpu_threads)\n"
    "  --table all|failures|none   which cases the printed table shows (default all)\n"
    "  --no-bind-shape-inputs do not retry a model whose import needs a graph input's value\n"
    "                         (Reshape's shape, Resize's scales) with its rank-0/1 inputs bound\n"
    "                         as constants from the data set (such passes are counted apart)\n"
    "  --no-fork              run cases in this process (no crash isolation; for debugging)\n"
    "  --progress             one line per finished case on stderr (outcome, stage, seconds\n"
    "                         since the start, compile and run seconds), for a log that a\n"
    "                         run stopped from outside still leaves readable\n"
    "  --help                 show this help\n";

struct Flags {
  std::vector<std::string> suites;
  std::string filter;
  std::string cases_file;
  std::string report;
  std::vector<std::string> expected;
  std::vector<std::string> update_expected;
  bool remote = false;
  std::string tetherd = kDefaultTetherd;
  int jobs = 1;
  double timeout = 300;
  std::string pipeline = "default";
  int simulate_gpu = 0;
  Device device = Device::Cpu();
  std::string table = "all";
  bool no_fork = false;
  bool progress = false;
  bool bind_shape_inputs = true;
};

// Whether `device` exists and, for a CUDA device, the target its models are
// built for, asked once in a child process: a CUDA driver initialized here
// would be unusable in the forked case processes, and asking in each of them
// would cost every case a driver start. nullopt: the device does not exist.
std::optional<std::string> ProbeDeviceInChild(Device device) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    close(fds[0]);
    if (!DeviceExists(device)) _exit(1);
    const std::string target = device.type == kDLCUDA ? CudaTarget(device) : "";
    const bool written =
        write(fds[1], target.data(), target.size()) == static_cast<ssize_t>(target.size());
    _exit(written ? 0 : 1);
  }
  close(fds[1]);
  std::string target;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) target.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::nullopt;
  }
  return target;
}

int UsageError(absl::string_view message) {
  std::cerr << "tether_conformance: " << message << "\n" << kUsage;
  return 2;
}

// Parses argv into *flags; returns an exit code (>= 0) to stop with, or -1.
int ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (flag == "--remote") {
      flags->remote = true;
      continue;
    }
    if (flag == "--no-bind-shape-inputs") {
      flags->bind_shape_inputs = false;
      continue;
    }
    if (flag == "--no-fork") {
      flags->no_fork = true;
      continue;
    }
    if (flag == "--progress") {
      flags->progress = true;
      continue;
    }
    if (i + 1 >= argc) return UsageError(absl::StrCat(flag, " needs a value"));
    std::string value = argv[++i];
    if (flag == "--suite") {
      flags->suites.push_back(value);
    } else if (flag == "--filter") {
      flags->filter = value;
    } else if (flag == "--cases") {
      flags->cases_file = value;
    } else if (flag == "--report") {
      flags->report = value;
    } else if (flag == "--expected") {
      flags->expected.push_back(value);
    } else if (flag == "--update-expected") {
      flags->update_expected.push_back(value);
    } else if (flag == "--tetherd") {
      flags->tetherd = value;
    } else if (flag == "--jobs") {
      if (!absl::SimpleAtoi(value, &flags->jobs) || flags->jobs < 1 || flags->jobs > 256) {
        return UsageError(absl::StrCat("--jobs ", value, " is not a count from 1 to 256"));
      }
    } else if (flag == "--timeout") {
      if (!absl::SimpleAtod(value, &flags->timeout) || flags->timeout < 0) {
        return UsageError(absl::StrCat("--timeout ", value, " is not a number of seconds >= 0"));
      }
    } else if (flag == "--pipeline") {
      flags->pipeline = value;
    } else if (flag == "--device") {
      absl::StatusOr<Device> d = Device::Parse(value);
      if (!d.ok()) return UsageError(absl::StrCat("--device ", value, ": ", d.status().message()));
      flags->device = *d;
    } else if (flag == "--simulate-gpu") {
      if (!absl::SimpleAtoi(value, &flags->simulate_gpu) || flags->simulate_gpu < 1 ||
          flags->simulate_gpu > 4096) {
        return UsageError(absl::StrCat("--simulate-gpu ", value, " is not a count from 1 to 4096"));
      }
    } else if (flag == "--table") {
      if (value != "all" && value != "failures" && value != "none") {
        return UsageError(absl::StrCat("--table ", value, " is not all, failures or none"));
      }
      flags->table = value;
    } else {
      return UsageError(absl::StrCat("unknown flag ", flag));
    }
  }
  if (flags->suites.empty()) return UsageError("no --suite given");
  for (const auto* lists : {&flags->expected, &flags->update_expected}) {
    if (lists->size() > 1 && lists->size() != flags->suites.size()) {
      return UsageError(absl::StrCat(lists->size(), " expected lists for ", flags->suites.size(),
                                     " suites: give one, or one per suite"));
    }
  }
  return -1;
}

// A suite argument as (label, directory).
std::pair<std::string, std::string> ResolveSuite(const std::string& arg) {
  std::error_code ec;
  std::string dir = arg;
  if (!fs::is_directory(dir, ec) && arg.find('/') == std::string::npos) {
    dir = (fs::path(kDefaultDataDir) / arg).string();
  }
  std::string label = fs::path(dir).lexically_normal().filename().string();
  if (label.empty()) label = fs::path(dir).lexically_normal().parent_path().filename().string();
  return {label, dir};
}

// Which expected-list entry applies to suite number `i`: its own list when
// there is one per suite, the only list otherwise.
const std::string* ListFor(const std::vector<std::string>& lists, size_t i) {
  if (lists.empty()) return nullptr;
  return lists.size() == 1 ? &lists[0] : &lists[i];
}

int Main(int argc, char** argv) {
  Flags flags;
  if (int code = ParseFlags(argc, argv, &flags); code >= 0) return code;

  std::unique_ptr<std::regex> filter;
  if (!flags.filter.empty()) {
    try {
      filter = std::make_unique<std::regex>(flags.filter);
    } catch (const std::regex_error& e) {
      return UsageError(absl::StrCat("--filter ", flags.filter, " is not a regex: ", e.what()));
    }
  }
  std::set<std::string> only;
  if (!flags.cases_file.empty()) {
    absl::StatusOr<std::set<std::string>> list = ReadExpectedList(flags.cases_file);
    if (!list.ok()) return UsageError(list.status().message());
    only = std::move(*list);
  }
  auto selected = [&](const std::string& name) {
    if (filter && !std::regex_search(name, *filter)) return false;
    return flags.cases_file.empty() || only.count(name) > 0;
  };

  // Cases, and per suite the expected names that apply to it.
  std::vector<std::string> labels;
  std::vector<CaseSpec> cases;
  std::vector<std::set<std::string>> expected(flags.suites.size());
  for (size_t i = 0; i < flags.suites.size(); ++i) {
    auto [label, dir] = ResolveSuite(flags.suites[i]);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return UsageError(absl::StrCat("suite ", flags.suites[i], " is not a directory (", dir, ")"));
    }
    labels.push_back(label);
    for (CaseSpec& spec : ListCases(dir, label)) {
      if (selected(spec.name)) cases.push_back(std::move(spec));
    }
    if (const std::string* list = ListFor(flags.expected, i)) {
      absl::StatusOr<std::set<std::string>> names = ReadExpectedList(*list);
      if (!names.ok()) return UsageError(names.status().message());
      for (const std::string& name : *names) {
        if (selected(name)) expected[i].insert(name);
      }
    }
  }

  std::unique_ptr<DaemonProcess> daemon;
  std::string daemon_dir;  // its store and log; removed unless a case regressed
  CaseOptions case_options;
  case_options.pipeline = flags.pipeline;
  case_options.bind_shape_inputs = flags.bind_shape_inputs;
  case_options.simulate_gpu_threads = flags.simulate_gpu;
  case_options.device = flags.device;
  std::optional<std::string> probed;
  if (flags.device.type != kDLCPU) probed = ProbeDeviceInChild(flags.device);
  if (flags.device.type == kDLCUDA && probed.has_value()) case_options.cuda_target = *probed;
  if (flags.device.type != kDLCPU && !probed.has_value()) {
    std::cout << "SKIP: " << flags.device.ToString()
              << " does not exist on this machine (no driver or no device)\n";
    return 77;
  }
  if (flags.remote) {
    char dir_template[] = "/tmp/tether-conformance-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
      std::cerr << "tether_conformance: cannot create a temporary directory\n";
      return 1;
    }
    absl::StatusOr<std::unique_ptr<DaemonProcess>> started =
        DaemonProcess::Start(flags.tetherd, dir_template);
    if (!started.ok()) {
      std::cerr << "tether_conformance: " << started.status() << "\n";
      return 1;
    }
    daemon = std::move(*started);
    daemon_dir = dir_template;
    case_options.remote_target = daemon->target();
    case_options.remote_token = daemon->token();
    std::cerr << "tetherd listening on " << daemon->target() << "\n";
    // Models are built for the daemon's CPU, as its handshake reports it
    // (a board's daemon under emulation, say).
    client::ConnectOptions connect;
    connect.auth_token = daemon->token();
    absl::StatusOr<std::unique_ptr<client::RemoteSession>> probe =
        client::RemoteSession::Connect(daemon->target(), connect);
    if (!probe.ok()) {
      std::cerr << "tether_conformance: " << probe.status() << "\n";
      return 1;
    }
    case_options.cpu_target = (*probe)->CpuCompileTarget();
    std::cerr << "models for its cpu are built for " << case_options.cpu_target << "\n";
  }

  CasePoolOptions pool_options;
  pool_options.jobs = flags.jobs;
  pool_options.timeout_seconds = flags.timeout;
  pool_options.in_process = flags.no_fork;
  std::vector<CaseRecord> records(cases.size());
  size_t finished = 0;
  const auto start = std::chrono::steady_clock::now();
  auto run_case = [&case_options](const CaseSpec& spec) { return RunCase(spec, case_options); };
  RunCases(cases, run_case, pool_options, [&](size_t index, const CaseResult& result) {
    records[index] = {cases[index], result};
    ++finished;
    if (flags.progress) {
      const double since =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << absl::StrFormat(
                       "[%zu/%zu] %s/%s: %s%s%s (at %.1f s; compile %.2f s, run %.2f s)\n",
                       finished, cases.size(), cases[index].suite, cases[index].name,
                       OutcomeName(result.outcome), result.stage.empty() ? "" : " at ",
                       result.stage, since, result.compile_seconds, result.run_seconds)
                << std::flush;
    } else if (isatty(STDERR_FILENO)) {
      std::cerr << "\r[" << finished << "/" << cases.size() << "] " << cases[index].name << "\033[K"
                << std::flush;
    }
  });
  if (!flags.progress && isatty(STDERR_FILENO)) std::cerr << "\r\033[K";
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  daemon.reset();

  std::vector<CaseRecord> shown;
  for (const CaseRecord& r : records) {
    if (flags.table == "all" || (flags.table == "failures" && r.result.outcome != Outcome::kPass)) {
      shown.push_back(r);
    }
  }
  if (!shown.empty()) std::cout << FormatTable(shown, 200) << "\n";
  std::string groups = FormatGroups(records, 40);
  if (!groups.empty()) std::cout << groups << "\n";

  double compile = 0, run = 0;
  for (const CaseRecord& r : records) {
    compile += r.result.compile_seconds;
    run += r.result.run_seconds;
  }
  std::vector<std::string> summaries;
  for (const std::string& label : labels) summaries.push_back(SummaryLine(label, records));
  const std::string timing = absl::StrFormat(
      "time: %.1f s wall with %d job(s); per case sums: compile %.1f s, run %.1f s%s", wall,
      flags.jobs, compile, run, flags.remote ? " (through tetherd)" : "");

  // Regressions (expected but not passing, or missing) and new passes.
  std::vector<std::string> regressions, new_passes;
  for (size_t i = 0; i < labels.size(); ++i) {
    std::map<std::string, const CaseRecord*> by_name;
    for (const CaseRecord& r : records) {
      if (r.spec.suite == labels[i]) by_name[r.spec.name] = &r;
    }
    for (const std::string& name : expected[i]) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        regressions.push_back(absl::StrCat(labels[i], "/", name, ": case not found in the suite"));
      } else if (it->second->result.outcome != Outcome::kPass) {
        regressions.push_back(
            absl::StrCat(labels[i], "/", name, ": ", OutcomeName(it->second->result.outcome), " (",
                         it->second->result.stage, ") ", it->second->result.reason));
      }
    }
    if (!flags.expected.empty()) {
      for (const auto& [name, r] : by_name) {
        if (r->result.outcome == Outcome::kPass && expected[i].count(name) == 0) {
          new_passes.push_back(absl::StrCat(labels[i], "/", name));
        }
      }
    }
  }

  if (!flags.report.empty()) {
    std::ofstream out(flags.report, std::ios::trunc);
    out << FormatTsv(records);
    for (const std::string& s : summaries) out << "# " << s << "\n";
    out << "# " << timing << "\n";
    if (!out) std::cerr << "tether_conformance: cannot write --report " << flags.report << "\n";
  }

  for (size_t i = 0; i < flags.update_expected.size(); ++i) {
    std::set<std::string> names;
    std::vector<std::string> suites_named;
    for (size_t s = 0; s < labels.size(); ++s) {
      if (flags.update_expected.size() > 1 && s != i) continue;
      suites_named.push_back(labels[s]);
      for (const CaseRecord& r : records) {
        if (r.spec.suite == labels[s] && r.result.outcome == Outcome::kPass) {
          names.insert(r.spec.name);
        }
      }
    }
    absl::Status s =
        WriteExpectedList(flags.update_expected[i], absl::StrJoin(suites_named, ", "), names);
    if (!s.ok()) {
      std::cerr << "tether_conformance: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << names.size() << " passing cases to " << flags.update_expected[i]
              << "\n";
  }

  if (!new_passes.empty()) {
    std::cout << "newly passing (not in the expected list; add with --update-expected):\n";
    for (const std::string& n : new_passes) std::cout << "  " << n << "\n";
  }
  for (const std::string& s : summaries) std::cout << s << "\n";
  std::cout << timing << "\n";
  if (!regressions.empty()) {
    std::cout << "REGRESSIONS: " << regressions.size() << " expected case(s) did not pass:\n";
    for (const std::string& r : regressions) std::cout << "  " << r << "\n";
    if (!daemon_dir.empty())
      std::cout << "tetherd's store and log are kept in " << daemon_dir << "\n";
    return 1;
  }
  std::error_code ignored;
  if (!daemon_dir.empty()) std::filesystem::remove_all(daemon_dir, ignored);
  return 0;
}

}  // namespace
}  // namespace tether::conformance

int main(int argc, char** argv) { return tether::conformance::Main(argc, argv); }
