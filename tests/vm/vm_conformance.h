// The VM conformance suite's shared declarations: a backend is a named VM
// factory, and VmConformanceTest (its TEST_Ps live in vm_conformance_test.cc)
// is instantiated once per backend — locally in vm_conformance_test.cc, through
// a real tetherd in vm_conformance_remote_test.cc.
#ifndef TETHER_TESTS_VM_VM_CONFORMANCE_H_
#define TETHER_TESTS_VM_VM_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/executable.h"
#include "runtime/vm/virtual_machine.h"

namespace tether::vm {

using VmFactory = std::function<absl::StatusOr<std::unique_ptr<VirtualMachine>>(Ref<Executable>)>;

struct Backend {
  std::string name;
  VmFactory make;
};

// Names the backend in test listings (the default prints its bytes).
inline void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

// Thread contract: a gtest fixture, one test at a time.
class VmConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  // Registers the test functions and instruments the suite calls.
  void SetUp() override;

  std::unique_ptr<VirtualMachine> Make(ExecBuilder& b) {
    auto exec = b.Get();
    EXPECT_TRUE(exec.ok()) << exec.status();
    if (!exec.ok()) return nullptr;
    auto vm = GetParam().make(*exec);
    EXPECT_TRUE(vm.ok()) << vm.status();
    return vm.ok() ? std::move(*vm) : nullptr;
  }

  // A VM of main(x, y) = test.vm.mul(test.vm.add(x, y), y): two packed
  // calls, for the instruments and the profiler.
  std::unique_ptr<VirtualMachine> MakeAddThenMul() {
    ExecBuilder b;
    b.EmitFunction("main", 2, {"x", "y"});
    b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, 2);
    b.EmitCall("test.vm.mul", {Arg::Register(2), Arg::Register(1)}, 3);
    b.EmitRet(3);
    b.EndFunction("main");
    return Make(b);
  }

  // main(x, y) = test.vm.add(x, y)
  static void EmitAdd(ExecBuilder& b, absl::string_view name = "main") {
    b.EmitFunction(name, 2, {"x", "y"});
    b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, 2);
    b.EmitRet(2);
    b.EndFunction(name);
  }
};

}  // namespace tether::vm

#endif  // TETHER_TESTS_VM_VM_CONFORMANCE_H_
