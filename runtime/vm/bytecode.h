// The VM instruction set: four opcodes (Call, Ret, Goto, If) over 64-bit words,
// with the reference's argument encoding — the top 8 bits of an argument word
// are its kind (register, immediate, constant index, function index) and the
// low 56 bits a sign-extended value.
#ifndef TETHER_RUNTIME_VM_BYTECODE_H_
#define TETHER_RUNTIME_VM_BYTECODE_H_

#include <cstdint>
#include <string>

namespace tether::vm {

using ExecWord = int64_t;
using RegName = int64_t;
using Index = int64_t;

enum class Opcode : ExecWord { kCall = 1, kRet = 2, kGoto = 3, kIf = 4 };

// Words each instruction occupies: Call is 4 + num_args, the others fixed.
inline constexpr int64_t kCallHeaderWords = 4;  // opcode, dst, func_idx, num_args
inline constexpr int64_t kRetWords = 2;         // opcode, result
inline constexpr int64_t kGotoWords = 2;        // opcode, pc_offset
inline constexpr int64_t kIfWords = 3;          // opcode, cond, false_offset

// Registers at or above this are special.
inline constexpr RegName kBeginSpecialReg = int64_t{1} << 54;
// Reads as None; as a destination, discards the result.
inline constexpr RegName kVoidRegister = kBeginSpecialReg;
// Reads as the VM context pointer (what builtins taking `%vm` receive).
inline constexpr RegName kVMRegister = kBeginSpecialReg + 1;

enum class ArgKind : int { kRegister = 0, kImmediate = 1, kConstIdx = 2, kFuncIdx = 3 };

// One encoded argument word.
class Arg {
 public:
  static constexpr int kKindBits = 8;
  static constexpr int kValueBits = 64 - kKindBits;
  static constexpr int64_t kValueMaxLimit = (int64_t{1} << (kValueBits - 1)) - 1;

  constexpr Arg() : word_(0) {}
  constexpr explicit Arg(ExecWord word) : word_(word) {}
  // `value` must be within +/- kValueMaxLimit (the builder checks).
  static constexpr Arg Make(ArgKind kind, int64_t value) {
    uint64_t bits = (static_cast<uint64_t>(kind) << kValueBits) |
                    (static_cast<uint64_t>(value) & ((uint64_t{1} << kValueBits) - 1));
    return Arg(static_cast<ExecWord>(bits));
  }
  static constexpr Arg Register(RegName reg) { return Make(ArgKind::kRegister, reg); }
  static constexpr Arg Immediate(int64_t v) { return Make(ArgKind::kImmediate, v); }
  static constexpr Arg ConstIdx(Index i) { return Make(ArgKind::kConstIdx, i); }
  static constexpr Arg FuncIdx(Index i) { return Make(ArgKind::kFuncIdx, i); }

  // The raw kind bits; may be an invalid kind in a corrupt file.
  constexpr int raw_kind() const {
    return static_cast<int>(static_cast<uint64_t>(word_) >> kValueBits);
  }
  constexpr ArgKind kind() const { return static_cast<ArgKind>(raw_kind()); }
  // The value, sign-extended from 56 bits.
  constexpr int64_t value() const {
    return static_cast<int64_t>(static_cast<uint64_t>(word_) << kKindBits) >> kKindBits;
  }
  constexpr ExecWord word() const { return word_; }

  friend constexpr bool operator==(Arg a, Arg b) { return a.word_ == b.word_; }

 private:
  ExecWord word_;
};

// Whether `reg` is a valid register of a frame with `register_file_size` slots:
// an ordinary register in range, or one of the two special registers.
constexpr bool IsValidRegister(RegName reg, int64_t register_file_size) {
  return (reg >= 0 && reg < register_file_size) || reg == kVoidRegister || reg == kVMRegister;
}

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_BYTECODE_H_
