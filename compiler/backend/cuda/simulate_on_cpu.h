// A device kernel run on the CPU: the GPU lowering checked, operator by
// operator, on a machine without a GPU (BuildOptions::simulate_gpu_threads,
// the conformance runner's --simulate-gpu).
//
// Thread contract: a free function over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_BACKEND_CUDA_SIMULATE_ON_CPU_H_
#define TETHER_COMPILER_BACKEND_CUDA_SIMULATE_ON_CPU_H_

#include <cstdint>

#include "compiler/backend/cuda/device_split.h"

namespace tether::compiler {

// The source kernel as its launches run on a CPU: each launch's body inside
// a serial loop over `nthreads` simulated threads (one for a serial launch;
// for a block launch, max(1, nthreads / block) blocks, whose kThread loops
// run their threads one after the other), launches in order. Same
// parameters and name as the source kernel, so it replaces it in a CPU build.
KernelFunc SimulateOnCpu(const DeviceKernel& kernel, int64_t nthreads);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_CUDA_SIMULATE_ON_CPU_H_
