// The CPU GEMM schedule (cpu_gemm.h).
#include "compiler/op/cpu_gemm.h"

#include <algorithm>
#include <cstring>

#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::Loop;

// Micro-kernel: kRows x kCols float32 accumulators, 16 AVX-512 registers at
// 8 x 32 (a batch of 8 rows is one row block, with no clamped rows).
constexpr int64_t kRows = 8;
constexpr int64_t kCols = 32;
// Accumulators a micro-kernel keeps at least, where few rows allow it (8
// AVX-512 registers, independent FMA chains), and the most panels it
// covers for that.
constexpr int64_t kMinAccumulators = 128;
constexpr int64_t kMaxPanelGroup = 4;

// `e` without its casts.
PrimExpr WithoutCasts(PrimExpr e) {
  while (const CastNode* c = e.as<CastNode>()) {
    PrimExpr value = c->value;
    e = std::move(value);
  }
  return e;
}

}  // namespace

// Whether the row blocks are the inner loop of a thread's tasks (each B
// panel group stays in cache while A's row blocks stream by) rather than
// the panels (each row block of A stays while B streams). The inner
// operand is read again for every block of the outer one unless it fits
// the cache: A once per panel group, B once per row block, which is 4x as
// often for a square product (row blocks of 8, panels of 32). So the
// panels are inner only where B fits and A does not, or, where both fit
// or the sizes are unknown, where B is not the larger. A square 1024^3
// product streamed B 128 times from L3 with the panels inner: 84-92
// GFLOP/s on an AMD EPYC, 95 with the rows.
int64_t CpuGemmCacheBudget(const KernelTarget& target) {
  return target.l2_cache_bytes > 0 ? target.l2_cache_bytes : kDefaultCpuGemmCacheBudget;
}

bool CpuGemmRowBlocksInner(const CpuGemm& g) {
  const int64_t *m = g.m.as_int(), *n = g.n.as_int(), *k = g.k.as_int();
  if (m == nullptr || n == nullptr) return false;
  const bool b_larger = *n > *m;
  if (k == nullptr) return b_larger;
  const int64_t elem = std::max<int64_t>(1, g.acc_t.bytes());
  const bool a_fits = *m * *k * elem <= g.cache_budget_bytes;
  const bool b_fits = *k * *n * elem <= g.cache_budget_bytes;
  if (a_fits == b_fits) return b_fits ? b_larger : true;
  return a_fits;
}

Stmt CpuGemmSchedule(const CpuGemm& g) {
  const PrimExpr &M = g.m, &N = g.n, &K = g.k;
  const DataType acc_t = g.acc_t;
  // Narrow tiles for small constant extents (matrix-vector products).
  int64_t mr = kRows, nr = kCols;
  if (const int64_t* m = M.as_int()) mr = std::max<int64_t>(1, std::min(mr, *m));
  if (const int64_t* n = N.as_int()) nr = CpuGemmPanelWidth(*n);
  const PrimExpr MR(mr), NR(nr);
  const PrimExpr nj = CeilDiv(N, nr);
  const PrimExpr mi = CeilDiv(M, mr);

  // When the column panels tile N exactly, the micro-kernel reads B in place
  // (NR contiguous values per k, as from a packed panel). Otherwise B is packed
  // into zero-padded panels first. Packing costs a pass over B per call, which
  // dominates for few rows (a batch of 8 against a 784 x 256 weight). But B's
  // rows (N elements apart, in a matmul and in a 1x1 convolution's image) a
  // multiple of 1 KiB apart share a sixteenth of the cache sets or less
  // (4 KiB apart, one set of a 48 KiB 12-way L1 and 1/64 of a 2 MiB L2's),
  // so a panel read in place is evicted before the next row block reads it
  // again: past 4 row blocks such a B is packed. In place, a 1024^3 product
  // ran at 42-47 GFLOP/s on an Intel Xeon (Emerald Rapids), a third of its
  // speed packed.
  const int64_t* n_const = N.as_int();
  const int64_t* m_const = M.as_int();
  const bool prepacked = g.b_panel != nullptr;
  const bool aliasing_rows = n_const != nullptr && m_const != nullptr && *m_const > 4 * mr &&
                             (*n_const * acc_t.bytes()) % 1024 == 0;
  // A task's micro-kernel covers `pc` adjacent panels when there are few
  // rows: MR x NR accumulators alone would be too few independent FMA
  // chains to hide the FMA latency (a matrix-vector product, MR = 1, would
  // run two), so MR x pc x NR of them are at least kMinAccumulators values.
  // A group past the last panel reads a clamped panel and stores nothing.
  // No more panels than there are (a narrow product would compute clamped
  // copies of its one panel).
  int64_t pc =
      std::max<int64_t>(1, std::min<int64_t>(kMaxPanelGroup, kMinAccumulators / (mr * nr)));
  if (n_const != nullptr) pc = std::min(pc, (*n_const + nr - 1) / nr);
  const PrimExpr PC(pc);
  const PrimExpr ng = CeilDiv(nj, pc);
  // The last panel of a constant N that NR does not divide (N = 196: 6
  // panels of 32 and 4 columns) may run a micro-kernel of its own, which
  // stores only the remaining columns: half as wide where they are at most
  // half a panel (narrow_last), so it computes 16 columns for its few
  // rather than 32; and where it reads its panel packed alone (tail_packed).
  const int64_t tail = n_const != nullptr ? *n_const % nr : 0;
  const bool partial_last = pc == 1 && tail > 0 && *n_const > nr;
  const bool narrow_last = partial_last && nr == kCols && tail <= kCols / 2;
  const bool rows_inner = CpuGemmRowBlocksInner(g);
  // With the row blocks inner (each panel read from memory once, then from
  // cache for every row block), the full panels of a B whose columns are
  // contiguous are read in place, and only the partial last one is packed
  // (zero past N), into gemm_tail_b[bb, k, jj]: a pass over all of B
  // per call was a fifth to two fifths of a 1x1 convolution's time on 28 x
  // 28 and 14 x 14 pixels. With the panels inner, all of B is read again
  // for every row block, and packed it is a contiguous stream: in place, a
  // 1x1 convolution 256 -> 1024 on 14 x 14 pixels was 5-15% slower.
  const bool tail_packed =
      partial_last && rows_inner && !prepacked && g.b_contiguous && !aliasing_rows;
  const bool split_last = narrow_last || tail_packed;
  const int64_t last_width = narrow_last ? kCols / 2 : nr;
  const bool direct_b = prepacked || tail_packed ||
                        (g.b_contiguous && n_const != nullptr && tail == 0 && !aliasing_rows);
  // Pack B: Bp[bb, jo, k, jj] = B[bb, k, jo * NR + jj], zero past N.
  Buffer Bp = MakeBuffer("gemm_packed_b", acc_t, {g.b_batches, nj, K, NR});
  auto pack = [&] {
    return Loop("pb", g.b_batches * nj, ForKind::kParallel, [&](const PrimExpr& t) {
      PrimExpr bb = FloorDiv(t, nj), jo = FloorMod(t, nj);
      return Loop("pk", K, ForKind::kSerial, [&](const PrimExpr& k) {
        PrimExpr full = LE((jo + 1) * NR, N);
        Stmt fast = Loop("pj", NR, ForKind::kVectorized, [&](const PrimExpr& jj) {
          return Store(Bp, {bb, jo, k, jj}, g.b(bb, k, jo * NR + jj));
        });
        Stmt edge = Loop("pj", NR, ForKind::kSerial, [&](const PrimExpr& jj) {
          PrimExpr col = jo * NR + jj;
          return Store(Bp, {bb, jo, k, jj},
                       Select(LT(col, N), g.b(bb, k, Min(col, N - 1)), MakeConst(acc_t, 0)));
        });
        if (n_const != nullptr && tail == 0) return fast;
        return IfThenElse(full, fast, edge);
      });
    });
  };
  // Pack the last panel only: Bt[bb, k, jj] = B[bb, k, (nj - 1) * NR + jj],
  // zero past N.
  Buffer Bt = MakeBuffer("gemm_tail_b", acc_t, {g.b_batches, K, NR});
  auto pack_tail = [&] {
    return Loop("tb", g.b_batches, ForKind::kParallel, [&](const PrimExpr& bb) {
      return Loop("tk", K, ForKind::kSerial, [&](const PrimExpr& k) {
        Stmt copy = Loop("tj", PrimExpr(tail), ForKind::kVectorized, [&](const PrimExpr& jj) {
          return Store(Bt, {bb, k, jj}, g.b(bb, k, (nj - 1) * NR + jj));
        });
        Stmt zero = Loop("tz", PrimExpr(nr - tail), ForKind::kVectorized, [&](const PrimExpr& jj) {
          return Store(Bt, {bb, k, jj + PrimExpr(tail)}, MakeConst(acc_t, 0));
        });
        return Seq({copy, zero});
      });
    });
  };

  // Compute: parallel over (output batch, row block, column panel), the
  // inner of the two as CpuGemmRowBlocksInner decides: row blocks
  // innermost where B is the larger (each B panel is read from memory once
  // and then from cache for every row block: a weight matrix against a few
  // rows, an image against a 1x1 convolution's small weight) or neither
  // fits the cache, panels innermost where A is the larger and B fits (a
  // thread's contiguous share of tasks keeps its A rows).
  //
  // With the row blocks inner and an A larger than the cache budget, they
  // go in groups of rows that fit half of it: a group's rows of A stay in
  // cache while every panel group passes (the order is group, panel group,
  // row block), so A is read from memory once, not once per panel group,
  // and B once per group. A 1024^3 product read A's 4 MiB 32 times from L3
  // without groups: 87 GFLOP/s at 1 thread on an Intel Xeon (Emerald
  // Rapids), 107-136 with them (a noisy 2-core VM). An A that fits (a batch
  // of 64 rows against a 4096 x 1024 weight: 1 MiB) stays ungrouped: B, far
  // larger, would be read once per group.
  int64_t group = 0, blocks = 0;
  const int64_t* k_const = K.as_int();
  if (rows_inner && m_const != nullptr && k_const != nullptr) {
    blocks = (*m_const + mr - 1) / mr;
    const int64_t block_bytes =
        std::max<int64_t>(1, mr * *k_const * std::max<int64_t>(1, acc_t.bytes()));
    const int64_t fit = std::max<int64_t>(1, g.cache_budget_bytes / 2 / block_bytes);
    if (blocks * block_bytes > g.cache_budget_bytes) {
      const int64_t groups = (blocks + fit - 1) / fit;
      group = (blocks + groups - 1) / groups;  // balanced: the last group is short by < groups
    }
  }
  const PrimExpr G(std::max<int64_t>(group, 1));
  const PrimExpr tiles = group > 0 ? PrimExpr((blocks + group - 1) / group * group) * ng : mi * ng;
  Stmt compute = Loop("mb", g.batches * tiles, ForKind::kParallel, [&](const PrimExpr& t) {
    PrimExpr tile = FloorMod(t, tiles);
    PrimExpr b = FloorDiv(t, tiles);
    PrimExpr io = rows_inner ? FloorMod(tile, mi) : FloorDiv(tile, ng);
    PrimExpr jg = rows_inner ? FloorDiv(tile, mi) : FloorMod(tile, ng);
    if (group > 0) {
      io = FloorDiv(tile, G * ng) * G + FloorMod(tile, G);
      jg = FloorMod(FloorDiv(tile, G), ng);
    }
    // A constant weight's panels come from memory on their first pass, at
    // the micro-kernel's pace (128 bytes per 16 FMAs): more than one core's
    // share of DRAM bandwidth, so that pass ran at a fraction of the others'
    // speed. With the row blocks inner each panel is read once per row
    // block, and the micro-kernel prefetches the next panel as it goes
    // (one panel a task: pc == 1).
    const bool prefetch_next =
        prepacked && rows_inner && pc == 1 && m_const != nullptr && *m_const > mr;
    const int64_t line = std::max<int64_t>(1, 64 / std::max<int64_t>(1, acc_t.bytes()));
    PrimExpr bb = g.b_of(b);
    // Panel q of the group, clamped to the last panel for reads.
    auto panel_of = [&](const PrimExpr& q) { return pc == 1 ? jg : jg * PC + q; };
    auto read_panel = [&](const PrimExpr& q) { return pc == 1 ? jg : Min(jg * PC + q, nj - 1); };
    // Element (k, jj) of panel q; `last`: of the last panel, split_last's
    // micro-kernel, which reads the tail panel where that is packed alone.
    auto panel = [&](const PrimExpr& q, const PrimExpr& k, const PrimExpr& jj, bool last) {
      if (last && tail_packed) return Load(Bt, {bb, k, jj});
      PrimExpr jo = read_panel(q);
      if (prepacked) return g.b_panel(bb, jo, k, jj);
      return direct_b ? g.b(bb, k, jo * NR + jj) : Load(Bp, {bb, jo, k, jj});
    };
    // The micro-kernel over `width` columns of each panel (NR, or the
    // last panel's): accumulate, then store.
    auto kernel = [&](int64_t width, const char* name, bool last) {
      const PrimExpr Wd(width);
      Buffer acc = MakeBuffer(name, acc_t, {MR, PC, Wd}, BufferNode::Scope::kLocal);
      Stmt zero = Loop("zi", MR, ForKind::kUnrolled, [&](const PrimExpr& ii) {
        return Loop("zq", PC, ForKind::kUnrolled, [&](const PrimExpr& q) {
          return Loop("zj", Wd, ForKind::kVectorized, [&](const PrimExpr& jj) {
            return Store(acc, {ii, q, jj}, MakeConst(acc_t, 0));
          });
        });
      });
      Stmt kloop = Loop("k", K, ForKind::kSerial, [&](const PrimExpr& k) {
        Stmt fma = Loop("ii", MR, ForKind::kUnrolled, [&](const PrimExpr& ii) {
          PrimExpr av = g.a(b, Min(io * MR + ii, M - 1), k);
          return Loop("q", PC, ForKind::kUnrolled, [&](const PrimExpr& q) {
            return Loop("jj", Wd, ForKind::kVectorized, [&](const PrimExpr& jj) {
              return Store(acc, {ii, q, jj}, Load(acc, {ii, q, jj}) + av * panel(q, k, jj, last));
            });
          });
        });
        if (!prefetch_next) return fma;
        // The next panel's row k, a cache line at a time, while this one
        // is computed (every row block of the panel's pass fetches it, so
        // memory has the whole pass to deliver it).
        std::vector<Stmt> steps;
        const PrimExpr next = Min(jg + 1, nj - 1);
        for (int64_t at = 0; at < nr; at += line) {
          const PrimExpr element = WithoutCasts(g.b_panel(bb, next, k, PrimExpr(at)));
          if (const LoadNode* l = element.as<LoadNode>()) {
            steps.push_back(Prefetch(l->buffer, l->indices));
          }
        }
        steps.push_back(fma);
        return Seq(steps);
      });
      // A full panel's row is stored as one constant-length vector (the
      // kernel emitter's explicit vectors: the store's index arithmetic runs
      // once per row, not per element, which matters where the reader's
      // indices divide, as a convolution's pixel does); the last panel of an
      // N that NR does not divide stores its remaining columns.
      auto store_panel = [&](const PrimExpr& q) {
        const PrimExpr jo = panel_of(q);
        return Loop("si", Min(MR, M - io * MR), ForKind::kSerial, [&](const PrimExpr& ii) {
          auto cols = [&](const PrimExpr& extent) {
            return Loop("sj", extent, ForKind::kVectorized, [&](const PrimExpr& jj) {
              return g.store(b, io * MR + ii, jo * NR + jj, Load(acc, {ii, q, jj}));
            });
          };
          if (last) return cols(PrimExpr(tail));
          if (split_last || (n_const != nullptr && tail == 0)) return cols(NR);
          return IfThenElse(LE((jo + 1) * NR, N), cols(NR), cols(N - jo * NR));
        });
      };
      Stmt store = pc == 1 ? store_panel(PrimExpr(0))
                           : Loop("sq", Min(PC, nj - jg * PC), ForKind::kSerial, store_panel);
      return Allocate(acc, Seq({zero, kloop, store}));
    };
    Stmt task = !split_last
                    ? kernel(nr, "gemm_acc", false)
                    : IfThenElse(EQ(jg, nj - 1),
                                 kernel(last_width,
                                        last_width < nr ? "gemm_acc_tail" : "gemm_acc_last", true),
                                 kernel(nr, "gemm_acc", false));
    // A short last group's missing row blocks do nothing.
    if (group > 0 && blocks % group != 0) return IfThenElse(LT(io, mi), task);
    return task;
  });
  if (tail_packed) return Allocate(Bt, Seq({pack_tail(), compute}));
  if (direct_b) return compute;
  return Allocate(Bp, Seq({pack(), compute}));
}

int64_t CpuGemmPanelWidth(int64_t n) { return std::max<int64_t>(1, std::min(kCols, n)); }

absl::StatusOr<Tensor> PackGemmPanels(const Tensor& b) {
  if (b->ndim() != 2 || b->device() != Device::Cpu()) {
    return absl::InvalidArgumentError("PackGemmPanels: B must be a 2-d tensor on the CPU");
  }
  const int64_t k = b->shape()[0], n = b->shape()[1];
  const int64_t nr = CpuGemmPanelWidth(n), nj = (n + nr - 1) / nr;
  const int64_t shape[] = {nj, k, nr};
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, b->dtype(), Device::Cpu()));
  const size_t elem = (b->dtype().bits() + 7) / 8;
  const char* src = static_cast<const char*>(b->element_data());
  char* dst = static_cast<char*>(out->element_data());
  std::memset(dst, 0, static_cast<size_t>(nj * k * nr) * elem);
  for (int64_t jo = 0; jo < nj; ++jo) {
    const int64_t cols = std::min(nr, n - jo * nr);
    for (int64_t kk = 0; kk < k; ++kk) {
      std::memcpy(dst + static_cast<size_t>((jo * k + kk) * nr) * elem,
                  src + static_cast<size_t>(kk * n + jo * nr) * elem,
                  static_cast<size_t>(cols) * elem);
    }
  }
  return out;
}

}  // namespace tether::compiler
