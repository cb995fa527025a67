// Result documents, JUnit XML and Chrome traces (client/results/): what is
// written parses back, and a file that cannot be a baseline says why.
#include <string>
#include <vector>

#include "client/results/bench_document.h"
#include "client/results/chrome_trace.h"
#include "client/results/json_writer.h"
#include "client/results/junit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/profiling/json.h"

namespace tether::results {
namespace {

using profiling::JsonValue;
using ::testing::HasSubstr;

Provenance SampleProvenance() {
  Provenance p;
  p.timestamp = "2026-12-01T10:00:00Z";
  p.model_path = "examples/mlp.rx";
  p.model_sha256 = std::string(64, 'a');
  p.module_sha256 = std::string(64, 'b');
  p.function = "main";
  p.device = "cpu:0";
  InputRecord x;
  x.name = "x";
  x.dtype = "float32";
  x.shape = {8, 784};
  x.source = "random";
  x.seed = 42;
  x.low = -1;
  x.high = 1;
  p.inputs.push_back(x);
  p.client_version = "0.1.0";
  p.daemon_version = "0.1.0";
  p.device_state_json = R"({"cpu_model": "Test CPU \"9000\""})";
  return p;
}

profiling::BenchmarkResult SampleResult() {
  return profiling::BenchmarkResult::FromSamples({1e-3, 1.01e-3, 0.99e-3, 1e-3, 1.005e-3}, 51, 10);
}

TEST(JsonWriterTest, NestsAndEscapes) {
  JsonWriter w;
  w.BeginObject().Key("a\"b").String("x\ny").Key("list").BeginArray().Int(1).Double(0.5);
  w.Bool(true).Null().BeginObject().EndObject().EndArray().Key("empty").BeginArray().EndArray();
  w.EndObject();
  absl::StatusOr<JsonValue> v = profiling::ParseJson(w.text());
  ASSERT_TRUE(v.ok()) << v.status() << "\n" << w.text();
  EXPECT_EQ(v->Find("a\"b")->text, "x\ny");
  EXPECT_EQ(v->Find("list")->items.size(), 5u);
  EXPECT_TRUE(v->Find("empty")->items.empty());
}

TEST(BenchDocumentTest, RoundTripsAsABaseline) {
  TimingSettings timing;
  timing.number = 10;
  timing.repeat = 5;
  std::string text = BenchDocumentJson(SampleResult(), SampleProvenance(), timing);
  absl::StatusOr<JsonValue> doc = profiling::ParseJson(text);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->Find("kind")->text, "tether.bench");
  EXPECT_EQ(doc->Find("samples")->items.size(), 5u);
  EXPECT_EQ(doc->Find("provenance")->Find("device_state")->Find("cpu_model")->text,
            "Test CPU \"9000\"");

  absl::StatusOr<StoredBench> back = ParseBenchDocument(text, "old.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->samples.size(), 5u);
  EXPECT_DOUBLE_EQ(back->samples[1], 1.01e-3);
  EXPECT_EQ(back->timing.repeat, 5);
  EXPECT_EQ(back->function, "main");
  ASSERT_EQ(back->inputs.size(), 1u);
  EXPECT_EQ(back->inputs[0].shape, (std::vector<int64_t>{8, 784}));
  EXPECT_TRUE(CheckSameWorkload(*back, SampleProvenance()).ok());
  EXPECT_TRUE(BaselineDifferences(*back, SampleProvenance(), timing).empty());

  // With a comparison, it is written too.
  Comparison c = Compare(back->samples, back->samples);
  CompareOptions options;
  std::string compared =
      BenchDocumentJson(SampleResult(), SampleProvenance(), timing, &c, &options, "old.json");
  doc = profiling::ParseJson(compared);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->Find("comparison")->Find("verdict")->text, "same");
}

TEST(BenchDocumentTest, RefusesWhatIsNoBaseline) {
  auto error = [](absl::string_view text) {
    absl::StatusOr<StoredBench> b = ParseBenchDocument(text, "old.json");
    EXPECT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(b.status().message());
  };
  EXPECT_THAT(error("not json"), HasSubstr("old.json is not JSON"));
  EXPECT_THAT(error("[1, 2]"), HasSubstr("is not a tether bench result"));
  EXPECT_THAT(error(R"({"calls": []})"), HasSubstr("is not a tether bench result"));
  EXPECT_THAT(error(R"({"kind": "tether.profile", "version": 1})"),
              HasSubstr("its \"kind\" is \"tether.profile\""));
  EXPECT_THAT(error(R"({"samples": [1.0], "median": 1.0})"), HasSubstr("without provenance"));
  EXPECT_THAT(error(R"({"kind": "tether.bench", "version": 2, "samples": [1.0]})"),
              HasSubstr("is a version 2 bench result"));
  EXPECT_THAT(error(R"({"kind": "tether.bench", "version": 1, "samples": []})"),
              HasSubstr("has no samples"));
  EXPECT_THAT(error(R"({"kind": "tether.bench", "version": 1, "samples": [1e-3, "x"]})"),
              HasSubstr("not a non-negative number (line 1, column"));
  EXPECT_THAT(error(R"({"kind": "tether.bench", "version": 1, "samples": [1e-3]})"),
              HasSubstr("no \"provenance\""));
}

TEST(BenchDocumentTest, AnotherWorkloadIsNamed) {
  TimingSettings timing;
  absl::StatusOr<StoredBench> base =
      ParseBenchDocument(BenchDocumentJson(SampleResult(), SampleProvenance(), timing), "b.json");
  ASSERT_TRUE(base.ok()) << base.status();
  Provenance other = SampleProvenance();
  other.model_sha256 = std::string(64, 'c');
  other.model_path = "examples/cnn.rx";
  absl::Status s = CheckSameWorkload(*base, other);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("(model (sha256 of the model file)): the baseline's examples/mlp.rx "
                        "aaaaaaaaaaaa; this run's examples/cnn.rx"));
  other = SampleProvenance();
  other.inputs[0].shape = {16, 784};
  EXPECT_THAT(
      CheckSameWorkload(*base, other).message(),
      HasSubstr("(inputs): the baseline's x float32[8, 784]; this run's x float32[16, 784]"));
  other = SampleProvenance();
  other.module_sha256 = std::string(64, 'd');
  other.device = "cuda:0";
  timing.number = 20;
  EXPECT_TRUE(CheckSameWorkload(*base, other).ok());
  EXPECT_THAT(BaselineDifferences(*base, other, timing),
              ::testing::ElementsAre("module bbbbbbbbbbbb -> dddddddddddd",
                                     "device cpu:0 -> cuda:0", "number 10 -> 20"));
}

TEST(JunitTest, EscapesEverything) {
  std::string out;
  AppendXmlEscaped(&out, "a<b>&\"c'\n\x01\xff\xc3\xa9", true);
  EXPECT_EQ(out, "a&lt;b&gt;&amp;&quot;c&apos;&#10;\xEF\xBF\xBD\xEF\xBF\xBD\xc3\xa9");
  out.clear();
  AppendXmlEscaped(&out, "x\"y\nz\x7f", false);
  EXPECT_EQ(out, "x\"y\nz\xEF\xBF\xBD");
  out.clear();
  AppendXmlEscaped(&out, "\xed\xa0\x80 \xc0\xaf", false);  // a surrogate, an overlong '/'
  EXPECT_EQ(out, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(JunitTest, CountsOutcomes) {
  JunitSuite suite;
  suite.name = "tether bench";
  suite.timestamp = "2026-12-01T10:00:00";
  JunitCase pass;
  pass.classname = "tether.bench.mlp";
  pass.name = "main on cpu:0";
  pass.seconds = 0.5;
  JunitCase fail = pass;
  fail.outcome = JunitCase::Outcome::kFailure;
  fail.type = "regression";
  fail.message = "20.0% slower";
  JunitCase error = pass;
  error.outcome = JunitCase::Outcome::kError;
  error.message = "cannot <connect>";
  suite.cases = {pass, fail, error};
  std::string xml = JunitXml(suite);
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"tether bench\" tests=\"3\" failures=\"1\" "
                             "errors=\"1\" skipped=\"0\" time=\"1.500000\""));
  EXPECT_THAT(xml, HasSubstr("<failure message=\"20.0% slower\" type=\"regression\">"));
  EXPECT_THAT(xml, HasSubstr("<error message=\"cannot &lt;connect&gt;\">"));
}

TEST(ChromeTraceTest, EventsPerCallOnDeviceTracks) {
  profiling::ReportBuilder b;
  b.AddCall("matmul", 100, Device::Cpu(), "float32[4, 4]", 1,
            {{std::string(profiling::kStartColumn), profiling::Duration{10}}});
  b.AddCall("relu", 5, Device::Cpu(), "", 1,
            {{std::string(profiling::kStartColumn), profiling::Duration{115}}});
  b.SetDeviceTotal(Device::Cpu(), 130);
  b.SetConfiguration("Executor", std::string("VM"));
  std::string trace = ChromeTraceJson(b.Build(), "tether profile m", R"({"function": "main"})");
  absl::StatusOr<JsonValue> doc = profiling::ParseJson(trace);
  ASSERT_TRUE(doc.ok()) << doc.status() << trace;
  const JsonValue* events = doc->Find("traceEvents");
  ASSERT_NE(events, nullptr);
  std::vector<std::string> complete;
  for (const JsonValue& e : events->items) {
    if (e.Find("ph")->text != "X") continue;
    complete.push_back(absl::StrCat(e.Find("name")->text, "@", e.Find("ts")->text, "+",
                                    e.Find("dur")->text, " tid ", e.Find("tid")->text));
  }
  EXPECT_THAT(complete, ::testing::ElementsAre("run@0.0+130.0 tid 1", "matmul@10.0+100.0 tid 1",
                                               "relu@115.0+5.0 tid 1"));
  EXPECT_EQ(doc->Find("otherData")->Find("provenance")->Find("function")->text, "main");
  EXPECT_EQ(doc->Find("otherData")->Find("configuration")->Find("Executor")->text, "VM");
}

TEST(ChromeTraceTest, RowsWithoutStartsAreLaidEndToEnd) {
  profiling::ReportBuilder b;
  b.AddCall("a", 3, Device::Cpu());
  b.AddCall("b", 4, Device::Cpu());
  std::string trace = ChromeTraceJson(b.Build(), "p");
  absl::StatusOr<JsonValue> doc = profiling::ParseJson(trace);
  ASSERT_TRUE(doc.ok()) << doc.status();
  std::vector<std::string> ts;
  for (const JsonValue& e : doc->Find("traceEvents")->items) {
    if (e.Find("ph")->text == "X" && e.Find("cat")->text == "call") {
      ts.push_back(e.Find("ts")->text);
    }
  }
  EXPECT_THAT(ts, ::testing::ElementsAre("0.0", "3.0"));
}

}  // namespace
}  // namespace tether::results
