// A small, strict JSON reader and the writing helpers the profiling report
// needs. The runtime may depend only on Abseil and dlpack, so this is ours:
// RFC 8259 grammar, UTF-8 passed through, \uXXXX escapes (surrogate pairs
// included) decoded to UTF-8, a nesting limit, duplicate object keys rejected,
// and every error an INVALID_ARGUMENT naming the byte offset, line and column.
#ifndef TETHER_RUNTIME_PROFILING_JSON_H_
#define TETHER_RUNTIME_PROFILING_JSON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether::profiling {

struct JsonMember;

// A parsed JSON value. Numbers keep their source text so a caller can tell an
// integer from a float and parse each exactly. Objects keep member order.
// Thread contract: a value type; thread-compatible.
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  bool bool_value = false;
  std::string text;                 // kString: the decoded string; kNumber: the literal as written
  std::vector<JsonValue> items;     // kArray
  std::vector<JsonMember> members;  // kObject, in source order
  size_t offset = 0;                // where the value starts

  // Whether a kNumber literal has no fraction and no exponent.
  bool IsIntegerLiteral() const;
  // The member named `key` of an object, or null.
  const JsonValue* Find(absl::string_view key) const;
};

// One member of an object (a struct, not a std::pair: a pair of an
// incomplete JsonValue inside JsonValue is not allowed).
struct JsonMember {
  std::string name;
  JsonValue value;
};

// The maximum nesting depth of arrays and objects ParseJson accepts.
inline constexpr int kMaxJsonDepth = 128;

// Parses one JSON document (surrounding whitespace allowed, nothing else).
// INVALID_ARGUMENT "invalid json at offset 12 (line 1, column 13): ..." on any
// malformed input.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// "line L, column C" for a byte offset in `text` (both 1-based).
std::string JsonPosition(absl::string_view text, size_t offset);

// Appends `s` as a JSON string literal: quotes and backslashes escaped, control
// characters (and DEL) as \u00XX, all other bytes (UTF-8) passed through.
void AppendJsonString(std::string* out, absl::string_view s);

// Appends the shortest decimal that parses back to exactly `v`, always with a
// '.' or an exponent so readers see a float ("2.0", "1e+300"). Non-finite
// values have no JSON spelling and are written as null.
void AppendJsonDouble(std::string* out, double v);

// The shortest round-trip decimal for `v` ("2", "0.1", "1e+300", "nan", "inf").
std::string ShortestDouble(double v);

}  // namespace tether::profiling

#endif  // TETHER_RUNTIME_PROFILING_JSON_H_
