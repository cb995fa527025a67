// ExecBuilder: assembles an Executable instruction by instruction, as the
// reference's relax.ExecBuilder does. Codegen uses it, and tests use it to
// write bytecode by hand.
//
//   ExecBuilder b;
//   b.EmitFunction("main", 2, {"x", "y"});
//   b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, /*dst=*/2);
//   b.EmitRet(2);
//   b.EndFunction("main");
//   absl::StatusOr<Ref<Executable>> exec = b.Get();
//
// Emit methods never fail on the spot: the first error is recorded (later ones
// are dropped) and returned by Get() and status(), so hand-written bytecode
// reads as a straight list of instructions.
#ifndef TETHER_RUNTIME_VM_EXEC_BUILDER_H_
#define TETHER_RUNTIME_VM_EXEC_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/value.h"
#include "runtime/vm/bytecode.h"
#include "runtime/vm/executable.h"

namespace tether::vm {

// Thread contract: thread-hostile (one builder per thread).
class ExecBuilder {
 public:
  ExecBuilder();

  // Declares `name` with `kind` and returns its index; declaring an existing
  // name again is a no-op unless the kind differs, which is an error
  // ("function X already declared as a different kind").
  Index DeclareFunction(absl::string_view name, FunctionKind kind);

  // Opens the bytecode function `name` taking `num_args` arguments in
  // registers 0..num_args-1. `param_names` is empty or has num_args names.
  // The name may have been declared (kVMFunc) before, for forward calls.
  void EmitFunction(absl::string_view name, int64_t num_args,
                    std::vector<std::string> param_names = {});
  // Declares a vm_tir function (its body lives in a kernel library as
  // "__vmtir__<name>"); it takes num_args arguments.
  void DeclareVMTIRFunction(absl::string_view name, int64_t num_args,
                            std::vector<std::string> param_names = {});
  // Closes the open function, which must be `name`.
  void EndFunction(absl::string_view name);

  // Call `func` (a name, implicitly declared as a packed function when new, or
  // an index) with `args`; the result goes to `dst` (kVoidRegister discards).
  void EmitCall(absl::string_view func, std::span<const Arg> args, RegName dst = kVoidRegister);
  void EmitCall(absl::string_view func, std::initializer_list<Arg> args,
                RegName dst = kVoidRegister) {
    EmitCall(func, std::span<const Arg>(args.begin(), args.size()), dst);
  }
  void EmitCall(Index func_idx, std::span<const Arg> args, RegName dst = kVoidRegister);
  void EmitCall(Index func_idx, std::initializer_list<Arg> args, RegName dst = kVoidRegister) {
    EmitCall(func_idx, std::span<const Arg>(args.begin(), args.size()), dst);
  }
  // Return the value of register `result` (a register Arg, or a RegName).
  void EmitRet(Arg result);
  void EmitRet(RegName result) { EmitRet(Arg::Register(result)); }
  // pc += offset (relative, non-zero).
  void EmitGoto(int64_t pc_offset);
  // If register `cond` holds a non-zero value, pc += 1, else pc += false_offset (> 1).
  void EmitIf(Arg cond, int64_t false_offset);
  void EmitIf(RegName cond, int64_t false_offset) { EmitIf(Arg::Register(cond), false_offset); }

  // An argument for `value`: an immediate for an int64 that fits in 56 bits,
  // otherwise a constant-pool entry shared with every structurally equal
  // constant (strings by content, shapes by dims, floats by bit pattern,
  // tensors by dtype, shape and bytes). Values that cannot be constants (None,
  // tuples, functions) record an error.
  Arg ConvertConstant(const Value& value);
  // The constant-pool index of `value` (deduplicated as above), never an immediate.
  Index AddConstant(const Value& value);
  // A function argument (a closure target, say) for `name`; like EmitCall, a
  // name not yet declared is declared as a packed function, so declare
  // bytecode functions before referring to them.
  Arg FunctionArg(absl::string_view name);
  // The index of `name`; NOT_FOUND when it was never declared.
  absl::StatusOr<Index> GetFunctionIndex(absl::string_view name) const;

  void AddKernelLibrary(KernelLibraryBlob library);
  void SetMetadata(absl::string_view key, absl::string_view value);

  // Renumbers the non-parameter registers of every ended bytecode function in
  // order of first definition (r100, r50 -> r2, r3 in a 2-argument function)
  // and sets register_file_size. Idempotent. Get() formalizes its copy of the
  // code anyway, so calling this is only needed to inspect the result early.
  void Formalize();

  // Checks the program (registers defined before use, goto offsets non-zero,
  // if offsets > 1, every function ended and defined, indices in range), then
  // returns a formalized, validated copy of the executable. The builder is
  // unchanged and may keep emitting afterwards. INVALID_ARGUMENT (NOT_FOUND for an unknown
  // function) on the first error.
  absl::StatusOr<Ref<Executable>> Get();

  // The first error recorded so far.
  const absl::Status& status() const { return status_; }

 private:
  enum class State { kDeclared, kOpen, kEnded };

  template <typename... Args>
  void Fail(const Args&... args);
  void RecordError(absl::Status status);
  bool InFunction(absl::string_view what);
  void EmitWords(std::initializer_list<ExecWord> words, std::span<const Arg> args = {});
  absl::Status CheckFunction(const FunctionInfo& f) const;

  std::vector<FunctionInfo> functions_;
  std::vector<State> states_;
  absl::flat_hash_map<std::string, Index> function_map_;
  std::vector<Value> constants_;
  // Structural key -> the constants with that key (tensors: a hash of their
  // bytes, so more than one when two hash alike).
  absl::flat_hash_map<std::string, std::vector<Index>> constant_dedup_;
  std::vector<int64_t> instr_offset_;
  std::vector<ExecWord> instr_data_;
  std::vector<KernelLibraryBlob> kernel_libraries_;
  std::map<std::string, std::string> metadata_;
  Index open_function_ = -1;
  absl::Status status_;
};

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_EXEC_BUILDER_H_
