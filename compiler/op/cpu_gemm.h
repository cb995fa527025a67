// The CPU schedule for products C[b][m][n] = sum_k A[b][m][k] * B[b][k][n],
// shared by matmul and by the convolutions that are one (a 1x1 convolution
// with unit strides and no padding is W[o][c] times the image as a
// [c][h * w] matrix), as block_gemm.h is on a GPU.
//
// It follows the GotoBLAS/BLIS shape on a small scale: B is packed once per
// B operand into zero-padded column panels Bp[bb][jo][k][NR] (so the
// micro-kernel reads NR contiguous values per k and never checks bounds),
// or, where B's columns are contiguous and N is constant, B's full panels
// are read in place and only a partial last panel is packed (but not a B
// whose rows are a multiple of 1 KiB apart against more than 4 row blocks:
// those rows share few cache sets). Each (batch,
// row block, column panel) triple -- the parallel loop, panels innermost --
// runs an MR x NR micro-kernel (which, reading a packed constant B with
// its row blocks inner, prefetches the next panel's row of each k step):
// MR x NR accumulators in a kLocal tile
// (emitted as vector registers), MR rows unrolled, NR columns vectorized,
// the k loop innermost. With few rows a task covers up to 4 adjacent
// panels (a matrix-vector product's MR x NR accumulators alone would be two
// FMA chains). Rows past M read a clamped row and are not stored;
// columns past N are zeros in the panel and are not stored. The last
// panel of a constant N that NR does not divide runs a micro-kernel of its
// own, half as wide where it holds 16 columns or fewer (N = 196: 6 x 32 + 4).
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_OP_CPU_GEMM_H_
#define TETHER_COMPILER_OP_CPU_GEMM_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "compiler/tir/kernel_ir.h"
#include "compiler/tir/kernel_target.h"
#include "runtime/core/tensor.h"

namespace tether::compiler {

// The cache budget where the target's L2 is unknown: 1 MiB (Zen 4's L2,
// and Skylake-SP's and later Xeons' 1-2 MiB; Zen 2/3 have 512 KiB, but
// their L3 is near).
inline constexpr int64_t kDefaultCpuGemmCacheBudget = int64_t{1} << 20;

struct CpuGemm {
  PrimExpr batches;    // output batches (a flat index b in [0, batches))
  PrimExpr b_batches;  // distinct B operands (each packed once)
  PrimExpr m, n, k;    // extents, possibly symbolic
  DataType acc_t;      // accumulation type
  // The B operand (in [0, b_batches)) output batch `b` multiplies.
  std::function<PrimExpr(const PrimExpr& b)> b_of;
  // Element readers, called with in-range indices only, returning acc_t.
  // `a` takes the output batch, `b` the B operand. B's columns are read as
  // vectors: in place where b_contiguous, else only to pack B.
  std::function<PrimExpr(const PrimExpr& b, const PrimExpr& m, const PrimExpr& k)> a;
  std::function<PrimExpr(const PrimExpr& bb, const PrimExpr& k, const PrimExpr& n)> b;
  // The store of one result (acc_t) at an in-range (b, m, n).
  std::function<Stmt(const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v)>
      store;
  // Where B is packed already (a constant weight packed at compile time,
  // PackGemmPanels): element (jo, k, jj) of B operand bb's panels, each
  // CpuGemmPanelWidth(n) columns wide, zero past n (returning acc_t). Then
  // nothing is packed per call and `b` is unused.
  std::function<PrimExpr(const PrimExpr& bb, const PrimExpr& jo, const PrimExpr& k,
                         const PrimExpr& jj)>
      b_panel;
  // Whether B's columns are contiguous in memory (n and n + 1 adjacent), so
  // its panels can be read in place; false (a strided convolution's pixels)
  // packs all of B on every call.
  bool b_contiguous = true;
  // Bytes of one operand a core's cache keeps between passes
  // (CpuGemmCacheBudget).
  int64_t cache_budget_bytes = kDefaultCpuGemmCacheBudget;
};

// The cache budget of a CPU GEMM on `target`: one core's L2 where the target
// gives it, else kDefaultCpuGemmCacheBudget.
int64_t CpuGemmCacheBudget(const KernelTarget& target);

// The packing (where needed) and the parallel micro-kernel loop of `g`.
Stmt CpuGemmSchedule(const CpuGemm& g);

// Whether CpuGemmSchedule runs a thread's row blocks innermost (each B
// panel group stays in cache while A's rows stream by) rather than its
// column panels: unless B fits the cache budget and A does not, or
// both fit (or m, n or k is symbolic) and B is not the larger. With the
// row blocks inner and an A over the budget, they run in groups that fit
// half of it, every panel group meeting a group's rows before the next
// group starts.
bool CpuGemmRowBlocksInner(const CpuGemm& g);

// The column panel width of the micro-kernel for n columns (the NR of
// CpuGemmSchedule): at most 32, n where smaller.
int64_t CpuGemmPanelWidth(int64_t n);

// A constant B of shape [k, n] packed as CpuGemmSchedule's panels,
// [ceil(n / NR), k, NR] with NR = CpuGemmPanelWidth(n), zero past n (the
// layout b_panel reads). INVALID_ARGUMENT for a tensor that is not 2-d on
// the CPU.
absl::StatusOr<Tensor> PackGemmPanels(const Tensor& b);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_OP_CPU_GEMM_H_
