// Kernel code generation with LLVM: KernelFuncs -> optimized LLVM IR ->
// object code for a Target -> a kernel library (an ELF shared object linked
// with in-process lld, or a static archive for a system library). The ABI of
// the result is docs/design/kernel-abi.md; runtime/kernel/kernel_library.h
// loads it.
//
// Thread contract: every function here is thread-safe (each call has its own
// LLVM context; the lld link is serialized internally).
#ifndef TETHER_COMPILER_BACKEND_LLVM_LLVM_CODEGEN_H_
#define TETHER_COMPILER_BACKEND_LLVM_LLVM_CODEGEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/tir/kernel_ir.h"
#include "runtime/vm/executable.h"

namespace tether::compiler {

// What BuildKernelLibrary spent on a CPU target, in thread seconds summed
// over its modules (`tether compile --time-passes`).
struct CodegenStats {
  int kernels = 0;
  int modules = 0;                  // objects linked (one per kernel, and the library's own)
  int cached = 0;                   // of them, found in the kernel object cache
  int threads = 0;                  // compiling them in parallel
  double emit_seconds = 0;          // kernel IR to LLVM IR
  double optimize_seconds = 0;      // LLVM's optimization pipeline
  double machine_code_seconds = 0;  // instruction selection to object code
  double link_seconds = 0;          // lld (or the archive)
  void Add(const CodegenStats& other);
};

struct CodegenOptions {
  int opt_level = 3;              // 0..3
  bool system_lib = false;        // a static archive with a registration function
  std::string system_lib_prefix;  // C identifier suffix of tether_system_lib_register_<prefix>
  // A shared object is compiled as one module per kernel and one for the
  // library's globals and helpers, on up to this many threads (0: one per
  // hardware thread, at most kMaxCodegenThreads), and their objects are
  // linked. A system library is one module.
  int threads = 0;
  // A folder of compiled kernel objects (object_cache.h), shared between
  // builds: each module of a shared object found there is not optimized
  // or compiled again, and each one compiled is stored. Used only with
  // `compiler_build`, the compiler's build ID (compiler/build_id.h) that
  // keeps one build's objects from another's. Empty: none.
  std::string cache_dir;
  std::string compiler_build;
  int64_t cache_max_bytes = int64_t{1} << 30;
  // exec_mode="compiled": the bytecode functions of this executable are
  // compiled into the library too, as "__vmtir__<name>"
  // (vm_function_emitter.h). Shared objects only.
  const vm::Executable* vm_functions = nullptr;
  // When set, BuildKernelLibrary adds what it spent (CPU targets).
  CodegenStats* stats = nullptr;
};
inline constexpr int kMaxCodegenThreads = 8;

// One kernel library for `kernels`. For a cuda target: format "ptx" (each
// kernel split into device launches, PTX for every architecture of the
// target, and the manifest; docs/design/kernel-abi.md "CUDA kernel
// libraries"). Otherwise format "so" (an ELF shared object with
// no undefined symbols) or, with system_lib, format "static" (an ar archive
// whose object defines tether_system_lib_register_<prefix>). The blob's target
// is target.ToString(). INVALID_ARGUMENT for kernels or targets that cannot be
// compiled (unknown triple, bad kernel IR); INTERNAL when LLVM or lld fails.
absl::StatusOr<vm::KernelLibraryBlob> BuildKernelLibrary(const std::vector<KernelFunc>& kernels,
                                                         const Target& target,
                                                         const CodegenOptions& options = {});
// The LLVM IR of `kernels` for `target` after the optimization pipeline of
// `opt_level`, as .ll text (for cuda: the NVPTX IR of the first
// architecture).
absl::StatusOr<std::string> EmitLLVMIR(const std::vector<KernelFunc>& kernels, const Target& target,
                                       int opt_level = 3);
// The target assembly of `kernels`, as .s text (for cuda: the PTX of every
// architecture, each after a "// ---- sm_XY ----" line).
absl::StatusOr<std::string> EmitAssembly(const std::vector<KernelFunc>& kernels,
                                         const Target& target);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_LLVM_LLVM_CODEGEN_H_
