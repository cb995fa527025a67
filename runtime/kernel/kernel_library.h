// Kernel libraries: loading the CPU kernels the compiler generates (an ELF
// shared object, format "so") from memory, and calling them through the
// kernel ABI of docs/design/kernel-abi.md. The runtime side of that ABI lives
// here — the C declarations below, the services table (parallel-for on the
// runtime's thread pool, workspace memory, error reporting) and the manifest
// parser — so a board runs compiled kernels without LLVM.
//
// A loaded library is a Module ("library.so") whose GetFunction(name) is a
// Function taking Values in the kernel's parameter order (Tensors on the CPU
// and ints); each call checks the arguments against the library's manifest
// before the kernel runs, and a kernel's error comes back as a Status carrying
// its message.
#ifndef TETHER_RUNTIME_KERNEL_KERNEL_LIBRARY_H_
#define TETHER_RUNTIME_KERNEL_KERNEL_LIBRARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlpack/dlpack.h"
#include "runtime/core/data_type.h"
#include "runtime/kernel/loader_registry.h"
#include "runtime/module/module.h"

// ---- The kernel ABI (docs/design/kernel-abi.md), plain C. ----------------------
extern "C" {

#define TETHER_KERNEL_ABI_VERSION 1u

// One kernel argument, in the kernel's parameter order.
typedef union TetherKernelArg {
  DLTensor* tensor;  // tensor parameters
  int64_t i64;       // scalar (int) parameters
} TetherKernelArg;

// The runtime's services, passed to every kernel call. `ctx` is opaque to the
// kernel and passed back to each service.
typedef struct TetherKernelServices {
  uint32_t abi_version;  // TETHER_KERNEL_ABI_VERSION
  uint32_t reserved;
  void* ctx;
  // Runs body(begin, end, closure) over chunks covering [0, n), possibly on
  // several threads; returns 0, or the first non-zero value a body returned.
  int32_t (*parallel_for)(void* ctx, int64_t n,
                          int32_t (*body)(int64_t begin, int64_t end, void* closure),
                          void* closure);
  // Scratch memory of `bytes` aligned to `align` (a power of two); NULL when
  // it cannot be had. Freed with workspace_free before the kernel returns.
  void* (*workspace_alloc)(void* ctx, uint64_t bytes, uint64_t align);
  void (*workspace_free)(void* ctx, void* ptr);
  // Records the message of the error the kernel is about to return (the
  // first message of a call wins). Thread-safe.
  void (*set_error)(void* ctx, const char* message);
} TetherKernelServices;

// Kernel return codes.
#define TETHER_KERNEL_OK 0
#define TETHER_KERNEL_INVALID_ARGUMENT (-1)  // argument checks and AssertStmt
#define TETHER_KERNEL_OUT_OF_MEMORY (-2)     // workspace_alloc failed

typedef int32_t (*TetherKernelFn)(const TetherKernelArg* args, int32_t num_args,
                                  const TetherKernelServices* services);

}  // extern "C"

// On a function that calls generated code (a kernel, a compiled VM function)
// through a pointer: clang's -fsanitize=function checks an indirect call by
// reading a type signature just before the callee, which generated code does
// not have; where the callee starts a mapping's first page the read faults
// (seen on a kernel at the start of a library's text). The calls are checked
// by the kernel ABI instead (TETHER_KERNEL_ABI_VERSION, the manifest).
#if defined(__clang__)
#define TETHER_CALLS_GENERATED_CODE __attribute__((no_sanitize("function")))
#else
#define TETHER_CALLS_GENERATED_CODE
#endif

namespace tether {

// ---- The manifest: which kernels a library holds and their parameters. ------
//
// Text, one item per line:
//   tether-kernel-manifest 1
//   kernel <name> <num_params>
//   tensor <dtype> <ndim>        (one line per parameter, in order)
//   int64
//   end
struct KernelParamInfo {
  bool is_tensor = false;
  DataType dtype;  // tensors
  int ndim = 0;    // tensors
};
struct KernelInfo {
  std::string name;
  std::vector<KernelParamInfo> params;
};

// The manifest text of `kernels` (what codegen embeds).
std::string FormatKernelManifest(const std::vector<KernelInfo>& kernels);
// Parses manifest text defensively: INVALID_ARGUMENT naming the line for
// anything malformed (unknown keyword, bad counts, duplicate kernels, ...).
absl::StatusOr<std::vector<KernelInfo>> ParseKernelManifest(absl::string_view text);

// Loads a kernel library. Format "so": the ELF image is checked (header,
// machine of this process, segments inside the blob), written to a memfd and
// dlopen'ed; the ABI version and manifest symbols are checked and every
// kernel of the manifest resolved. INVALID_ARGUMENT for a corrupt or foreign
// blob, UNIMPLEMENTED for another format. Thread-safe.
absl::StatusOr<Ref<Module>> LoadKernelLibrary(const KernelLibraryBlob& blob);

// A Module over kernels registered in the system library under `prefix` by a
// statically linked kernel library (format "static"): its registration
// function registers each kernel and "__tether_kernel_manifest". NOT_FOUND
// when no manifest is registered under `prefix`.
absl::StatusOr<Ref<Module>> LoadSystemLibKernels(absl::string_view prefix);

// The prefix of a system library archive (format "static": what
// `tether compile --system-lib PREFIX` writes), read from its symbol table:
// the one exported symbol is tether_system_lib_register_<prefix>.
// INVALID_ARGUMENT for anything else.
absl::StatusOr<std::string> SystemLibPrefixOfArchive(absl::string_view archive);

// Loads a kernel library of format "static" from the kernels of its prefix
// that are linked into this process (LoadSystemLibKernels); NOT_FOUND,
// saying what to link, when they are not; FAILED_PRECONDITION when its
// target is another machine's.
absl::StatusOr<Ref<Module>> LoadStaticKernelLibrary(const KernelLibraryBlob& blob);

// Registers the VM's loaders of format "so" (LoadKernelLibrary) and
// "static" (LoadStaticKernelLibrary); idempotent, thread-safe.
// LocalVirtualMachine::Create calls it.
void RegisterKernelLibraryLoaders();

}  // namespace tether

#endif  // TETHER_RUNTIME_KERNEL_KERNEL_LIBRARY_H_
