// The lexer of the Relax text format (a TVMScript subset, see
// docs/design/text-format.md). It turns source text into Python-like tokens:
// names, numbers, strings, punctuation, and the layout tokens NEWLINE,
// INDENT and DEDENT. Newlines and indentation inside brackets are ignored,
// as in Python; comments run from '#' to the end of the line.
//
// Thread contract: Lex is a pure function; thread-safe.
#ifndef TETHER_COMPILER_TEXT_LEXER_H_
#define TETHER_COMPILER_TEXT_LEXER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether::compiler::text {

enum class TokenKind : uint8_t {
  kName,     // identifiers and keywords (def, class, with, if, else, return, ...)
  kInt,      // 42
  kFloat,    // 1.5, 1e-5
  kString,   // "float32" (text holds the unescaped contents)
  kPunct,    // ( ) [ ] { } , : . = -> + - * / // % @ == != < <= > >= += -= *=
  kNewline,  // end of a logical line
  kIndent,
  kDedent,
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // the name, punctuation, literal digits or string contents
  int line = 0;      // 1-based
  int column = 0;    // 1-based
  int64_t int_value = 0;
  double float_value = 0;

  bool Is(TokenKind k, absl::string_view t) const { return kind == k && text == t; }
  bool IsPunct(absl::string_view t) const { return Is(TokenKind::kPunct, t); }
  bool IsName(absl::string_view t) const { return Is(TokenKind::kName, t); }
  // How an error message names the token: "'='", "name 'foo'", "end of line".
  std::string Describe() const;
};

// Tokens of `text`, ending with NEWLINE (when the last line has content),
// the DEDENTs that close open blocks, and END. `line` and `column` offset
// the positions (used to lex the contents of a quoted dimension such as
// "n * 2" in place); `layout` false skips NEWLINE/INDENT/DEDENT.
// INVALID_ARGUMENT "file:line:col: ..." on a bad character, an unterminated
// string or bracket, a mismatched closing bracket, tabs in indentation or a
// dedent that matches no outer level.
absl::StatusOr<std::vector<Token>> Lex(absl::string_view text, absl::string_view file_name,
                                       int line = 1, int column = 1, bool layout = true);

// `value` as the body of a string literal the lexer reads back as `value`:
// \n \t \r \\ \" \' escaped, every other byte below 0x20 or from 0x7f
// as \xHH, the rest as is. The printer writes every string through it.
std::string EscapeString(absl::string_view value);

}  // namespace tether::compiler::text

#endif  // TETHER_COMPILER_TEXT_LEXER_H_
