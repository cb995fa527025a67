// The VM conformance suite (vm_conformance_cases.cc) on the local
// interpreter.
#include "tests/vm/vm_conformance.h"

#include "runtime/vm/local_vm.h"

namespace tether::vm {
namespace {

absl::StatusOr<std::unique_ptr<VirtualMachine>> MakeLocal(Ref<Executable> exec) {
  TETHER_ASSIGN_OR_RETURN(auto vm, LocalVirtualMachine::Create(std::move(exec), {Device::Cpu()}));
  return std::unique_ptr<VirtualMachine>(std::move(vm));
}

INSTANTIATE_TEST_SUITE_P(Local, VmConformanceTest, ::testing::Values(Backend{"local", MakeLocal}),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace tether::vm
