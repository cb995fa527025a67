// ExecBuilder: emission, constant deduplication, register formalization and
// the program checks run by Get(). The checks here are the builder's (they
// speak in terms of what the author wrote: undefined registers, unended
// functions); Executable::Validate() then enforces the safety rules the
// interpreter relies on.
#include "runtime/vm/exec_builder.h"

#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"

namespace tether::vm {
namespace {

absl::string_view KindName(FunctionKind kind) {
  switch (kind) {
    case FunctionKind::kPackedFunc:
      return "packed function";
    case FunctionKind::kVMFunc:
      return "bytecode function";
    case FunctionKind::kVMTIRFunc:
      return "vm_tir function";
  }
  return "unknown";
}

template <typename T>
void AppendRaw(std::string* key, const T& v) {
  key->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// The bytes of a compact CPU tensor.
absl::string_view TensorBytes(const Tensor& t) {
  return absl::string_view(static_cast<const char*>(t->element_data()),
                           static_cast<size_t>(t->NumBytes()));
}

// A key equal for structurally equal constants, and a canonical value to store
// (tensors are stored as compact CPU tensors). Fails for non-constant values.
absl::Status ConstantKey(const Value& value, std::string* key, Value* stored) {
  *stored = value;
  switch (value.kind()) {
    case Value::Kind::kInt:
      key->push_back('i');
      AppendRaw(key, value.int_value());
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      uint64_t bits;
      double f = value.float_value();
      std::memcpy(&bits, &f, sizeof(bits));
      key->push_back('f');
      AppendRaw(key, bits);
      return absl::OkStatus();
    }
    case Value::Kind::kBool:
      key->push_back('b');
      key->push_back(value.bool_value() ? 1 : 0);
      return absl::OkStatus();
    case Value::Kind::kDataType: {
      DataType t = value.dtype_value();
      key->push_back('d');
      AppendRaw(key, t.code());
      AppendRaw(key, t.bits());
      AppendRaw(key, t.lanes());
      return absl::OkStatus();
    }
    case Value::Kind::kDevice: {
      Device d = value.device_value();
      key->push_back('v');
      AppendRaw(key, static_cast<int32_t>(d.type));
      AppendRaw(key, d.id);
      return absl::OkStatus();
    }
    default:
      break;
  }
  if (value.is_string()) {
    key->push_back('s');
    key->append(value.string_value());
    return absl::OkStatus();
  }
  if (value.is_shape()) {
    key->push_back('S');
    for (int64_t d : value.AsRef<ShapeObj>()->dims) AppendRaw(key, d);
    return absl::OkStatus();
  }
  if (value.is_tensor()) {
    // The key has the tensor's type, shape and a hash of its bytes, not the
    // bytes (a model's weights are hundreds of MB): AddConstant compares the
    // bytes of the constants whose key matches.
    Tensor t(value.AsRef<TensorObj>());
    TETHER_ASSIGN_OR_RETURN(int64_t nbytes, CheckedNumBytes(t->shape(), t->dtype()));
    DataType dtype = t->dtype();
    if (t->device().type != kDLCPU || !t->IsContiguous()) {
      std::string bytes(static_cast<size_t>(nbytes), '\0');
      TETHER_RETURN_IF_ERROR(t.CopyToBytes(bytes.data(), bytes.size()));
      TETHER_ASSIGN_OR_RETURN(t, Tensor::FromBytes(t->shape(), dtype, bytes.data(), bytes.size()));
      *stored = Value(t.ref());
    }
    key->push_back('t');
    AppendRaw(key, dtype.code());
    AppendRaw(key, dtype.bits());
    AppendRaw(key, dtype.lanes());
    AppendRaw(key, static_cast<int64_t>(t->ndim()));
    for (int64_t d : t->shape()) AppendRaw(key, d);
    AppendRaw(key, absl::HashOf(TensorBytes(t)));
    return absl::OkStatus();
  }
  return ValueError("a ", value.TypeName(), " cannot be a constant");
}

// Renumbers the non-parameter registers of bytecode function `f` in order of
// first definition and sets its register_file_size.
void FormalizeFunction(FunctionInfo& f, const std::vector<int64_t>& instr_offset,
                       std::vector<ExecWord>& instr_data) {
  const int64_t num_args = f.num_args;
  auto renumberable = [&](RegName r) { return r >= num_args && r < kBeginSpecialReg; };
  // Pass 1: number destinations in order of first definition.
  absl::flat_hash_map<RegName, RegName> map;
  RegName next = num_args;
  for (Index pc = f.start_instr; pc < f.end_instr; ++pc) {
    const int64_t off = instr_offset[pc];
    if (instr_data[off] != static_cast<ExecWord>(Opcode::kCall)) continue;
    const RegName dst = instr_data[off + 1];
    if (renumberable(dst) && map.emplace(dst, next).second) ++next;
  }
  // Pass 2: rewrite every definition and use (a use textually before its
  // definition too); undefined registers are left for the checks to report.
  auto rename = [&](RegName r) {
    auto it = renumberable(r) ? map.find(r) : map.end();
    return it == map.end() ? r : it->second;
  };
  for (Index pc = f.start_instr; pc < f.end_instr; ++pc) {
    const int64_t off = instr_offset[pc];
    switch (static_cast<Opcode>(instr_data[off])) {
      case Opcode::kCall: {
        instr_data[off + 1] = rename(instr_data[off + 1]);
        const int64_t n = instr_data[off + 3];
        for (int64_t a = 0; a < n; ++a) {
          Arg arg(instr_data[off + kCallHeaderWords + a]);
          if (arg.raw_kind() == static_cast<int>(ArgKind::kRegister)) {
            instr_data[off + kCallHeaderWords + a] = Arg::Register(rename(arg.value())).word();
          }
        }
        break;
      }
      case Opcode::kRet:
      case Opcode::kIf:
        instr_data[off + 1] = rename(instr_data[off + 1]);
        break;
      case Opcode::kGoto:
        break;
    }
  }
  f.register_file_size = next;
}

}  // namespace

ExecBuilder::ExecBuilder() = default;

template <typename... Args>
void ExecBuilder::Fail(const Args&... args) {
  RecordError(absl::InvalidArgumentError(absl::StrCat(args...)));
}

void ExecBuilder::RecordError(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

Index ExecBuilder::DeclareFunction(absl::string_view name, FunctionKind kind) {
  if (auto it = function_map_.find(name); it != function_map_.end()) {
    if (functions_[it->second].kind != kind) {
      Fail("function ", name, " already declared as a different kind (",
           KindName(functions_[it->second].kind), ", now ", KindName(kind), ")");
    }
    return it->second;
  }
  if (name.empty()) Fail("function name is empty");
  const Index idx = static_cast<Index>(functions_.size());
  FunctionInfo info;
  info.kind = kind;
  info.name = std::string(name);
  // A packed function's arity is unknown (-1); the others get theirs when defined.
  info.num_args = kind == FunctionKind::kPackedFunc ? -1 : 0;
  functions_.push_back(std::move(info));
  states_.push_back(kind == FunctionKind::kPackedFunc ? State::kEnded : State::kDeclared);
  function_map_.emplace(std::string(name), idx);
  return idx;
}

void ExecBuilder::EmitFunction(absl::string_view name, int64_t num_args,
                               std::vector<std::string> param_names) {
  if (open_function_ >= 0) {
    Fail("function ", name, " opened while function ", functions_[open_function_].name,
         " is still open");
    return;
  }
  if (num_args < 0 || num_args > kMaxRegisterFileSize) {
    Fail("function ", name, " has invalid argument count ", num_args);
    return;
  }
  if (!param_names.empty() && static_cast<int64_t>(param_names.size()) != num_args) {
    Fail("function ", name, " has ", param_names.size(), " parameter names for ", num_args,
         " arguments");
    return;
  }
  const Index idx = DeclareFunction(name, FunctionKind::kVMFunc);
  if (functions_[idx].kind != FunctionKind::kVMFunc) return;  // error recorded
  if (states_[idx] != State::kDeclared) {
    Fail("function ", name, " already defined");
    return;
  }
  FunctionInfo& f = functions_[idx];
  f.start_instr = f.end_instr = static_cast<int64_t>(instr_offset_.size());
  f.num_args = num_args;
  f.register_file_size = num_args;
  f.param_names = std::move(param_names);
  states_[idx] = State::kOpen;
  open_function_ = idx;
}

void ExecBuilder::DeclareVMTIRFunction(absl::string_view name, int64_t num_args,
                                       std::vector<std::string> param_names) {
  if (num_args < 0 || num_args >= kMaxRegisterFileSize) {
    Fail("function ", name, " has invalid argument count ", num_args);
    return;
  }
  if (!param_names.empty() && static_cast<int64_t>(param_names.size()) != num_args) {
    Fail("function ", name, " has ", param_names.size(), " parameter names for ", num_args,
         " arguments");
    return;
  }
  const Index idx = DeclareFunction(name, FunctionKind::kVMTIRFunc);
  if (functions_[idx].kind != FunctionKind::kVMTIRFunc) return;
  if (states_[idx] != State::kDeclared) {
    Fail("function ", name, " already defined");
    return;
  }
  FunctionInfo& f = functions_[idx];
  f.num_args = num_args;
  f.register_file_size = num_args + 1;
  f.param_names = std::move(param_names);
  states_[idx] = State::kEnded;
}

void ExecBuilder::EndFunction(absl::string_view name) {
  if (open_function_ < 0 || functions_[open_function_].name != name) {
    Fail("EndFunction(", name, ") but ",
         open_function_ < 0
             ? std::string("no function is open")
             : absl::StrCat("function ", functions_[open_function_].name, " is open"));
    return;
  }
  functions_[open_function_].end_instr = static_cast<int64_t>(instr_offset_.size());
  states_[open_function_] = State::kEnded;
  open_function_ = -1;
}

bool ExecBuilder::InFunction(absl::string_view what) {
  if (open_function_ >= 0) return true;
  Fail(what, " emitted outside a function (call EmitFunction first)");
  return false;
}

void ExecBuilder::EmitWords(std::initializer_list<ExecWord> words, std::span<const Arg> args) {
  instr_offset_.push_back(static_cast<int64_t>(instr_data_.size()));
  instr_data_.insert(instr_data_.end(), words.begin(), words.end());
  for (Arg a : args) instr_data_.push_back(a.word());
}

void ExecBuilder::EmitCall(absl::string_view func, std::span<const Arg> args, RegName dst) {
  if (!InFunction("call")) return;
  auto it = function_map_.find(func);
  const Index idx =
      it != function_map_.end() ? it->second : DeclareFunction(func, FunctionKind::kPackedFunc);
  EmitCall(idx, args, dst);
}

void ExecBuilder::EmitCall(Index func_idx, std::span<const Arg> args, RegName dst) {
  if (!InFunction("call")) return;
  EmitWords(
      {static_cast<ExecWord>(Opcode::kCall), dst, func_idx, static_cast<ExecWord>(args.size())},
      args);
}

void ExecBuilder::EmitRet(Arg result) {
  if (!InFunction("ret")) return;
  if (result.raw_kind() != static_cast<int>(ArgKind::kRegister)) {
    Fail("ret in function ", functions_[open_function_].name,
         " expects a register argument, got kind ", result.raw_kind());
    return;
  }
  EmitWords({static_cast<ExecWord>(Opcode::kRet), result.value()});
}

void ExecBuilder::EmitGoto(int64_t pc_offset) {
  if (!InFunction("goto")) return;
  EmitWords({static_cast<ExecWord>(Opcode::kGoto), pc_offset});
}

void ExecBuilder::EmitIf(Arg cond, int64_t false_offset) {
  if (!InFunction("if")) return;
  if (cond.raw_kind() != static_cast<int>(ArgKind::kRegister)) {
    Fail("if in function ", functions_[open_function_].name,
         " expects a register condition, got kind ", cond.raw_kind());
    return;
  }
  EmitWords({static_cast<ExecWord>(Opcode::kIf), cond.value(), false_offset});
}

Arg ExecBuilder::ConvertConstant(const Value& value) {
  if (value.is_int() && value.int_value() >= -Arg::kValueMaxLimit &&
      value.int_value() <= Arg::kValueMaxLimit) {
    return Arg::Immediate(value.int_value());
  }
  return Arg::ConstIdx(AddConstant(value));
}

Index ExecBuilder::AddConstant(const Value& value) {
  std::string key;
  Value stored;
  absl::Status status = ConstantKey(value, &key, &stored);
  if (!status.ok()) {
    RecordError(absl::InvalidArgumentError(
        absl::StrCat("cannot add constant ", value.ToString(), ": ", status.message())));
    return 0;
  }
  std::vector<Index>& same_key = constant_dedup_[key];
  for (Index i : same_key) {
    // Equal keys of tensors may still differ in their bytes (the key has
    // their hash); other constants' keys are the whole value.
    if (!stored.is_tensor() || TensorBytes(Tensor(constants_[i].AsRef<TensorObj>())) ==
                                   TensorBytes(Tensor(stored.AsRef<TensorObj>()))) {
      return i;
    }
  }
  same_key.push_back(static_cast<Index>(constants_.size()));
  constants_.push_back(std::move(stored));
  return same_key.back();
}

absl::StatusOr<Index> ExecBuilder::GetFunctionIndex(absl::string_view name) const {
  auto it = function_map_.find(name);
  if (it == function_map_.end()) return NotFoundError("function ", name, " is not declared");
  return it->second;
}

Arg ExecBuilder::FunctionArg(absl::string_view name) {
  auto it = function_map_.find(name);
  return Arg::FuncIdx(it != function_map_.end() ? it->second
                                                : DeclareFunction(name, FunctionKind::kPackedFunc));
}

void ExecBuilder::AddKernelLibrary(KernelLibraryBlob library) {
  kernel_libraries_.push_back(std::move(library));
}

void ExecBuilder::SetMetadata(absl::string_view key, absl::string_view value) {
  metadata_[std::string(key)] = std::string(value);
}

void ExecBuilder::Formalize() {
  for (size_t fi = 0; fi < functions_.size(); ++fi) {
    if (functions_[fi].kind == FunctionKind::kVMFunc && states_[fi] == State::kEnded) {
      FormalizeFunction(functions_[fi], instr_offset_, instr_data_);
    }
  }
}

absl::Status ExecBuilder::CheckFunction(const FunctionInfo& f) const {
  const Index num_functions = static_cast<Index>(functions_.size());
  const Index num_constants = static_cast<Index>(constants_.size());
  absl::flat_hash_set<RegName> defined;
  auto at = [&](Index pc) { return absl::StrCat("function ", f.name, ", pc ", pc, ": "); };
  // `use` describes the reader for the message: "input of call X", "ret", ...
  // `use` (and `callee`, when not empty) describe the reader for the message,
  // joined only when there is an error: "input of call X", "result of ret", ...
  auto check_read = [&](Index pc, RegName r, absl::string_view use,
                        absl::string_view callee = "") -> absl::Status {
    if (r == kVoidRegister || r == kVMRegister) return absl::OkStatus();
    if (r < 0 || r >= kBeginSpecialReg) {
      return absl::InvalidArgumentError(absl::StrCat(at(pc), "invalid register ", r));
    }
    if (r < f.num_args || defined.contains(r)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("register r", r, " is used as ", use, callee,
                                                   " in function ", f.name, " but never defined"));
  };
  for (Index pc = f.start_instr; pc < f.end_instr; ++pc) {
    const int64_t off = instr_offset_[pc];
    const ExecWord* w = instr_data_.data() + off;
    switch (static_cast<Opcode>(w[0])) {
      case Opcode::kCall: {
        const Index callee = w[2];
        if (callee < 0 || callee >= num_functions) {
          return absl::InvalidArgumentError(absl::StrCat(
              at(pc), "function index ", callee, " out of range (", num_functions, " functions)"));
        }
        const std::string& callee_name = functions_[callee].name;
        for (int64_t a = 0; a < w[3]; ++a) {
          const Arg arg(w[kCallHeaderWords + a]);
          switch (arg.raw_kind()) {
            case static_cast<int>(ArgKind::kRegister):
              TETHER_RETURN_IF_ERROR(check_read(pc, arg.value(), "input of call ", callee_name));
              break;
            case static_cast<int>(ArgKind::kImmediate):
              break;
            case static_cast<int>(ArgKind::kConstIdx):
              if (arg.value() < 0 || arg.value() >= num_constants) {
                return absl::InvalidArgumentError(absl::StrCat(at(pc), "constant index ",
                                                               arg.value(), " out of range (",
                                                               num_constants, " constants)"));
              }
              break;
            case static_cast<int>(ArgKind::kFuncIdx):
              if (arg.value() < 0 || arg.value() >= num_functions) {
                return absl::InvalidArgumentError(absl::StrCat(at(pc), "function index ",
                                                               arg.value(), " out of range (",
                                                               num_functions, " functions)"));
              }
              break;
            default:
              return absl::InvalidArgumentError(
                  absl::StrCat(at(pc), "argument ", a, " has invalid kind ", arg.raw_kind()));
          }
        }
        const RegName dst = w[1];
        if (dst == kVMRegister) {
          return absl::InvalidArgumentError(absl::StrCat(at(pc), "cannot write to %vm"));
        }
        if (dst != kVoidRegister) {
          if (dst < 0 || dst >= kBeginSpecialReg) {
            return absl::InvalidArgumentError(
                absl::StrCat(at(pc), "invalid destination register ", dst));
          }
          defined.insert(dst);
        }
        break;
      }
      case Opcode::kRet:
        TETHER_RETURN_IF_ERROR(check_read(pc, w[1], "result of ret"));
        break;
      case Opcode::kGoto:
        if (w[1] == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(at(pc), "goto offset is 0 (an infinite loop)"));
        }
        break;
      case Opcode::kIf:
        TETHER_RETURN_IF_ERROR(check_read(pc, w[1], "condition of if"));
        if (w[2] <= 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(at(pc), "if false offset ", w[2], " must be greater than 1"));
        }
        break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Ref<Executable>> ExecBuilder::Get() {
  TETHER_RETURN_IF_ERROR(status_);
  for (size_t i = 0; i < functions_.size(); ++i) {
    const FunctionInfo& f = functions_[i];
    if (states_[i] == State::kOpen) {
      return absl::InvalidArgumentError(
          absl::StrCat("function ", f.name, " was not ended (call EndFunction)"));
    }
    if (states_[i] == State::kDeclared) {
      return absl::InvalidArgumentError(
          absl::StrCat("function ", f.name, " is declared but never defined"));
    }
    if (f.kind != FunctionKind::kVMFunc) continue;
    if (f.start_instr == f.end_instr) {
      return absl::InvalidArgumentError(absl::StrCat("function ", f.name, " has no instructions"));
    }
    TETHER_RETURN_IF_ERROR(CheckFunction(f));
  }
  // Formalizes a copy, so the builder keeps the author's register numbers.
  auto exec = MakeRef<Executable>();
  exec->functions = functions_;
  exec->function_map = function_map_;
  exec->constants = constants_;
  exec->instr_offset = instr_offset_;
  exec->instr_data = instr_data_;
  for (FunctionInfo& f : exec->functions) {
    if (f.kind == FunctionKind::kVMFunc) FormalizeFunction(f, exec->instr_offset, exec->instr_data);
  }
  exec->kernel_libraries = kernel_libraries_;
  exec->metadata = metadata_;
  TETHER_RETURN_IF_ERROR(exec->Validate());
  return exec;
}

}  // namespace tether::vm
