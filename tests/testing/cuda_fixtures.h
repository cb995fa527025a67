// What the CUDA kernel-library format tests (tests/vm/cuda_kernel_format_test.cc)
// and the GPU tests (tests/gpu/cuda_kernel_library_test.cc) build on: a
// manifest (docs/design/kernel-abi.md) with add(a, b, c), c = a + b on
// float32 vectors of one length, launched as add_k0 (256 threads a block,
// one per element), and PTX modules for sm_75.
#ifndef TETHER_TESTS_TESTING_CUDA_FIXTURES_H_
#define TETHER_TESTS_TESTING_CUDA_FIXTURES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tether::testing {

// The manifest: its header line, the add kernel, `more_kernels` (whole
// lines), and "end".
std::string CudaManifestWithAdd(absl::string_view more_kernels);

// A PTX module for sm_75 (version 7.8, 64-bit addresses) with `entries`.
std::string PtxModule(absl::string_view entries);

// A PTX module with two kernels written by hand with the kernel ABI's
// parameter layout (per kernel parameter a 64-bit value, data pointer or
// scalar, then each tensor's dims; checked with `ptxas -arch=sm_75` and
// `-arch=sm_90`): add_k0, the manifest's add, grid-stride; and
// store_null_k0(x, addr), whose thread 0 stores through `addr` (a run-time
// value, so the JIT cannot drop the store): with 0, a sticky fault.
std::string AddAndStoreNullPtx();

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_CUDA_FIXTURES_H_
