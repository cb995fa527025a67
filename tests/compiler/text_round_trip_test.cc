// The text printer and the print/parse round trip: printing a parsed module
// and parsing it again gives a structurally equal module that prints the
// same, on every example and on snippets covering each construct.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "compiler/relax/structural_equal.h"
#include "compiler/text/lexer.h"
#include "compiler/text/parser.h"
#include "compiler/text/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/repo_root.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;

using tether::testing::RepoRoot;

// print(parse(text)), then checks that parsing that output prints the same.
std::string RoundTrip(absl::string_view text) {
  absl::StatusOr<IRModule> first = ParseModule(text, "first.rx");
  EXPECT_TRUE(first.ok()) << first.status();
  if (!first.ok()) return "";
  std::string printed = PrintModule(*first);
  absl::StatusOr<IRModule> second = ParseModule(printed, "second.rx");
  EXPECT_TRUE(second.ok()) << second.status() << "\n" << printed;
  if (!second.ok()) return printed;
  EXPECT_EQ(PrintModule(*second), printed);
  EXPECT_TRUE(StructuralEqual(*first, *second)) << printed;
  return printed;
}

TEST(TextRoundTripTest, EveryExampleRoundTrips) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RepoRoot() + "examples")) {
    if (entry.path().extension() != ".rx") continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    absl::StatusOr<IRModule> m = ParseModuleFile(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status();
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string printed = RoundTrip(ss.str());
    EXPECT_THAT(printed, HasSubstr("@R.function"));
    EXPECT_THAT(printed, HasSubstr("R.output(gv)"));
  }
  EXPECT_GE(count, 3);
}

TEST(TextRoundTripTest, DifferentModulesAreNotEqual) {
  constexpr absl::string_view kText =
      "@R.function\ndef main(x: R.Tensor((\"n\", 4), \"float32\")):\n    y = R.nn.relu(x)\n    "
      "return y\n";
  absl::StatusOr<IRModule> a = ParseModule(kText);
  absl::StatusOr<IRModule> b =
      ParseModule(std::string(kText).replace(kText.find("relu"), 4, "silu"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(StructuralEqual(*a, *b));
  EXPECT_TRUE(StructuralEqual(*a, *ParseModule(PrintModule(*a))));
}

TEST(TextRoundTripTest, PrintsSignatureQuotedAndBodyBare) {
  std::string printed = RoundTrip(R"(
@R.function
def main(x: R.Tensor(("n", 784), "float32"), w: R.Tensor((784, 128), "float32")) -> R.Tensor(("n", 128), "float32"):
    with R.dataflow():
        lv0: R.Tensor((n, 128), "float32") = R.matmul(x, w)
        gv = R.nn.relu(lv0)
        R.output(gv)
    return gv
)");
  EXPECT_THAT(printed, HasSubstr("def main(x: R.Tensor((\"n\", 784), dtype=\"float32\"), "
                                 "w: R.Tensor((784, 128), dtype=\"float32\")) -> "
                                 "R.Tensor((\"n\", 128), dtype=\"float32\"):\n"
                                 "        n = T.int64()\n"));
  EXPECT_THAT(printed, HasSubstr("lv0: R.Tensor((n, 128), dtype=\"float32\") = R.matmul(x, w)"));
  EXPECT_THAT(printed, HasSubstr("            gv: R.Tensor((n, 128), dtype=\"float32\") = "
                                 "R.nn.relu(lv0)\n            R.output(gv)\n"));
}

TEST(TextRoundTripTest, SymbolicArithmeticAndStructInfoForms) {
  std::string printed = RoundTrip(R"(
@R.function
def main(a: R.Tensor(("n", "n * 2 + 1"), "float16"), b: R.Tensor(ndim=2, dtype="float32"),
         c: R.Tensor, d: R.Tuple(R.Shape([4, "n"]), R.Shape(ndim=2), R.Shape), e: R.Prim("int64"),
         f: R.Object, g: R.Callable((R.Tensor((2,), "float32"),), R.Object, purity=False),
         h: R.Tensor(("n // 2", "(n - 1) % 3"), "int8"), k: R.Prim(value="n"), v: R.Tensor((2,), "float32", "cuda:0")):
    y: R.Tensor((n // 2, (n - 1) % 3), "int8") = h
    return y
)");
  EXPECT_THAT(printed, HasSubstr("a: R.Tensor((\"n\", \"n * 2 + 1\"), dtype=\"float16\")"));
  EXPECT_THAT(printed, HasSubstr("b: R.Tensor(dtype=\"float32\", ndim=2), c: R.Tensor,"));
  EXPECT_THAT(printed, HasSubstr("R.Tuple(R.Shape([4, \"n\"]), R.Shape(ndim=2), R.Shape)"));
  EXPECT_THAT(
      printed,
      HasSubstr("g: R.Callable((R.Tensor((2,), dtype=\"float32\"),), R.Object, purity=False)"));
  EXPECT_THAT(printed, HasSubstr("h: R.Tensor((\"n // 2\", \"(n - 1) % 3\"), dtype=\"int8\")"));
  EXPECT_THAT(printed, HasSubstr("k: R.Prim(\"int64\", value=\"n\")"));
  EXPECT_THAT(printed, HasSubstr("vdevice=\"cuda:0\""));
  EXPECT_THAT(printed, HasSubstr("y: R.Tensor((n // 2, (n - 1) % 3), dtype=\"int8\") = h"));
}

TEST(TextRoundTripTest, CallsLiteralsAndAttributes) {
  std::string printed = RoundTrip(R"(
@R.function
def main(x: R.Tensor(("n", 1024), "float32"), gamma: R.Tensor((1024,), "float32")):
    n = T.int64()
    R.func_attr({"num_input": 1, "global_symbol": "main"})
    a = R.reshape(x, (n, 1024))
    b = R.sum(a, keepdims=True, axis=[1])
    c = R.clip(a, 0, 6.5)
    d = R.prim_value(T.int32(3))
    e = R.str("a \"quoted\" string")
    f = R.dtype("float16")
    g = R.astype(a, dtype=R.dtype("float16"))
    i = R.shape_of(x)
    j = (a, (b, c))
    k = j[1][0]
    l = R.nn.layer_norm(a, gamma, gamma, axes=[-1], epsilon=0.30000000000000004)
    return k
)");
  EXPECT_THAT(printed, HasSubstr("R.func_attr({\"global_symbol\": \"main\", \"num_input\": 1})"));
  EXPECT_THAT(printed, HasSubstr("R.reshape(x, R.shape([n, 1024]))"));
  EXPECT_THAT(printed, HasSubstr("R.sum(a, axis=[1], keepdims=True)"));
  EXPECT_THAT(printed, HasSubstr("R.clip(a, R.prim_value(0), R.prim_value(6.5))"));
  EXPECT_THAT(printed, HasSubstr("R.prim_value(T.int32(3))"));
  EXPECT_THAT(printed, HasSubstr("R.str(\"a \\\"quoted\\\" string\")"));
  EXPECT_THAT(printed, HasSubstr("R.astype(a, dtype=R.dtype(\"float16\"))"));
  EXPECT_THAT(printed, HasSubstr("k: R.Tensor((n, 1), dtype=\"float32\") = lv[0]"));
  EXPECT_THAT(printed, HasSubstr("epsilon=0.30000000000000004"));
}

// Found by text_fuzz: a string holding control bytes printed with C octal
// escapes the lexer does not read ("\\002"), or read back as other bytes
// ("\\000" as NUL, '0', '0'). Every byte now prints as an escape the lexer
// reads back to the same byte.
TEST(TextRoundTripTest, StringsWithAnyBytesRoundTrip) {
  std::string printed = RoundTrip(
      "@R.function\n"
      "def main(x: R.Tensor((2,), \"float32\")):\n"
      "    e = R.str(\"nul\\0 stx\\x02 del\\x7f high\\xC3\\xa9 tab\\t quote\\\" end\")\n"
      "    return x\n");
  EXPECT_THAT(
      printed,
      HasSubstr("R.str(\"nul\\x00 stx\\x02 del\\x7f high\\xc3\\xa9 tab\\t quote\\\" end\")"));
  EXPECT_EQ(text::EscapeString(std::string("a\0b\x01\n", 5)), "a\\x00b\\x01\\n");
  absl::StatusOr<IRModule> bad =
      ParseModule("@R.function\ndef main():\n    e = R.str(\"\\xZ1\")\n");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("two hex digits after \\x"));
}

TEST(TextRoundTripTest, CrossCallsMatchCastIfAndPackedCalls) {
  std::string printed = RoundTrip(R"(
@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.nn.relu(x)
        return y

    @R.function(pure=False)
    def main(c: R.Prim("bool"), x: R.Tensor(ndim=1, dtype="float32")):
        lv = R.match_cast(x, R.Tensor((4,), "float32"))
        m = T.int64()
        lv1 = R.match_cast(x, R.Tensor((m,), "float32"))
        if c:
            a = cls.helper(lv)
            y = R.add(a, lv)
        else:
            y = R.multiply(lv, lv)
        p = R.call_dps_packed("my_add", (y, y), out_sinfo=R.Tensor((4,), "float32"))
        q = R.call_pure_packed("my_relu", p, lv1, sinfo_args=[R.Tensor((4,), "float32")])
        return q
)");
  EXPECT_THAT(printed, HasSubstr("lv = R.match_cast(x, R.Tensor((4,), dtype=\"float32\"))"));
  EXPECT_THAT(printed, HasSubstr("lv1 = R.match_cast(x, R.Tensor((m,), dtype=\"float32\"))"));
  EXPECT_THAT(printed, HasSubstr("        if c:\n            a"));
  EXPECT_THAT(printed, HasSubstr("cls.helper(lv)"));
  EXPECT_THAT(printed, HasSubstr("        else:\n            y: R.Tensor((4,), dtype=\"float32\") "
                                 "= R.multiply(lv, lv)\n"));
  EXPECT_THAT(
      printed,
      HasSubstr(
          "R.call_dps_packed(\"my_add\", (y, y), out_sinfo=R.Tensor((4,), dtype=\"float32\"))"));
  EXPECT_THAT(printed, HasSubstr("sinfo_args=R.Tensor((4,), dtype=\"float32\"))"));
  EXPECT_THAT(printed, HasSubstr("@R.function(pure=False)"));
}

TEST(TextRoundTripTest, ConstantsInlineWithExactFloatsAndLargeOnesAsMetadata) {
  absl::StatusOr<IRModule> m = ParseModule(R"(
@R.function
def main():
    a = R.const([[0.1, -2.5], [1e-30, 3.0]], "float32")
    b = R.const(0.1, "float64")
    c = R.const([True, False])
    d = R.const([1, -2], "int8")
    return (a, b, c, d)
)");
  ASSERT_TRUE(m.ok()) << m.status();
  std::string printed = PrintModule(*m);
  EXPECT_THAT(printed, HasSubstr("R.const([[0.1, -2.5], [1e-30, 3.0]], \"float32\")"));
  EXPECT_THAT(printed, HasSubstr("R.const(0.1, \"float64\")"));
  EXPECT_THAT(printed, HasSubstr("R.const([True, False], \"bool\")"));
  EXPECT_THAT(printed, HasSubstr("R.const([1, -2], \"int8\")"));
  RoundTrip(printed);

  std::vector<float> big(kMaxInlineConstantElements + 1, 1.0f);
  std::vector<int64_t> shape = {static_cast<int64_t>(big.size())};
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, DataType::Float(32), big.data(), big.size() * 4);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(PrintExpr(MakeConstant(*t)), "metadata[\"relax.Constant\"][0]");
}

TEST(TextRoundTripTest, PrintsKernelsAsPrimFuncs) {
  IRModule m;
  Var n("n");
  Buffer a = MakeBuffer("A", DataType::Float(32), {n});
  Buffer b = MakeBuffer("B", DataType::Float(32), {n});
  Var i("i");
  m.kernels["copy"] = MakeKernelFunc("copy", {KernelParam::Tensor(a), KernelParam::Tensor(b)},
                                     For(i, 0, n, ForKind::kSerial,
                                         Seq({Prefetch(a, {Min(i + PrimExpr(16), n - PrimExpr(1))}),
                                              Store(b, {i}, Load(a, {i}))})));
  std::string printed = PrintModule(m);
  EXPECT_THAT(printed, HasSubstr("class Module:\n    @T.prim_func\n    def copy("));
  EXPECT_THAT(printed, HasSubstr("T.evaluate(T.prefetch(A[")) << printed;
  auto parsed = ParseModule(printed, "k.rx");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->kernels.count("copy"), 1u);
  EXPECT_EQ(PrintModule(*parsed), printed);
}

TEST(TextRoundTripTest, PrintExprPrintsOneExpressionOrFunction) {
  Expr x = MakeVar("x", TensorSInfo({2}, DataType::Float(32)));
  EXPECT_EQ(PrintExpr(MakeCall(GetOp("relax.add"), {x, x}, {{"alpha", AttrValue(0.5)}})),
            "R.add(x, x, alpha=0.5)");
  EXPECT_EQ(PrintExpr(MakeTuple({x})), "(x,)");
  Expr f = MakeFunction({x}, MakeSeqExpr({}, x), TensorSInfo({2}, DataType::Float(32)));
  EXPECT_EQ(PrintExpr(f),
            "@R.function\ndef func(x: R.Tensor((2,), dtype=\"float32\")) -> "
            "R.Tensor((2,), dtype=\"float32\"):\n    return x\n");
}

}  // namespace
}  // namespace tether::compiler
