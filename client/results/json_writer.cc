// JsonWriter: commas and indentation by nesting level; the escaping and the
// numbers come from runtime/profiling/json.h, shared with the reports.
#include "client/results/json_writer.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "runtime/profiling/json.h"

namespace tether::results {
namespace {

// A programmer error: the writer was driven out of order.
void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "tether: JsonWriter misuse: %s\n", what);
  std::abort();
}

}  // namespace

void JsonWriter::Newline() {
  out_.push_back('\n');
  out_.append(2 * levels_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (levels_.empty()) {
    Require(out_.empty(), "a JSON document has one top-level value");
    return;
  }
  Level& level = levels_.back();
  if (level.object) {
    Require(key_pending_, "a value inside a JSON object needs a Key first");
    key_pending_ = false;
    return;  // Key wrote the separator
  }
  if (!level.empty) out_.push_back(',');
  level.empty = false;
  Newline();
}

JsonWriter& JsonWriter::Key(absl::string_view key) {
  Require(!levels_.empty() && levels_.back().object && !key_pending_, "misplaced JSON key");
  Level& level = levels_.back();
  if (!level.empty) out_.push_back(',');
  level.empty = false;
  Newline();
  profiling::AppendJsonString(&out_, key);
  out_.append(": ");
  key_pending_ = true;
  return *this;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  levels_.push_back({true});
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  levels_.push_back({false});
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  Require(!levels_.empty() && levels_.back().object && !key_pending_, "unbalanced EndObject");
  const bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) Newline();
  out_.push_back('}');
  if (levels_.empty()) out_.push_back('\n');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Require(!levels_.empty() && !levels_.back().object, "unbalanced EndArray");
  const bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) Newline();
  out_.push_back(']');
  if (levels_.empty()) out_.push_back('\n');
  return *this;
}

JsonWriter& JsonWriter::String(absl::string_view value) {
  BeforeValue();
  profiling::AppendJsonString(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  profiling::AppendJsonDouble(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_.append(value ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::Raw(absl::string_view json) {
  BeforeValue();
  out_.append(json.data(), json.size());
  return *this;
}

}  // namespace tether::results
