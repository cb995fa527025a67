// The text-format parser on malformed input: each mistake gives
// INVALID_ARGUMENT with its position and what was expected; garbage never
// crashes it.
#include <fstream>
#include <random>
#include <sstream>

#include "absl/status/status.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/repo_root.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

absl::Status ParseError(absl::string_view text) { return ParseModule(text, "bad.rx").status(); }

#define EXPECT_PARSE_ERROR(text, fragment)                          \
  do {                                                              \
    absl::Status s_ = ParseError(text);                             \
    EXPECT_EQ(s_.code(), absl::StatusCode::kInvalidArgument) << s_; \
    EXPECT_THAT(std::string(s_.message()), HasSubstr(fragment));    \
  } while (0)

TEST(TextParserErrorTest, ReportsWrongPunctuationAfterParameterName) {
  EXPECT_PARSE_ERROR("@R.function\ndef main(x = 1):\n    return x\n",
                     "bad.rx:2:12: expected ':' after parameter name, got '='");
}

TEST(TextParserErrorTest, ReportsUnterminatedParenthesis) {
  EXPECT_PARSE_ERROR("@R.function\ndef main(x: R.Tensor((2,), \"float32\"):\n    return x\n",
                     "bad.rx:2:9: expected ')' to close '('");
}

TEST(TextParserErrorTest, ReportsBadIndentation) {
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.nn.relu(x)\n  return y\n",
      "bad.rx:4:3: expected indentation of 0 columns");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.nn.relu(x)\n        z = "
      "y\n"
      "    return y\n",
      "bad.rx:4:9: expected a statement, got an unexpected indent");
}

TEST(TextParserErrorTest, ReportsUnknownType) {
  EXPECT_PARSE_ERROR("@R.function\ndef main(x: R.Matrix((2,), \"float32\")):\n    return x\n",
                     "bad.rx:2:15: expected a struct info (R.Tensor, R.Tuple, R.Shape, R.Prim, "
                     "R.Object or R.Callable), got R.Matrix");
  EXPECT_PARSE_ERROR("@R.function\ndef main(x: int):\n    return x\n",
                     "bad.rx:2:13: expected a struct info such as R.Tensor(...), got 'int'");
  EXPECT_PARSE_ERROR("@R.function\ndef main(x: R.Tensor((2,), \"float33\")):\n    return x\n",
                     "bad.rx:2:28: expected a dtype, got \"float33\"");
}

TEST(TextParserErrorTest, ReportsUndefinedVariables) {
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.add(x, z)\n"
      "    return y\n",
      "bad.rx:3:18: expected a defined variable, got 'z' (undefined)");
  // A dataflow var is not visible after its block.
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n"
      "    with R.dataflow():\n        lv = R.nn.relu(x)\n        gv = R.add(lv, x)\n"
      "        R.output(gv)\n    return lv\n",
      "bad.rx:7:12: expected a defined variable, got 'lv' (undefined)");
  // A bare symbolic name in an annotation must have been declared.
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n"
      "    y: R.Tensor((k,), \"float32\") = R.nn.relu(x)\n    return y\n",
      "bad.rx:3:18: expected a declared symbolic variable, got 'k'");
  EXPECT_PARSE_ERROR(
      "@I.ir_module\nclass M:\n    @R.function\n    def main(x: R.Tensor((2,), \"float32\")):\n"
      "        y = cls.missing(x)\n        return y\n",
      "bad.rx:5:17: expected a function of the module after 'cls.', got 'missing'");
}

TEST(TextParserErrorTest, ReportsAnnotationThatIsNotASupertype) {
  // Wrong shape.
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n"
      "    y: R.Tensor((3,), \"float32\") = R.nn.relu(x)\n    return y\n",
      "bad.rx:3:5:");
  // Narrowing needs R.match_cast.
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor(ndim=1, dtype=\"float32\")):\n"
      "    y: R.Tensor((4,), \"float32\") = R.nn.relu(x)\n    return y\n",
      "bad.rx:3:5: expected an annotation of 'y' that covers its value's "
      "R.Tensor(\"float32\", ndim=1), got R.Tensor((4,), \"float32\") (use R.match_cast "
      "to narrow)");
  // Widening is fine.
  EXPECT_TRUE(ParseModule("@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n"
                          "    y: R.Tensor(ndim=1) = R.nn.relu(x)\n    return y\n")
                  .ok());
}

TEST(TextParserErrorTest, ReportsOperatorErrorsAtTheCall) {
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2, 3), \"float32\"), w: R.Tensor((4, 5), \"float32\")):\n"
      "    y = R.matmul(x, w)\n    return y\n",
      "bad.rx:3:9: relax.matmul");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2, 3), \"float32\")):\n"
      "    y = R.no_such_op(x)\n    return y\n",
      "bad.rx:3:9:");
}

TEST(TextParserErrorTest, ReportsROutputOutsideDataflow) {
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    R.output(x)\n"
      "    return x\n",
      "bad.rx:3:5: expected a binding, got R.output");
}

TEST(TextParserErrorTest, ReportsMissingReturn) {
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.nn.relu(x)\n",
      "bad.rx:2:5: expected 'return' as the last statement of function 'main'");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    return x\n    y = x\n",
      "bad.rx:4:5: expected the end of function 'main' after 'return', got 'y'");
}

TEST(TextParserErrorTest, ReportsMisuseOfBlocksAndBuiltins) {
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(c: R.Prim(\"bool\"), x: R.Tensor((2,), \"float32\")):\n"
      "    if c:\n        y = x\n    else:\n        z = x\n    return x\n",
      "bad.rx:3:5: expected both branches of 'if' to end by binding the same variable, "
      "got 'y' and 'z'");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n"
      "    with R.dataflow():\n        gv = x\n        R.output(gv)\n        y = gv\n    return "
      "x\n",
      "bad.rx:6:9: expected the end of the dataflow block after R.output(...)");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.add(R.match_cast(x, "
      "R.Tensor), x)\n"
      "    return y\n",
      "bad.rx:3:15: expected an expression, got R.match_cast");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n    y = R.add(x, axis=1, x)\n"
      "    return y\n",
      "bad.rx:3:26: expected a keyword argument (name=value) after keyword arguments");
  EXPECT_PARSE_ERROR("@R.function\ndef main():\n    y = R.const([[1, 2], [3]])\n    return y\n",
                     "bad.rx:3:28: expected 2 elements in this list of R.const");
  EXPECT_PARSE_ERROR(
      "@R.function\ndef main():\n    y = metadata[\"relax.Constant\"][0]\n    return y\n",
      "bad.rx:3:9: expected an inline R.const(...), got a metadata[...] reference");
}

TEST(TextParserErrorTest, RefusesCallTirToWhatIsNotAKernel) {
  EXPECT_PARSE_ERROR(
      "@I.ir_module\nclass M:\n    @R.function\n    def main(x: R.Tensor((4,), \"float32\")):\n"
      "        y = R.call_tir(cls.add, (x,), out_sinfo=R.Tensor((4,), \"float32\"))\n"
      "        return y\n",
      "bad.rx:5:28: expected a kernel of the module as the callee of R.call_tir, got 'add' "
      "(undefined)");
  EXPECT_PARSE_ERROR(
      "@I.ir_module\nclass M:\n    @T.prim_func\n    def add(A: T.Buffer((4,), \"float32\")):\n"
      "        pass\n\n    @R.function\n    def main(x: R.Tensor((4,), \"float32\")):\n"
      "        y = cls.add(x)\n        return y\n",
      "bad.rx:9:17: expected a relax function, got kernel 'add': call kernels with R.call_tir");
}

// T.block's arguments after the name are skipped one by one, commas
// included: "T.block("C", x=1)" once looped forever (a fuzz find, the seed
// tests/fuzz/corpus/text/regression-block-extra-arguments.rx).
TEST(TextParserErrorTest, BlockArgumentsAfterTheNameAreSkipped) {
  const std::string text =
      "from tvm.script import ir as I\n"
      "from tvm.script import tir as T\n"
      "@I.ir_module\n"
      "class Module:\n"
      "    @T.prim_func\n"
      "    def k(A: T.Buffer((4,), \"float32\")):\n"
      "        for i in T.serial(4):\n"
      "            with T.block(\"A\", annotations={\"a\": 1}, x=(1, 2)):\n"
      "                vi = T.axis.spatial(4, i)\n"
      "                A[vi] = T.float32(0)\n";
  absl::StatusOr<IRModule> m = ParseModule(text, "block.rx");
  EXPECT_TRUE(m.ok()) << m.status();
  // Unterminated: an error, not a hang.
  EXPECT_PARSE_ERROR(
      "from tvm.script import tir as T\n@T.prim_func\ndef k(A: T.Buffer((4,), \"float32\")):\n"
      "    for i in T.serial(4):\n        with T.block(\"A\" x, y=R.shape([1]))\n",
      "bad.rx");
}

TEST(TextParserErrorTest, BoundsNestingDepth) {
  std::string deep = "@R.function\ndef main():\n    y = R.prim_value(" + std::string(100000, '(') +
                     "1" + std::string(100000, ')') + ")\n    return y\n";
  EXPECT_PARSE_ERROR(deep, "bad.rx:3:221: expected at most 200 nested brackets, got more");
  std::string minus = "@R.function\ndef main():\n    y = R.prim_value(" + std::string(100000, '-') +
                      "1)\n    return y\n";
  EXPECT_TRUE(ParseModule(minus).ok());
  std::string blocks;
  for (int i = 0; i < 150; ++i) blocks += std::string(i, ' ') + "a:\n";
  EXPECT_PARSE_ERROR(blocks, "expected at most 100 nested blocks, got more");
}

// Mutations of a valid module: deleted, duplicated and swapped characters
// and truncations. The parser must return (ok or an error), never crash.
TEST(TextParserErrorTest, SurvivesMutatedInput) {
  const std::string path = tether::testing::RepoRoot() + "examples/cnn.rx";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string base = ss.str();
  ASSERT_TRUE(ParseModule(base).ok());
  const std::string alphabet = "()[]{},:.=-+*/%@#\"' \n\tRTaxn019_";
  std::mt19937 rng(1234);
  int errors = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 5) {
        case 0:
          text.erase(at, 1 + rng() % 8);
          break;
        case 1:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 3:
          text.resize(at);
          break;
        case 4:
          text.insert(at, text.substr(rng() % text.size(), 1 + rng() % 16));
          break;
      }
    }
    absl::StatusOr<IRModule> m = ParseModule(text, "fuzz.rx");
    if (!m.ok()) {
      ++errors;
      EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
      EXPECT_THAT(std::string(m.status().message()), HasSubstr("fuzz.rx:"));
    }
  }
  EXPECT_GT(errors, 100);
  // Random bytes too.
  for (int iter = 0; iter < 300; ++iter) {
    std::string text(rng() % 200, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    EXPECT_FALSE(ParseModule(text).ok());
  }
}

}  // namespace
}  // namespace tether::compiler
