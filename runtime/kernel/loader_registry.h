// Kernel libraries as an executable carries them (KernelLibraryBlob), and
// the table of loaders by format ("so", "ptx", ...) that turn one into a
// Module of kernels. The loaders of this folder (kernel_library.h) and of
// runtime/cuda/ register here; the VM (runtime/vm/local_vm.h) looks them up
// when it loads an executable.
//
// Thread contract: thread-safe.
#ifndef TETHER_RUNTIME_KERNEL_LOADER_REGISTRY_H_
#define TETHER_RUNTIME_KERNEL_LOADER_REGISTRY_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/object.h"
#include "runtime/module/module.h"

namespace tether {

// A kernel library embedded in an executable: one per target.
struct KernelLibraryBlob {
  std::string target;  // e.g. "llvm -mtriple=x86_64-linux-gnu", "cuda -arch=sm_90"
  std::string format;  // "so" (ELF shared object), "ptx", "cubin", "static"
  std::string data;
};

using KernelLibraryLoader = std::function<absl::StatusOr<Ref<Module>>(const KernelLibraryBlob&)>;

// ALREADY_EXISTS when `format` has a loader.
absl::Status RegisterKernelLibraryLoader(const std::string& format, KernelLibraryLoader loader);

// The loader of `format`, or an empty function when none is registered.
KernelLibraryLoader FindKernelLibraryLoader(absl::string_view format);

}  // namespace tether

#endif  // TETHER_RUNTIME_KERNEL_LOADER_REGISTRY_H_
