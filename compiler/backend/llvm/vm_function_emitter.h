// exec_mode="compiled": each bytecode function of an executable becomes a
// native function "__vmtir__<name>" with the C ABI of
// runtime/vm/compiled_function.h. Its instructions become basic blocks: a
// Call calls the VM's `call` service with its site, an index into the
// function's table "__vmtir_sites__<name>" of each call's function,
// destination and argument words; an If reads its condition through `cond`
// and branches, a Goto branches, a Ret hands its register to `ret` and
// returns. A service's error code is returned at once. The interpreter is
// not in the loop: the code does the dispatch the interpreter would.
//
// Thread contract: a function; calls on one LLVMContext must be serialized.
#ifndef TETHER_COMPILER_BACKEND_LLVM_VM_FUNCTION_EMITTER_H_
#define TETHER_COMPILER_BACKEND_LLVM_VM_FUNCTION_EMITTER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "runtime/vm/executable.h"

namespace tether::compiler::codegen {

// The native functions of every bytecode function of `exec`, which must be
// valid (Executable::Validate). INVALID_ARGUMENT when it is not.
absl::StatusOr<std::unique_ptr<llvm::Module>> EmitVMFunctions(llvm::LLVMContext& context,
                                                              const vm::Executable& exec);

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_VM_FUNCTION_EMITTER_H_
