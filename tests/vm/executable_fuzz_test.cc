// Robustness of the executable loader and validator against corrupt input:
// every truncation, random byte-level mutations (with and without a fixed-up
// checksum, so the parser and validator behind the checksum are exercised),
// and structured mutations of the bytecode and function table. A mutated file
// must either fail with a clean status or load into an executable that honours
// every guarantee the interpreter relies on. Seeds are fixed: failures
// reproduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/vm/executable.h"
#include "tests/vm/executable_test_util.h"

namespace tether::vm {
namespace {

using testing::BuildRichExecutable;
using testing::FindSection;
using testing::ReadLe;
using testing::WriteLe;

// Checks, independently of Validate(), what the interpreter assumes of a
// loaded executable. Returns a description of the first violation, or "".
std::string CheckInterpreterGuarantees(const Executable& e) {
  const int64_t num_functions = static_cast<int64_t>(e.functions.size());
  const int64_t num_constants = static_cast<int64_t>(e.constants.size());
  const int64_t words = static_cast<int64_t>(e.instr_data.size());
  for (int64_t i = 0; i < e.num_instructions(); ++i) {
    if (e.instr_offset[i] < 0 || e.instr_offset[i] >= words)
      return "instruction offset out of data";
  }
  for (const FunctionInfo& f : e.functions) {
    if (e.function_map.at(f.name) < 0 || e.function_map.at(f.name) >= num_functions) {
      return "function map out of range";
    }
    if (f.kind != FunctionKind::kVMFunc) continue;
    if (f.start_instr < 0 || f.start_instr >= f.end_instr || f.end_instr > e.num_instructions()) {
      return "bad code range";
    }
    if (f.register_file_size < f.num_args || f.register_file_size > kMaxRegisterFileSize) {
      return "bad register file";
    }
    auto reg_ok = [&](RegName r) { return IsValidRegister(r, f.register_file_size); };
    auto in_function = [&](int64_t pc) { return pc >= f.start_instr && pc < f.end_instr; };
    for (int64_t pc = f.start_instr; pc < f.end_instr; ++pc) {
      const int64_t off = e.instr_offset[pc];
      const ExecWord op = e.instr_data[off];
      if (op < 1 || op > 4) return "bad opcode";
      if (op == 1 && off + 4 > words) return "call header past data";
      const Instruction instr = e.GetInstruction(pc);
      switch (instr.op) {
        case Opcode::kCall: {
          if (instr.num_args < 0 || off + 4 + instr.num_args > words) return "call args past data";
          if (instr.dst != kVoidRegister && !(instr.dst >= 0 && instr.dst < f.register_file_size)) {
            return "bad dst";
          }
          if (instr.func_idx < 0 || instr.func_idx >= num_functions) return "bad func_idx";
          const FunctionInfo& callee = e.functions[instr.func_idx];
          if (callee.kind == FunctionKind::kVMFunc &&
              (instr.num_args != callee.num_args || callee.num_args > callee.register_file_size)) {
            return "arity mismatch";
          }
          for (int64_t a = 0; a < instr.num_args; ++a) {
            Arg arg = instr.arg(a);
            switch (arg.raw_kind()) {
              case 0:
                if (!reg_ok(arg.value())) return "bad arg register";
                break;
              case 1:
                break;
              case 2:
                if (arg.value() < 0 || arg.value() >= num_constants) return "bad const idx";
                break;
              case 3:
                if (arg.value() < 0 || arg.value() >= num_functions) return "bad func arg";
                break;
              default:
                return "bad arg kind";
            }
          }
          if (!in_function(pc + 1)) return "call falls off the end";
          break;
        }
        case Opcode::kRet:
          if (off + 2 > words || !reg_ok(instr.result)) return "bad ret";
          break;
        case Opcode::kGoto:
          if (off + 2 > words || instr.pc_offset == 0) return "bad goto";
          if (instr.pc_offset > 0 ? pc > std::numeric_limits<int64_t>::max() - instr.pc_offset
                                  : pc < std::numeric_limits<int64_t>::min() - instr.pc_offset) {
            return "goto overflows";
          }
          if (!in_function(pc + instr.pc_offset)) return "goto leaves function";
          break;
        case Opcode::kIf:
          if (off + 3 > words || !reg_ok(instr.cond) || instr.false_offset <= 1) return "bad if";
          if (instr.false_offset > std::numeric_limits<int64_t>::max() - pc) return "if overflows";
          if (!in_function(pc + 1) || !in_function(pc + instr.false_offset)) {
            return "if leaves function";
          }
          break;
      }
    }
  }
  for (const Value& c : e.constants) {
    if (c.is_tensor() && static_cast<const TensorObj*>(c.object())->device().type != kDLCPU) {
      return "tensor constant not on cpu";
    }
  }
  return "";
}

// What a successful load must give: a valid executable honouring the
// guarantees, whose views work and which round-trips.
void CheckLoaded(const Executable& e, const std::string& context) {
  ASSERT_TRUE(e.Validate().ok()) << context;
  ASSERT_EQ(CheckInterpreterGuarantees(e), "") << context;
  const std::string text = e.AsText();
  (void)e.Stats();
  absl::StatusOr<Ref<Executable>> again = Executable::LoadFromBytes(e.SaveToBytes());
  ASSERT_TRUE(again.ok()) << context << ": " << again.status();
  ASSERT_EQ((*again)->AsText(), text) << context;
}

const int64_t kInterestingWords[] = {0,
                                     1,
                                     2,
                                     3,
                                     4,
                                     5,
                                     7,
                                     8,
                                     -1,
                                     -2,
                                     0x7F,
                                     0x80,
                                     0xFF,
                                     0xFFFF,
                                     0x7FFFFFFF,
                                     0xFFFFFFFF,
                                     int64_t{1} << 32,
                                     kBeginSpecialReg - 1,
                                     kBeginSpecialReg,
                                     kBeginSpecialReg + 1,
                                     kBeginSpecialReg + 2,
                                     kMaxRegisterFileSize,
                                     kMaxRegisterFileSize + 1,
                                     Arg::kValueMaxLimit,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  uint64_t Uniform(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  int64_t InterestingWord() {
    constexpr size_t n = sizeof(kInterestingWords) / sizeof(kInterestingWords[0]);
    int64_t v = kInterestingWords[Uniform(n)];
    // Sometimes a small offset from it, or an encoded argument of a random kind.
    switch (Uniform(4)) {
      case 0:
        return static_cast<int64_t>(static_cast<uint64_t>(v) + Uniform(5) - 2);  // wraps
      case 1:
        return Arg::Make(static_cast<ArgKind>(Uniform(5)), static_cast<int64_t>(Uniform(10)) - 1)
            .word();
      default:
        return v;
    }
  }

  // One random byte-level edit of `b`.
  void MutateBytes(std::string& b) {
    const size_t size = b.size();
    switch (Uniform(7)) {
      case 0:  // flip a bit
        if (size) b[Uniform(size)] ^= static_cast<char>(1u << Uniform(8));
        break;
      case 1:  // overwrite a byte
        if (size) b[Uniform(size)] = static_cast<char>(Uniform(256));
        break;
      case 2: {  // write an interesting value, 1/2/4/8 bytes wide
        const int width = 1 << Uniform(4);
        if (size >= static_cast<size_t>(width)) {
          WriteLe(b, Uniform(size - width + 1), width, static_cast<uint64_t>(InterestingWord()));
        }
        break;
      }
      case 3: {  // insert random bytes
        std::string ins(1 + Uniform(16), '\0');
        for (char& c : ins) c = static_cast<char>(Uniform(256));
        b.insert(Uniform(size + 1), ins);
        break;
      }
      case 4:  // delete a range
        if (size) {
          const size_t pos = Uniform(size);
          b.erase(pos, 1 + Uniform(std::min<size_t>(32, size - pos)));
        }
        break;
      case 5:  // duplicate a range somewhere else
        if (size) {
          const size_t pos = Uniform(size);
          const std::string chunk = b.substr(pos, 1 + Uniform(std::min<size_t>(24, size - pos)));
          b.insert(Uniform(size + 1), chunk);
        }
        break;
      case 6:  // zero a range
        if (size) {
          const size_t pos = Uniform(size);
          const size_t n = 1 + Uniform(std::min<size_t>(16, size - pos));
          for (size_t i = 0; i < n; ++i) b[pos + i] = 0;
        }
        break;
    }
  }

 private:
  std::mt19937 rng_;
};

class ExecutableFuzzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    exec_ = BuildRichExecutable();
    ASSERT_TRUE(exec_);
    bytes_ = exec_->SaveToBytes();
    ASSERT_TRUE(Executable::LoadFromBytes(bytes_).ok());
  }
  Ref<Executable> exec_;
  std::string bytes_;
};

TEST_F(ExecutableFuzzTest, EveryTruncationFails) {
  for (size_t len = 0; len < bytes_.size(); ++len) {
    const std::string cut = bytes_.substr(0, len);
    EXPECT_FALSE(Executable::LoadFromBytes(cut).ok()) << "length " << len;
    // Also with a checksum that matches the truncated file.
    EXPECT_FALSE(Executable::LoadFromBytes(RecomputeExecutableChecksum(cut)).ok())
        << "length " << len << " (checksum fixed)";
  }
}

TEST_F(ExecutableFuzzTest, RandomMutationsWithoutChecksumFixFailCleanly) {
  Mutator m(12345);
  int unchanged = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    std::string b = bytes_;
    const int edits = 1 + static_cast<int>(m.Uniform(3));
    for (int i = 0; i < edits; ++i) m.MutateBytes(b);
    if (b == bytes_) {
      ++unchanged;  // e.g. a zero written over a zero
      continue;
    }
    absl::StatusOr<Ref<Executable>> exec = Executable::LoadFromBytes(b);
    // CRC-32C catches every change of up to 3 bits and every burst of up to
    // 32; with a fixed seed the rest (2^-32 odds each) cannot flake either.
    EXPECT_FALSE(exec.ok()) << "iteration " << iter;
    EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument) << exec.status();
  }
  EXPECT_LT(unchanged, 1000);
}

TEST_F(ExecutableFuzzTest, RandomMutationsBehindTheChecksumFailCleanlyOrLoadValid) {
  Mutator m(67890);
  constexpr int kIterations = 30000;
  int loaded = 0;
  for (int iter = 0; iter < kIterations; ++iter) {
    std::string b = bytes_.substr(0, bytes_.size() - 4);
    const int edits = 1 + static_cast<int>(m.Uniform(3));
    for (int i = 0; i < edits; ++i) m.MutateBytes(b);
    b = RecomputeExecutableChecksum(b + std::string(4, '\0'));
    absl::StatusOr<Ref<Executable>> exec = Executable::LoadFromBytes(b);
    if (exec.ok()) {
      ++loaded;
      CheckLoaded(**exec, absl::StrCat("iteration ", iter));
      if (::testing::Test::HasFatalFailure()) return;
    } else {
      EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument) << exec.status();
      EXPECT_EQ(exec.status().message().find("checksum"), absl::string_view::npos)
          << "iteration " << iter << ": " << exec.status();
    }
  }
  // Some mutations (in strings, tensor data, immediates) leave a valid file.
  EXPECT_GT(loaded, 0);
  std::cout << "mutations behind the checksum that still loaded: " << loaded << " of "
            << kIterations << "\n";
}

// Word-level edits of the bytecode section (offsets and instruction words)
// with the checksum fixed, so most files reach Validate().
TEST_F(ExecutableFuzzTest, BytecodeWordMutationsFailCleanlyOrLoadValid) {
  const testing::RawSection code = FindSection(bytes_, 3);
  const uint64_t num_instr = ReadLe(bytes_, code.offset, 8);
  const uint64_t offsets_at = code.offset + 8;
  const uint64_t words_at = offsets_at + 8 * num_instr + 8;
  const uint64_t num_words = ReadLe(bytes_, words_at - 8, 8);
  const testing::RawSection functions = FindSection(bytes_, 1);
  Mutator m(424242);
  constexpr int kIterations = 20000;
  int loaded = 0;
  for (int iter = 0; iter < kIterations; ++iter) {
    std::string b = bytes_;
    const int edits = 1 + static_cast<int>(m.Uniform(3));
    for (int i = 0; i < edits; ++i) {
      switch (m.Uniform(4)) {
        case 0:
        case 1:  // an instruction word
          WriteLe(b, words_at + 8 * m.Uniform(num_words), 8,
                  static_cast<uint64_t>(m.InterestingWord()));
          break;
        case 2:  // an instruction offset
          WriteLe(b, offsets_at + 8 * m.Uniform(num_instr), 8,
                  static_cast<uint64_t>(m.InterestingWord()));
          break;
        case 3: {  // an 8-byte field somewhere in the function table
          const uint64_t pos = functions.offset + m.Uniform(functions.size - 7);
          WriteLe(b, pos, 8, static_cast<uint64_t>(m.InterestingWord()));
          break;
        }
      }
    }
    b = RecomputeExecutableChecksum(b);
    absl::StatusOr<Ref<Executable>> exec = Executable::LoadFromBytes(b);
    if (exec.ok()) {
      ++loaded;
      CheckLoaded(**exec, absl::StrCat("iteration ", iter));
      if (::testing::Test::HasFatalFailure()) return;
    } else {
      EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument) << exec.status();
    }
  }
  EXPECT_GT(loaded, 0);
  std::cout << "bytecode mutations that still loaded: " << loaded << " of " << kIterations << "\n";
}

// The same directly on an in-memory executable: Validate() is the gate for
// executables that never went through a file (built by codegen).
TEST_F(ExecutableFuzzTest, ValidateGuardsInMemoryMutations) {
  Mutator m(777);
  int accepted = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    auto e = MakeRef<Executable>();
    e->functions = exec_->functions;
    e->function_map = exec_->function_map;
    e->constants = exec_->constants;
    e->instr_offset = exec_->instr_offset;
    e->instr_data = exec_->instr_data;
    const int edits = 1 + static_cast<int>(m.Uniform(3));
    for (int i = 0; i < edits; ++i) {
      const int64_t v = m.InterestingWord();
      switch (m.Uniform(8)) {
        case 0:
        case 1:
        case 2:
          e->instr_data[m.Uniform(e->instr_data.size())] = v;
          break;
        case 3:
          e->instr_offset[m.Uniform(e->instr_offset.size())] = v;
          break;
        case 4: {
          FunctionInfo& f = e->functions[m.Uniform(e->functions.size())];
          int64_t* fields[] = {&f.start_instr, &f.end_instr, &f.num_args, &f.register_file_size};
          *fields[m.Uniform(4)] = v;
          break;
        }
        case 5:
          e->functions[m.Uniform(e->functions.size())].kind = static_cast<FunctionKind>(v % 5);
          break;
        case 6:
          if (!e->instr_data.empty()) e->instr_data.pop_back();
          break;
        case 7:
          e->instr_data.push_back(v);
          break;
      }
    }
    if (e->Validate().ok()) {
      ++accepted;
      ASSERT_EQ(CheckInterpreterGuarantees(*e), "") << "iteration " << iter;
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace tether::vm
