// The interpreter core of LocalVirtualMachine: decoding the bytecode once,
// the heap frame stack, the run loop and packed calls. Creation and the public
// API live in local_vm.cc.
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/threading/thread_pool.h"
#include "runtime/vm/closure.h"
#include "runtime/vm/local_vm.h"
#include "runtime/vm/profile_recorder.h"

namespace tether::vm {

LocalVirtualMachine::Frame* LocalVirtualMachine::PushFrame(Index func_index) {
  std::unique_ptr<Frame> frame;
  if (!free_frames_.empty()) {
    frame = std::move(free_frames_.back());
    free_frames_.pop_back();
  } else {
    frame = std::make_unique<Frame>();
  }
  frame->func_index = func_index;
  frame->registers.resize(static_cast<size_t>(exec_->functions[func_index].register_file_size));
  frames_.push_back(std::move(frame));
  return frames_.back().get();
}

void LocalVirtualMachine::PopFrame() {
  std::unique_ptr<Frame> frame = std::move(frames_.back());
  frames_.pop_back();
  // Drop every value now (kill semantics), keep the capacity for reuse.
  frame->registers.clear();
  free_frames_.push_back(std::move(frame));
}

absl::Status LocalVirtualMachine::CheckArity(Index func_index, size_t num_args) const {
  const FunctionInfo& info = exec_->functions[func_index];
  if (static_cast<int64_t>(num_args) == info.num_args) return absl::OkStatus();
  std::string names = info.param_names.empty()
                          ? ""
                          : absl::StrCat(" (", absl::StrJoin(info.param_names, ", "), ")");
  return ValueError("function ", info.name, " expects ", info.num_args, " argument",
                    info.num_args == 1 ? "" : "s", names, ", got ", num_args);
}

absl::StatusOr<Value> LocalVirtualMachine::RunFunction(Index func_index, ArgSpan args) {
  ScopedThreadLimit thread_limit(num_threads_);
  TETHER_RETURN_IF_ERROR(CheckArity(func_index, args.size()));
  if (frames_.size() >= kMaxFrames) {
    return OutOfMemoryError("vm call stack exhausted: more than ", kMaxFrames, " frames");
  }
  size_t entry_depth = frames_.size();
  Frame* frame = PushFrame(func_index);
  for (size_t i = 0; i < args.size(); ++i) frame->registers[i] = args[i];
  frame->return_pc = -1;
  Value result;
  absl::Status status = compiled_[func_index].code != nullptr ? RunCompiled(entry_depth, &result)
                                                              : RunLoop(entry_depth, &result);
  if (!status.ok()) return status;
  return result;
}

absl::Status LocalVirtualMachine::Decode() {
  const Executable& exec = *exec_;
  size_t num_instrs = static_cast<size_t>(exec.num_instructions());
  // Count the immediates first: their Values must not move once pointed to.
  size_t num_args_total = 0, num_immediates = 0;
  auto count = [&](const Instruction& instr) {
    num_args_total += static_cast<size_t>(instr.num_args);
    for (int64_t i = 0; i < instr.num_args; ++i) {
      num_immediates += instr.arg(i).kind() == ArgKind::kImmediate;
    }
  };
  size_t num_sites = 0;
  for (size_t pc = 0; pc < num_instrs; ++pc) {
    Instruction instr = exec.GetInstruction(static_cast<Index>(pc));
    if (instr.op == Opcode::kCall) count(instr);
  }
  for (const CompiledFunction& f : compiled_) {
    for (const Instruction& call : f.calls) count(call);
    num_sites += f.calls.size();
  }
  immediates_.reserve(num_immediates);
  decoded_args_.reserve(num_args_total);
  program_.resize(num_instrs);
  // %void stays None, as constructed; %vm is this VM. (Swapped in rather
  // than assigned: at -O3 GCC 12 cannot see that an assigned-over None holds
  // no object and fails the build with -Wnonnull.)
  Value vm_pointer = Value::OpaquePtr(this);
  special_values_[1].swap(vm_pointer);
  auto decode_arg = [&](Arg arg) -> DecodedArg {
    switch (arg.kind()) {
      case ArgKind::kRegister:
        if (arg.value() == kVoidRegister) return {-1, &special_values_[0]};
        if (arg.value() == kVMRegister) return {-1, &special_values_[1]};
        return {arg.value(), nullptr};
      case ArgKind::kImmediate:
        immediates_.push_back(Value(arg.value()));
        return {-1, &immediates_.back()};
      case ArgKind::kConstIdx:
        return {-1, &constants_[static_cast<size_t>(arg.value())]};
      case ArgKind::kFuncIdx:
        return {-1, &func_pool_[static_cast<size_t>(arg.value())]};
    }
    return {-1, &special_values_[0]};
  };
  auto decode_call = [&](const Instruction& instr, DecodedInstr* d) {
    d->op = Opcode::kCall;
    d->reg = instr.dst;
    d->imm = instr.func_idx;
    d->num_args = instr.num_args;
    d->args_begin = decoded_args_.size();
    const Value& callee = func_pool_[static_cast<size_t>(d->imm)];
    if (callee.is_function()) d->packed = static_cast<const FunctionObj*>(callee.object());
    for (int64_t i = 0; i < d->num_args; ++i) decoded_args_.push_back(decode_arg(instr.arg(i)));
  };
  // Executable::GetInstruction is the one reader of the word layout; Validate()
  // already guaranteed every index and offset used here (FindCompiledFunction
  // the same for the compiled functions' call sites).
  for (size_t pc = 0; pc < num_instrs; ++pc) {
    Instruction instr = exec.GetInstruction(static_cast<Index>(pc));
    DecodedInstr& d = program_[pc];
    d.op = instr.op;
    switch (instr.op) {
      case Opcode::kCall:
        decode_call(instr, &d);
        break;
      case Opcode::kRet:
        d.reg = instr.result;
        break;
      case Opcode::kGoto:
        d.imm = instr.pc_offset;
        break;
      case Opcode::kIf:
        d.reg = instr.cond;
        d.imm = instr.false_offset;
        break;
      default:
        return absl::InternalError(absl::StrCat("invalid opcode at pc ", pc));
    }
  }
  compiled_sites_.resize(num_sites);
  size_t site = 0;
  for (CompiledFunction& f : compiled_) {
    f.first_site = site;
    for (const Instruction& call : f.calls) decode_call(call, &compiled_sites_[site++]);
  }
  return absl::OkStatus();
}

absl::Status LocalVirtualMachine::RunLoop(size_t entry_depth, Value* result) {
  ++nesting_;
  const Executable& exec = *exec_;
  const DecodedInstr* program = program_.data();
  const DecodedArg* decoded_args = decoded_args_.data();
  Frame* frame = frames_.back().get();
  Index pc = exec.functions[frame->func_index].start_instr;
  absl::Status status;
  slow_calls_ = instrument_ || profiler_ != nullptr;

  // A register or special register, by value.
  auto read = [&](RegName reg) -> Value {
    if (reg < kBeginSpecialReg) return frame->registers[static_cast<size_t>(reg)];
    return special_values_[reg == kVMRegister ? 1 : 0];
  };
  auto arg_value = [&](const DecodedArg& a) -> const Value& {
    return a.reg >= 0 ? frame->registers[static_cast<size_t>(a.reg)] : *a.fixed;
  };

  while (true) {
    if (interrupt_ != nullptr) {
      int code = interrupt_->load(std::memory_order_relaxed);
      if (code != 0) {
        status = WithErrorKind(
            absl::Status(static_cast<absl::StatusCode>(code),
                         absl::StrCat("vm stopped in ", exec.functions[frame->func_index].name,
                                      " at pc ", pc)),
            ErrorKind::kCancelled);
        break;
      }
    }
    const DecodedInstr& instr = program[pc];
    switch (instr.op) {
      case Opcode::kCall: {
        const DecodedArg* args = decoded_args + instr.args_begin;
        ArgBuffer& call_args = frame->call_args;
        if (!slow_calls_) {
          if (instr.packed != nullptr) {
            // The hot path: a packed function, called through its object without
            // touching its reference count.
            // The buffer's size stays 0: the arguments live only across this call.
            size_t n = static_cast<size_t>(instr.num_args);
            Value* slots = call_args.Prepare(n);
            for (size_t i = 0; i < n; ++i) new (slots + i) Value(arg_value(args[i]));
            absl::StatusOr<Value> ret = instr.packed->Call(ArgSpan(slots, n));
            // Release the arguments now: a register killed later must free its value.
            for (size_t i = 0; i < n; ++i) slots[i].~Value();
            if (!ret.ok()) {
              status = std::move(ret).status();
              break;
            }
            if (instr.reg < kBeginSpecialReg)
              frame->registers[static_cast<size_t>(instr.reg)] = *std::move(ret);
            ++pc;
            continue;
          }
          const FunctionInfo& callee_info = exec.functions[static_cast<size_t>(instr.imm)];
          if (callee_info.kind == FunctionKind::kVMFunc) {
            // Bytecode to bytecode: a new frame on the heap stack, no native recursion.
            status = CheckArity(instr.imm, static_cast<size_t>(instr.num_args));
            if (!status.ok()) break;
            if (frames_.size() >= kMaxFrames) {
              status =
                  OutOfMemoryError("vm call stack exhausted: more than ", kMaxFrames, " frames");
              break;
            }
            Frame* next = PushFrame(instr.imm);
            for (int64_t i = 0; i < instr.num_args; ++i)
              next->registers[static_cast<size_t>(i)] = arg_value(args[i]);
            next->return_pc = pc + 1;
            next->caller_dst = instr.reg;
            frame = next;
            pc = callee_info.start_instr;
            continue;
          }
        }
        const Value& callee = func_pool_[static_cast<size_t>(instr.imm)];
        Value* slots = call_args.Prepare(static_cast<size_t>(instr.num_args));
        for (int64_t i = 0; i < instr.num_args; ++i) new (slots + i) Value(arg_value(args[i]));
        call_args.set_size(static_cast<size_t>(instr.num_args));
        Value ret;
        status = CallPacked(callee, instr.imm, frame, &ret);
        call_args.clear();
        if (!status.ok()) break;
        if (instr.reg < kBeginSpecialReg)
          frame->registers[static_cast<size_t>(instr.reg)] = std::move(ret);
        ++pc;
        continue;
      }
      case Opcode::kRet: {
        Value ret = read(instr.reg);
        if (frames_.size() - 1 == entry_depth) {
          *result = std::move(ret);
          PopFrame();
          --nesting_;
          return absl::OkStatus();
        }
        RegName caller_dst = frame->caller_dst;
        Index return_pc = frame->return_pc;
        PopFrame();
        frame = frames_.back().get();
        if (caller_dst < kBeginSpecialReg)
          frame->registers[static_cast<size_t>(caller_dst)] = std::move(ret);
        pc = return_pc;
        continue;
      }
      case Opcode::kGoto:
        pc += instr.imm;
        continue;
      case Opcode::kIf: {
        Value cond = read(instr.reg);
        int64_t c;
        if (cond.is_int()) {
          c = cond.int_value();
        } else if (cond.is_bool()) {
          c = cond.bool_value();
        } else {
          status = TypeError("if condition in ", exec.functions[frame->func_index].name, " at pc ",
                             pc, " must be an int or bool, got ", cond.TypeName());
          break;
        }
        pc += c != 0 ? 1 : instr.imm;
        continue;
      }
    }
    break;
  }
  // Error: drop every frame this activation pushed, so the VM stays usable.
  while (frames_.size() > entry_depth) PopFrame();
  --nesting_;
  return status;
}

absl::Status LocalVirtualMachine::CallPacked(const Value& callee, Index func_index, Frame* frame,
                                             Value* result) {
  ArgSpan args = frame->call_args.span();
  const std::string& symbol = exec_->functions[static_cast<size_t>(func_index)].name;
  if (instrument_) {
    std::vector<Value> iargs = {callee, Value(symbol), Value(true), Value()};
    iargs.insert(iargs.end(), args.begin(), args.end());
    TETHER_ASSIGN_OR_RETURN(Value action, instrument_(iargs));
    if (action.is_int() &&
        action.int_value() == static_cast<int64_t>(InstrumentReturnKind::kSkipRun)) {
      *result = Value();
      return absl::OkStatus();
    }
  }
  if (profiler_ != nullptr && callee.is_function()) {
    Device device = devices_[0];
    for (const Value& a : args) {
      if (a.is_tensor()) device = a.AsRef<TensorObj>()->device();
    }
    TETHER_ASSIGN_OR_RETURN(DeviceTimer * timer, profiler_->TimerFor(device));
    const auto began = std::chrono::steady_clock::now();
    TETHER_RETURN_IF_ERROR(timer->Start());
    absl::StatusOr<Value> r = CallValue(callee, args);
    TETHER_RETURN_IF_ERROR(timer->Stop());
    TETHER_ASSIGN_OR_RETURN(int64_t ns, timer->ElapsedNanos());
    if (!r.ok()) return r.status();
    *result = *std::move(r);
    profiler_->rows.push_back(
        {symbol, static_cast<double>(ns) / 1e3, device, ArgumentShapes(args),
         std::chrono::duration<double, std::micro>(began - profiler_->origin).count()});
  } else {
    TETHER_ASSIGN_OR_RETURN(*result, CallValue(callee, args));
  }
  if (instrument_) {
    std::vector<Value> iargs = {callee, Value(symbol), Value(false), *result};
    iargs.insert(iargs.end(), args.begin(), args.end());
    TETHER_RETURN_IF_ERROR(instrument_(iargs).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> LocalVirtualMachine::CallValue(const Value& callee, ArgSpan args) {
  ScopedThreadLimit thread_limit(num_threads_);
  if (callee.is_function()) return static_cast<const FunctionObj*>(callee.object())->Call(args);
  if (!callee.is_closure()) {
    return TypeError("cannot call a value of type ", callee.TypeName(),
                     "; expected a function or closure");
  }
  const ClosureObj& closure = *static_cast<const ClosureObj*>(callee.object());
  if (closure.func_index >= 0 && static_cast<size_t>(closure.func_index) >= func_pool_.size()) {
    return ValueError("closure ", closure.func_name, " does not belong to this VM");
  }
  std::vector<Value> full;
  ArgSpan call_args = args;
  if (!closure.bound_args.empty()) {
    full.assign(args.begin(), args.end());
    full.insert(full.end(), closure.bound_args.begin(), closure.bound_args.end());
    call_args = ArgSpan(full);
  }
  if (closure.callee.is_function()) {
    return static_cast<const FunctionObj*>(closure.callee.object())->Call(call_args);
  }
  if (closure.func_index < 0 || exec_->functions[closure.func_index].name != closure.func_name) {
    return ValueError("closure ", closure.func_name, " does not belong to this VM");
  }
  return RunFunction(closure.func_index, call_args);
}

}  // namespace tether::vm
