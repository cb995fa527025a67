// LocalVirtualMachine's compiled functions (exec_mode="compiled";
// compiled_function.h): finding their code in the kernel libraries, running
// it in a frame, and the services it calls. The services do what the
// interpreter does for a Call, an If and a Ret (the same calls, the same
// instruments, profiler and interrupts, the same messages), but they cannot
// lean on the verifier: the code passes indices the bytecode verifier never
// saw, so each is checked: the call sites once, when the VM loads the
// function (as the verifier checks bytecode), registers on each access.
#include <new>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/kernel/kernel_library.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/vm/compiled_function.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {

// One activation of a compiled function: what its services act on. The
// frame's registers and the function's sites are read once, at the start:
// they do not move while the function runs.
struct LocalVirtualMachine::CompiledActivation {
  LocalVirtualMachine* vm = nullptr;
  Frame* frame = nullptr;
  Value* registers = nullptr;
  uint64_t num_registers = 0;
  const DecodedInstr* sites = nullptr;
  uint64_t num_sites = 0;
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
};

namespace {

// The call sites of compiled function `f` from its table (compiled_function.h),
// each checked as Executable::Validate checks a bytecode Call.
absl::StatusOr<std::vector<Instruction>> ReadSites(const Executable& exec, const FunctionInfo& f,
                                                   const int64_t* table) {
  auto error = [&](const auto&... what) {
    return absl::InvalidArgumentError(
        absl::StrCat("compiled function ", f.name, ": site table ", what...));
  };
  // The table's length comes first; nothing past it is read.
  const int64_t total = table[0];
  if (total < 2 || total > kMaxRegisterFileSize * 64) return error("has length ", total);
  const int64_t num_sites = table[1];
  if (num_sites < 0 || num_sites > total) return error("has ", num_sites, " sites");
  std::vector<Instruction> calls;
  int64_t at = 2;
  const int64_t num_constants = static_cast<int64_t>(exec.constants.size());
  const int64_t num_functions = static_cast<int64_t>(exec.functions.size());
  for (int64_t site = 0; site < num_sites; ++site) {
    if (total - at < 3) return error("ends in site ", site);
    Instruction call;
    call.op = Opcode::kCall;
    call.func_idx = table[at];
    call.dst = table[at + 1];
    call.num_args = table[at + 2];
    call.args = reinterpret_cast<const ExecWord*>(table + at + 3);
    if (call.num_args < 0 || call.num_args > total - at - 3) {
      return error("site ", site, " has ", call.num_args, " arguments past its end");
    }
    at += 3 + call.num_args;
    if (call.dst != kVoidRegister && !(call.dst >= 0 && call.dst < f.register_file_size)) {
      return error("site ", site, ": destination register ", call.dst, " out of range");
    }
    if (call.func_idx < 0 || call.func_idx >= num_functions) {
      return error("site ", site, ": function index ", call.func_idx, " out of range");
    }
    const FunctionInfo& callee = exec.functions[call.func_idx];
    if (callee.kind != FunctionKind::kPackedFunc && callee.num_args != call.num_args) {
      return error("site ", site, ": call to ", callee.name, " with ", call.num_args,
                   " arguments, expected ", callee.num_args);
    }
    for (int64_t i = 0; i < call.num_args; ++i) {
      const Arg arg = call.arg(i);
      bool ok = false;
      switch (arg.raw_kind()) {
        case static_cast<int>(ArgKind::kRegister):
          ok = IsValidRegister(arg.value(), f.register_file_size);
          break;
        case static_cast<int>(ArgKind::kImmediate):
          ok = true;
          break;
        case static_cast<int>(ArgKind::kConstIdx):
          ok = arg.value() >= 0 && arg.value() < num_constants;
          break;
        case static_cast<int>(ArgKind::kFuncIdx):
          ok = arg.value() >= 0 && arg.value() < num_functions;
          break;
      }
      if (!ok) return error("site ", site, ": argument ", i, " is out of range");
    }
    calls.push_back(call);
  }
  if (at != total) return error("has ", total - at, " words after its last site");
  return calls;
}

}  // namespace

absl::Status LocalVirtualMachine::FindCompiledFunction(Index func_index) {
  const FunctionInfo& f = exec_->functions[func_index];
  const std::string symbol = absl::StrCat(kCompiledFunctionPrefix, f.name);
  const std::string sites = absl::StrCat(kCompiledSitesPrefix, f.name);
  for (const Ref<Module>& lib : kernel_libraries_) {
    const auto* kernels = dynamic_cast<const KernelLibraryModule*>(lib.get());
    void* code = kernels != nullptr ? kernels->FindSymbol(symbol) : nullptr;
    if (code == nullptr) continue;
    const auto* table = static_cast<const int64_t*>(kernels->FindSymbol(sites));
    if (table == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("compiled function ", f.name, " has no site table ", sites));
    }
    CompiledFunction& compiled = compiled_[func_index];
    TETHER_ASSIGN_OR_RETURN(compiled.calls, ReadSites(*exec_, f, table));
    compiled.code = reinterpret_cast<TetherVMFunctionFn>(code);
    return absl::OkStatus();
  }
  return NotFoundError("function ", f.name, " is compiled (exec_mode \"compiled\"), but its code, ",
                       symbol, ", is in none of the executable's kernel libraries");
}

TETHER_CALLS_GENERATED_CODE absl::Status LocalVirtualMachine::RunCompiled(size_t entry_depth,
                                                                          Value* result) {
  CompiledActivation activation;
  activation.vm = this;
  activation.frame = frames_.back().get();
  activation.registers = activation.frame->registers.data();
  activation.num_registers = activation.frame->registers.size();
  const CompiledFunction& compiled = compiled_[activation.frame->func_index];
  activation.sites = compiled_sites_.data() + compiled.first_site;
  activation.num_sites = compiled.calls.size();
  absl::Status status;
  if (nesting_ >= kMaxCompiledNesting) {
    status = OutOfMemoryError("vm call stack exhausted: more than ", kMaxCompiledNesting,
                              " nested calls of compiled functions");
  } else {
    ++nesting_;
    slow_calls_ = instrument_ || profiler_ != nullptr;
    const TetherVMServices services{
        TETHER_VM_FUNCTION_ABI_VERSION, 0, &activation, &CompiledCall, &CompiledCond, &CompiledRet};
    const int32_t code = compiled.code(&services);
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

int32_t LocalVirtualMachine::CompiledCall(void* ctx, int64_t site) {
  auto& a = *static_cast<CompiledActivation*>(ctx);
  LocalVirtualMachine& vm = *a.vm;
  if (ABSL_PREDICT_FALSE(vm.interrupt_ != nullptr) &&
      vm.interrupt_->load(std::memory_order_relaxed) != 0) {
    return a.Fail(WithErrorKind(
        absl::Status(static_cast<absl::StatusCode>(vm.interrupt_->load(std::memory_order_relaxed)),
                     absl::StrCat("vm stopped in ", a.name())),
        ErrorKind::kCancelled));
  }
  if (ABSL_PREDICT_FALSE(static_cast<uint64_t>(site) >= a.num_sites)) {
    return a.OutOfRange("call site ", site, " out of range (", a.num_sites, " sites)");
  }
  // As the interpreter's Call: the site was checked and decoded at load.
  const DecodedInstr& d = a.sites[site];
  if (ABSL_PREDICT_FALSE(vm.slow_calls_ || d.packed == nullptr)) return CompiledSlowCall(a, d);
  const DecodedArg* args = vm.decoded_args_.data() + d.args_begin;
  const size_t n = static_cast<size_t>(d.num_args);
  Value* slots = a.frame->call_args.Prepare(n);
  for (size_t i = 0; i < n; ++i) {
    new (slots + i) Value(args[i].reg >= 0 ? a.registers[args[i].reg] : *args[i].fixed);
  }
  // The arguments live only across the call (kill semantics).
  absl::StatusOr<Value> ret = d.packed->Call(ArgSpan(slots, n));
  for (size_t i = 0; i < n; ++i) slots[i].~Value();
  if (ABSL_PREDICT_FALSE(!ret.ok())) return a.Fail(std::move(ret).status());
  if (d.reg < kBeginSpecialReg) a.registers[d.reg] = *std::move(ret);
  return 0;
}

// Calls through the VM's CallPacked: closures and other VM functions, and
// every call while an instrument or the profiler watches.
int32_t LocalVirtualMachine::CompiledSlowCall(CompiledActivation& a, const DecodedInstr& d) {
  LocalVirtualMachine& vm = *a.vm;
  const DecodedArg* args = vm.decoded_args_.data() + d.args_begin;
  const size_t n = static_cast<size_t>(d.num_args);
  ArgBuffer& call_args = a.frame->call_args;
  Value* slots = call_args.Prepare(n);
  for (size_t i = 0; i < n; ++i) {
    new (slots + i) Value(args[i].reg >= 0 ? a.registers[args[i].reg] : *args[i].fixed);
  }
  call_args.set_size(n);
  Value out;
  absl::Status s = vm.CallPacked(vm.func_pool_[static_cast<size_t>(d.imm)], d.imm, a.frame, &out);
  call_args.clear();
  if (!s.ok()) return a.Fail(std::move(s));
  if (d.reg < kBeginSpecialReg) a.registers[d.reg] = std::move(out);
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
