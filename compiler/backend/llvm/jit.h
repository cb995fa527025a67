// BuildAndLoad: compile kernels for the host and load them into this process
// (tests, constant folding). The module's functions are the kernels, called
// with Values as runtime/kernel/kernel_library.h describes.
//
// Thread contract: thread-safe.
#ifndef TETHER_COMPILER_BACKEND_LLVM_JIT_H_
#define TETHER_COMPILER_BACKEND_LLVM_JIT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/tir/kernel_ir.h"
#include "runtime/module/module.h"

namespace tether::compiler {

// Errors of BuildKernelLibrary and LoadKernelLibrary.
absl::StatusOr<Ref<Module>> BuildAndLoad(const std::vector<KernelFunc>& kernels,
                                         const CodegenOptions& options = {});

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_LLVM_JIT_H_
