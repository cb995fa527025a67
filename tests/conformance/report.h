// Reporting for the conformance runner: the per-case table, the summary
// line per suite, the grouping of non-passing cases by operator, and the
// checked-in lists of cases that must pass (tests/conformance/expected/).
//
// Expected-list format: one case name per line; blank lines and lines
// starting with '#' are ignored.
//
// Thread contract: thread-safe (pure functions).
#ifndef TETHER_TESTS_CONFORMANCE_REPORT_H_
#define TETHER_TESTS_CONFORMANCE_REPORT_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/conformance/case_runner.h"

namespace tether::conformance {

struct CaseRecord {
  CaseSpec spec;
  CaseResult result;
};

// The case names of an expected list. NOT_FOUND if the file cannot be read.
absl::StatusOr<std::set<std::string>> ReadExpectedList(const std::string& path);
// Writes `names` (sorted) under a comment header naming `suites`.
absl::Status WriteExpectedList(const std::string& path, const std::string& suites,
                               const std::set<std::string>& names);

// What a non-passing case is blamed on: the op named in an importer message
// ("... (Loop, opset 11): ...") when there is one; for an unsupported case
// without one, its message with quoted names blanked ("opset 6 of the
// default domain is not supported (7 to 17)"); else the model's op list
// ("Conv,Relu"), else "?".
std::string BlamedOp(const CaseResult& result);

// "node: 412 pass, 37 fail, 483 unsupported (932 cases)", followed by
// "; 12 of the passes with shape inputs bound as constants" when some were.
std::string SummaryLine(const std::string& suite, const std::vector<CaseRecord>& records);

// One aligned line per case (reasons cut to `reason_width` characters).
std::string FormatTable(const std::vector<CaseRecord>& records, size_t reason_width);

// Tab-separated: a header, then suite, case, result, stage, compile_s, run_s,
// ops, reason per case.
std::string FormatTsv(const std::vector<CaseRecord>& records);

// The non-passing cases grouped by outcome and blamed op, biggest groups
// first, with an example reason each.
std::string FormatGroups(const std::vector<CaseRecord>& records, size_t max_groups);

}  // namespace tether::conformance

#endif  // TETHER_TESTS_CONFORMANCE_REPORT_H_
