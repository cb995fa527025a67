// Table and summary formatting, expected-list I/O and op blame. Op blame
// reads the importer's message format from compiler/frontend/onnx/importer.h
// ("onnx: node 'n' (Op, opset 13): ...").
#include "tests/conformance/report.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace tether::conformance {
namespace {

std::string Cut(const std::string& text, size_t width) {
  if (width == 0 || text.size() <= width) return text;
  return text.substr(0, width > 3 ? width - 3 : width) + "...";
}

}  // namespace

absl::StatusOr<std::set<std::string>> ReadExpectedList(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read expected list ", path));
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view name = absl::StripAsciiWhitespace(line);
    if (name.empty() || name[0] == '#') continue;
    names.insert(std::string(name));
  }
  return names;
}

absl::Status WriteExpectedList(const std::string& path, const std::string& suites,
                               const std::set<std::string>& names) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write expected list ", path));
  out << "# ONNX conformance: cases of " << suites << " that must pass.\n"
      << "# Regenerate with tether_conformance --update-expected "
         "(docs/design/onnx-conformance.md).\n";
  for (const std::string& name : names) out << name << "\n";
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write expected list ", path));
  return absl::OkStatus();
}

std::string BlamedOp(const CaseResult& result) {
  static const std::regex* const kNodeOp = new std::regex(R"(\(([A-Za-z0-9_.]+), opset \d+\))");
  std::smatch m;
  if (std::regex_search(result.reason, m, *kNodeOp)) return m[1].str();
  if (result.outcome == Outcome::kUnsupported && !result.reason.empty()) {
    // A model-level refusal ("opset 6 of the default domain is not
    // supported"): the message itself, with names and the status code
    // stripped, so that every case refused for the same reason groups.
    static const std::regex* const kQuoted = new std::regex(R"('[^']*')");
    std::string key = std::regex_replace(result.reason, *kQuoted, "'_'");
    for (absl::string_view prefix : {"UNIMPLEMENTED: ", "onnx: "}) {
      if (absl::StartsWith(key, prefix)) key.erase(0, prefix.size());
    }
    return key;
  }
  if (!result.ops.empty()) return result.ops;
  return "?";
}

std::string SummaryLine(const std::string& suite, const std::vector<CaseRecord>& records) {
  int pass = 0, fail = 0, unsupported = 0, bound = 0;
  for (const CaseRecord& r : records) {
    if (r.spec.suite != suite) continue;
    switch (r.result.outcome) {
      case Outcome::kPass:
        ++pass;
        if (!r.result.bound_inputs.empty()) ++bound;
        break;
      case Outcome::kFail:
        ++fail;
        break;
      case Outcome::kUnsupported:
        ++unsupported;
        break;
    }
  }
  std::string line = absl::StrCat(suite, ": ", pass, " pass, ", fail, " fail, ", unsupported,
                                  " unsupported (", pass + fail + unsupported, " cases)");
  if (bound > 0) {
    absl::StrAppend(&line, "; ", bound, " of the passes with shape inputs bound as constants");
  }
  return line;
}

std::string FormatTable(const std::vector<CaseRecord>& records, size_t reason_width) {
  size_t name_width = 4;
  for (const CaseRecord& r : records) {
    name_width = std::max(name_width, r.spec.suite.size() + 1 + r.spec.name.size());
  }
  std::string out = absl::StrFormat("%-*s  %-11s  %-8s  %7s  %s\n", static_cast<int>(name_width),
                                    "case", "result", "stage", "secs", "reason");
  for (const CaseRecord& r : records) {
    absl::StrAppendFormat(
        &out, "%-*s  %-11s  %-8s  %7.2f  %s\n", static_cast<int>(name_width),
        absl::StrCat(r.spec.suite, "/", r.spec.name), OutcomeName(r.result.outcome), r.result.stage,
        r.result.compile_seconds + r.result.run_seconds, Cut(r.result.reason, reason_width));
  }
  return out;
}

std::string FormatTsv(const std::vector<CaseRecord>& records) {
  std::string out = "suite\tcase\tresult\tstage\tcompile_s\trun_s\tops\treason\n";
  for (const CaseRecord& r : records) {
    absl::StrAppendFormat(&out, "%s\t%s\t%s\t%s\t%.3f\t%.3f\t%s\t%s\n", r.spec.suite, r.spec.name,
                          OutcomeName(r.result.outcome), r.result.stage, r.result.compile_seconds,
                          r.result.run_seconds, r.result.ops, r.result.reason);
  }
  return out;
}

std::string FormatGroups(const std::vector<CaseRecord>& records, size_t max_groups) {
  struct Group {
    std::string outcome;
    std::string op;
    int count = 0;
    std::map<std::string, int> stages;
    std::string example;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const CaseRecord& r : records) {
    if (r.result.outcome == Outcome::kPass) continue;
    std::string outcome(OutcomeName(r.result.outcome));
    std::string op = BlamedOp(r.result);
    Group& g = groups[{outcome, op}];
    g.outcome = outcome;
    g.op = op;
    if (g.count++ == 0) g.example = absl::StrCat(r.spec.name, ": ", r.result.reason);
    ++g.stages[r.result.stage];
  }
  std::vector<const Group*> sorted;
  for (const auto& [key, g] : groups) sorted.push_back(&g);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Group* a, const Group* b) {
    if (a->outcome != b->outcome) return a->outcome < b->outcome;
    return a->count > b->count;
  });
  std::string out;
  std::string current;
  size_t shown = 0;
  for (const Group* g : sorted) {
    if (g->outcome != current) {
      current = g->outcome;
      shown = 0;
      absl::StrAppend(&out, current, " by op:\n");
    }
    if (max_groups > 0 && shown++ >= max_groups) continue;
    std::vector<std::string> stages;
    for (const auto& [stage, n] : g->stages) stages.push_back(absl::StrCat(stage, " ", n));
    absl::StrAppendFormat(&out, "  %4d  %-28s [%s]  e.g. %s\n", g->count, Cut(g->op, 70),
                          absl::StrJoin(stages, ", "), Cut(g->example, 150));
  }
  return out;
}

}  // namespace tether::conformance
