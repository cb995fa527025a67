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
#ifndef TETHER_COMPILER_BACKEND_VM_VM_CODEGEN_H_
#define TETHER_COMPILER_BACKEND_VM_VM_CODEGEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"
#include "runtime/vm/executable.h"
#include "runtime/vm/shape_program.h"

namespace tether::compiler {

// Symbolic shape arithmetic becomes a shape program (runtime/vm/shape_program.h).
using vm::ShapeProgramOp;

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

#endif  // TETHER_COMPILER_BACKEND_VM_VM_CODEGEN_H_
