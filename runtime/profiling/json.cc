// The strict JSON reader and the writing helpers declared in json.h.
#include "runtime/profiling/json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace tether::profiling {
namespace {

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    JsonValue value;
    SkipSpace();
    absl::Status status = ParseValue(&value, 0);
    if (!status.ok()) return status;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected trailing characters after the document");
    return value;
  }

 private:
  absl::Status Error(absl::string_view what) const { return ErrorAt(pos_, what); }
  absl::Status ErrorAt(size_t offset, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("invalid json at offset ", offset, " (",
                                                   JsonPosition(text_, offset),
                                                   "): ", std::string(what)));
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  absl::Status ParseValue(JsonValue* out, int depth) {
    if (AtEnd()) return Error("unexpected end of input, expected a value");
    out->offset = pos_;
    char c = Peek();
    switch (c) {
      case '{':
        return ParseObject(out, depth + 1);
      case '[':
        return ParseArray(out, depth + 1);
      case '"':
        out->kind = JsonValue::Kind::kString;
        return ParseString(&out->text);
      case 't':
        out->kind = JsonValue::Kind::kBool;
        out->bool_value = true;
        return ParseLiteral("true");
      case 'f':
        out->kind = JsonValue::Kind::kBool;
        out->bool_value = false;
        return ParseLiteral("false");
      case 'n':
        out->kind = JsonValue::Kind::kNull;
        return ParseLiteral("null");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
        return Error(absl::StrFormat("unexpected character %s, expected a value", Describe(c)));
    }
  }

  static std::string Describe(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return absl::StrCat("'", std::string(1, c), "'");
    return absl::StrFormat("0x%02x", u);
  }

  absl::Status ParseLiteral(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      return Error(absl::StrCat("invalid literal, expected ", std::string(word)));
    }
    pos_ += word.size();
    return absl::OkStatus();
  }

  absl::Status ParseNumber(JsonValue* out) {
    size_t start = pos_;
    auto digits = [&] {
      size_t n = 0;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_, ++n;
      return n;
    };
    if (Peek() == '-') ++pos_;
    if (AtEnd()) return Error("unexpected end of input in a number");
    if (Peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Error("expected a digit");
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (digits() == 0) return Error("expected a digit after the decimal point");
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (digits() == 0) return Error("expected a digit in the exponent");
    }
    out->kind = JsonValue::Kind::kNumber;
    out->text = std::string(text_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    if (text_.size() - pos_ < 4) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        return ErrorAt(pos_ + i, "invalid hex digit in \\u escape");
      }
    }
    pos_ += 4;
    return v;
  }

  static void AppendUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Expects the opening quote at pos_.
  absl::Status ParseString(std::string* out) {
    ++pos_;
    out->clear();
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      char c = Peek();
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error(absl::StrCat("unescaped control character ", Describe(c), " in a string"));
      }
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      size_t escape_at = pos_;
      ++pos_;
      if (AtEnd()) return Error("unterminated escape in a string");
      char e = Peek();
      ++pos_;
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          absl::StatusOr<uint32_t> cp = ParseHex4();
          if (!cp.ok()) return cp.status();
          uint32_t code = *cp;
          if (code >= 0xDC00 && code <= 0xDFFF) {
            return ErrorAt(escape_at, "unpaired low surrogate in \\u escape");
          }
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") {
              return ErrorAt(escape_at, "high surrogate not followed by a low surrogate");
            }
            pos_ += 2;
            absl::StatusOr<uint32_t> low = ParseHex4();
            if (!low.ok()) return low.status();
            if (*low < 0xDC00 || *low > 0xDFFF) {
              return ErrorAt(escape_at, "high surrogate not followed by a low surrogate");
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (*low - 0xDC00);
          }
          AppendUtf8(out, code);
          break;
        }
        default:
          return ErrorAt(escape_at, absl::StrCat("invalid escape \\", Describe(e)));
      }
    }
  }

  absl::Status ParseArray(JsonValue* out, int depth) {
    if (depth > kMaxJsonDepth) return Error(absl::StrCat("nesting deeper than ", kMaxJsonDepth));
    out->kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      JsonValue item;
      absl::Status status = ParseValue(&item, depth);
      if (!status.ok()) return status;
      out->items.push_back(std::move(item));
      SkipSpace();
      if (AtEnd()) return Error("unexpected end of input, expected ',' or ']'");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error(
          absl::StrCat("unexpected character ", Describe(Peek()), ", expected ',' or ']'"));
    }
  }

  absl::Status ParseObject(JsonValue* out, int depth) {
    if (depth > kMaxJsonDepth) return Error(absl::StrCat("nesting deeper than ", kMaxJsonDepth));
    out->kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    absl::flat_hash_set<std::string> seen;
    while (true) {
      SkipSpace();
      if (AtEnd()) return Error("unexpected end of input, expected a member name");
      if (Peek() != '"') {
        return Error(absl::StrCat("unexpected character ", Describe(Peek()),
                                  ", expected a member name string"));
      }
      size_t key_at = pos_;
      std::string key;
      absl::Status status = ParseString(&key);
      if (!status.ok()) return status;
      if (!seen.insert(key).second)
        return ErrorAt(key_at, absl::StrCat("duplicate key \"", key, "\""));
      SkipSpace();
      if (AtEnd() || Peek() != ':') return Error("expected ':' after a member name");
      ++pos_;
      SkipSpace();
      JsonValue value;
      status = ParseValue(&value, depth);
      if (!status.ok()) return status;
      out->members.push_back(JsonMember{std::move(key), std::move(value)});
      SkipSpace();
      if (AtEnd()) return Error("unexpected end of input, expected ',' or '}'");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error(
          absl::StrCat("unexpected character ", Describe(Peek()), ", expected ',' or '}'"));
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

bool JsonValue::IsIntegerLiteral() const {
  return kind == Kind::kNumber && text.find_first_of(".eE") == std::string::npos;
}

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).ParseDocument(); }

std::string JsonPosition(absl::string_view text, size_t offset) {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return absl::StrCat("line ", line, ", column ", column);
}

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"') {
      out->append("\\\"");
    } else if (c == '\\') {
      out->append("\\\\");
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppendFormat(out, "\\u%04x", u);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

std::string ShortestDouble(double v) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

void AppendJsonDouble(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  std::string s = ShortestDouble(v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  out->append(s);
}

}  // namespace tether::profiling
