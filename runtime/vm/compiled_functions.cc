// LocalVirtualMachine's compiled functions (exec_mode="compiled";
// compiled_function.h): finding their code in the kernel libraries, running
// it in a frame, and the services it calls. The services do what the
// interpreter does for a Call, an If and a Ret (the same calls, the same
// instruments, profiler and interrupts, the same messages), but they cannot
// lean on the verifier: the code passes indices the bytecode verifier never
// saw, so each is checked here.
#include <new>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/vm/compiled_function.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {

// One activation of a compiled function: what its services act on. The
// frame's registers and the VM's pools are read once, at the start: they do
// not move while the function runs.
struct LocalVirtualMachine::CompiledActivation {
  LocalVirtualMachine* vm = nullptr;
  Frame* frame = nullptr;
  Value* registers = nullptr;
  uint64_t num_registers = 0;
  absl::Status status;
  Value result;
  bool returned = false;

  ABSL_ATTRIBUTE_NOINLINE int32_t Fail(absl::Status s) {
    status = std::move(s);
    return -1;
  }
  template <typename... Args>
  ABSL_ATTRIBUTE_NOINLINE int32_t OutOfRange(const Args&... what) {
    return Fail(absl::InternalError(absl::StrCat("compiled function ", name(), ": ", what...)));
  }
  const std::string& name() const { return vm->exec_->functions[frame->func_index].name; }
  // Register `reg` of the frame, %void or %vm; nullptr when out of range.
  const Value* Register(int64_t reg) const {
    if (static_cast<uint64_t>(reg) < num_registers) return &registers[reg];
    if (reg == kVoidRegister) return &vm->special_values_[0];
    if (reg == kVMRegister) return &vm->special_values_[1];
    return nullptr;
  }
  // Constructs argument word `word` in `slot`; false when it is out of range.
  bool Argument(int64_t word, Value* slot) const {
    const Arg arg(word);
    const Value* fixed = nullptr;
    const uint64_t index = static_cast<uint64_t>(arg.value());
    switch (arg.kind()) {
      case ArgKind::kRegister:
        fixed = Register(arg.value());
        break;
      case ArgKind::kImmediate:
        new (slot) Value(arg.value());
        return true;
      case ArgKind::kConstIdx:
        if (index < vm->constants_.size()) fixed = &vm->constants_[index];
        break;
      case ArgKind::kFuncIdx:
        if (index < vm->func_pool_.size()) fixed = &vm->func_pool_[index];
        break;
    }
    if (fixed == nullptr) return false;
    new (slot) Value(*fixed);
    return true;
  }
};

absl::Status LocalVirtualMachine::FindCompiledFunction(Index func_index) {
  const std::string& name = exec_->functions[func_index].name;
  const std::string symbol = absl::StrCat(kCompiledFunctionPrefix, name);
  for (const Ref<Module>& lib : kernel_libraries_) {
    const auto* kernels = dynamic_cast<const KernelLibraryModule*>(lib.get());
    void* code = kernels != nullptr ? kernels->FindSymbol(symbol) : nullptr;
    if (code != nullptr) {
      compiled_[func_index] = reinterpret_cast<TetherVMFunctionFn>(code);
      return absl::OkStatus();
    }
  }
  return NotFoundError("function ", name, " is compiled (exec_mode \"compiled\"), but its code, ",
                       symbol, ", is in none of the executable's kernel libraries");
}

absl::Status LocalVirtualMachine::RunCompiled(size_t entry_depth, Value* result) {
  CompiledActivation activation;
  activation.vm = this;
  activation.frame = frames_.back().get();
  activation.registers = activation.frame->registers.data();
  activation.num_registers = activation.frame->registers.size();
  absl::Status status;
  if (nesting_ >= kMaxCompiledNesting) {
    status = OutOfMemoryError("vm call stack exhausted: more than ", kMaxCompiledNesting,
                              " nested calls of compiled functions");
  } else {
    ++nesting_;
    slow_calls_ = instrument_ || profiler_ != nullptr;
    const TetherVMServices services{
        TETHER_VM_FUNCTION_ABI_VERSION, 0, &activation, &CompiledCall, &CompiledCond, &CompiledRet};
    const int32_t code = compiled_[activation.frame->func_index](&services);
    --nesting_;
    if (code != 0) {
      status = activation.status.ok()
                   ? absl::InternalError(absl::StrCat("compiled function ", activation.name(),
                                                      " failed (", code, ") without an error"))
                   : std::move(activation.status);
    } else if (!activation.returned) {
      status = absl::InternalError(
          absl::StrCat("compiled function ", activation.name(), " returned no result"));
    }
  }
  while (frames_.size() > entry_depth) PopFrame();
  if (!status.ok()) return status;
  *result = std::move(activation.result);
  return absl::OkStatus();
}

int32_t LocalVirtualMachine::CompiledCall(void* ctx, int64_t func_index, int64_t num_args,
                                          const int64_t* args, int64_t dst) {
  auto& a = *static_cast<CompiledActivation*>(ctx);
  LocalVirtualMachine& vm = *a.vm;
  if (ABSL_PREDICT_FALSE(vm.interrupt_ != nullptr) &&
      vm.interrupt_->load(std::memory_order_relaxed) != 0) {
    return a.Fail(WithErrorKind(
        absl::Status(static_cast<absl::StatusCode>(vm.interrupt_->load(std::memory_order_relaxed)),
                     absl::StrCat("vm stopped in ", a.name())),
        ErrorKind::kCancelled));
  }
  if (ABSL_PREDICT_FALSE(
          static_cast<uint64_t>(func_index) >= vm.func_pool_.size() ||
          static_cast<uint64_t>(num_args) > kMaxRegisterFileSize ||
          (num_args > 0 && args == nullptr) ||
          (dst < kBeginSpecialReg && static_cast<uint64_t>(dst) >= a.num_registers))) {
    return a.OutOfRange("call of function ", func_index, " with ", num_args,
                        " arguments into register ", dst, " is out of range");
  }
  const size_t n = static_cast<size_t>(num_args);
  ArgBuffer& call_args = a.frame->call_args;
  Value* slots = call_args.Prepare(n);
  for (size_t i = 0; i < n; ++i) {
    if (ABSL_PREDICT_FALSE(!a.Argument(args[i], slots + i))) {
      for (size_t j = 0; j < i; ++j) slots[j].~Value();
      return a.OutOfRange("argument ", i, " of a call is out of range");
    }
  }
  const Value& callee = vm.func_pool_[static_cast<size_t>(func_index)];
  if (ABSL_PREDICT_TRUE(!vm.slow_calls_ && callee.is_function())) {
    // As the interpreter's hot path: the arguments live only across the call.
    absl::StatusOr<Value> ret =
        static_cast<const FunctionObj*>(callee.object())->Call(ArgSpan(slots, n));
    for (size_t i = 0; i < n; ++i) slots[i].~Value();
    if (ABSL_PREDICT_FALSE(!ret.ok())) return a.Fail(std::move(ret).status());
    if (dst < kBeginSpecialReg) a.registers[dst] = *std::move(ret);
    return 0;
  }
  return CompiledSlowCall(a, callee, func_index, n, dst);
}

// Calls through the VM's CallPacked: closures and other VM functions, and
// every call while an instrument or the profiler watches.
int32_t LocalVirtualMachine::CompiledSlowCall(CompiledActivation& a, const Value& callee,
                                              int64_t func_index, size_t num_args, int64_t dst) {
  ArgBuffer& call_args = a.frame->call_args;
  call_args.set_size(num_args);
  Value out;
  absl::Status s = a.vm->CallPacked(callee, func_index, a.frame, &out);
  call_args.clear();
  if (!s.ok()) return a.Fail(std::move(s));
  if (dst < kBeginSpecialReg) a.registers[dst] = std::move(out);
  return 0;
}

int32_t LocalVirtualMachine::CompiledCond(void* ctx, int64_t reg, int64_t* out) {
  auto& a = *static_cast<CompiledActivation*>(ctx);
  const Value* cond = a.Register(reg);
  if (cond == nullptr || out == nullptr) {
    return a.OutOfRange("condition register ", reg, " is out of range");
  }
  if (cond->is_int()) {
    *out = cond->int_value() != 0;
  } else if (cond->is_bool()) {
    *out = cond->bool_value() ? 1 : 0;
  } else {
    return a.Fail(
        TypeError("if condition in ", a.name(), " must be an int or bool, got ", cond->TypeName()));
  }
  return 0;
}

int32_t LocalVirtualMachine::CompiledRet(void* ctx, int64_t reg) {
  auto& a = *static_cast<CompiledActivation*>(ctx);
  const Value* value = a.Register(reg);
  if (value == nullptr) return a.OutOfRange("result register ", reg, " is out of range");
  a.result = *value;
  a.returned = true;
  return 0;
}

}  // namespace tether::vm
