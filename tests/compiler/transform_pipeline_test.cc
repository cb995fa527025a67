// RunPipeline: the named pipelines leave no call_tir and no operator call,
// "default" fuses where "zero" does not, and unknown names are rejected with
// the list of known ones.
#include "compiler/transform/memory_plan.h"
#include "compiler/transform/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/transform_test_util.h"

namespace tether::compiler {
namespace {

using testing::BindingsCalling;
using ::testing::ElementsAre;
using testing::F32;
using ::testing::HasSubstr;
using testing::Op;
using testing::RawFunction;
using ::testing::UnorderedElementsAre;

IRModule ModuleOf(Expr main) {
  IRModule m;
  m.functions["main"] = std::move(main);
  return m;
}

std::vector<std::string> KernelNames(const IRModule& m) {
  std::vector<std::string> names;
  for (const auto& [name, k] : m.kernels) names.push_back(name);
  return names;
}

// Every called operator of main is a memory or packed-call builtin.
void ExpectFullyLowered(const IRModule& m) {
  for (const Binding& b : testing::Bindings(m)) {
    absl::string_view op = CalledOpName(b.value);
    if (op.empty()) continue;
    EXPECT_TRUE(op == "relax.memory.alloc_storage" || op == "relax.memory.alloc_tensor" ||
                op == "relax.builtin.alloc_tensor" || op == "relax.call_pure_packed")
        << op << " left in the lowered module";
  }
}

TEST(RunPipelineTest, UnknownNameListsTheKnownOnes) {
  auto out = RunPipeline(ModuleOf(testing::MlpFunction()), "fast");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("unknown pipeline \"fast\""));
  EXPECT_THAT(out.status().message(), HasSubstr("default, zero"));
  EXPECT_THAT(ListPipelines(), ElementsAre("default", "zero"));
}

TEST(RunPipelineTest, ZeroLegalizesEveryCallWithoutFusing) {
  auto out = RunPipeline(ModuleOf(testing::MlpFunction()), "zero");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(KernelNames(*out),
              UnorderedElementsAre("matmul", "add", "relu", "matmul_1", "add_1"));
  EXPECT_TRUE(BindingsCalling(*out, "relax.call_tir").empty());
  ExpectFullyLowered(*out);
}

TEST(RunPipelineTest, DefaultFusesTheMlpIntoTwoKernels) {
  auto out = RunPipeline(ModuleOf(testing::MlpFunction()), "default");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(KernelNames(*out), UnorderedElementsAre("fused_matmul_add_relu", "fused_matmul_add"));
  EXPECT_TRUE(BindingsCalling(*out, "relax.call_tir").empty());
  ExpectFullyLowered(*out);
}

TEST(RunPipelineTest, DefaultWithoutFusionMatchesZeroKernels) {
  PipelineOptions options;
  options.fuse = false;
  auto out = RunPipeline(ModuleOf(testing::MlpFunction()), "default", options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kernels.size(), 5u);
}

TEST(RunPipelineTest, StaticChainPlansTwoStoragesForFourOps) {
  // Four elementwise ops on 1 MiB tensors; the last is returned.
  RawFunction f;
  Expr x = f.Param("x", F32({256, 1024}));
  Expr a = f.Bind("a", Op("relax.exp", {x}));
  Expr b = f.Bind("b", Op("relax.nn.relu", {a}));
  Expr c = f.Bind("c", Op("relax.negative", {b}));
  Expr gv = f.Output("gv", Op("relax.sqrt", {c}));
  auto out = RunPipeline(ModuleOf(f.Finish(gv)), "zero");
  ASSERT_TRUE(out.ok()) << out.status();
  auto peak = PlannedPeakBytes(*out, "main");
  ASSERT_TRUE(peak.ok()) << peak.status();
  EXPECT_EQ(*peak, 2 << 20);
  // With fusion the chain is one kernel writing the returned tensor directly.
  auto fused = RunPipeline(ModuleOf(f.Finish(gv)), "default");
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_THAT(KernelNames(*fused), ElementsAre("fused_exp_relu_negative_sqrt"));
  EXPECT_EQ(*PlannedPeakBytes(*fused, "main"), 0);
}

TEST(RunPipelineTest, ErrorsNameThePass) {
  RawFunction f;
  Expr x = f.Param("x", TensorSInfoOfRank(2, DataType::Float(32)));
  Expr gv = f.Output("gv", Op("relax.nn.relu", {x}));
  auto out = RunPipeline(ModuleOf(f.Finish(gv)), "zero");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("LegalizeOps: main: cannot legalize relax.nn.relu"));
}

}  // namespace
}  // namespace tether::compiler
