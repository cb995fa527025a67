// Token helpers shared by the CUDA kernel library formats
// (cuda_kernel_format.cc) and the loader that checks calls against them
// (cuda_kernel_library.cc). Internal to runtime/cuda.
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_RUNTIME_CUDA_CUDA_KERNEL_FORMAT_INTERNAL_H_
#define TETHER_RUNTIME_CUDA_CUDA_KERNEL_FORMAT_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace tether::cuda_internal {

// A strict decimal: digits only (a leading '-' when `allow_negative`), no
// '+', no spaces, in range.
bool ParseDecimal(absl::string_view s, bool allow_negative, int64_t* out);
// A small non-negative index (at most 6 digits).
bool ParseSmallIndex(absl::string_view s, int* out);

// A reference: `d<p>.<i>` (dim i of parameter p) or `s<p>` (scalar p).
struct CudaRef {
  bool is_dim = false;
  int param = 0;
  int dim = 0;
};
bool ParseRef(absl::string_view tok, CudaRef* out);
// The token of `r` ("d0.1", "s2").
std::string RefName(const CudaRef& r);
// What a ref names, in messages: "argument 0 dim 1", "argument 2".
std::string RefDescription(const CudaRef& r);

// PTX identifiers: [a-zA-Z][a-zA-Z0-9_$]* or [_$%][a-zA-Z0-9_$]+.
bool IsPtxIdentifier(absl::string_view s);
// The names declared with `.entry` in PTX text (a name in a comment may be
// counted too, which only makes a check for missing entries more lenient).
absl::flat_hash_set<std::string> PtxEntryNames(absl::string_view ptx);

}  // namespace tether::cuda_internal

#endif  // TETHER_RUNTIME_CUDA_CUDA_KERNEL_FORMAT_INTERNAL_H_
