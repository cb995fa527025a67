// Host compilation plus in-process loading of the resulting kernel library.
#include "compiler/backend/llvm/jit.h"

#include "compiler/backend/llvm/llvm_codegen.h"
#include "runtime/core/error.h"
#include "runtime/kernel/kernel_library.h"

namespace tether::compiler {

absl::StatusOr<Ref<Module>> BuildAndLoad(const std::vector<KernelFunc>& kernels,
                                         const CodegenOptions& options) {
  TETHER_ASSIGN_OR_RETURN(vm::KernelLibraryBlob blob,
                          BuildKernelLibrary(kernels, Target::Host(), options));
  return LoadKernelLibrary(blob);
}

}  // namespace tether::compiler
