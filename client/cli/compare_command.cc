// `tether compare BASELINE.json RESULT.json`: the verdict of `bench
// --baseline` for two stored results, without running anything — for
// results gathered on devices and judged elsewhere, and for CI scripts that
// keep their results. Same statistics, output and exit codes as `bench
// --baseline` (docs/design/results.md).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli/commands.h"
#include "client/cli/result_output.h"
#include "client/results/bench_document.h"
#include "client/results/json_writer.h"
#include "runtime/core/file.h"

namespace tether::cli {
namespace {

constexpr char kUsage[] =
    "usage: tether compare BASELINE.json RESULT.json [options]\n"
    "  compare two stored `tether bench --json` results of one workload: faster, slower,\n"
    "  same within noise, or unstable (a bootstrap interval of the ratio of medians)\n"
    "  --regression-threshold PCT  a slowdown past PCT percent is a regression (default 5)\n"
    "  --json                 the comparison as JSON\n"
    "  --junit FILE           write the outcome as JUnit XML (for CI)\n"
    "exit status: 0 compared, 2 bad usage, 3 a regression past the threshold, 4 unstable\n"
    "(rerun with more repeats), 5 a file is no usable result or they measured different\n"
    "workloads\n";

absl::StatusOr<results::StoredBench> Read(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return results::ParseBenchDocument(*text, path);
}

// The run side of CheckSameWorkload, from a stored result.
results::Provenance AsRun(const results::StoredBench& b) {
  results::Provenance p;
  p.model_path = b.model_path;
  p.model_sha256 = b.model_sha256;
  p.module_sha256 = b.module_sha256;
  p.function = b.function;
  p.device = b.device;
  p.inputs = b.inputs;
  p.compiler_version = b.compiler_version;
  p.daemon_version = b.daemon_version;
  p.farm_device = b.farm_device;
  return p;
}

}  // namespace

int RunCompare(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  std::string junit;
  bool json = false;
  results::CompareOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if ((a == "--junit" || a == "--regression-threshold") && i + 1 < args.size()) {
      std::string v = args[++i];
      if (a == "--junit") {
        junit = v;
        continue;
      }
      if (!v.empty() && v.back() == '%') v.pop_back();
      double pct = 0;
      if (!absl::SimpleAtod(v, &pct) || !(pct > 0) || pct > 1000) {
        std::fprintf(stderr,
                     "tether compare: --regression-threshold wants a percentage above 0, like 5\n");
        return 2;
      }
      options.regression_threshold = pct / 100;
    } else if (!a.empty() && a[0] != '-' && files.size() < 2) {
      files.push_back(a);
    } else {
      std::fprintf(stderr, "tether compare: unexpected argument %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (files.size() != 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const absl::Time start = absl::Now();
  results::JunitSuite suite;
  suite.name = "tether compare";
  suite.timestamp = absl::FormatTime("%Y-%m-%dT%H:%M:%S", start, absl::UTCTimeZone());
  suite.hostname = HostName();
  results::JunitCase c;
  c.classname = "tether.compare";
  c.name = absl::StrCat(files[1], " against ", files[0]);
  auto refuse = [&](const absl::Status& status) {
    Fail("", status);
    if (!junit.empty()) {
      suite.cases.push_back(ErrorCase(c, status));
      WriteJunit(junit, suite);
    }
    return kExitBadBaseline;
  };
  absl::StatusOr<results::StoredBench> baseline = Read(files[0]);
  if (!baseline.ok()) return refuse(baseline.status());
  absl::StatusOr<results::StoredBench> result = Read(files[1]);
  if (!result.ok()) return refuse(result.status());
  const results::Provenance run = AsRun(*result);
  if (absl::Status s = results::CheckSameWorkload(*baseline, run); !s.ok()) return refuse(s);

  const results::Comparison cmp = results::Compare(baseline->samples, result->samples, options);
  const std::vector<std::string> differences =
      results::BaselineDifferences(*baseline, run, result->timing);
  int rc = cmp.regression                               ? kExitRegression
           : cmp.verdict == results::Verdict::kUnstable ? kExitUnstable
                                                        : 0;
  std::string summary = absl::StrFormat(
      "baseline  %s (%s, %d samples, median %.4f ms)\nresult    %s (%s, %d samples, median "
      "%.4f ms)\n",
      files[0], baseline->timestamp, cmp.baseline.count, cmp.baseline.median * 1e3, files[1],
      result->timestamp, cmp.candidate.count, cmp.candidate.median * 1e3);
  if (!differences.empty()) {
    absl::StrAppend(&summary, "differs   ", absl::StrJoin(differences, ", "), "\n");
  }
  absl::StrAppendFormat(&summary, "verdict   %s: %s\n", results::VerdictName(cmp.verdict),
                        cmp.explanation);
  if (json) {
    results::JsonWriter w;
    results::WriteComparison(w, cmp, options, files[0]);
    std::printf("%s", w.text().c_str());
  } else {
    std::printf("%s", summary.c_str());
  }
  if (!junit.empty()) {
    c.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    c.system_out = summary;
    c.properties = {{"verdict", results::VerdictName(cmp.verdict)},
                    {"ratio", absl::StrCat(cmp.ratio)},
                    {"ci_low", absl::StrCat(cmp.ci_low)},
                    {"ci_high", absl::StrCat(cmp.ci_high)}};
    if (rc != 0) {
      c.outcome = results::JunitCase::Outcome::kFailure;
      c.type = cmp.regression ? "regression" : "unstable";
      c.message = cmp.explanation;
      c.detail = summary;
    }
    suite.cases.push_back(c);
    if (int written = WriteJunit(junit, suite); written != 0 && rc == 0) return written;
  }
  return rc;
}

}  // namespace tether::cli
