// Executable: instruction decoding (instruction_decode.h) and the functions an
// executable serves as a Module. The verifier that makes bytecode safe to
// interpret is verifier.cc, the debug views (AsText, Stats) disassembler.cc,
// serialization executable_io.cc.
#include "runtime/vm/executable.h"

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
#include "runtime/vm/instruction_decode.h"

namespace tether::vm {

// Number of words of the instruction starting at `offset`, or an error message
// when the words do not fit in `data`.
absl::StatusOr<int64_t> InstructionWords(const std::vector<ExecWord>& data, int64_t offset) {
  const int64_t size = static_cast<int64_t>(data.size());
  if (offset < 0 || offset >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("instruction offset ", offset, " is outside the bytecode (", size, " words)"));
  }
  const int64_t available = size - offset;
  const ExecWord op = data[offset];
  switch (op) {
    case static_cast<ExecWord>(Opcode::kCall): {
      if (available < kCallHeaderWords) {
        return absl::InvalidArgumentError(absl::StrCat("call needs ", kCallHeaderWords,
                                                       " words but only ", available, " remain"));
      }
      const int64_t num_args = data[offset + 3];
      if (num_args < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("call has negative argument count ", num_args));
      }
      if (num_args > available - kCallHeaderWords) {
        return absl::InvalidArgumentError(
            absl::StrCat("call with ", num_args, " arguments runs past the end of the bytecode (",
                         available - kCallHeaderWords, " words remain)"));
      }
      return kCallHeaderWords + num_args;
    }
    case static_cast<ExecWord>(Opcode::kRet):
    case static_cast<ExecWord>(Opcode::kGoto):
    case static_cast<ExecWord>(Opcode::kIf): {
      const int64_t words = op == static_cast<ExecWord>(Opcode::kRet)    ? kRetWords
                            : op == static_cast<ExecWord>(Opcode::kGoto) ? kGotoWords
                                                                         : kIfWords;
      if (available < words) {
        return absl::InvalidArgumentError(absl::StrCat("instruction with opcode ", op, " needs ",
                                                       words, " words but only ", available,
                                                       " remain"));
      }
      return words;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("invalid opcode ", op));
  }
}

// Decodes without any check; `offset` must start a well-formed instruction.
Instruction DecodeAt(const std::vector<ExecWord>& data, int64_t offset) {
  Instruction instr;
  const ExecWord* w = data.data() + offset;
  instr.op = static_cast<Opcode>(w[0]);
  switch (instr.op) {
    case Opcode::kCall:
      instr.dst = w[1];
      instr.func_idx = w[2];
      instr.num_args = w[3];
      instr.args = w + kCallHeaderWords;
      break;
    case Opcode::kRet:
      instr.result = w[1];
      break;
    case Opcode::kGoto:
      instr.pc_offset = w[1];
      break;
    case Opcode::kIf:
      instr.cond = w[1];
      instr.false_offset = w[2];
      break;
  }
  return instr;
}

Instruction Executable::GetInstruction(Index i) const {
  return DecodeAt(instr_data, instr_offset[i]);
}

absl::StatusOr<Function> Executable::GetOwnFunction(absl::string_view name) {
  auto it = function_map.find(name);
  if (it != function_map.end() && functions[it->second].kind != FunctionKind::kPackedFunc) {
    return PreconditionError("function ", name,
                             " of the executable runs only through a vm; create a virtual "
                             "machine from the executable and call it there");
  }
  return NotFoundError("executable has no function ", name);
}

bool Executable::ImplementsOwnFunction(absl::string_view name) const {
  auto it = function_map.find(name);
  return it != function_map.end() && functions[it->second].kind != FunctionKind::kPackedFunc;
}

}  // namespace tether::vm
