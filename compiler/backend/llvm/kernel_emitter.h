// KernelEmitter: lowers KernelFuncs to one llvm::Module with the C ABI of
// docs/design/kernel-abi.md: per kernel an exported entry that checks and
// unpacks its arguments (binding shape vars, checking shape expressions) and
// an internal body taking noalias data pointers; kParallel loops outlined into
// closures run through the services' parallel_for; the ABI version and
// manifest globals; or, for a system library, a registration function.
//
// Thread contract: a function; each call uses its own llvm::Module, but all
// calls on one LLVMContext must be serialized by the caller.
#ifndef TETHER_COMPILER_BACKEND_LLVM_KERNEL_EMITTER_H_
#define TETHER_COMPILER_BACKEND_LLVM_KERNEL_EMITTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/tir/kernel_ir.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace tether::compiler::codegen {

struct EmitOptions {
  bool system_lib = false;        // registration function instead of exported kernels
  std::string system_lib_prefix;  // a C identifier suffix, may be empty
  // Sharding, for compiling one library as several modules in parallel and
  // linking their objects together: when `emit` is not empty, only the
  // kernels i with emit[i] get code in this module (all are still checked),
  // and the library globals (manifest, ABI version) and helpers (argument
  // checks, message builders, memcpy/memset/memmove) are defined, hidden,
  // only when `library_globals`; the other modules declare the helpers.
  // Not with system_lib.
  std::vector<bool> emit;
  bool library_globals = true;
};

// INVALID_ARGUMENT for kernels codegen cannot lower (bad names, duplicate
// names, unbound vars, non-constant local allocations, vector dtypes, ...),
// naming the kernel.
absl::StatusOr<std::unique_ptr<llvm::Module>> EmitKernels(llvm::LLVMContext& context,
                                                          const std::vector<KernelFunc>& kernels,
                                                          const EmitOptions& options);

// The NVPTX module of device launch kernels (compiler/backend/cuda/device_split.h):
// one PTX entry per launch, named as it, with the parameters of
// docs/design/kernel-abi.md "PTX entries"; the launch's last two parameters
// (tether_tid, tether_nthreads) come from the thread and block indices.
// INVALID_ARGUMENT for a kernel that is not a launch or that uses what a
// device cannot run (workspace allocations, assertions) or what sm_<sm>
// lacks (asynchronous copies before sm_80).
absl::StatusOr<std::unique_ptr<llvm::Module>> EmitDeviceKernels(
    llvm::LLVMContext& context, const std::vector<KernelFunc>& launches, int sm);

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_KERNEL_EMITTER_H_
