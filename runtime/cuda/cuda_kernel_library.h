// CUDA kernel libraries (blob format "ptx", docs/design/kernel-abi.md "CUDA
// kernel libraries"): the blob and manifest the compiler writes, and the
// loader the VM uses to run them through the driver API (cuda_driver.h).
//
// The blob holds PTX images for one or more architectures and a manifest of
// kernels, each with its parameters (dtype, ndim and a host-side check per
// dim) and its launches (a PTX entry, a block size and the iteration count as
// a postfix program over the arguments' dims and scalar values).
//
// A loaded library is a Module ("library.ptx"); GetFunction(name) is a
// Function taking Values in the kernel's parameter order (Tensors on one CUDA
// device and ints). Each call checks its arguments against the manifest and
// launches the kernel's entries in order on the device's legacy default
// stream, asynchronously.
//
// Thread contract: the free functions are thread-safe; a loaded Module is
// thread-safe (per-device CUmodules are loaded once under a mutex).
#ifndef TETHER_RUNTIME_CUDA_CUDA_KERNEL_LIBRARY_H_
#define TETHER_RUNTIME_CUDA_CUDA_KERNEL_LIBRARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/kernel/loader_registry.h"
#include "runtime/module/module.h"

namespace tether {

// Every tensor argument's data (data + byte_offset) is at least this
// aligned, or the call is INVALID_ARGUMENT; the kernels may rely on it
// (vector loads of 16 bytes).
inline constexpr int64_t kCudaTensorAlignment = 16;

// One PTX image: the text (without the trailing NUL, which the blob adds)
// for architecture sm_<sm>.
struct CudaImage {
  int sm = 0;  // 75, 80, 90, ...
  std::string ptx;
};

// A host-side check of one tensor dim: `*` any, `42` exactly, `=d0.1` /
// `=s2` equal to a reference, `?` not checked. Kept as its manifest token.
struct CudaParamInfo {
  bool is_tensor = false;
  DataType dtype;                 // tensors
  std::vector<std::string> dims;  // tensors: one spec token per dim
};

struct CudaLaunchInfo {
  std::string entry;               // the PTX .entry name
  int block = 256;                 // threads per block, 1..1024
  std::vector<std::string> count;  // postfix tokens; empty = unknown
  // Bytes of dynamic shared memory (the PTX's `.extern .shared` array) each
  // block gets: 0 (none) or 1 to kCudaMaxDynamicSharedBytes. Above 48 KiB the
  // loader opts the entry in (cuFuncSetAttribute), refusing a device that
  // allows less.
  int64_t dynamic_shared_bytes = 0;
};

// The most dynamic shared memory a launch may ask for: 227 KiB, what sm_90
// gives a block that opts in (the most of any NVIDIA GPU today).
inline constexpr int64_t kCudaMaxDynamicSharedBytes = 232448;
// Up to this much a launch needs no opt-in (cuFuncSetAttribute).
inline constexpr int64_t kCudaDefaultDynamicSharedBytes = 48 << 10;

// A device buffer the launcher allocates for one call (a kernel's scratch:
// partial results one launch writes and a later one reads), 1-D, of `count`
// elements (a postfix program like a launch count; never empty). Its pointer
// and its one dim are passed to every launch after the parameters'.
struct CudaScratchInfo {
  DataType dtype;
  std::vector<std::string> count;
};

struct CudaKernelInfo {
  std::string name;
  std::vector<CudaParamInfo> params;
  std::vector<CudaScratchInfo> scratch;  // at most 16
  std::vector<CudaLaunchInfo> launches;  // at least one
};

// The manifest text of `kernels` ("tether-cuda-manifest 1" ... "end").
std::string FormatCudaManifest(const std::vector<CudaKernelInfo>& kernels);
// Parses manifest text defensively: INVALID_ARGUMENT naming the line for
// anything malformed (unknown keyword or dtype, bad counts or tokens, a
// reference to a later or missing parameter, duplicate kernels, a `shared`
// line out of place or out of range, ...).
absl::StatusOr<std::vector<CudaKernelInfo>> ParseCudaManifest(absl::string_view text);

// The blob bytes ("TPTX" container) of `images` (sorted by sm, distinct) and
// `manifest` text.
std::string WriteCudaBlob(const std::vector<CudaImage>& images, absl::string_view manifest);
// The kernel library an executable carries for `target` ("cuda -arch=sm_75"):
// format "ptx", data WriteCudaBlob(images, manifest).
KernelLibraryBlob MakeCudaKernelLibraryBlob(std::string target,
                                            const std::vector<CudaImage>& images,
                                            absl::string_view manifest);
struct CudaBlobContents {
  std::vector<CudaImage> images;
  std::string manifest;
};
// Reads a blob defensively: INVALID_ARGUMENT for a bad magic or version,
// truncation, sizes past the end, unsorted or duplicate images, PTX that is
// not NUL-terminated, trailing bytes.
absl::StatusOr<CudaBlobContents> ReadCudaBlob(absl::string_view data);

// Whether an image is PTX for an architecture-specific target (its
// `.target sm_90a`: features such as sm_90a's wgmma), which a GPU of that
// compute capability alone runs.
bool IsArchSpecific(const CudaImage& image);
// The image a GPU of compute capability `sm` (major * 10 + minor) runs best:
// of `images` (sorted by sm), the newest not above `sm`, an architecture-
// specific one only when it is exactly `sm`. Null when none fits.
const CudaImage* PickCudaImage(const std::vector<CudaImage>& images, int sm);
// "sm_75, sm_90a": the images' targets, for messages.
std::string CudaImageNames(const std::vector<CudaImage>& images);

// Evaluates a launch count program with `dim(p, i)` and `scalar(p)` from the
// arguments. INVALID_ARGUMENT for a malformed program, division by zero or
// overflow.
struct CudaCountArgs {
  std::vector<std::vector<int64_t>> dims;  // per parameter (empty for scalars)
  std::vector<int64_t> scalars;            // per parameter (0 for tensors)
};
absl::StatusOr<int64_t> EvalCudaCount(const std::vector<std::string>& program,
                                      const CudaCountArgs& args);

// Loads a "ptx" blob: parses and checks it (no driver needed). Modules are
// loaded per device on the first call there. INVALID_ARGUMENT for a corrupt
// blob, UNIMPLEMENTED for another format.
absl::StatusOr<Ref<Module>> LoadCudaKernelLibrary(const KernelLibraryBlob& blob);

// Registers LoadCudaKernelLibrary as the VM's loader of format "ptx"
// (idempotent, thread-safe). LocalVirtualMachine::Create calls it.
void RegisterCudaKernelLibraryLoader();

}  // namespace tether

#endif  // TETHER_RUNTIME_CUDA_CUDA_KERNEL_LIBRARY_H_
