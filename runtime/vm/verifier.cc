// The verifier behind Executable::Validate(), the single gate between
// untrusted bytes and the interpreter: after it succeeds, every register an
// instruction reads or writes is inside its function's register file (or
// special), every constant and function index is in range, and no
// instruction can move the pc outside its function. As IREE's verifier, it
// promises that running the bytecode cannot crash, not that it is correct.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/vm/executable.h"
#include "runtime/vm/instruction_decode.h"

namespace tether::vm {
namespace {

// Checks one constant pool entry; an empty string means it is fine.
std::string CheckConstant(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kBool:
    case Value::Kind::kDataType:
      return "";
    case Value::Kind::kDevice: {
      Device d = v.device_value();
      if (!IsKnownDeviceType(static_cast<int>(d.type)) || d.id < 0) {
        return absl::StrCat("device constant has unknown type ", static_cast<int>(d.type),
                            " or negative id ", d.id);
      }
      return "";
    }
    case Value::Kind::kObject:
      break;
    default:
      return absl::StrCat("constant of type ", v.TypeName(),
                          " is not allowed in the constant pool");
  }
  switch (v.object_type()) {
    case TypeIndex::kString:
    case TypeIndex::kShape:
      return "";
    case TypeIndex::kTensor: {
      const TensorObj* t = static_cast<const TensorObj*>(v.object());
      if (t->device().type != kDLCPU) {
        return absl::StrCat("tensor constant is on ", t->device().ToString(), ", expected cpu");
      }
      if (!t->dtype().IsValidStorageType()) {
        return absl::StrCat("tensor constant has unsupported data type ", t->dtype().ToString());
      }
      if (!t->IsContiguous()) return "tensor constant is not contiguous";
      if (!CheckedNumBytes(t->shape(), t->dtype()).ok()) {
        return absl::StrCat("tensor constant has invalid shape ", ShapeToString(t->shape()));
      }
      if (t->NumBytes() > 0 && t->data() == nullptr) return "tensor constant has no data";
      return "";
    }
    default:
      return absl::StrCat("constant of type ", v.TypeName(),
                          " is not allowed in the constant pool");
  }
}

// Validation context: formats "function F, pc N: ..." messages.
class Validator {
 public:
  explicit Validator(const Executable& exec) : exec_(exec) {}

  absl::Status Run() {
    TETHER_RETURN_IF_ERROR(CheckConstants());
    TETHER_RETURN_IF_ERROR(CheckFunctionTable());
    TETHER_RETURN_IF_ERROR(CheckInstructionLayout());
    for (size_t f = 0; f < exec_.functions.size(); ++f) {
      if (exec_.functions[f].kind == FunctionKind::kVMFunc) {
        TETHER_RETURN_IF_ERROR(CheckFunctionCode(exec_.functions[f]));
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(args...));
  }
  template <typename... Args>
  absl::Status AtPc(const FunctionInfo& f, Index pc, const Args&... args) const {
    return Error("function ", f.name, ", pc ", pc, ": ", args...);
  }
  // "function F, pc N" when a bytecode function contains instruction `pc`.
  std::string Where(Index pc) const {
    for (const FunctionInfo& f : exec_.functions) {
      if (f.kind == FunctionKind::kVMFunc && pc >= f.start_instr && pc < f.end_instr) {
        return absl::StrCat("function ", f.name, ", pc ", pc);
      }
    }
    return absl::StrCat("pc ", pc, " (outside any function)");
  }

  absl::Status CheckConstants() const {
    for (size_t i = 0; i < exec_.constants.size(); ++i) {
      std::string problem = CheckConstant(exec_.constants[i]);
      if (!problem.empty()) return Error("constant ", i, ": ", problem);
    }
    return absl::OkStatus();
  }

  absl::Status CheckFunctionTable() const {
    const int64_t num_functions = static_cast<int64_t>(exec_.functions.size());
    if (static_cast<int64_t>(exec_.function_map.size()) != num_functions) {
      return Error("function map has ", exec_.function_map.size(), " entries for ", num_functions,
                   " functions");
    }
    for (int64_t i = 0; i < num_functions; ++i) {
      const FunctionInfo& f = exec_.functions[i];
      if (f.name.empty()) return Error("function ", i, " has an empty name");
      auto it = exec_.function_map.find(f.name);
      if (it == exec_.function_map.end()) {
        return Error("function ", f.name, " is missing from the function map");
      }
      if (it->second != i) {
        return Error("function ", f.name, " is at index ", i, " but the function map says ",
                     it->second, " (duplicate name?)");
      }
      const int32_t kind = static_cast<int32_t>(f.kind);
      switch (f.kind) {
        case FunctionKind::kPackedFunc:
          if (f.start_instr != 0 || f.end_instr != 0) {
            return Error("packed function ", f.name, " has a code range [", f.start_instr, ", ",
                         f.end_instr, ")");
          }
          if (f.num_args < -1) {
            return Error("packed function ", f.name, " has invalid argument count ", f.num_args);
          }
          if (f.register_file_size != 0 || !f.param_names.empty()) {
            return Error("packed function ", f.name, " has registers or parameter names");
          }
          break;
        case FunctionKind::kVMFunc:
          if (f.start_instr < 0 || f.start_instr >= f.end_instr ||
              f.end_instr > exec_.num_instructions()) {
            return Error("function ", f.name, " has invalid code range [", f.start_instr, ", ",
                         f.end_instr, ") (", exec_.num_instructions(), " instructions)");
          }
          TETHER_RETURN_IF_ERROR(CheckFrame(f, /*extra_registers=*/0));
          break;
        case FunctionKind::kVMTIRFunc:
          if (f.start_instr != 0 || f.end_instr != 0) {
            return Error("vm_tir function ", f.name, " has a code range [", f.start_instr, ", ",
                         f.end_instr, ")");
          }
          TETHER_RETURN_IF_ERROR(CheckFrame(f, /*extra_registers=*/1));
          break;
        default:
          return Error("function ", f.name, " has invalid kind ", kind);
      }
    }
    return absl::OkStatus();
  }

  // Arity, register file and parameter names of a bytecode or vm_tir function.
  absl::Status CheckFrame(const FunctionInfo& f, int64_t extra_registers) const {
    if (f.num_args < 0 || f.num_args > kMaxRegisterFileSize) {
      return Error("function ", f.name, " has invalid argument count ", f.num_args);
    }
    if (f.register_file_size < f.num_args + extra_registers ||
        f.register_file_size > kMaxRegisterFileSize) {
      return Error("function ", f.name, " has register file size ", f.register_file_size,
                   ", expected between ", f.num_args + extra_registers, " and ",
                   kMaxRegisterFileSize);
    }
    if (!f.param_names.empty() && static_cast<int64_t>(f.param_names.size()) != f.num_args) {
      return Error("function ", f.name, " has ", f.param_names.size(), " parameter names for ",
                   f.num_args, " arguments");
    }
    return absl::OkStatus();
  }

  // Offsets strictly increasing from 0, each instruction well-formed and
  // immediately followed by the next, the last ending at the end of the data.
  absl::Status CheckInstructionLayout() const {
    const int64_t n = exec_.num_instructions();
    const int64_t words = static_cast<int64_t>(exec_.instr_data.size());
    int64_t expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t offset = exec_.instr_offset[i];
      if (offset != expected) {
        return Error(Where(i), ": instruction offset ", offset, ", expected ", expected);
      }
      absl::StatusOr<int64_t> size = InstructionWords(exec_.instr_data, offset);
      if (!size.ok()) return Error(Where(i), ": ", size.status().message());
      expected = offset + *size;
    }
    if (expected != words) {
      return Error("bytecode has ", words - expected, " words after the last instruction");
    }
    return absl::OkStatus();
  }

  absl::Status CheckRegister(const FunctionInfo& f, Index pc, RegName reg,
                             absl::string_view what) const {
    if (!IsValidRegister(reg, f.register_file_size)) {
      return AtPc(f, pc, what, " register ", reg, " out of range (register file size ",
                  f.register_file_size, ")");
    }
    return absl::OkStatus();
  }

  absl::Status CheckFunctionIndex(const FunctionInfo& f, Index pc, Index idx) const {
    if (idx < 0 || idx >= static_cast<Index>(exec_.functions.size())) {
      return AtPc(f, pc, "function index ", idx, " out of range (", exec_.functions.size(),
                  " functions)");
    }
    return absl::OkStatus();
  }

  absl::Status CheckJump(const FunctionInfo& f, Index pc, int64_t offset,
                         absl::string_view what) const {
    Index target;
    if (__builtin_add_overflow(pc, offset, &target) || target < f.start_instr ||
        target >= f.end_instr) {
      return AtPc(f, pc, what, " offset ", offset, " jumps outside the function (instructions [",
                  f.start_instr, ", ", f.end_instr, "))");
    }
    return absl::OkStatus();
  }

  absl::Status CheckFunctionCode(const FunctionInfo& f) const {
    const Index num_constants = static_cast<Index>(exec_.constants.size());
    for (Index pc = f.start_instr; pc < f.end_instr; ++pc) {
      const Instruction instr = exec_.GetInstruction(pc);
      const bool last = pc + 1 == f.end_instr;
      switch (instr.op) {
        case Opcode::kCall: {
          if (instr.dst != kVoidRegister && !(instr.dst >= 0 && instr.dst < f.register_file_size)) {
            return AtPc(f, pc, "destination register ", instr.dst,
                        " out of range (register file size ", f.register_file_size, ")");
          }
          TETHER_RETURN_IF_ERROR(CheckFunctionIndex(f, pc, instr.func_idx));
          const FunctionInfo& callee = exec_.functions[instr.func_idx];
          if (callee.kind != FunctionKind::kPackedFunc && callee.num_args != instr.num_args) {
            return AtPc(f, pc, "call to ", callee.name, " with ", instr.num_args,
                        " arguments, expected ", callee.num_args);
          }
          for (int64_t a = 0; a < instr.num_args; ++a) {
            const Arg arg = instr.arg(a);
            switch (arg.raw_kind()) {
              case static_cast<int>(ArgKind::kRegister):
                TETHER_RETURN_IF_ERROR(
                    IsValidRegister(arg.value(), f.register_file_size)
                        ? absl::OkStatus()
                        : CheckRegister(f, pc, arg.value(), absl::StrCat("argument ", a)));
                break;
              case static_cast<int>(ArgKind::kImmediate):
                break;
              case static_cast<int>(ArgKind::kConstIdx):
                if (arg.value() < 0 || arg.value() >= num_constants) {
                  return AtPc(f, pc, "constant index ", arg.value(), " out of range (",
                              num_constants, " constants)");
                }
                break;
              case static_cast<int>(ArgKind::kFuncIdx):
                TETHER_RETURN_IF_ERROR(CheckFunctionIndex(f, pc, arg.value()));
                break;
              default:
                return AtPc(f, pc, "argument ", a, " has invalid kind ", arg.raw_kind());
            }
          }
          if (last)
            return AtPc(f, pc, "call is the last instruction; execution would run off the end");
          break;
        }
        case Opcode::kRet:
          TETHER_RETURN_IF_ERROR(CheckRegister(f, pc, instr.result, "result"));
          break;
        case Opcode::kGoto:
          if (instr.pc_offset == 0) return AtPc(f, pc, "goto offset is 0");
          TETHER_RETURN_IF_ERROR(CheckJump(f, pc, instr.pc_offset, "goto"));
          break;
        case Opcode::kIf:
          TETHER_RETURN_IF_ERROR(CheckRegister(f, pc, instr.cond, "condition"));
          if (instr.false_offset <= 1) {
            return AtPc(f, pc, "if false offset ", instr.false_offset, " must be greater than 1");
          }
          TETHER_RETURN_IF_ERROR(CheckJump(f, pc, instr.false_offset, "if false"));
          if (last)
            return AtPc(f, pc, "if is the last instruction; execution would run off the end");
          break;
      }
    }
    return absl::OkStatus();
  }

  const Executable& exec_;
};

}  // namespace

absl::Status Executable::Validate() const { return Validator(*this).Run(); }

}  // namespace tether::vm
