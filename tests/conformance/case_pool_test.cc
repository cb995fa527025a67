// The case pool's isolation: a case that aborts or hangs becomes a "crash"
// or "timeout" result for that case alone, results arrive for every case,
// and ordinary results cross the process boundary intact.
#include "tests/conformance/case_pool.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::conformance {
namespace {

using ::testing::HasSubstr;

CaseResult FakeCase(const CaseSpec& spec) {
  if (spec.name == "aborts") {
    std::fprintf(stderr, "fatal: converter registered twice\n");
    std::abort();
  }
  if (spec.name == "hangs") {
    while (true) pause();
  }
  CaseResult r;
  r.outcome = spec.name == "passes" ? Outcome::kPass : Outcome::kUnsupported;
  r.stage = spec.name == "passes" ? "" : "import";
  r.reason = "UNIMPLEMENTED: onnx: node 'n' (Loop, opset 11): unsupported operator";
  r.ops = "Loop,Add";
  r.bound_inputs = "axes";
  r.compile_seconds = 0.25;
  return r;
}

std::map<std::string, CaseResult> RunAll(const std::vector<std::string>& names, int jobs) {
  std::vector<CaseSpec> cases;
  for (const std::string& name : names) cases.push_back({"fake", name, "/nowhere"});
  CasePoolOptions options;
  options.jobs = jobs;
  options.timeout_seconds = 2;
  std::map<std::string, CaseResult> results;
  RunCases(cases, FakeCase, options,
           [&](size_t index, const CaseResult& r) { results[cases[index].name] = r; });
  return results;
}

TEST(CasePoolTest, CrashAndHangCostOnlyTheirCase) {
  auto results = RunAll({"passes", "aborts", "hangs", "unsupported"}, 2);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results["passes"].outcome, Outcome::kPass);
  EXPECT_EQ(results["unsupported"].outcome, Outcome::kUnsupported);
  EXPECT_EQ(results["aborts"].outcome, Outcome::kFail);
  EXPECT_EQ(results["aborts"].stage, "crash");
  EXPECT_THAT(results["aborts"].reason, HasSubstr("signal 6"));
  EXPECT_THAT(results["aborts"].reason, HasSubstr("fatal: converter registered twice"));
  EXPECT_EQ(results["hangs"].outcome, Outcome::kFail);
  EXPECT_EQ(results["hangs"].stage, "timeout");
}

TEST(CasePoolTest, ResultFieldsSurviveTheChildProcess) {
  auto results = RunAll({"unsupported"}, 1);
  const CaseResult& r = results["unsupported"];
  EXPECT_EQ(r.stage, "import");
  EXPECT_EQ(r.reason, "UNIMPLEMENTED: onnx: node 'n' (Loop, opset 11): unsupported operator");
  EXPECT_EQ(r.ops, "Loop,Add");
  EXPECT_EQ(r.bound_inputs, "axes");
  EXPECT_DOUBLE_EQ(r.compile_seconds, 0.25);
}

}  // namespace
}  // namespace tether::conformance
