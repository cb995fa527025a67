// exec_mode="compiled" end to end: the example models built both ways give
// the same bytes out, on the local VM and through a real tetherd on
// 127.0.0.1 (one suite, both paths); the executable carries no bytecode;
// the VM API (stateful calls, the profiler, the time evaluator) behaves as
// for bytecode; what compiled mode cannot do is refused with the reason.
// The VM API scenario by scenario: vm_conformance_compiled_test.cc.
#include <cmath>
#include <cstring>

#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/vm/local_vm.h"
#include "runtime/vm/param_binding.h"
#include "tests/compiler/build_example.h"
#include "tests/compiler/vm_host.h"
#include "tests/testing/repo_root.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::RandomFloats;
using tether::testing::ReadFloats;

Ref<vm::Executable> BuildInMode(const std::string& name, const std::string& exec_mode) {
  BuildOptions options;
  options.exec_mode = exec_mode;
  return BuildExample(name, options);
}

// Random float32 inputs of main's parameter types, symbolic dims 3.
std::vector<Value> InputsFor(const vm::Executable& exec) {
  const vm::FunctionInfo& main = exec.functions[exec.function_map.at("main")];
  auto types = vm::ParseParamTypes(exec.metadata.at("param_types.main"), main.num_args);
  EXPECT_TRUE(types.ok()) << types.status();
  std::vector<Value> inputs;
  uint32_t seed = 1;
  for (const vm::ParamType& t : types.ok() ? *types : std::vector<vm::ParamType>{}) {
    std::vector<int64_t> shape;
    for (const auto& d : *t.dims) shape.push_back(d.value_or(3));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    // Positive, so a variance or a denominator among them is one.
    std::vector<float> values = RandomFloats(static_cast<size_t>(n), seed++);
    for (float& v : values) v = std::fabs(v) + 0.5f;
    inputs.push_back(MakeFloatTensor(shape, std::move(values)));
  }
  return inputs;
}

// The VMs of an executable, local or on a real tetherd.
class CompiledModeTest : public ::testing::TestWithParam<bool> {
 protected:
  vm::VirtualMachine* Load(Ref<vm::Executable> exec) { return host_.Load(std::move(exec)); }

  tether::testing::VmHost host_{GetParam()};
};

TEST_P(CompiledModeTest, ExamplesComputeTheSameInBothModes) {
  for (const char* example : {"mlp.rx", "cnn.rx", "attention.rx", "tir_matmul.rx"}) {
    SCOPED_TRACE(example);
    Ref<vm::Executable> bytecode = BuildInMode(example, "bytecode");
    Ref<vm::Executable> compiled = BuildInMode(example, "compiled");
    ASSERT_TRUE(bytecode && compiled);
    EXPECT_GT(bytecode->num_instructions(), 0);
    EXPECT_EQ(compiled->num_instructions(), 0);
    EXPECT_EQ(compiled->functions[compiled->function_map.at("main")].kind,
              vm::FunctionKind::kVMTIRFunc);
    EXPECT_EQ(compiled->metadata.at("exec_mode"), "compiled");
    const std::vector<Value> inputs = InputsFor(*bytecode);
    vm::VirtualMachine* a = Load(bytecode);
    vm::VirtualMachine* b = Load(compiled);
    ASSERT_TRUE(a && b);
    auto want = a->Invoke("main", inputs);
    auto got = b->Invoke("main", inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<float> w = ReadFloats(Tensor(want->AsRef<TensorObj>()));
    ASSERT_FALSE(w.empty());
    for (float v : w) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(ReadFloats(Tensor(got->AsRef<TensorObj>())), w);
  }
}

TEST_P(CompiledModeTest, TheVmApiBehavesAsForBytecode) {
  Ref<vm::Executable> compiled = BuildInMode("mlp.rx", "compiled");
  Ref<vm::Executable> bytecode = BuildInMode("mlp.rx", "bytecode");
  ASSERT_TRUE(compiled && bytecode);
  vm::VirtualMachine* vm = Load(compiled);
  vm::VirtualMachine* reference = Load(bytecode);
  ASSERT_TRUE(vm && reference);
  EXPECT_EQ(*vm->GetFunctionParamNames("main"), *reference->GetFunctionParamNames("main"));
  const std::vector<Value> inputs = InputsFor(*compiled);
  auto want = reference->Invoke("main", inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  // Stateful calls.
  ASSERT_TRUE(vm->SetInput("main", inputs).ok());
  ASSERT_TRUE(vm->InvokeStateful("main").ok());
  auto outputs = vm->GetOutputs("main");
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(ReadFloats(Tensor(outputs->AsRef<TensorObj>())),
            ReadFloats(Tensor(want->AsRef<TensorObj>())));
  // The profiler sees the same kernel calls, in the same order.
  auto names = [](const profiling::Report& r) {
    std::vector<std::string> out;
    for (const profiling::MetricMap& row : r.calls) {
      out.push_back(std::get<std::string>(row.at(std::string(profiling::kNameColumn))));
    }
    return out;
  };
  auto profile = vm->Profile("main", {});  // the inputs set_input set
  auto reference_profile = reference->Profile("main", inputs);
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_TRUE(reference_profile.ok()) << reference_profile.status();
  EXPECT_THAT(names(*profile), ::testing::Contains("fused_matmul_add_relu"));
  EXPECT_EQ(names(*profile), names(*reference_profile));
  // The time evaluator runs it.
  profiling::TimeEvaluatorOptions options;
  options.number = 3;
  options.repeat = 2;
  const Value stateful[] = {Value("main")};
  auto timed = vm->TimeEvaluator(vm::kInvokeStatefulName, Device::Cpu(), options, stateful);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_EQ(timed->results.size(), 2u);
  // A wrong input fails as it does in bytecode, and the VM serves on.
  vm::VirtualMachine* fresh = Load(compiled);
  ASSERT_NE(fresh, nullptr);
  std::vector<Value> wrong = inputs;
  wrong[1] = MakeFloatTensor({2, 2}, {1, 2, 3, 4});
  absl::Status bad = fresh->Invoke("main", wrong).status();
  absl::Status reference_bad = reference->Invoke("main", wrong).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_EQ(bad, reference_bad);
  EXPECT_TRUE(fresh->Invoke("main", inputs).ok());
}

INSTANTIATE_TEST_SUITE_P(LocalAndRemote, CompiledModeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Tetherd" : "LocalVm";
                         });

TEST(CompiledModeRefusalsTest, WhatCompiledModeCannotDoIsRefusedWithTheReason) {
  auto module = ParseModuleFile(tether::testing::RepoRoot() + "/examples/mlp.rx");
  ASSERT_TRUE(module.ok()) << module.status();
  BuildOptions cuda;
  cuda.exec_mode = "compiled";
  cuda.target = "cuda -arch=sm_90";
  absl::Status s = Build(*module, cuda).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("needs a CPU target"));
  BuildOptions system_lib;
  system_lib.exec_mode = "compiled";
  system_lib.system_lib = true;
  system_lib.system_lib_prefix = "mlp";
  s = Build(*module, system_lib).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("with system_lib"));
  BuildOptions unknown;
  unknown.exec_mode = "jit";
  EXPECT_EQ(Build(*module, unknown).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompiledModeRefusalsTest, AnExecutableWhoseCodeIsMissingIsRefusedWhenLoaded) {
  Ref<vm::Executable> compiled = BuildInMode("mlp.rx", "compiled");
  ASSERT_TRUE(compiled);
  // The kernels of a bytecode build, without the compiled functions.
  Ref<vm::Executable> bytecode = BuildInMode("mlp.rx", "bytecode");
  ASSERT_TRUE(bytecode);
  compiled->kernel_libraries = bytecode->kernel_libraries;
  auto vm = vm::LocalVirtualMachine::Create(compiled, {Device::Cpu()});
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(vm.status().message(), HasSubstr("__vmtir__main"));
}

// The call sites a compiled function makes come from a table in its
// library; the VM checks it as the verifier checks bytecode, so a table that
// names a register the function does not have is refused at creation.
TEST(CompiledModeRefusalsTest, ACorruptSiteTableIsRefusedWhenLoaded) {
  Ref<vm::Executable> bytecode = BuildInMode("mlp.rx", "bytecode");
  ASSERT_TRUE(bytecode);
  // The table of main as the compiler writes it: {total, sites, then each
  // site's function, destination, argument count and words}.
  const vm::FunctionInfo& main = bytecode->functions[bytecode->function_map.at("main")];
  std::vector<int64_t> table = {0, 0};
  for (vm::Index pc = main.start_instr; pc < main.end_instr; ++pc) {
    const vm::Instruction instr = bytecode->GetInstruction(pc);
    if (instr.op != vm::Opcode::kCall) continue;
    ++table[1];
    table.insert(table.end(), {instr.func_idx, instr.dst, instr.num_args});
    table.insert(table.end(), instr.args, instr.args + instr.num_args);
  }
  table[0] = static_cast<int64_t>(table.size());
  ASSERT_GT(table[1], 2);
  Ref<vm::Executable> compiled = BuildInMode("mlp.rx", "compiled");
  ASSERT_TRUE(compiled);
  std::string& library = compiled->kernel_libraries.at(0).data;
  const std::string pattern(reinterpret_cast<const char*>(table.data()),
                            table.size() * sizeof(int64_t));
  const size_t at = library.find(pattern);
  ASSERT_NE(at, std::string::npos) << "main's site table is not in the library";
  // Site 0's destination: a register main does not have.
  const int64_t bad = int64_t{1} << 40;
  std::memcpy(library.data() + at + 3 * sizeof(int64_t), &bad, sizeof(bad));
  auto vm = vm::LocalVirtualMachine::Create(compiled, {Device::Cpu()});
  EXPECT_EQ(vm.status().code(), absl::StatusCode::kInvalidArgument) << vm.status();
  EXPECT_THAT(vm.status().message(), HasSubstr("compiled function main: site table site 0"));
}

// A compiled executable is a file like any other: saved, exported as a
// shared library, loaded back, it runs.
TEST(CompiledModeRefusalsTest, ACompiledExecutableSavesExportsAndLoads) {
  Ref<vm::Executable> compiled = BuildInMode("tir_matmul.rx", "compiled");
  ASSERT_TRUE(compiled);
  auto library = compiled->ExportLibraryBytes();
  ASSERT_TRUE(library.ok()) << library.status();
  auto loaded = vm::Executable::LoadFromBytes(*library);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->SaveToBytes(), compiled->SaveToBytes());
  auto vm = vm::LocalVirtualMachine::Create(*loaded, {Device::Cpu()});
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_TRUE((*vm)->Invoke("main", InputsFor(**loaded)).ok());
}

}  // namespace
}  // namespace tether::compiler
