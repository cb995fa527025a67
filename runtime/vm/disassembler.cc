// The debug views of an executable: Executable::AsText (one line per
// instruction, registers and constants named) and Executable::Stats.
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

// Decodes instruction `i` with bounds checks (for views of unvalidated code).
bool TryDecode(const Executable& exec, Index i, Instruction* out) {
  if (i < 0 || i >= exec.num_instructions()) return false;
  const int64_t offset = exec.instr_offset[i];
  absl::StatusOr<int64_t> words = InstructionWords(exec.instr_data, offset);
  if (!words.ok()) return false;
  *out = DecodeAt(exec.instr_data, offset);
  return true;
}

std::string RegisterToString(RegName reg) {
  if (reg == kVoidRegister) return "%void";
  if (reg == kVMRegister) return "%vm";
  return absl::StrCat("%", reg);
}

std::string FunctionName(const Executable& exec, Index index) {
  if (index >= 0 && index < static_cast<Index>(exec.functions.size())) {
    return exec.functions[index].name;
  }
  return absl::StrCat("unknown_func_index(", index, ")");
}

std::string ArgToString(const Executable& exec, Arg arg) {
  switch (arg.raw_kind()) {
    case static_cast<int>(ArgKind::kRegister):
      return RegisterToString(arg.value());
    case static_cast<int>(ArgKind::kImmediate):
      return absl::StrCat("i", arg.value());
    case static_cast<int>(ArgKind::kConstIdx):
      return absl::StrCat("c[", arg.value(), "]");
    case static_cast<int>(ArgKind::kFuncIdx):
      return absl::StrCat("f[", FunctionName(exec, arg.value()), "]");
    default:
      return absl::StrCat("<bad arg kind ", arg.raw_kind(), ">");
  }
}

// Left-justifies `s` in a field of `width` (std::setw + std::left).
std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

absl::string_view KindName(FunctionKind kind) {
  switch (kind) {
    case FunctionKind::kPackedFunc:
      return "packed";
    case FunctionKind::kVMFunc:
      return "bytecode";
    case FunctionKind::kVMTIRFunc:
      return "vm_tir";
  }
  return "unknown";
}

// A short rendering of a constant for Stats().
std::string ConstantToString(const Value& v) {
  constexpr size_t kMaxStringChars = 32;
  if (v.is_string()) {
    const std::string& s = v.string_value();
    if (s.size() <= kMaxStringChars) return absl::StrCat("\"", s, "\"");
    return absl::StrCat("\"", s.substr(0, kMaxStringChars), "...\" (", s.size(), " bytes)");
  }
  if (v.is_shape()) {
    const auto& dims = v.AsRef<ShapeObj>()->dims;
    return absl::StrCat("shape", ShapeToString({dims.data(), dims.size()}));
  }
  if (v.is_tensor()) {
    const TensorObj* t = static_cast<const TensorObj*>(v.object());
    return absl::StrCat("tensor<", t->dtype().ToString(), ShapeToString(t->shape()), ">");
  }
  return v.ToString();
}

}  // namespace

std::string Executable::AsText() const {
  std::string out;
  for (const FunctionInfo& f : functions) {
    if (f.kind == FunctionKind::kPackedFunc) {
      absl::StrAppend(&out, "@", f.name, " packed_func;\n");
      continue;
    }
    if (f.kind == FunctionKind::kVMTIRFunc) {
      absl::StrAppend(&out, "@", f.name, " num_inputs=", f.num_args, " vm_tir_func;\n");
      continue;
    }
    if (f.kind != FunctionKind::kVMFunc) {
      absl::StrAppend(&out, "@", f.name, " kind=", static_cast<int32_t>(f.kind), ";\n");
      continue;
    }
    absl::StrAppend(&out, "@", f.name, ":\n");
    // Tolerates unvalidated code: the builder dumps text in its error messages.
    for (Index pc = std::max<Index>(f.start_instr, 0); pc < f.end_instr; ++pc) {
      Instruction instr;
      if (!TryDecode(*this, pc, &instr)) {
        absl::StrAppend(&out, "  <invalid instruction ", pc, ">\n");
        break;
      }
      switch (instr.op) {
        case Opcode::kCall: {
          std::vector<std::string> args;
          args.reserve(instr.num_args);
          for (int64_t a = 0; a < instr.num_args; ++a) {
            args.push_back(ArgToString(*this, instr.arg(a)));
          }
          absl::StrAppend(&out, "  ", Pad("call", 6), Pad(FunctionName(*this, instr.func_idx), 16),
                          " in: ", Pad(absl::StrJoin(args, ", "), 12),
                          " dst: ", RegisterToString(instr.dst), "\n");
          break;
        }
        case Opcode::kRet:
          absl::StrAppend(&out, "  ", Pad("ret", 6), RegisterToString(instr.result), "\n");
          break;
        case Opcode::kGoto:
          absl::StrAppend(&out, "  ", Pad("goto", 6), instr.pc_offset, "\n");
          break;
        case Opcode::kIf:
          absl::StrAppend(&out, "  ", Pad("If", 6), RegisterToString(instr.cond), ", ",
                          instr.false_offset, "\n");
          break;
      }
    }
    out.append("\n");
  }
  return out;
}

std::string Executable::Stats() const {
  std::string out = "executable statistics:\n";
  std::vector<std::string> items;
  for (const Value& c : constants) items.push_back(ConstantToString(c));
  absl::StrAppend(&out, "  constant pool (#", constants.size(), "): [", absl::StrJoin(items, ", "),
                  "]\n");
  items.clear();
  for (const FunctionInfo& f : functions) {
    std::string item = f.name;
    if (f.kind == FunctionKind::kVMFunc) {
      absl::StrAppend(
          &item, "(", f.num_args, " args, ", f.register_file_size, " registers, ",
          // Guarded: Stats() may describe an executable that failed Validate().
          f.start_instr >= 0 && f.end_instr >= f.start_instr ? f.end_instr - f.start_instr : 0,
          " instructions)");
    } else if (f.kind != FunctionKind::kPackedFunc) {
      absl::StrAppend(&item, "(", KindName(f.kind), ")");
    }
    items.push_back(std::move(item));
  }
  absl::StrAppend(&out, "  globals (#", functions.size(), "): [", absl::StrJoin(items, ", "),
                  "]\n");
  absl::StrAppend(&out, "  bytecode: ", num_instructions(), " instructions, ", instr_data.size(),
                  " words\n");
  items.clear();
  for (const KernelLibraryBlob& lib : kernel_libraries) {
    items.push_back(absl::StrCat(lib.target, " (", lib.format, ", ", lib.data.size(), " bytes)"));
  }
  absl::StrAppend(&out, "  kernel libraries (#", kernel_libraries.size(), "): [",
                  absl::StrJoin(items, ", "), "]\n");
  items.clear();
  for (const auto& [key, value] : metadata) items.push_back(key);
  absl::StrAppend(&out, "  metadata (#", metadata.size(), "): [", absl::StrJoin(items, ", "),
                  "]\n");
  return out;
}

}  // namespace tether::vm
