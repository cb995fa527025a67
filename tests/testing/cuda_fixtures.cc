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

std::string AddAndStoreNullPtx() {
  return PtxModule(R"(
// add(a, b, c): c[i] = a[i] + b[i] for i < n, grid-stride. Parameters: the
// three data pointers, then the one dim of each tensor.
.visible .entry add_k0(
  .param .u64 a, .param .u64 b, .param .u64 c,
  .param .u64 a_d0, .param .u64 b_d0, .param .u64 c_d0)
{
  .reg .pred %p<2>;
  .reg .b32 %r<5>;
  .reg .b64 %rd<12>;
  .reg .f32 %f<4>;

  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [c];
  ld.param.u64 %rd4, [a_d0];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd5, %r1, %r2;
  cvt.u64.u32 %rd6, %r3;
  add.s64 %rd5, %rd5, %rd6;
  mul.wide.u32 %rd7, %r4, %r2;
LOOP:
  setp.ge.s64 %p1, %rd5, %rd4;
  @%p1 bra DONE;
  shl.b64 %rd8, %rd5, 2;
  add.s64 %rd9, %rd1, %rd8;
  add.s64 %rd10, %rd2, %rd8;
  add.s64 %rd11, %rd3, %rd8;
  ld.global.f32 %f1, [%rd9];
  ld.global.f32 %f2, [%rd10];
  add.rn.f32 %f3, %f1, %f2;
  st.global.f32 [%rd11], %f3;
  add.s64 %rd5, %rd5, %rd7;
  bra.uni LOOP;
DONE:
  ret;
}

// store_null(x, addr): thread 0 writes to the address given as a scalar
// (a runtime value, so the JIT cannot drop the store).
.visible .entry store_null_k0(.param .u64 x, .param .u64 addr, .param .u64 x_d0)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [addr];
  mov.u32 %r1, 42;
  st.global.u32 [%rd1], %r1;
  ret;
}
)");
}

}  // namespace tether::testing
