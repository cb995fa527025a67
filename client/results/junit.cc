// JUnit XML: escaping (with a UTF-8 validator) and the document.
#include "client/results/junit.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::results {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at `s[i]`, or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp == 0xFFFE || cp == 0xFFFF) return 0;  // not characters in XML 1.0
  return n;
}

void Attribute(std::string* out, absl::string_view name, absl::string_view value) {
  absl::StrAppend(out, " ", name, "=\"");
  AppendXmlEscaped(out, value, true);
  out->push_back('"');
}

void Properties(std::string* out, const std::vector<std::pair<std::string, std::string>>& props,
                absl::string_view indent) {
  if (props.empty()) return;
  absl::StrAppend(out, indent, "<properties>\n");
  for (const auto& [name, value] : props) {
    absl::StrAppend(out, indent, "  <property");
    Attribute(out, "name", name);
    Attribute(out, "value", value);
    out->append("/>\n");
  }
  absl::StrAppend(out, indent, "</properties>\n");
}

}  // namespace

void AppendXmlEscaped(std::string* out, absl::string_view text, bool attribute) {
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&':
        out->append("&amp;");
        ++i;
        continue;
      case '<':
        out->append("&lt;");
        ++i;
        continue;
      case '>':
        out->append("&gt;");
        ++i;
        continue;
      case '"':
        out->append(attribute ? "&quot;" : "\"");
        ++i;
        continue;
      case '\'':
        out->append(attribute ? "&apos;" : "'");
        ++i;
        continue;
      case '\n':
      case '\r':
      case '\t':
        // Attribute values normalize raw whitespace to spaces; references keep it.
        if (attribute) {
          absl::StrAppend(out, "&#", static_cast<int>(c), ";");
        } else {
          out->push_back(c);
        }
        ++i;
        continue;
      default:
        break;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      out->append(kReplacement);  // XML 1.0 cannot carry it, not even as a reference
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out->append(kReplacement);
      ++i;
      continue;
    }
    out->append(text.data() + i, n);
    i += n;
  }
}

std::string JunitXml(const JunitSuite& suite) {
  int failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  for (const JunitCase& c : suite.cases) {
    failures += c.outcome == JunitCase::Outcome::kFailure;
    errors += c.outcome == JunitCase::Outcome::kError;
    skipped += c.outcome == JunitCase::Outcome::kSkipped;
    seconds += c.seconds;
  }
  const std::string tests = absl::StrCat(suite.cases.size());
  const std::string time = absl::StrFormat("%.6f", seconds);
  // The totals, on <testsuites> and again on its one <testsuite>.
  auto totals = [&](std::string* out) {
    Attribute(out, "name", suite.name);
    Attribute(out, "tests", tests);
    Attribute(out, "failures", absl::StrCat(failures));
    Attribute(out, "errors", absl::StrCat(errors));
    Attribute(out, "skipped", absl::StrCat(skipped));
    Attribute(out, "time", time);
  };
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites";
  totals(&out);
  out.append(">\n  <testsuite");
  totals(&out);
  if (!suite.timestamp.empty()) Attribute(&out, "timestamp", suite.timestamp);
  if (!suite.hostname.empty()) Attribute(&out, "hostname", suite.hostname);
  out.append(">\n");
  Properties(&out, suite.properties, "    ");
  for (const JunitCase& c : suite.cases) {
    out.append("    <testcase");
    Attribute(&out, "classname", c.classname);
    Attribute(&out, "name", c.name);
    Attribute(&out, "time", absl::StrFormat("%.6f", c.seconds));
    out.append(">\n");
    Properties(&out, c.properties, "      ");
    const char* element = nullptr;
    switch (c.outcome) {
      case JunitCase::Outcome::kFailure:
        element = "failure";
        break;
      case JunitCase::Outcome::kError:
        element = "error";
        break;
      case JunitCase::Outcome::kSkipped:
        element = "skipped";
        break;
      case JunitCase::Outcome::kPassed:
        break;
    }
    if (element != nullptr) {
      absl::StrAppend(&out, "      <", element);
      Attribute(&out, "message", c.message);
      if (!c.type.empty()) Attribute(&out, "type", c.type);
      out.append(">");
      AppendXmlEscaped(&out, c.detail, false);
      absl::StrAppend(&out, "</", element, ">\n");
    }
    if (!c.system_out.empty()) {
      out.append("      <system-out>");
      AppendXmlEscaped(&out, c.system_out, false);
      out.append("</system-out>\n");
    }
    out.append("    </testcase>\n");
  }
  out.append("  </testsuite>\n</testsuites>\n");
  return out;
}

absl::Status WriteTextFile(const std::string& path, absl::string_view text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace tether::results
