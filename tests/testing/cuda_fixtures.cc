#include "tests/testing/cuda_fixtures.h"

#include "absl/strings/str_cat.h"

namespace tether::testing {

std::string CudaManifestWithAdd(absl::string_view more_kernels) {
  return absl::StrCat(
      "tether-cuda-manifest 1\n"
      "kernel add 3 1\n"
      "tensor float32 1 *\n"
      "tensor float32 1 =d0.0\n"
      "tensor float32 1 =d0.0\n"
      "launch add_k0 256 1 d0.0\n",
      more_kernels, "end\n");
}

std::string PtxModule(absl::string_view entries) {
  return absl::StrCat(".version 7.8\n.target sm_75\n.address_size 64\n", entries);
}

}  // namespace tether::testing
