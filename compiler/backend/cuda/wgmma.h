// The NVPTX code of warpgroup statements (compiler/tir/kernel_ir.h,
// "Warpgroup MMA"): Hopper's wgmma.mma_async (sm_90a) as inline PTX, since
// LLVM 19 has no intrinsic for it. A and B are read from kSwizzle128 shared
// tiles through 64-bit matrix descriptors: A K-major (rows of 64 k values,
// 128 bytes, 8 rows a 1024-byte swizzle period apart), B N-major (k rows of
// 64 n values per 128-byte column block, the blocks `b_rows` x 128 bytes
// apart). The accumulator of m64nNk16 is N / 2 float32 registers per thread,
// register r of thread t holding row 16 (t % 128 / 32) + t % 32 / 4 +
// 8 (r / 2 % 2), column 8 (r / 4) + 2 (t % 4) + r % 2 (the PTX ISA's
// "Matrix Fragments for wgmma.mma_async.m64nNk16").
//
// Thread contract: stateless functions over an IRBuilder; thread-compatible.
#ifndef TETHER_COMPILER_BACKEND_CUDA_WGMMA_H_
#define TETHER_COMPILER_BACKEND_CUDA_WGMMA_H_

#include <cstdint>

#include "compiler/tir/prim_expr.h"
#include "llvm/IR/IRBuilder.h"

namespace tether::compiler::codegen {

// The module flag set when a module uses wgmma: its PTX must target sm_90a.
inline constexpr char kSm90aFlag[] = "tether.sm_90a";

// One warpgroup product: an accumulator of `n` columns, a k step of `k`
// (A's row, 128 bytes), B's tile of `b_rows` rows, operands of `dtype`.
struct WarpgroupShape {
  int64_t n, k, b_rows;
  DataType dtype;
};

// Registers per thread of an accumulator of `n` columns.
inline int64_t WgmmaRegisters(int64_t n) { return n / 2; }

// acc = (accumulate ? acc : 0) + A x B: wgmma.fence, k / 16 wgmma.mma_async,
// a commit, then a wait that leaves this group in flight. `acc` points to
// the thread's registers (float[n / 2]); `a` and `b` to the tiles' first
// elements in shared memory; `accumulate` is an i1.
void EmitWgmma(llvm::IRBuilder<>& b, const WarpgroupShape& shape, llvm::Value* acc, llvm::Value* a,
               llvm::Value* bt, llvm::Value* accumulate);

// Waits for every wgmma group, then stores columns [first_col, first_col +
// width) of the accumulator to the float32 tile at `dst` (shared memory,
// rows `width` elements apart); `tid` is the thread's index in its block.
void EmitWgmmaStore(llvm::IRBuilder<>& b, llvm::Value* acc, llvm::Value* tid, int64_t first_col,
                    int64_t width, llvm::Value* dst);

// fence.proxy.async.shared::cta: this thread's shared-memory writes become
// visible to the tensor cores' (async proxy) reads after the next barrier.
void EmitAsyncProxyFence(llvm::IRBuilder<>& b);

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_CUDA_WGMMA_H_
