// Pipelines a user can extend (TVM's get_pipeline, relax_pipeline=,
// tir_pipeline=): the named pipelines listed pass by pass, a user's Relax
// pass spliced in between our stages and a user's kernel pass run before
// code generation, each changing what the built executable computes, and
// the errors for a missing anchor or a failing pass.
#include "compiler/build.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/visitor.h"
#include "compiler/text/parser.h"
#include "compiler/transform/pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

constexpr char kAdd[] = R"(
@R.function
def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
    with R.dataflow():
        z = R.add(x, y)
        R.output(z)
    return z
)";

std::vector<float> RunMain(const BuildOptions& options) {
  auto module = ParseModule(kAdd);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  auto exec = Build(*module, options);
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return {};
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  EXPECT_TRUE(vm.ok()) << vm.status();
  Value args[] = {MakeFloatTensor({4}, {1, 2, 3, 4}), MakeFloatTensor({4}, {10, 20, 30, 40})};
  auto out = (*vm)->Invoke("main", args);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? ReadFloats(Tensor(out->AsRef<TensorObj>())) : std::vector<float>{};
}

TEST(CustomPipelineTest, NamedPipelinesListTheirPasses) {
  auto def = GetPipeline("default");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_THAT(def->PassNames(),
              ElementsAre("NormalizeModule", "ConstantFolding", "PackConstantWeights", "FuseOps",
                          "LegalizeOps", "DeadCodeElimination", "StaticPlanBlockMemory"));
  auto zero = GetPipeline("zero");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_THAT(zero->PassNames(),
              ElementsAre("NormalizeModule", "LegalizeOps", "StaticPlanBlockMemory"));
  EXPECT_THAT(GetPipeline("fast").status().message(),
              HasSubstr("unknown pipeline \"fast\", known pipelines: default, zero"));
  absl::Status s = def->InsertAfter("Fuse", Pass{"Mine", [](IRModule m) { return m; }});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no pass \"Fuse\" in the pipeline (NormalizeModule, "));
}

// A user's Relax pass: every relax.add becomes relax.multiply, rebuilt with
// the mutator's post-order visit so its struct info is inferred.
class AddToMultiply : public ExprMutator {
 public:
  Expr VisitCall(const Expr& e) override {
    absl::StatusOr<Expr> r = VisitExprPostOrder(e);
    if (!r.ok()) {
      status = r.status();
      return e;
    }
    const auto* c = r->as<CallNode>();
    const auto* op = c->op.as<OpNode>();
    if (op == nullptr || op->name != "relax.add") return *r;
    ++rewritten;
    absl::StatusOr<Expr> m = builder()->Normalize(MakeCall(GetOp("relax.multiply"), c->args));
    if (!m.ok()) status = m.status();
    return m.ok() ? *m : e;
  }
  absl::Status status;
  int rewritten = 0;
};

TEST(CustomPipelineTest, AUsersRelaxPassRunsBetweenOurStages) {
  BuildOptions options;
  auto pipeline_options = PipelineOptionsFor(options);
  ASSERT_TRUE(pipeline_options.ok()) << pipeline_options.status();
  auto pipeline = GetPipeline("default", *pipeline_options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  int rewritten = 0;
  std::vector<std::string> saw_kernels;
  ASSERT_TRUE(
      pipeline
          ->InsertAfter("NormalizeModule", Pass{"AddToMultiply",
                                                [&](IRModule m) -> absl::StatusOr<IRModule> {
                                                  AddToMultiply mutator;
                                                  for (auto& [name, f] : m.functions)
                                                    f = mutator.VisitExpr(f);
                                                  rewritten += mutator.rewritten;
                                                  if (!mutator.status.ok()) return mutator.status;
                                                  return m;
                                                }})
          .ok());
  // And one after legalization, which sees the kernels our stages made.
  ASSERT_TRUE(
      pipeline
          ->InsertBefore("StaticPlanBlockMemory", Pass{"ListKernels",
                                                       [&](IRModule m) -> absl::StatusOr<IRModule> {
                                                         for (const auto& [name, k] : m.kernels)
                                                           saw_kernels.push_back(name);
                                                         return m;
                                                       }})
          .ok());
  options.relax_pipeline = *pipeline;
  EXPECT_THAT(RunMain(options), ElementsAre(10, 40, 90, 160));  // x * y, not x + y
  EXPECT_EQ(rewritten, 1);
  EXPECT_THAT(saw_kernels, ElementsAre("multiply"));

  auto module = ParseModule(kAdd);
  ASSERT_TRUE(module.ok());
  auto exec = Build(*module, options);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_THAT((*exec)->metadata.at("pipeline"),
              HasSubstr("custom: NormalizeModule, AddToMultiply, ConstantFolding"));
}

// A user's kernel pass: every kernel writes twice its result (a second loop
// over the 4-element output), compiled in place of what legalization made.
TEST(CustomPipelineTest, AUsersKernelPassChangesWhatIsCompiled) {
  BuildOptions options;
  Pipeline tir;
  tir.Append(KernelPass("DoubleOutputs", [](const KernelFunc& k) -> absl::StatusOr<KernelFunc> {
    const Buffer& out = k->params.back().buffer;
    if (out == nullptr || out->shape.size() != 1) {
      return absl::InvalidArgumentError("expected a 1-d output");
    }
    Var i("i");
    Stmt twice = For(i, 0, out->shape[0], ForKind::kSerial,
                     Store(out, {i}, Load(out, {i}) * FloatImm(out->dtype, 2.0)));
    return MakeKernelFunc(k->name, k->params, Seq({k->body, twice}), k->num_outputs);
  }));
  options.tir_pipeline = tir;
  EXPECT_THAT(RunMain(options), ElementsAre(22, 44, 66, 88));  // 2 (x + y)

  // A failing kernel pass names itself and the kernel.
  Pipeline failing;
  failing.Append(KernelPass("Refuse", [](const KernelFunc&) -> absl::StatusOr<KernelFunc> {
    return absl::FailedPreconditionError("not today");
  }));
  options.tir_pipeline = failing;
  auto module = ParseModule(kAdd);
  ASSERT_TRUE(module.ok());
  absl::Status s = Build(*module, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("Refuse: "));
  EXPECT_THAT(s.message(), HasSubstr("not today"));
}

}  // namespace
}  // namespace tether::compiler
