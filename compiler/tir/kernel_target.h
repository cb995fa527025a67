// What kernel lowering needs to know about the machine the kernels will run
// on: one struct, made once by Build() from the target text
// (compiler/backend/llvm/target.h) and carried through the pipeline
// (PipelineOptions, FuseOptions, LegalizeOptions) to every operator's
// compute or schedule (LowerContext) and the block GEMM.
//
// Thread contract: a value type.
#ifndef TETHER_COMPILER_TIR_KERNEL_TARGET_H_
#define TETHER_COMPILER_TIR_KERNEL_TARGET_H_

#include <cstdint>

namespace tether::compiler {

struct KernelTarget {
  // Threads the kernels will run on (schedules may pick tiles by it); 0 = unknown.
  int num_threads = 0;
  // The kernels will run on a GPU (compiler/backend/cuda/device_split.h): a
  // kernel must have no kGlobal allocation below its top level and no
  // assertion, and should do its work in one top-level kParallel loop over
  // output elements (or rows), reductions serial inside it with kLocal
  // accumulators.
  bool gpu = false;
  // With gpu: the lowest architecture the kernels must run on (80 = sm_80;
  // 0 = unknown), which decides whether tensor cores may be used (70 for
  // float16, 80 for bfloat16).
  int gpu_arch = 0;
  // One CPU core's L2 cache in bytes (the target's -l2-cache, the host's own
  // when it is the host); 0 = unknown. The CPU GEMM's cache budget
  // (CpuGemmCacheBudget).
  int64_t l2_cache_bytes = 0;
};

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TIR_KERNEL_TARGET_H_
