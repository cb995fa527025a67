// Report helpers of the conformance runner: op blame from importer
// messages, the summary line, and expected lists surviving a round trip.
#include "tests/conformance/report.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::conformance {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CaseRecord Record(std::string suite, std::string name, Outcome outcome, std::string reason = "",
                  std::string ops = "") {
  CaseRecord r;
  r.spec = {suite, name, "/nowhere/" + name};
  r.result.outcome = outcome;
  r.result.reason = std::move(reason);
  r.result.ops = std::move(ops);
  return r;
}

TEST(ReportTest, BlamesTheOpNamedByTheImporter) {
  CaseResult r;
  r.reason = "UNIMPLEMENTED: onnx: node 'loop_1' (Loop, opset 11): no converter";
  r.ops = "Loop,Add";
  EXPECT_EQ(BlamedOp(r), "Loop");
  r.outcome = Outcome::kFail;
  r.reason = "INVALID_ARGUMENT: out of range";
  EXPECT_EQ(BlamedOp(r), "Loop,Add");
  r.outcome = Outcome::kUnsupported;
  r.reason = "UNIMPLEMENTED: onnx: graph input 'x': element type STRING is not supported";
  EXPECT_EQ(BlamedOp(r), "graph input '_': element type STRING is not supported");
  r.outcome = Outcome::kFail;
  r.ops = "";
  EXPECT_EQ(BlamedOp(r), "?");
}

TEST(ReportTest, SummaryLineCountsOneSuite) {
  std::vector<CaseRecord> records = {
      Record("node", "a", Outcome::kPass), Record("node", "b", Outcome::kFail),
      Record("node", "c", Outcome::kUnsupported), Record("node", "d", Outcome::kPass),
      Record("simple", "e", Outcome::kPass)};
  EXPECT_EQ(SummaryLine("node", records), "node: 2 pass, 1 fail, 1 unsupported (4 cases)");
}

TEST(ReportTest, GroupsNonPassingCasesByOp) {
  std::vector<CaseRecord> records = {
      Record("node", "t1", Outcome::kUnsupported, "x (Loop, opset 11): no", "Loop"),
      Record("node", "t2", Outcome::kUnsupported, "x (Loop, opset 13): no", "Loop"),
      Record("node", "t3", Outcome::kFail, "3 of 4 values differ", "Erf")};
  std::string groups = FormatGroups(records, 10);
  EXPECT_THAT(groups, HasSubstr("unsupported by op:"));
  EXPECT_THAT(groups, HasSubstr("   2  Loop"));
  EXPECT_THAT(groups, HasSubstr("   1  Erf"));
}

TEST(ReportTest, ExpectedListRoundTripsAndIgnoresComments) {
  std::string path = (std::filesystem::path(::testing::TempDir()) / "expected.txt").string();
  ASSERT_TRUE(WriteExpectedList(path, "node", {"test_b", "test_a"}).ok());
  auto names = ReadExpectedList(path);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("test_a", "test_b"));
  EXPECT_EQ(ReadExpectedList(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tether::conformance
