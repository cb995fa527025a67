// The shared remote test program (session_program.h).
#include "tests/testing/session_program.h"

#include "gtest/gtest.h"
#include "runtime/vm/exec_builder.h"

namespace tether::testing {

std::string SessionTestExecutable() {
  vm::ExecBuilder b;
  b.EmitFunction("main", 2, {"a", "b"});
  b.EmitCall("test.vm.add", {vm::Arg::Register(0), vm::Arg::Register(1)}, 2);
  b.EmitRet(2);
  b.EndFunction("main");
  b.EmitFunction("swap", 2, {"a", "b"});
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(1), vm::Arg::Register(0)}, 2);
  b.EmitRet(2);
  b.EndFunction("swap");
  b.EmitFunction("pair", 1, {"a"});
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(0), vm::Arg::Register(0)}, 1);
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(0), vm::Arg::Register(1)}, 2);
  b.EmitRet(2);
  b.EndFunction("pair");
  b.EmitFunction("loop", 1, {"n"});
  b.EmitCall("test.vm.equal_zero", {vm::Arg::Register(0)}, 1);
  b.EmitIf(1, 2);
  b.EmitRet(0);
  b.EmitCall("test.vm.subtract_one", {vm::Arg::Register(0)}, 0);
  b.EmitGoto(-4);
  b.EndFunction("loop");
  auto exec = b.Get();
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? (*exec)->SaveToBytes() : std::string();
}

std::string BuiltinsTestExecutable() {
  vm::ExecBuilder b;
  b.EmitFunction("swap", 2, {"a", "b"});
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(1), vm::Arg::Register(0)}, 2);
  b.EmitRet(2);
  b.EndFunction("swap");
  b.EmitFunction("spin", 1, {"a"});
  b.EmitGoto(1);
  b.EmitGoto(-1);
  b.EmitRet(0);
  b.EndFunction("spin");
  auto exec = b.Get();
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? (*exec)->SaveToBytes() : std::string();
}

}  // namespace tether::testing
