// The text-format lexer: layout tokens, literals and positioned errors.
#include "absl/status/status.h"
#include "compiler/text/lexer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::compiler::text {
namespace {

using ::testing::HasSubstr;

std::vector<TokenKind> Kinds(const std::vector<Token>& tokens) {
  std::vector<TokenKind> kinds;
  for (const Token& t : tokens) kinds.push_back(t.kind);
  return kinds;
}

TEST(TextLexerTest, EmitsIndentAndDedentFromLayout) {
  absl::StatusOr<std::vector<Token>> tokens = Lex("a:\n    b\nc\n", "t.rx");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  using K = TokenKind;
  EXPECT_EQ(Kinds(*tokens),
            (std::vector<K>{K::kName, K::kPunct, K::kNewline, K::kIndent, K::kName, K::kNewline,
                            K::kDedent, K::kName, K::kNewline, K::kEnd}));
}

TEST(TextLexerTest, IgnoresNewlinesInsideBracketsAndComments) {
  absl::StatusOr<std::vector<Token>> tokens =
      Lex("f(a,  # first\n  b)\n# only a comment\n", "t.rx");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 8u);  // f ( a , b ) NEWLINE END
  EXPECT_EQ((*tokens)[4].text, "b");
  EXPECT_EQ((*tokens)[4].line, 2);
  EXPECT_EQ((*tokens)[4].column, 3);
}

TEST(TextLexerTest, ReadsNumbersStringsAndPunctuation) {
  absl::StatusOr<std::vector<Token>> tokens =
      Lex("12 1.5e-5 'a\\n' -> // \"x\"", "t.rx", 1, 1, false);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 7u);
  EXPECT_EQ((*tokens)[0].int_value, 12);
  EXPECT_DOUBLE_EQ((*tokens)[1].float_value, 1.5e-5);
  EXPECT_EQ((*tokens)[2].text, "a\n");
  EXPECT_TRUE((*tokens)[3].IsPunct("->"));
  EXPECT_TRUE((*tokens)[4].IsPunct("//"));
  EXPECT_EQ((*tokens)[5].kind, TokenKind::kString);
}

TEST(TextLexerTest, RejectsUnterminatedBracketAtItsPosition) {
  absl::StatusOr<std::vector<Token>> tokens = Lex("x = f(a,\n  b\n", "m.rx");
  EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tokens.status().message(), HasSubstr("m.rx:1:6: expected ')' to close '('"));
}

TEST(TextLexerTest, RejectsMismatchedClosingBracket) {
  absl::StatusOr<std::vector<Token>> tokens = Lex("f(a]\n", "m.rx");
  EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tokens.status().message(),
              HasSubstr("m.rx:1:4: expected ')' to close '(' at 1:2, got ']'"));
}

TEST(TextLexerTest, RejectsDedentToUnknownLevel) {
  absl::StatusOr<std::vector<Token>> tokens = Lex("a:\n    b\n  c\n", "m.rx");
  EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      tokens.status().message(),
      HasSubstr("m.rx:3:3: expected indentation of 0 columns to match an outer block, got 2"));
}

TEST(TextLexerTest, RejectsTabsUnterminatedStringsAndStrayBytes) {
  EXPECT_THAT(Lex("a:\n\tb\n", "m.rx").status().message(), HasSubstr("m.rx:2:1: expected spaces"));
  EXPECT_THAT(Lex("x = \"abc\n", "m.rx").status().message(),
              HasSubstr("m.rx:1:5: expected a closing \" to end the string"));
  EXPECT_THAT(Lex("x = $\n", "m.rx").status().message(),
              HasSubstr("m.rx:1:5: expected a token, got '$'"));
  EXPECT_THAT(Lex("x = 99999999999999999999\n", "m.rx").status().message(),
              HasSubstr("expected an int64 literal"));
}

}  // namespace
}  // namespace tether::compiler::text
