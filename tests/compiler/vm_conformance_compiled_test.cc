// The VM conformance suite (tests/vm/vm_conformance_cases.cc) with every
// bytecode function compiled to native code first (exec_mode="compiled"):
// the VM API must behave as it does for the interpreter.
#include "compiler/build.h"
#include "runtime/vm/local_vm.h"
#include "tests/vm/vm_conformance.h"

namespace tether::vm {
namespace {

absl::StatusOr<std::unique_ptr<VirtualMachine>> MakeCompiled(Ref<Executable> exec) {
  // A copy: the suite may run the executable it built on another backend too.
  TETHER_ASSIGN_OR_RETURN(Ref<Executable> copy, Executable::LoadFromBytes(exec->SaveToBytes()));
  TETHER_RETURN_IF_ERROR(compiler::CompileVMFunctions(copy.get()));
  if (copy->num_instructions() != 0) return absl::InternalError("bytecode left after compiling");
  TETHER_ASSIGN_OR_RETURN(auto vm, LocalVirtualMachine::Create(std::move(copy), {Device::Cpu()}));
  return std::unique_ptr<VirtualMachine>(std::move(vm));
}

INSTANTIATE_TEST_SUITE_P(Compiled, VmConformanceTest,
                         ::testing::Values(Backend{"compiled", MakeCompiled}),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace tether::vm
