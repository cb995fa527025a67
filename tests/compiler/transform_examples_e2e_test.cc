// Every examples/*.rx model built with the "default" pipeline (folded, fused,
// planned) computes the same numbers as with the "zero" pipeline (one kernel
// per operator), on the local VM, with symbolic dims set to 2.
#include <cmath>
#include <filesystem>

#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "compiler/tir/arith.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/repo_root.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

using tether::testing::RepoRoot;

// Deterministic float32 inputs for main's parameters, symbolic dims = 2.
std::vector<Value> InputsFor(const IRModule& m) {
  std::vector<Value> args;
  const auto* f = m.Lookup("main").as<FunctionNode>();
  for (size_t p = 0; p < f->params.size(); ++p) {
    const auto* t = f->params[p].struct_info().as<TensorStructInfoNode>();
    EXPECT_TRUE(t != nullptr && t->shape.has_value());
    if (t == nullptr || !t->shape.has_value()) return {};
    std::vector<int64_t> shape;
    for (const PrimExpr& d : *t->shape) {
      std::vector<Var> vars;
      CollectVars(d, &vars);
      VarMap two;
      for (const Var& v : vars) two[v.get()] = PrimExpr(int64_t{2});
      shape.push_back(AsConstInt(Substitute(d, two)).value_or(2));
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      // Positive where a variance might be read; small so softmax and exp stay tame.
      values[i] = 0.5f + 0.4f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(p));
    }
    args.push_back(MakeFloatTensor(shape, values));
  }
  return args;
}

std::vector<float> BuildAndRunMain(const IRModule& m, const std::string& pipeline,
                                   std::vector<Value> args) {
  BuildOptions options;
  options.pipeline = pipeline;
  auto exec = Build(m, options);
  EXPECT_TRUE(exec.ok()) << pipeline << ": " << exec.status();
  if (!exec.ok()) return {};
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  EXPECT_TRUE(vm.ok()) << vm.status();
  if (!vm.ok()) return {};
  auto out = (*vm)->Invoke("main", ArgSpan(args.data(), args.size()));
  EXPECT_TRUE(out.ok()) << pipeline << ": " << out.status();
  if (!out.ok() || out->AsRef<TensorObj>() == nullptr) return {};
  return ReadFloats(Tensor(out->AsRef<TensorObj>()));
}

TEST(ExamplesEndToEndTest, DefaultPipelineMatchesZeroPipeline) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(RepoRoot() + "examples")) {
    if (entry.path().extension() != ".rx") continue;
    SCOPED_TRACE(entry.path().string());
    auto m = ParseModuleFile(entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status();
    std::vector<Value> args = InputsFor(*m);
    std::vector<float> zero = BuildAndRunMain(*m, "zero", args);
    std::vector<float> fused = BuildAndRunMain(*m, "default", args);
    ASSERT_FALSE(zero.empty());
    ASSERT_EQ(zero.size(), fused.size());
    for (size_t i = 0; i < zero.size(); ++i) {
      EXPECT_NEAR(fused[i], zero[i], 1e-3f * (1.0f + std::fabs(zero[i]))) << "element " << i;
    }
    ++count;
  }
  EXPECT_GE(count, 1);
}

}  // namespace
}  // namespace tether::compiler
