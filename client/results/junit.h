// JUnit XML, the report format CI systems read (Jenkins, GitLab, GitHub
// actions' test reporters): one <testsuite> of <testcase>s, each passed,
// failed (the work ran and its check failed: a regression), in error (the
// work could not run) or skipped. The schema followed is the common subset
// of Jenkins' junit.xsd; docs/design/results.md shows an example.
//
// All text is escaped for XML 1.0: markup characters as entities, control
// characters XML cannot carry (all below 0x20 but tab, LF and CR) and
// invalid UTF-8 as U+FFFD, line breaks inside attributes as character
// references, so any error message yields a well-formed file.
//
// Thread contract: value types and pure functions; thread-compatible.
#ifndef TETHER_CLIENT_RESULTS_JUNIT_H_
#define TETHER_CLIENT_RESULTS_JUNIT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tether::results {

struct JunitCase {
  enum class Outcome { kPassed, kFailure, kError, kSkipped };
  std::string classname;  // "tether.bench.mlp"
  std::string name;       // "main on cpu:0"
  double seconds = 0;
  Outcome outcome = Outcome::kPassed;
  std::string message;  // the one-line reason, for failure/error/skipped
  std::string type;     // "regression", "unstable", the status code name
  std::string detail;   // the element's text: a longer explanation
  std::string system_out;
  std::vector<std::pair<std::string, std::string>> properties;
};

struct JunitSuite {
  std::string name;       // "tether bench"
  std::string timestamp;  // ISO 8601, no zone suffix, as the schema wants
  std::string hostname;
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<JunitCase> cases;
};

// The document: <?xml ...?><testsuites><testsuite ...>...</testsuite></testsuites>.
std::string JunitXml(const JunitSuite& suite);

// Appends `text` escaped for XML content (attribute: also quotes, line
// breaks and tabs as character references).
void AppendXmlEscaped(std::string* out, absl::string_view text, bool attribute);

// Writes `xml` to `path` (replacing it). An error names the path.
absl::Status WriteTextFile(const std::string& path, absl::string_view text);

}  // namespace tether::results

#endif  // TETHER_CLIENT_RESULTS_JUNIT_H_
