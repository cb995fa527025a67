// VM code generation: the last step of Build(). Turns every Relax function
// of a lowered module (normalized, tensor work already in destination-passing
// calls to kernels, allocations explicit) into bytecode for the VM of
// runtime/vm/, as TVM's CodeGenVM together with VMShapeLower.
//
// What each construct becomes is described in docs/design/compiler-pipeline.md
// ("VM code generation"). In short: parameters are checked at entry
// (vm.builtin.check_*_info) and their symbolic dimensions matched into a
// per-call shape heap (vm.builtin.match_shape), with an error context that
// names the function, the parameter and its annotation; symbolic shape
// expressions (n * 4, n + 1) are computed at run time by
// vm.builtin.compute_shape_heap, a small stack program over heap slots;
// calls to kernels and to runtime-registered functions are packed calls,
// calls to Relax functions are bytecode calls, If becomes read_if_cond/If/Goto.
#ifndef TETHER_COMPILER_TRANSFORM_VM_CODEGEN_H_
#define TETHER_COMPILER_TRANSFORM_VM_CODEGEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/module.h"
#include "runtime/vm/executable.h"

namespace tether::compiler {

// Opcodes of the shape programs that vm.builtin.compute_shape_heap runs (the
// runtime keeps the same numbering in runtime/vm/builtins.cc): a program is a
// Shape constant of int64 words, each opcode followed by its operand where it
// has one, evaluated on a stack of int64.
enum class ShapeProgramOp : int64_t {
  kPushImm = 0,  // operand: the value
  kLoad = 1,     // operand: a heap slot
  kStore = 2,    // operand: a heap slot; pops the value
  kAdd = 3,
  kSub = 4,
  kMul = 5,
  kFloorDiv = 6,
  kFloorMod = 7,
  kMin = 8,
  kMax = 9,
  kTruncDiv = 10,
  kEQ = 11,
  kNE = 12,
  kLT = 13,
  kLE = 14,
  kGT = 15,
  kGE = 16,
  kAnd = 17,
  kOr = 18,
  kNot = 19,
  kSelect = 20,  // pops false value, true value, condition
};

// Metadata keys VMCodegen writes, one per Relax function F:
//   "signature.F": "(x: R.Tensor((n, 784), \"float32\"), w: ...) -> R.Tensor(...)".
inline constexpr char kSignatureMetadataPrefix[] = "signature.";

// Generates the executable for every Relax function of `lowered` and embeds
// `libraries` (the kernel libraries the kernels of the module were compiled
// into; a kernel is called by its name and resolved in them, then in the
// runtime's registry). ExternFuncs of the module are left to the registry.
//
// INVALID_ARGUMENT naming the function and the construct for IR the VM cannot
// run: an operator that was not lowered ("main: operator relax.add was not
// lowered to a kernel call; run the pipeline first"), a symbolic dimension
// used before any parameter or match_cast defines it, a nested function that
// was not lifted. Never crashes on malformed IR.
absl::StatusOr<Ref<vm::Executable>> VMCodegen(const IRModule& lowered,
                                              std::vector<vm::KernelLibraryBlob> libraries);

// The signature string of `func` (a FunctionNode), as stored under
// "signature.<name>": parameter names with their struct info, then the return.
std::string FunctionSignature(const Expr& func);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_VM_CODEGEN_H_
