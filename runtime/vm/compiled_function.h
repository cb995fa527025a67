// The C ABI of compiled VM functions (exec_mode="compiled"; docs/design/vm.md,
// "Compiled functions"). The compiler turns each bytecode function into a
// native function "__vmtir__<name>" in the executable's CPU kernel library:
// the function's control flow (If, Goto) becomes branches, and each Call and
// Ret a call of the VM's services below, which read and write the frame's
// registers. What each call site calls, with which arguments and into which
// register, is the table "__vmtir_sites__<name>" beside it, which the VM
// checks and decodes once, when it loads the function, as it does bytecode:
//
//   int64_t table[] = {total_words, num_sites,
//                      func_index, dst, num_args, arg_word..., (per site)};
//
// Argument words are the bytecode's (runtime/vm/bytecode.h). The runtime
// never links LLVM; a compiled function never links the runtime.
#ifndef TETHER_RUNTIME_VM_COMPILED_FUNCTION_H_
#define TETHER_RUNTIME_VM_COMPILED_FUNCTION_H_

#include <stdint.h>

extern "C" {

#define TETHER_VM_FUNCTION_ABI_VERSION 1u

// Passed to every compiled function. `ctx` is the frame, opaque to the code.
// Each service returns 0, or non-zero after recording the error in the VM
// (the compiled function then returns that value at once).
typedef struct TetherVMServices {
  uint32_t abi_version;  // TETHER_VM_FUNCTION_ABI_VERSION
  uint32_t reserved;
  void* ctx;
  // Makes call `site` (an index into the function's site table): calls its
  // function with its arguments and stores the result in its register (or
  // drops it for %void).
  int32_t (*call)(void* ctx, int64_t site);
  // Reads register `reg` as an If condition (an int or a bool): 1 or 0 in *out.
  int32_t (*cond)(void* ctx, int64_t reg, int64_t* out);
  // Makes register `reg` the function's result; the function returns next.
  int32_t (*ret)(void* ctx, int64_t reg);
} TetherVMServices;

typedef int32_t (*TetherVMFunctionFn)(const TetherVMServices* services);

}  // extern "C"

namespace tether::vm {

// The symbols of function `name`'s compiled code and of its site table.
inline constexpr char kCompiledFunctionPrefix[] = "__vmtir__";
inline constexpr char kCompiledSitesPrefix[] = "__vmtir_sites__";

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_COMPILED_FUNCTION_H_
