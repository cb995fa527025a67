// Tests of Report: the JSON schema of the reference's test_json, the
// round trip of test_report_serialization, escaping, the JSON reader's
// errors, CSV quoting, and table aggregation, sums and totals.
#include "runtime/profiling/report.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/profiling/json.h"

namespace tether::profiling {
namespace {

using ::testing::HasSubstr;

Report SampleReport() {
  ReportBuilder b;
  b.AddCall("matmul", 1200.5, Device::Cpu(), "float32[1, 64], float32[64, 64]");
  b.AddCall("relu", 10.25, Device::Cpu(), "float32[1, 64]");
  b.AddCall("matmul", 1000.0, Device::Cpu(), "float32[1, 64], float32[64, 64]");
  b.AddCall("vm.builtin.make_tuple", 0.5, Device::Cpu(), "", 1,
            {{"Ratio", Ratio{0.5}}, {"Hash", std::string("h-tuple")}});
  b.SetConfiguration("Executor", std::string("VM"));
  b.SetConfiguration("Number of threads", Count{4});
  return b.Build();
}

TEST(ReportTest, BuilderComputesPercentAndDeviceTotals) {
  Report r = SampleReport();
  ASSERT_EQ(r.calls.size(), 4u);
  EXPECT_EQ(std::get<std::string>(r.calls[0].at("Device")), "cpu0");
  ASSERT_EQ(r.device_metrics.count("cpu0"), 1u);
  const MetricMap& total = r.device_metrics.at("cpu0");
  EXPECT_DOUBLE_EQ(std::get<Duration>(total.at("Duration (us)")).microseconds, 2211.25);
  EXPECT_EQ(std::get<Count>(total.at("Count")).value, 4);
  EXPECT_DOUBLE_EQ(std::get<Percent>(total.at("Percent")).percent, 100.0);
  EXPECT_DOUBLE_EQ(std::get<Percent>(r.calls[1].at("Percent")).percent, 10.25 / 2211.25 * 100);
}

TEST(ReportTest, ExplicitDeviceTotalDrivesPercent) {
  ReportBuilder b;
  b.AddCall("a", 25, Device::Cpu());
  b.SetDeviceTotal(Device::Cpu(), 100);
  Report r = b.Build();
  EXPECT_DOUBLE_EQ(std::get<Percent>(r.calls[0].at("Percent")).percent, 25);
}

TEST(ReportTest, JsonSchemaMatchesTheReference) {
  Report r = SampleReport();
  absl::StatusOr<JsonValue> root = ParseJson(r.Json());
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(root->kind, JsonValue::Kind::kObject);
  std::vector<std::string> keys;
  for (const auto& [k, v] : root->members) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("calls", "device_metrics", "configuration"));
  const JsonValue& call = root->Find("calls")->items.at(0);
  const JsonValue* name = call.Find("Name")->Find("string");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->kind, JsonValue::Kind::kString);
  const JsonValue* count = call.Find("Count")->Find("count");
  ASSERT_NE(count, nullptr);
  EXPECT_TRUE(count->IsIntegerLiteral());
  const JsonValue* us = call.Find("Duration (us)")->Find("microseconds");
  ASSERT_NE(us, nullptr);
  EXPECT_EQ(us->kind, JsonValue::Kind::kNumber);
  EXPECT_FALSE(us->IsIntegerLiteral());  // a float, even for whole numbers
  const JsonValue& whole = root->Find("calls")->items.at(2);
  EXPECT_FALSE(whole.Find("Duration (us)")->Find("microseconds")->IsIntegerLiteral());
}

TEST(ReportTest, RoundTripKeepsTableAndCsv) {
  Report r = SampleReport();
  absl::StatusOr<Report> back = Report::FromJson(r.Json());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->Table(false, false), r.Table(false, false));
  EXPECT_EQ(back->Table(false, false, false), r.Table(false, false, false));
  EXPECT_EQ(back->Csv(), r.Csv());
  EXPECT_EQ(back->Json(), r.Json());
}

TEST(ReportTest, DoublesRoundTripExactly) {
  Report r;
  r.calls.push_back({{"Name", std::string("x")},
                     {"Duration (us)", Duration{0.1 + 0.2}},
                     {"Percent", Percent{1.0 / 3.0}},
                     {"Ratio", Ratio{1e-300}},
                     {"Big", Duration{1.7976931348623157e308}},
                     {"Count", Count{-9223372036854775807LL - 1}}});
  absl::StatusOr<Report> back = Report::FromJson(r.Json());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
}

TEST(ReportTest, NonFiniteDoublesBecomeNullAndReadAsNan) {
  Report r;
  r.configuration["x"] = Duration{std::nan("")};
  EXPECT_THAT(r.Json(), HasSubstr("{\"microseconds\":null}"));
  absl::StatusOr<Report> back = Report::FromJson(r.Json());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::isnan(std::get<Duration>(back->configuration.at("x")).microseconds));
}

TEST(ReportTest, EscapedNamesSurviveTheRoundTrip) {
  const std::string nasty =
      "say \"hi\"\\ \n\ttab \x01 ctrl, comma; \xC3\xA9t\xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x98\x80 \x7f";
  Report r;
  r.calls.push_back({{"Name", nasty}, {"Duration (us)", Duration{1}}, {nasty, Count{3}}});
  r.device_metrics[nasty] = {{"Name", std::string("Total")}};
  r.configuration[nasty] = nasty;
  std::string json = r.Json();
  EXPECT_THAT(json, HasSubstr("say \\\"hi\\\"\\\\ \\u000a\\u0009tab \\u0001"));
  EXPECT_THAT(json, HasSubstr("\xC3\xA9t\xC3\xA9"));  // UTF-8 passed through
  EXPECT_EQ(json.find('\n'), std::string::npos);
  absl::StatusOr<Report> back = Report::FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->Csv(), r.Csv());
  EXPECT_EQ(back->Table(false, false), r.Table(false, false));
}

TEST(ReportTest, FromJsonDecodesUnicodeEscapes) {
  absl::StatusOr<Report> r = Report::FromJson(
      R"({"calls":[{"Name":{"string":"\u00e9\ud83d\ude00\/\b\f\r"}}],"device_metrics":{},)"
      R"("configuration":{}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::get<std::string>(r->calls[0].at("Name")), "\xC3\xA9\xF0\x9F\x98\x80/\b\f\r");
}

TEST(ReportTest, FromJsonAcceptsWhitespaceAndMissingSections) {
  absl::StatusOr<Report> r =
      Report::FromJson(" {\n \"configuration\" : { \"Executor\" : { \"string\" : \"VM\" } } }\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->calls.empty());
  EXPECT_EQ(std::get<std::string>(r->configuration.at("Executor")), "VM");
}

TEST(ReportTest, MalformedJsonFailsWithPosition) {
  struct Case {
    const char* json;
    const char* fragment;
  };
  const Case cases[] = {
      {"", "offset 0 (line 1, column 1)"},
      {"{\"calls\":[}", "offset 10 (line 1, column 11)"},
      {"{\"calls\":[]", "expected ',' or '}'"},
      {"{\"calls\":[],}", "expected a member name"},
      {"{\n  \"calls\": [01]}", "line 2"},
      {"{\"a\":\"x\ny\"}", "unescaped control character"},
      {"{\"a\":\"\\x\"}", "invalid escape"},
      {"{\"a\":\"\\ud800\"}", "surrogate"},
      {"{\"a\":\"\\udc00\"}", "surrogate"},
      {"{\"a\":tru}", "expected true"},
      {"{\"a\":1,\"a\":2}", "duplicate key"},
      {"{} x", "trailing"},
      {"{\"a\":-}", "expected a digit"},
      {"{\"a\":1.}", "decimal point"},
      {"{\"a\":1e}", "exponent"},
      {"\"unterminated", "unterminated string"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Report> r = Report::FromJson(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(r.status().message(), HasSubstr(c.fragment)) << c.json;
    EXPECT_THAT(r.status().message(), HasSubstr("offset")) << c.json;
  }
}

TEST(ReportTest, DeepNestingIsRejectedNotACrash) {
  std::string deep(100000, '[');
  absl::StatusOr<JsonValue> v = ParseJson(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("nesting deeper than"));
}

TEST(ReportTest, EveryByteFlipParsesOrFailsCleanly) {
  std::string json = SampleReport().Json();
  for (size_t i = 0; i < json.size(); ++i) {
    for (char c : {'"', '\\', '{', ']', '\x01', '\xff', '0'}) {
      std::string corrupt = json;
      corrupt[i] = c;
      absl::StatusOr<Report> r = Report::FromJson(corrupt);
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << i;
      }
    }
    absl::StatusOr<Report> prefix = Report::FromJson(absl::string_view(json).substr(0, i));
    EXPECT_FALSE(prefix.ok()) << i;
  }
}

TEST(ReportTest, WrongMetricShapesAreRejected) {
  struct Case {
    const char* json;
    const char* fragment;
  };
  const Case cases[] = {
      {R"({"calls":[{"Name":{"bytes":"x"}}]})", "cannot parse metric of type bytes"},
      {R"({"calls":[{"Name":"x"}]})", "exactly one member"},
      {R"({"calls":[{"Name":{"string":"x","count":1}}]})", "exactly one member"},
      {R"({"calls":[{"Count":{"count":1.5}}]})", "count must be an integer"},
      {R"({"calls":[{"Count":{"count":99999999999999999999}}]})", "out of range"},
      {R"({"calls":[{"D":{"microseconds":"1"}}]})", "must be a number"},
      {R"({"calls":[{"D":{"string":1}}]})", "must be a string"},
      {R"({"calls":{}})", "calls must be an array"},
      {R"({"device_metrics":[]})", "device_metrics must be an object"},
      {R"({"configuration":3})", "configuration must be an object"},
      {R"([])", "must be an object"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Report> r = Report::FromJson(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(r.status().message(), HasSubstr(c.fragment)) << c.json;
  }
}

TEST(ReportTest, CsvQuotesPerRfc4180) {
  Report r;
  r.calls.push_back({{"Name", std::string("a \"b\", c\nd")},
                     {"Duration (us)", Duration{1.5}},
                     {"Count", Count{2}},
                     {"x,y", Ratio{0.25}}});
  r.calls.push_back({{"Name", std::string("plain")}, {"Percent", Percent{50}}});
  EXPECT_EQ(r.Csv(),
            "Count,Duration (us),Name,Percent,\"x,y\"\n"
            "2,1.5,\"a \"\"b\"\", c\nd\",,0.25\n"
            ",,\"plain\",50,\n");
}

TEST(ReportTest, TableAggregatesSortsAndSums) {
  Report r = SampleReport();
  std::string table = r.Table();
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_GE(lines.size(), 7u);
  // Header: fixed columns first, then the rest sorted.
  EXPECT_THAT(lines[0],
              ::testing::MatchesRegex(
                  "Name +Duration \\(us\\) +Percent +Device +Count +Argument Shapes +Hash "
                  "+Ratio  "));
  // Two matmul calls joined (2,200.50 us, count 2) and sorted first.
  EXPECT_THAT(lines[1], ::testing::StartsWith("matmul "));
  EXPECT_THAT(lines[1], HasSubstr("2,200.50"));
  EXPECT_THAT(lines[1], ::testing::MatchesRegex(".*cpu0 +2  float32.*"));
  EXPECT_THAT(lines[2], ::testing::StartsWith("relu "));
  EXPECT_THAT(lines[3], ::testing::StartsWith("vm.builtin.make_tuple "));
  EXPECT_THAT(lines[4], ::testing::StartsWith("---------- "));
  EXPECT_THAT(lines[5], ::testing::StartsWith("Sum "));
  EXPECT_THAT(lines[5], HasSubstr("2,211.25"));
  EXPECT_THAT(lines[5], HasSubstr("100.00"));
  EXPECT_THAT(lines[5], ::testing::Not(HasSubstr("0.5")));  // ratios are not summed
  EXPECT_THAT(lines[6], ::testing::StartsWith("Total "));
  EXPECT_THAT(table,
              HasSubstr("\nConfiguration\n-------------\nExecutor: VM\nNumber of threads: 4\n"));

  // Without aggregation or sums, every call is a row in call order.
  std::string flat = r.Table(false, false, false);
  std::vector<std::string> flat_lines = absl::StrSplit(flat, '\n');
  EXPECT_THAT(flat_lines[1], ::testing::StartsWith("matmul "));
  EXPECT_THAT(flat_lines[1], HasSubstr("1,200.50"));
  EXPECT_THAT(flat_lines[2], ::testing::StartsWith("relu "));
  EXPECT_THAT(flat_lines[3], ::testing::StartsWith("matmul "));
  EXPECT_THAT(flat_lines[5], ::testing::StartsWith("Total "));
  EXPECT_THAT(flat, ::testing::Not(HasSubstr("Sum")));
}

TEST(ReportTest, StartColumnKeepsTheEarliestAndHasNoSum) {
  Report r;
  for (double start : {30.0, 10.0, 20.0}) {
    r.calls.push_back({{"Name", std::string("op")},
                       {"Duration (us)", Duration{5}},
                       {"Device", std::string("cpu0")},
                       {std::string(kStartColumn), Duration{start}}});
  }
  std::vector<std::string> lines = absl::StrSplit(r.Table(), '\n');
  ASSERT_GE(lines.size(), 4u);
  // One aggregated row: durations summed (15), the start the earliest (10).
  EXPECT_THAT(lines[1], ::testing::MatchesRegex("op +15\\.00 .* 10\\.00  "));
  EXPECT_THAT(lines[3], ::testing::MatchesRegex("Sum +15\\.00 .*"));
  EXPECT_THAT(lines[3], ::testing::Not(HasSubstr("10.00")));
}

TEST(ReportTest, AggregationRulesPerMetricKind) {
  Report r;
  r.calls.push_back({{"Name", std::string("op")},
                     {"Duration (us)", Duration{1}},
                     {"Ratio", Ratio{0.2}},
                     {"Note", std::string("same")},
                     {"Mixed", std::string("a")}});
  r.calls.push_back({{"Name", std::string("op")},
                     {"Duration (us)", Duration{3}},
                     {"Ratio", Ratio{0.4}},
                     {"Note", std::string("same")},
                     {"Mixed", std::string("b")}});
  // Same name, another device: a separate row.
  r.calls.push_back({{"Name", std::string("op")},
                     {"Duration (us)", Duration{10}},
                     {"Device", std::string("cuda0")}});
  std::string t = r.Table(true, true, false);
  std::vector<std::string> lines = absl::StrSplit(t, '\n');
  EXPECT_THAT(lines[1], HasSubstr("10.00"));  // the cuda row sorts first
  EXPECT_THAT(lines[2], HasSubstr("4.00"));
  EXPECT_THAT(lines[2], HasSubstr("0.3"));   // ratios averaged
  EXPECT_THAT(lines[2], HasSubstr("same"));  // agreeing strings kept
  EXPECT_THAT(lines[2], ::testing::Not(HasSubstr("  a  ")));
}

TEST(ReportTest, FormatsNumbersLikeTheReference) {
  EXPECT_EQ(FormatMetric(Duration{1234567.891}), "1,234,567.89");
  EXPECT_EQ(FormatMetric(Duration{-1234.5}), "-1,234.50");
  EXPECT_EQ(FormatMetric(Duration{12.0}), "12.00");
  EXPECT_EQ(FormatMetric(Count{1234567}), "1,234,567");
  EXPECT_EQ(FormatMetric(Count{999}), "999");
  EXPECT_EQ(FormatMetric(Percent{12.345}), "12.35");
  EXPECT_EQ(FormatMetric(Ratio{0.33333}), "0.33");
  EXPECT_EQ(FormatMetric(std::string("x")), "x");
  EXPECT_EQ(ReportDeviceName(Device::Cuda(1)), "cuda1");
}

TEST(ReportTest, LongStringsAreCutInTheTable) {
  Report r;
  std::string shapes(60, 'x');
  r.calls.push_back(
      {{"Name", std::string("op")}, {"Duration (us)", Duration{1}}, {"Argument Shapes", shapes}});
  std::string t = r.Table(false, false, false);
  EXPECT_THAT(t, HasSubstr(std::string(47, 'x') + "..."));
  EXPECT_THAT(t, ::testing::Not(HasSubstr(std::string(48, 'x'))));
}

}  // namespace
}  // namespace tether::profiling
