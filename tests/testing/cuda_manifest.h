// The CUDA kernel-library manifest (docs/design/kernel-abi.md) that
// the format tests (tests/vm/cuda_kernel_format_test.cc) and the GPU tests
// (tests/gpu/cuda_kernel_library_test.cc) build on: add(a, b, c), c = a + b
// on float32 vectors of one length, launched as add_k0 (256 threads a
// block, one per element), then the kernels a test adds.
#ifndef TETHER_TESTS_TESTING_CUDA_MANIFEST_H_
#define TETHER_TESTS_TESTING_CUDA_MANIFEST_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tether::testing {

// The manifest: its header line, the add kernel, `more_kernels` (whole
// lines), and "end".
std::string CudaManifestWithAdd(absl::string_view more_kernels);

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_CUDA_MANIFEST_H_
