// ClosureObj: a VM function with arguments bound after the call's own
// (make_closure, save_function). The closure names its function by index in
// the executable, not by a pointer to the VM, so closures stored in a VM's
// function pool make no reference cycle.
#ifndef TETHER_RUNTIME_VM_CLOSURE_H_
#define TETHER_RUNTIME_VM_CLOSURE_H_

#include <string>
#include <vector>

#include "runtime/core/value.h"
#include "runtime/vm/bytecode.h"

namespace tether::vm {

// Thread contract: immutable; thread-safe.
class ClosureObj final : public Object {
 public:
  // `callee` is the function pool entry it calls: a Function or, for a bytecode
  // function, None with `func_index` naming it.
  ClosureObj(std::string func_name, Index func_index, Value callee, std::vector<Value> bound_args)
      : Object(TypeIndex::kClosure),
        func_name(std::move(func_name)),
        func_index(func_index),
        callee(std::move(callee)),
        bound_args(std::move(bound_args)) {}
  absl::string_view type_key() const override { return "vm.Closure"; }

  const std::string func_name;
  const Index func_index;               // index in the executable's function table, or -1
  const Value callee;                   // a Function for packed callees; None for bytecode
  const std::vector<Value> bound_args;  // appended after the call's arguments
};

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_CLOSURE_H_
