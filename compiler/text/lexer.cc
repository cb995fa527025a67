// Python-style tokenization for the Relax text format: layout tokens from
// indentation, bracket matching with positioned errors, literals.
#include "compiler/text/lexer.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tether::compiler::text {
namespace {

constexpr const char* kTwoCharPuncts[] = {"->", "//", "==", "!=", "<=", ">=", "+=", "-=", "*="};
constexpr absl::string_view kOneCharPuncts = "()[]{},:.=+-*/%@<>";
// Bounds on nesting keep the recursive-descent parser's stack small on
// hostile input.
constexpr size_t kMaxBracketDepth = 200;
constexpr size_t kMaxIndentDepth = 100;

struct OpenBracket {
  char c;
  int line;
  int column;
};

char Closer(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }

class Lexer {
 public:
  Lexer(absl::string_view text, absl::string_view file, int line, int column, bool layout)
      : text_(text), file_(file), line_(line), column_(column), layout_(layout) {}

  absl::StatusOr<std::vector<Token>> Run() {
    indents_.push_back(0);
    bool at_line_start = layout_;
    while (pos_ < text_.size()) {
      if (at_line_start && brackets_.empty()) {
        at_line_start = false;
        absl::Status s = Indentation();
        if (!s.ok()) return s;
        continue;
      }
      char c = text_[pos_];
      if (c == '\n') {
        if (layout_ && brackets_.empty() && line_has_content_) {
          Push(TokenKind::kNewline, "", line_, column_);
          line_has_content_ = false;
        }
        Advance();
        at_line_start = layout_ && brackets_.empty();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        Advance();
        continue;
      }
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') Advance();
        continue;
      }
      if (c == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
        Advance();
        Advance();
        continue;
      }
      absl::Status s = OneToken();
      if (!s.ok()) return s;
      line_has_content_ = true;
    }
    if (!brackets_.empty()) {
      const OpenBracket& b = brackets_.back();
      return Error(b.line, b.column,
                   absl::StrCat("expected '", std::string(1, Closer(b.c)), "' to close '",
                                std::string(1, b.c), "', got end of input"));
    }
    if (layout_) {
      if (line_has_content_) Push(TokenKind::kNewline, "", line_, column_);
      while (indents_.size() > 1) {
        indents_.pop_back();
        Push(TokenKind::kDedent, "", line_, column_);
      }
    }
    Push(TokenKind::kEnd, "", line_, column_);
    return std::move(tokens_);
  }

 private:
  absl::Status Error(int line, int column, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ":", column, ": ", message));
  }

  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  void Push(TokenKind kind, std::string text, int line, int column) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.line = line;
    t.column = column;
    tokens_.push_back(std::move(t));
  }

  // At the start of a physical line: measures indentation and emits INDENT
  // or DEDENTs when the line has content.
  absl::Status Indentation() {
    int width = 0;
    size_t p = pos_;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) {
      if (text_[p] == '\t') {
        return Error(line_, static_cast<int>(p - pos_) + 1,
                     "expected spaces for indentation, got a tab");
      }
      ++width;
      ++p;
    }
    // Blank and comment-only lines do not count.
    if (p >= text_.size() || text_[p] == '\n' || text_[p] == '#' || text_[p] == '\r') {
      return absl::OkStatus();
    }
    while (pos_ < p) Advance();
    if (width > indents_.back()) {
      if (indents_.size() > kMaxIndentDepth) {
        return Error(
            line_, column_,
            absl::StrCat("expected at most ", kMaxIndentDepth, " nested blocks, got more"));
      }
      indents_.push_back(width);
      Push(TokenKind::kIndent, "", line_, column_);
    } else {
      while (width < indents_.back()) {
        indents_.pop_back();
        Push(TokenKind::kDedent, "", line_, column_);
      }
      if (width != indents_.back()) {
        return Error(line_, column_,
                     absl::StrCat("expected indentation of ", indents_.back(),
                                  " columns to match an outer block, got ", width));
      }
    }
    return absl::OkStatus();
  }

  absl::Status OneToken() {
    const int line = line_, column = column_;
    const char c = text_[pos_];
    if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (absl::ascii_isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        Advance();
      }
      Push(TokenKind::kName, std::string(text_.substr(start, pos_ - start)), line, column);
      return absl::OkStatus();
    }
    if (absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && pos_ + 1 < text_.size() &&
         absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_ + 1])))) {
      return Number(line, column);
    }
    if (c == '"' || c == '\'') return String(line, column);
    for (const char* p : kTwoCharPuncts) {
      if (text_.substr(pos_, 2) == p) return Punct(2, line, column);
    }
    if (kOneCharPuncts.find(c) != absl::string_view::npos) return Punct(1, line, column);
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return Error(line, column,
                   absl::StrCat("expected a token, got the byte 0x",
                                absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2)));
    }
    return Error(line, column, absl::StrCat("expected a token, got '", std::string(1, c), "'"));
  }

  absl::Status Punct(int len, int line, int column) {
    std::string p(text_.substr(pos_, len));
    for (int i = 0; i < len; ++i) Advance();
    if (len == 1 && (p == "(" || p == "[" || p == "{")) {
      if (brackets_.size() >= kMaxBracketDepth) {
        return Error(
            line, column,
            absl::StrCat("expected at most ", kMaxBracketDepth, " nested brackets, got more"));
      }
      brackets_.push_back({p[0], line, column});
    } else if (len == 1 && (p == ")" || p == "]" || p == "}")) {
      if (brackets_.empty()) {
        return Error(line, column, absl::StrCat("expected an expression, got unmatched '", p, "'"));
      }
      OpenBracket open = brackets_.back();
      if (Closer(open.c) != p[0]) {
        return Error(line, column,
                     absl::StrCat("expected '", std::string(1, Closer(open.c)), "' to close '",
                                  std::string(1, open.c), "' at ", open.line, ":", open.column,
                                  ", got '", p, "'"));
      }
      brackets_.pop_back();
    }
    Push(TokenKind::kPunct, std::move(p), line, column);
    return absl::OkStatus();
  }

  absl::Status Number(int line, int column) {
    size_t start = pos_;
    bool is_float = false;
    while (pos_ < text_.size() &&
           (absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      Advance();
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_float = true;
      Advance();
      while (pos_ < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        Advance();
      }
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (p < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[p]))) {
        is_float = true;
        while (pos_ < p) Advance();
        while (pos_ < text_.size() &&
               absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
          Advance();
        }
      }
    }
    std::string digits;
    for (char ch : text_.substr(start, pos_ - start)) {
      if (ch != '_') digits.push_back(ch);
    }
    if (pos_ < text_.size() &&
        (absl::ascii_isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      return Error(line_, column_,
                   absl::StrCat("expected an operator or delimiter after the number ", digits,
                                ", got '", std::string(1, text_[pos_]), "'"));
    }
    Token t;
    t.line = line;
    t.column = column;
    t.text = digits;
    errno = 0;
    char* end = nullptr;
    if (is_float) {
      t.kind = TokenKind::kFloat;
      t.float_value = std::strtod(digits.c_str(), &end);
    } else {
      t.kind = TokenKind::kInt;
      t.int_value = std::strtoll(digits.c_str(), &end, 10);
      if (errno == ERANGE) {
        return Error(line, column,
                     absl::StrCat("expected an int64 literal, got ", digits, " (out of range)"));
      }
    }
    tokens_.push_back(std::move(t));
    return absl::OkStatus();
  }

  absl::Status String(int line, int column) {
    const char quote = text_[pos_];
    Advance();
    std::string value;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        return Error(line, column,
                     absl::StrCat("expected a closing ", std::string(1, quote),
                                  " to end the string, got end of line"));
      }
      char ch = text_[pos_];
      if (ch == quote) {
        Advance();
        break;
      }
      if (ch == '\\') {
        Advance();
        if (pos_ >= text_.size()) continue;
        char e = text_[pos_];
        switch (e) {
          case 'n':
            value.push_back('\n');
            break;
          case 't':
            value.push_back('\t');
            break;
          case 'r':
            value.push_back('\r');
            break;
          case '0':
            value.push_back('\0');
            break;
          case '\\':
          case '"':
          case '\'':
            value.push_back(e);
            break;
          case 'x': {
            // \xHH: one byte, two hex digits.
            int byte = 0;
            for (int i = 1; i <= 2; ++i) {
              const char h = pos_ + i < text_.size() ? text_[pos_ + i] : '\0';
              const int digit = absl::ascii_isdigit(h) ? h - '0'
                                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                       : -1;
              if (digit < 0) {
                return Error(line_, column_ - 1, "expected two hex digits after \\x");
              }
              byte = byte * 16 + digit;
            }
            value.push_back(static_cast<char>(byte));
            Advance();
            Advance();
            break;
          }
          default:
            return Error(
                line_, column_ - 1,
                absl::StrCat("expected an escape (\\n \\t \\r \\0 \\xHH \\\\ \\\" \\'), got '\\",
                             std::string(1, e), "'"));
        }
        Advance();
        continue;
      }
      value.push_back(ch);
      Advance();
    }
    Push(TokenKind::kString, std::move(value), line, column);
    return absl::OkStatus();
  }

  absl::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_;
  int column_;
  bool layout_;
  bool line_has_content_ = false;
  std::vector<int> indents_;
  std::vector<OpenBracket> brackets_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string Token::Describe() const {
  switch (kind) {
    case TokenKind::kName:
      return absl::StrCat("'", text, "'");
    case TokenKind::kInt:
    case TokenKind::kFloat:
      return absl::StrCat("the number ", text);
    case TokenKind::kString:
      return absl::StrCat("the string \"", absl::CEscape(text), "\"");
    case TokenKind::kPunct:
      return absl::StrCat("'", text, "'");
    case TokenKind::kNewline:
      return "end of line";
    case TokenKind::kIndent:
      return "an indented block";
    case TokenKind::kDedent:
      return "the end of the block";
    case TokenKind::kEnd:
      return "end of input";
  }
  return "?";
}

absl::StatusOr<std::vector<Token>> Lex(absl::string_view text, absl::string_view file_name,
                                       int line, int column, bool layout) {
  return Lexer(text, file_name, line, column, layout).Run();
}

std::string EscapeString(absl::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
      case '"':
      case '\'':
        out.push_back('\\');
        out.push_back(c);
        break;
      default:
        if (u < 0x20 || u >= 0x7f) {
          out += "\\x";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 15]);
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace tether::compiler::text
