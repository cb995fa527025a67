// Weights kept apart from the code (issue 24 item 4): BindParams by name and
// by position, BuildModel with separate_params (the weights stay parameters
// of main and come back as the param dict), a VM with the dict bound, and the
// whole flow through a real tetherd, where new weights upload only the param
// file and new code only the (small) module.
#include <stdlib.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "compiler/build.h"
#include "compiler/relax/bind.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/local_vm.h"
#include "runtime/vm/param_binding.h"
#include "server/daemon.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

// A two-layer perceptron whose weights are parameters, the first one before
// the input (so keeping them separate moves it after); it ends with a ReLU
// or not: two versions of the code for the same weights.
std::string Mlp(bool relu_at_end) {
  return absl::StrCat(R"(
@I.ir_module
class Module:
    @R.function
    def main(w0: R.Tensor((512, 1024), "float32"), x: R.Tensor(("n", 512), "float32"),
             b0: R.Tensor((1024,), "float32"), w1: R.Tensor((1024, 256), "float32"),
             b1: R.Tensor((256,), "float32")) -> R.Tensor(("n", 256), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w1)
)",
                      relu_at_end ? R"(            lv4 = R.add(lv3, b1)
            gv = R.nn.relu(lv4)
)"
                                  : R"(            gv = R.add(lv3, b1)
)",
                      R"(            R.output(gv)
        return gv
)");
}

Tensor Random(std::vector<int64_t> shape, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  return MakeFloatTensor(std::move(shape), std::move(values));
}

std::map<std::string, Tensor> Weights(uint32_t seed) {
  return {{"w0", Random({512, 1024}, seed, 0.05f)},
          {"b0", Random({1024}, seed + 1, 0.1f)},
          {"w1", Random({1024, 256}, seed + 2, 0.05f)},
          {"b1", Random({256}, seed + 3, 0.1f)}};
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::abs(want[i]))) << "element " << i;
  }
}

// --- BindParams ------------------------------------------------------------------

constexpr char kAffine[] = R"(
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32"), w: R.Tensor((2,), "float32"),
             b: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        with R.dataflow():
            lv0 = R.multiply(x, w)
            gv = R.add(lv0, b)
            R.output(gv)
        return gv
)";

Expr Main(const IRModule& module) { return module.functions.at("main"); }

size_t NumParams(const Expr& f) { return f.as<FunctionNode>()->params.size(); }

TEST(BindParamsTest, BindsByNameAndByPositionInAnyMix) {
  auto module = ParseModule(kAffine);
  ASSERT_TRUE(module.ok()) << module.status();
  Tensor w = MakeFloatTensor({2}, {2, 3});
  Tensor b = MakeFloatTensor({2}, {10, 20});
  auto bound = BindParamsByKey(Main(*module), std::vector<std::pair<ParamKey, Tensor>>{
                                                  {int64_t{1}, w}, {std::string("b"), b}});
  ASSERT_TRUE(bound.ok()) << bound.status();
  ASSERT_EQ(NumParams(*bound), 1u);
  EXPECT_EQ(bound->as<FunctionNode>()->params[0].as<VarNode>()->name_hint, "x");

  module->functions["main"] = *bound;
  auto exec = Build(*module, {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  ASSERT_TRUE(vm.ok()) << vm.status();
  Value x[] = {MakeFloatTensor({2}, {1, 1})};
  auto out = (*vm)->Invoke("main", x);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ReadFloats(Tensor(out->AsRef<TensorObj>())), ElementsAre(12, 23));
}

TEST(BindParamsTest, RefusesUnknownNamesPositionsOutOfRangeTwiceBoundAndWrongTensors) {
  auto module = ParseModule(kAffine);
  ASSERT_TRUE(module.ok()) << module.status();
  Tensor w = MakeFloatTensor({2}, {2, 3});
  auto bind = [&](std::vector<std::pair<ParamKey, Tensor>> params) {
    return BindParamsByKey(Main(*module), params).status();
  };
  absl::Status s = bind({{std::string("weight"), w}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("function has no param named weight; it has 3 params (x, w, b)"));
  s = bind({{int64_t{3}, w}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("param position 3 is out of range: the function has 3 params"));
  s = bind({{int64_t{-1}, w}});
  EXPECT_THAT(s.message(), HasSubstr("param position -1 is out of range"));
  s = bind({{std::string("w"), w}, {int64_t{1}, w}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("param w (position 1) is bound twice: by name w and by position 1"));
  s = bind({{std::string("w"), MakeFloatTensor({3}, {1, 2, 3})}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("param w of R.Tensor((2,), \"float32\") cannot bind"));
  auto ints = Tensor::Empty(std::vector<int64_t>{2}, DataType::Int(32), Device::Cpu());
  ASSERT_TRUE(ints.ok());
  s = bind({{int64_t{2}, *ints}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("param b of"));
  // The name map of BuildOptions::params goes the same way.
  s = BindParams(Main(*module), std::map<std::string, Tensor>{{"nope", w}}).status();
  EXPECT_THAT(s.message(), HasSubstr("no param named nope; it has 3 params (x, w, b)"));
}

// --- BuildModel with separate_params ---------------------------------------------

TEST(SeparateParamsTest, WeightsStayParametersAfterTheInputsAndComeBackAsTheDict) {
  auto module = ParseModule(Mlp(false));
  ASSERT_TRUE(module.ok()) << module.status();
  BuildOptions options;
  options.params = Weights(1);
  options.separate_params = true;
  auto built = BuildModel(*module, options);
  ASSERT_TRUE(built.ok()) << built.status();
  const vm::Executable& exec = *built->exec;
  const vm::FunctionInfo& main = exec.functions[exec.function_map.at("main")];
  EXPECT_THAT(main.param_names, ElementsAre("x", "w0", "b0", "w1", "b1"));
  ASSERT_EQ(built->params.size(), 4u);
  EXPECT_EQ(built->params[0].first, "w0");
  EXPECT_EQ(built->params[3].first, "b1");
  EXPECT_EQ(exec.metadata.at("param_types.main"),
            "float32[?,512]\nfloat32[512,1024]\nfloat32[1024]\nfloat32[1024,256]\nfloat32[256]");

  // The bound build's numbers, from a VM with the dict bound.
  BuildOptions bound_options;
  bound_options.params = Weights(1);
  auto bound = Build(*module, bound_options);
  ASSERT_TRUE(bound.ok()) << bound.status();
  auto reference = vm::LocalVirtualMachine::Create(*bound, {Device::Cpu()});
  auto separate = vm::LocalVirtualMachine::Create(built->exec, {Device::Cpu()});
  ASSERT_TRUE(reference.ok() && separate.ok());
  ASSERT_TRUE((*separate)->BindParams(built->params).ok());
  EXPECT_EQ(*(*separate)->GetFunctionArity("main"), 1);
  EXPECT_THAT(*(*separate)->GetFunctionParamNames("main"), ElementsAre("x"));
  EXPECT_THAT(*(*separate)->GetFunctionBoundParamNames("main"),
              ElementsAre("w0", "b0", "w1", "b1"));
  Value x[] = {Random({3, 512}, 9, 1.0f)};
  auto want = (*reference)->Invoke("main", x);
  auto got = (*separate)->Invoke("main", x);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  ExpectNear(ReadFloats(Tensor(got->AsRef<TensorObj>())),
             ReadFloats(Tensor(want->AsRef<TensorObj>())));

  // The other entry points take the data inputs only, too.
  ASSERT_TRUE((*separate)->SaveFunction("main", "main_saved", x).ok());
  auto saved = (*separate)->Invoke("main_saved", {});
  ASSERT_TRUE(saved.ok()) << saved.status();
  ExpectNear(ReadFloats(Tensor(saved->AsRef<TensorObj>())),
             ReadFloats(Tensor(want->AsRef<TensorObj>())));
  profiling::TimeEvaluatorOptions timing;
  timing.number = 1;
  timing.repeat = 1;
  EXPECT_TRUE((*separate)->TimeEvaluator("main", Device::Cpu(), timing, x).ok());
  EXPECT_TRUE((*separate)->Profile("main", x).ok());
  vm::NamedArgs named = {{"w0", Value(Random({512, 1024}, 1, 1.0f))}};
  absl::Status s = (*separate)->SetInputNamed("main", x, named);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("parameter w0 of main is bound from the VM's params"));
  EXPECT_EQ((*separate)->BindParams(built->params).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SeparateParamsTest, RefusesWeightsMainDoesNotTakeOrThatDoNotFit) {
  auto module = ParseModule(Mlp(false));
  ASSERT_TRUE(module.ok()) << module.status();
  BuildOptions options;
  options.separate_params = true;
  options.params = {{"w9", Random({2}, 1, 1.0f)}};
  absl::Status s = BuildModel(*module, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no param named w9"));
  options.params = {{"b0", Random({1000}, 1, 1.0f)}};
  s = BuildModel(*module, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("param b0 of"));

  // A VM refuses a dict that does not fit its signature, naming both.
  options.params = Weights(1);
  auto built = BuildModel(*module, options);
  ASSERT_TRUE(built.ok()) << built.status();
  auto vm = vm::LocalVirtualMachine::Create(built->exec, {Device::Cpu()});
  ASSERT_TRUE(vm.ok());
  ParamList wrong = {{"b1", Random({255}, 1, 1.0f)}};
  s = (*vm)->BindParams(wrong, "w.params", "m.tx");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("w.params has b1 as float32[255], but parameter b1 of main in m.tx is "
                        "float32[256]"));
}

// --- Through a real daemon ---------------------------------------------------------

TEST(SeparateParamsRemoteTest, NewWeightsUploadOnlyTheParamFileAndNewCodeOnlyTheModule) {
  auto module = ParseModule(Mlp(false));
  auto module_relu = ParseModule(Mlp(true));
  ASSERT_TRUE(module.ok() && module_relu.ok());
  BuildOptions options;
  options.separate_params = true;
  options.params = Weights(1);
  auto built = BuildModel(*module, options);
  ASSERT_TRUE(built.ok()) << built.status();
  options.params = Weights(100);  // new weights, same code
  auto retrained = BuildModel(*module, options);
  options.params = Weights(1);  // same weights, new code
  auto recoded = BuildModel(*module_relu, options);
  ASSERT_TRUE(retrained.ok() && recoded.ok());
  // Retrained weights run with the code already built (a build of the same
  // code again need not give the same bytes: kernels compile in parallel).
  const std::string code = built->exec->SaveToBytes();
  const std::string new_code = recoded->exec->SaveToBytes();
  ASSERT_EQ(retrained->exec->metadata.at("source_hash"), built->exec->metadata.at("source_hash"));
  auto weights = SaveParamDict(built->params);
  auto new_weights = SaveParamDict(retrained->params);
  ASSERT_TRUE(weights.ok() && new_weights.ok());
  ASSERT_GT(weights->size(), uint64_t{3} << 20);  // several MB
  ASSERT_EQ(*SaveParamDict(recoded->params), *weights);

  server::DaemonOptions daemon_options;
  daemon_options.listen = {"127.0.0.1:0"};
  std::string store = (std::filesystem::temp_directory_path() / "tether-params-XXXXXX").string();
  ASSERT_NE(::mkdtemp(store.data()), nullptr);
  daemon_options.store_dir = store;
  auto daemon = server::Daemon::Start(daemon_options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Value x[] = {Random({4, 512}, 5, 1.0f)};
  // Runs the model the way a client does: upload what the daemon lacks,
  // a VM from (module, params), main(x).
  auto run = [&](client::RemoteSession& session, const std::string& exec_bytes,
                 const std::string& param_bytes) -> std::vector<float> {
    auto sha = session.UploadModule(exec_bytes);
    auto params_sha = session.UploadParams(param_bytes);
    EXPECT_TRUE(sha.ok() && params_sha.ok()) << sha.status() << params_sha.status();
    client::RemoteVmOptions vm_options;
    vm_options.params_sha256 = *params_sha;
    auto vm = client::RemoteVM::Create(&session, *sha, {Device::Cpu()}, "", vm_options);
    EXPECT_TRUE(vm.ok()) << vm.status();
    if (!vm.ok()) return {};
    EXPECT_THAT(*(*vm)->GetFunctionBoundParamNames("main"), ElementsAre("w0", "b0", "w1", "b1"));
    auto out = (*vm)->Invoke("main", x);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? ReadFloats(Tensor(out->AsRef<TensorObj>())) : std::vector<float>();
  };
  auto local = [&](const BuildOutput& b) {
    auto vm = vm::LocalVirtualMachine::Create(b.exec, {Device::Cpu()});
    EXPECT_TRUE(vm.ok() && (*vm)->BindParams(b.params).ok());
    auto out = (*vm)->Invoke("main", x);
    EXPECT_TRUE(out.ok()) << out.status();
    return ReadFloats(Tensor(out->AsRef<TensorObj>()));
  };
  {
    auto session = client::RemoteSession::Connect((*daemon)->target());
    ASSERT_TRUE(session.ok()) << session.status();
    client::RemoteSession& s = **session;
    ExpectNear(run(s, code, *weights), local(*built));
    EXPECT_EQ(s.module_streams(), 1u);
    EXPECT_EQ(s.param_streams(), 1u);
    EXPECT_EQ(s.store_bytes_sent(), code.size() + weights->size());

    // New weights: only the param file travels.
    uint64_t before = s.store_bytes_sent();
    ExpectNear(run(s, code, *new_weights), local(BuildOutput{built->exec, retrained->params}));
    EXPECT_EQ(s.module_streams(), 1u);
    EXPECT_EQ(s.param_streams(), 2u);
    EXPECT_EQ(s.store_bytes_sent() - before, new_weights->size());

    // New code: only the module travels, and it is kilobytes.
    before = s.store_bytes_sent();
    std::vector<float> relu = run(s, new_code, *weights);
    ExpectNear(relu, local(*recoded));
    EXPECT_EQ(s.module_streams(), 2u);
    EXPECT_EQ(s.param_streams(), 2u);
    EXPECT_EQ(s.store_bytes_sent() - before, new_code.size());
    EXPECT_LT(new_code.size(), 256u << 10);
    for (float v : relu) EXPECT_GE(v, 0.0f);
  }
  (*daemon)->Shutdown();
  std::filesystem::remove_all(daemon_options.store_dir);
}

}  // namespace
}  // namespace tether::compiler
