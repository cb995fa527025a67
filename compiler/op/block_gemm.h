// A GPU block schedule for products C[b][m][n] = sum_k A[b][m][k] * B[b][k][n]
// (compiler/tir/kernel_ir.h, "Block schedules"), shared by matmul and by
// conv2d as an implicit GEMM. Each block of 256 threads, a 16 x 16 grid,
// computes a (16 TM) x (16 TN) tile of C: k advances 16 at a time, the A and B
// slices staged in two stages of shared memory (zero outside the product),
// and thread (ty, tx) accumulates TM x TN values in registers, its rows runs
// of min(4, TM) adjacent ones 16 runs apart (columns likewise), so that its
// shared reads and its stores are 16-byte vectors and a warp's coalesce.
// Each k step is one barrier: a thread loads its share of the next step into
// registers, accumulates this one, then stores the next into the other stage.
//
// With float16 or bfloat16 operands on an architecture that has them in
// tensor cores (sm_70 / sm_80), the product runs on tensor cores instead
// (kernel_ir.h, "Tensor cores"): the block's 8 warps, 2 x 4, each own a
// (16 FM) x (16 FN) part of a tile of up to 128 x 128; k advances 32 at a
// time, A and B staged in shared memory as they are (rows padded by 16
// bytes), each warp loading its fragments from there and accumulating in
// float32 fragments. From sm_80, an operand that is a plain tensor with
// rows of 16-byte multiples is fetched with asynchronous copies into two
// stages of its tile, step k + 1 in flight while the warps work on step k.
// The epilogue goes through shared memory, a 16 x 16 tile per warp at a
// time, so it is applied per element as on the CPU.
//
// On sm_90 (Hopper), when both operands can be fetched with asynchronous
// copies and k is a constant, the product runs on the warpgroup MMA
// instead (kernel_ir.h, "Warpgroup MMA"): tiles of 128 x 256 (or 128 x 128
// for n up to 128), the block's two warpgroups 64 rows each, k steps of
// 64 in four stages of 128-byte-swizzled shared memory (dynamic, about
// 225 KB), two steps of copies and one product in flight; the epilogue
// goes through shared memory 64 columns at a time.
//
// Products of fewer than 16 rows or columns (a constant m or n) take the
// skinny schedule instead (WorthSkinnyGemm): k split across a block's
// warps, one column of C a lane.
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_OP_BLOCK_GEMM_H_
#define TETHER_COMPILER_OP_BLOCK_GEMM_H_

#include <functional>

#include "compiler/tir/kernel_ir.h"

namespace tether::compiler {

struct BlockGemm {
  PrimExpr batches, m, n, k;  // extents, possibly symbolic
  DataType acc_t;             // accumulation type (float32 for 16-bit data)
  DataType operand_t;         // what the readers return
  int gpu_arch = 0;           // KernelTarget::gpu_arch: whether tensor cores may be used
  // Element readers, called with in-range indices only, returning operand_t.
  std::function<PrimExpr(const PrimExpr& b, const PrimExpr& m, const PrimExpr& k)> a;
  std::function<PrimExpr(const PrimExpr& b, const PrimExpr& k, const PrimExpr& n)> b;
  // The store of one result (acc_t) at an in-range (b, m, n).
  std::function<Stmt(const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v)>
      store;
};

// Whether `g` runs on Hopper's warpgroup MMA (above): tensor cores, sm_90
// or newer, a constant k, m at least 128 and n at least 128 (or unknown),
// and operands that are plain tensors with rows of 16-byte multiples.
bool UsesWarpgroupMma(const BlockGemm& g);

// Whether a product is worth the block schedule on a GPU: m and n at least
// 16 each, or unknown (fewer: the skinny schedule below).
bool WorthBlockGemm(const PrimExpr& m, const PrimExpr& n);
// Whether a product takes the skinny schedule instead: m a constant from 1
// to 15 (a batch-1 fully connected layer, a recurrent step), at any n and
// k. It used to run one thread per output element, each walking all of k:
// ResNet-50's 1 x 2048 by 2048 x 1000 classifier took 222 us on an H200,
// 100 times its 8 MB at the card's bandwidth (bench/gpu/NOTES.md run 8). A
// block covers up to 8 rows and 32 columns of C: its 8 warps split k, each
// lane reading one column of B (a warp's loads coalesce) and A's element
// the same for the whole warp, and their partial sums are added in shared
// memory in warp order. Split-K (BlockGemmSchedule) aims at four blocks an
// SM, so that every SM has loads in flight. A product of few columns (n a
// constant below 16: a matrix times a vector, a convolution of a 1x1
// image) is the transposed one, C^T = B^T A^T, whose rows are few; there a
// lane reads a row of A, strided, the 8 warps the 8 adjacent k of a sector.
bool WorthSkinnyGemm(const PrimExpr& m);

// Whether `g` runs on tensor cores: float16 operands and sm_70 or newer, or
// bfloat16 and sm_80 or newer; float32 accumulation.
bool UsesTensorCores(const BlockGemm& g);

// The kBlock loop over (batch, m tile, n tile). Tiles of 128 x 128, or
// smaller along a side whose constant extent is below 128. When the tiles
// are fewer than a GPU has SMs (constant extents) and k is long (split-K):
// a kGlobal partial buffer around that loop over (k chunk, batch, tiles),
// each chunk's product stored to its part of the buffer, then a kParallel
// loop summing each element's partials in chunk order and storing it.
// With WorthSkinnyGemm(g.m), or of g.n (transposed), the skinny schedule
// instead.
Stmt BlockGemmSchedule(const BlockGemm& g);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_OP_BLOCK_GEMM_H_
