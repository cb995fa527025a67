// Decoding one instruction from an executable's words: shared by
// Executable::GetInstruction, the verifier (verifier.cc) and the disassembler
// (disassembler.cc). Internal to runtime/vm.
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_RUNTIME_VM_INSTRUCTION_DECODE_H_
#define TETHER_RUNTIME_VM_INSTRUCTION_DECODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/vm/bytecode.h"
#include "runtime/vm/executable.h"

namespace tether::vm {

// Number of words of the instruction starting at `offset`, or an error message
// when the words do not fit in `data`.
absl::StatusOr<int64_t> InstructionWords(const std::vector<ExecWord>& data, int64_t offset);

// The instruction at `offset`, which must be well formed (InstructionWords ok).
Instruction DecodeAt(const std::vector<ExecWord>& data, int64_t offset);

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_INSTRUCTION_DECODE_H_
