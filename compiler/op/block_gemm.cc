// The block GEMM schedule (block_gemm.h).
#include "compiler/op/block_gemm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::Loop;

constexpr int64_t kSide = 16;  // threads per tile side
constexpr int64_t kThreads = kSide * kSide;
constexpr int64_t kStepK = 16;
constexpr int64_t kMaxPer = 8;  // values per thread and side: tiles up to 128
static_assert(kThreads == kDeviceBlockThreads);

// Tensor cores: warps over the tile, k step, and the padding of staged rows.
constexpr int64_t kWarps = kThreads / kWarpThreads;
constexpr int64_t kWarpRows = 2, kWarpCols = kWarps / kWarpRows;
constexpr int64_t kFrag = kMatrixTileSide;
constexpr int64_t kTcStepK = 32;
constexpr int64_t kTcPad = 8;  // 16 bytes: rows start in other banks

// Warpgroup MMA (sm_90): tiles of 128 rows (a warpgroup's 64 each) and 256
// columns (128 when n is at most that), k steps of 64 (rows of 128 bytes)
// in kWgStages stages, kWgAhead of them in flight; the epilogue takes
// kWgSlab columns at a time.
constexpr int64_t kWarpgroups = kThreads / kWarpgroupThreads;
constexpr int64_t kWgRows = kWarpgroups * kWarpgroupRows;
constexpr int64_t kWgStepK = 64;
constexpr int64_t kWgStages = 4;
constexpr int64_t kWgAhead = kWgStages - 2;
constexpr int64_t kWgSlab = 64;

// Units per thread (or warp) along a side of constant extent `e` (unknown:
// `most`): the smallest power of two whose tile, `unit` times it, covers e.
int64_t PerThread(const PrimExpr& e, int64_t unit = kSide, int64_t most = kMaxPer) {
  const int64_t* c = e.as_int();
  if (c == nullptr) return most;
  int64_t per = 1;
  while (per < most && unit * per < *c) per *= 2;
  return per;
}

Stmt Threads(const std::function<Stmt(const PrimExpr&)>& body) {
  return Loop("t", kThreads, ForKind::kThread, body);
}

// The skinny schedule's block (SkinnySchedule): 32 columns, one a lane, and
// up to kSkinnyRows rows, in groups of equal size where m needs several (12
// rows: two of 6); its 8 warps take k steps of 8, kSkinnyUnroll of them an
// iteration.
constexpr int64_t kSkinnyCols = kWarpThreads;
constexpr int64_t kSkinnyLanes = kThreads / kSkinnyCols;
constexpr int64_t kSkinnyRows = 8;
constexpr int64_t kSkinnyUnroll = 4;
constexpr int64_t kSkinnyStep = kSkinnyLanes * kSkinnyUnroll;
int64_t SkinnyRows(int64_t m) {
  const int64_t groups = (m + kSkinnyRows - 1) / kSkinnyRows;
  return (m + groups - 1) / groups;
}

// A block's tile of C, rows x cols, as the schedule for `g` makes it.
struct TileShape {
  int64_t rows, cols;
};
int64_t WarpgroupCols(const PrimExpr& n) {
  const int64_t* c = n.as_int();
  return c != nullptr && *c <= 128 ? 128 : 256;
}
TileShape TileOf(const BlockGemm& g) {
  if (UsesWarpgroupMma(g)) return {kWgRows, WarpgroupCols(g.n)};
  if (UsesTensorCores(g)) {
    return {kWarpRows * kFrag * PerThread(g.m, kWarpRows * kFrag, 4),
            kWarpCols * kFrag * PerThread(g.n, kWarpCols * kFrag, 2)};
  }
  return {kSide * PerThread(g.m), kSide * PerThread(g.n)};
}

// Whether a side of extent `e`, tiled by `tile`, never has a partial tile.
bool Divides(int64_t tile, const PrimExpr& e) {
  const int64_t* c = e.as_int();
  return c != nullptr && *c % tile == 0;
}

using Reader = std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>;

// Whether an operand read by `read(row, col)`, of dtype `t` and `c_ext`
// columns, can be staged with 16-byte asynchronous copies: it is a Load of a
// tensor parameter whose last index is the column and whose others do not
// use it (a run of columns is contiguous), with rows and `c_ext` multiples of
// 16 bytes (so a copy is all inside the operand or all outside).
bool Copyable(const Reader& read, DataType t, const PrimExpr& c_ext) {
  Var r("probe_r"), c("probe_c");
  const PrimExpr v = read(r, c);
  const LoadNode* l = v.as<LoadNode>();
  if (l == nullptr || l->buffer->scope != BufferNode::Scope::kGlobal || l->buffer->dtype != t ||
      !l->indices.back().same_as(c)) {
    return false;
  }
  for (size_t i = 0; i + 1 < l->indices.size(); ++i) {
    std::vector<Var> used;
    CollectVars(l->indices[i], &used);
    for (const Var& u : used) {
      if (u.same_as(c)) return false;
    }
  }
  return KnownFactor(l->buffer->shape.back()) * t.bytes() % 16 == 0 &&
         KnownFactor(c_ext) * t.bytes() % 16 == 0;
}

// One tile of a block schedule's kBlock loop over (batch, m tile, n tile)
// with tiles of bm x bn: its batch, first row and column, and the operands'
// readers in that batch.
struct BlockTile {
  PrimExpr batch, m0, n0;
  Reader read_a, read_b;
};
//
// Blocks take the tiles of a batch in groups of kRasterRows rows of tiles,
// column by column within a group (CUTLASS's threadblock swizzle): the
// blocks resident at once share a few row panels of A and column panels of
// B, which then come from L2 rather than memory.
constexpr int64_t kRasterRows = 8;
Stmt EachTile(const BlockGemm& g, int64_t bm, int64_t bn,
              const std::function<Stmt(const BlockTile&)>& body) {
  const PrimExpr mt = CeilDiv(g.m, bm), nt = CeilDiv(g.n, bn), per_batch = mt * nt;
  const PrimExpr per_group = nt * kRasterRows;
  return Loop("tile", g.batches * per_batch, ForKind::kBlock, [&](const PrimExpr& tile) {
    const PrimExpr in_batch = FloorMod(tile, per_batch);
    const PrimExpr first = FloorDiv(in_batch, per_group) * kRasterRows;
    const PrimExpr rows = Min(mt - first, PrimExpr(kRasterRows));
    const PrimExpr in_group = FloorMod(in_batch, per_group);
    BlockTile t{FloorDiv(tile, per_batch), (first + FloorMod(in_group, rows)) * bm,
                FloorDiv(in_group, rows) * bn, Reader(), Reader()};
    t.read_a = [&g, b = t.batch](const PrimExpr& m, const PrimExpr& k) { return g.a(b, m, k); };
    t.read_b = [&g, b = t.batch](const PrimExpr& k, const PrimExpr& n) { return g.b(b, k, n); };
    return body(t);
  });
}

// One operand's tile of a k step: the rows x cols tile at (r0, c0) of an
// operand of extents (r_ext, c_ext), read(r, c), kept in dst[stage][row][col]
// (dst[row][col] without a stage; with `transpose`, [col][row]).
struct OperandTile {
  Buffer dst;
  int64_t rows, cols;
  PrimExpr r0, r_ext, c0, c_ext;
  Reader read;
  std::string name;
  bool transpose = false;
};

// How Stage moves a thread's share of a tile:
//   kDirect  operand -> dst, through the thread's registers
//   kAsync   operand -> dst by asynchronous copies (the operand is Copyable)
//   kFetch   operand -> regs[t][slot], to be put later
//   kPut     regs[t][slot] -> dst
enum class StageMode { kDirect, kAsync, kFetch, kPut };

// Thread t's share of `o` is (rows / step) runs of `vec` columns (16 bytes)
// of one row: with `step` rows of threads, a warp reads whole rows, and a
// thread's addresses differ by constants.
struct StageShape {
  int64_t vec, per_row, step, runs;
  explicit StageShape(const OperandTile& o)
      : vec(std::min<int64_t>(16 / o.dst->dtype.bytes(), o.cols)),
        per_row(o.cols / vec),
        step(kThreads / per_row),
        runs((o.rows + step - 1) / step) {}
  int64_t slots() const { return runs * vec; }  // a thread's values (kFetch)
};

// Stages thread t's share of `o` (zero outside the operand, reads clamped
// into range; a side whose extent is a constant multiple of the tile needs
// neither). With whole tiles of an operand whose rows are 16-byte multiples
// LLVM merges a run into one 128-bit load and store (the launcher holds
// tensor data 16-byte aligned); kAsync makes it one asynchronous copy,
// zero-filled outside the operand.
Stmt Stage(const OperandTile& o, const PrimExpr& stage, const PrimExpr& t, StageMode mode,
           const Buffer& regs = Buffer()) {
  const StageShape sh(o);
  const bool whole_r = Divides(o.rows, o.r_ext), whole_c = Divides(o.cols, o.c_ext);
  return Loop(o.name, sh.runs, ForKind::kUnrolled, [&](const PrimExpr& i) {
    const PrimExpr row = FloorDiv(t, sh.per_row) + i * sh.step;
    const PrimExpr r = o.r0 + row, r_in = whole_r ? r : Min(r, o.r_ext - 1);
    PrimExpr row_ok;
    if (!whole_r) row_ok = LT(r, o.r_ext);
    auto in_range = [&](const PrimExpr& c) {
      if (whole_c) return row_ok;
      return row_ok.defined() ? And(row_ok, LT(c, o.c_ext)) : LT(c, o.c_ext);
    };
    // dst's indices of (row, col).
    auto place = [&](const PrimExpr& col) {
      std::vector<PrimExpr> at = {row, col};
      if (o.transpose) std::swap(at[0], at[1]);
      if (stage.defined()) at.insert(at.begin(), stage);
      return at;
    };
    Stmt copy;
    // The run's first column, clamped to the operand's last run.
    const PrimExpr run = FloorMod(t, sh.per_row) * sh.vec, run_c = o.c0 + run;
    const PrimExpr first = mode == StageMode::kAsync
                               ? o.read(r_in, whole_c ? run_c : Min(run_c, o.c_ext - sh.vec))
                               : PrimExpr();
    if (const LoadNode* src = first.defined() ? first.as<LoadNode>() : nullptr) {
      copy = AsyncCopy({o.dst, place(run)}, {src->buffer, src->indices}, static_cast<int>(sh.vec),
                       in_range(run_c));
    } else {
      copy = Loop(o.name + "v", sh.vec, ForKind::kUnrolled, [&](const PrimExpr& e) {
        const PrimExpr col = run + e, c = o.c0 + col, slot = i * sh.vec + e;
        if (mode == StageMode::kPut) return Store(o.dst, place(col), Load(regs, {t, slot}));
        PrimExpr v = o.read(r_in, whole_c ? c : Min(c, o.c_ext - 1));
        const PrimExpr ok = in_range(c);
        if (ok.defined()) v = Select(ok, v, MakeConst(o.dst->dtype, 0));
        return mode == StageMode::kFetch ? Store(regs, {t, slot}, v) : Store(o.dst, place(col), v);
      });
    }
    return o.rows % sh.step == 0 ? copy : IfThenElse(LT(row, PrimExpr(o.rows)), copy);
  });
}

// The tensor-core schedule (block_gemm.h).
Stmt TensorCoreSchedule(const BlockGemm& g) {
  const auto [bm, bn] = TileOf(g);
  const int64_t fm = bm / (kWarpRows * kFrag), fn = bn / (kWarpCols * kFrag);
  const DataType f32 = DataType::Float(32);
  const bool whole = Divides(bm, g.m) && Divides(bn, g.n);
  using Scope = BufferNode::Scope;
  return EachTile(g, bm, bn, [&](const BlockTile& at) {
    const PrimExpr &batch = at.batch, &m0 = at.m0, &n0 = at.n0;
    const Reader &read_a = at.read_a, &read_b = at.read_b;
    // From sm_80, operands that are plain tensors are fetched with
    // asynchronous copies into two stages of tiles.
    const bool async_a = g.gpu_arch >= 80 && Copyable(read_a, g.operand_t, g.k);
    const bool async_b = g.gpu_arch >= 80 && Copyable(read_b, g.operand_t, g.n);
    const int64_t stages = async_a || async_b ? 2 : 1;
    Buffer as =
        MakeBuffer("gemm_a_tile", g.operand_t,
                   {PrimExpr(stages), PrimExpr(bm), PrimExpr(kTcStepK + kTcPad)}, Scope::kShared);
    Buffer bs =
        MakeBuffer("gemm_b_tile", g.operand_t,
                   {PrimExpr(stages), PrimExpr(kTcStepK), PrimExpr(bn + kTcPad)}, Scope::kShared);
    Buffer cs = MakeBuffer("gemm_c_tile", f32, {PrimExpr(kWarps), PrimExpr(kFrag), PrimExpr(kFrag)},
                           Scope::kShared);
    const PrimExpr w_(kWarps), f_(kFrag);
    Buffer af = MakeBuffer("gemm_a_frag", g.operand_t, {w_, PrimExpr(fm), f_, f_}, Scope::kMatrixA);
    Buffer bf = MakeBuffer("gemm_b_frag", g.operand_t, {w_, PrimExpr(fn), f_, f_}, Scope::kMatrixB);
    Buffer acc =
        MakeBuffer("gemm_acc", f32, {w_, PrimExpr(fm), PrimExpr(fn), f_, f_}, Scope::kAccumulator);
    auto warps = [&](const std::function<Stmt(const PrimExpr&)>& body) {
      return Loop("w", kWarps, ForKind::kWarp, body);
    };
    auto each_frag = [&](const std::function<Stmt(const PrimExpr&, const PrimExpr&)>& body) {
      return Loop("i", fm, ForKind::kUnrolled, [&](const PrimExpr& i) {
        return Loop("j", fn, ForKind::kUnrolled, [&](const PrimExpr& j) { return body(i, j); });
      });
    };
    // The warp's first row and column in the tile.
    auto warp_row = [&](const PrimExpr& w) { return FloorDiv(w, kWarpCols) * (fm * kFrag); };
    auto warp_col = [&](const PrimExpr& w) { return FloorMod(w, kWarpCols) * (fn * kFrag); };
    Stmt init = warps([&](const PrimExpr& w) {
      return each_frag([&](const PrimExpr& i, const PrimExpr& j) {
        return MatrixFill({acc, {w, i, j}}, MakeConst(f32, 0));
      });
    });
    // Stages k step `ko` in its stage of the tiles.
    auto fetch = [&](const PrimExpr& t, const PrimExpr& ko) {
      const PrimExpr k0 = ko * kTcStepK, stage = FloorMod(ko, stages);
      const OperandTile a{as, bm, kTcStepK, m0, g.m, k0, g.k, read_a, "la"};
      const OperandTile b{bs, kTcStepK, bn, k0, g.k, n0, g.n, read_b, "lb"};
      using enum StageMode;
      return Seq({Stage(a, stage, t, async_a ? kAsync : kDirect),
                  Stage(b, stage, t, async_b ? kAsync : kDirect)});
    };
    // Accumulates k step `ko` from its stage.
    auto compute = [&](const PrimExpr& ko) {
      const PrimExpr stage = FloorMod(ko, stages);
      return warps([&](const PrimExpr& w) {
        return Loop("ks", kTcStepK / kFrag, ForKind::kUnrolled, [&](const PrimExpr& ks) {
          Stmt la = Loop("fa", fm, ForKind::kUnrolled, [&](const PrimExpr& i) {
            return MatrixLoad({af, {w, i}}, {as, {stage, warp_row(w) + i * kFrag, ks * kFrag}});
          });
          Stmt lb = Loop("fb", fn, ForKind::kUnrolled, [&](const PrimExpr& j) {
            return MatrixLoad({bf, {w, j}}, {bs, {stage, ks * kFrag, warp_col(w) + j * kFrag}});
          });
          Stmt mma = each_frag([&](const PrimExpr& i, const PrimExpr& j) {
            return MatrixMma({acc, {w, i, j}}, {af, {w, i}}, {bf, {w, j}});
          });
          return Seq({la, lb, mma});
        });
      });
    };
    const PrimExpr steps = CeilDiv(g.k, kTcStepK);
    Stmt kloop;
    if (stages == 1) {
      kloop = Loop("k0", steps, ForKind::kSerial, [&](const PrimExpr& ko) {
        return Seq({Threads([&](const PrimExpr& t) { return fetch(t, ko); }), compute(ko)});
      });
    } else {
      // Double buffering: step ko + 1 is in flight while the warps work on
      // step ko. Each thread's fence waits for its copies of step ko (its
      // second-newest group), the barrier after it for everyone's.
      Stmt first = Threads([&](const PrimExpr& t) {
        Stmt f = fetch(t, PrimExpr(0));
        if (!(AsConstInt(g.k).value_or(0) > 0)) f = IfThenElse(LT(PrimExpr(0), g.k), f);
        return Seq({f, AsyncFence(1)});
      });
      Stmt loop = Loop("k0", steps, ForKind::kSerial, [&](const PrimExpr& ko) {
        Stmt next = Threads([&](const PrimExpr& t) {
          return Seq({IfThenElse(LT(ko + 1, steps), fetch(t, ko + 1)), AsyncFence(1)});
        });
        return Seq({next, compute(ko)});
      });
      kloop = Seq({first, loop});
    }
    // One fragment per warp at a time through shared memory; thread t then
    // takes row t / 16, column t % 16 of each warp's tile.
    Stmt store = each_frag([&](const PrimExpr& i, const PrimExpr& j) {
      Stmt spill = warps([&](const PrimExpr& w) {
        return MatrixStore({cs, {w, PrimExpr(0), PrimExpr(0)}}, {acc, {w, i, j}});
      });
      Stmt apply = Threads([&](const PrimExpr& t) {
        return Loop("q", kWarps, ForKind::kUnrolled, [&](const PrimExpr& q) {
          const PrimExpr r = FloorDiv(t, kFrag), c = FloorMod(t, kFrag);
          PrimExpr m = m0 + warp_row(q) + i * kFrag + r, n = n0 + warp_col(q) + j * kFrag + c;
          Stmt st = g.store(batch, m, n, Load(cs, {q, r, c}));
          return whole ? st : IfThenElse(And(LT(m, g.m), LT(n, g.n)), st);
        });
      });
      return Seq({spill, apply});
    });
    return Allocate(
        as, Allocate(
                bs, Allocate(
                        cs, Allocate(af, Allocate(bf, Allocate(acc, Seq({init, kloop, store})))))));
  });
}

// The warpgroup-MMA schedule (block_gemm.h): k step `ko` is fetched by
// every thread with asynchronous copies into stage ko % 4 of the swizzled
// tiles, kWgAhead steps ahead; each thread waits for its copies of step ko
// and fences them for the tensor cores, and after the barrier each
// warpgroup multiplies its 64 rows of A by B into its accumulator, which
// leaves that product in flight: the stage it reads is refilled two steps
// later, after the next step's barrier (kernel_ir.h, "Warpgroup MMA").
Stmt WarpgroupSchedule(const BlockGemm& g) {
  const int64_t bm = kWgRows, bn = WarpgroupCols(g.n);
  const int64_t steps = (*g.k.as_int() + kWgStepK - 1) / kWgStepK;
  const DataType f32 = DataType::Float(32);
  const bool whole = Divides(bm, g.m) && Divides(bn, g.n);
  using Scope = BufferNode::Scope;
  using Layout = BufferNode::Layout;
  return EachTile(g, bm, bn, [&](const BlockTile& at) {
    const PrimExpr &batch = at.batch, &m0 = at.m0, &n0 = at.n0;
    const Reader &read_a = at.read_a, &read_b = at.read_b;
    Buffer as = MakeBuffer("gemm_a_tile", g.operand_t,
                           {PrimExpr(kWgStages), PrimExpr(bm), PrimExpr(kWgStepK)}, Scope::kShared,
                           Layout::kSwizzle128);
    Buffer bs = MakeBuffer("gemm_b_tile", g.operand_t,
                           {PrimExpr(kWgStages), PrimExpr(kWgStepK), PrimExpr(bn)}, Scope::kShared,
                           Layout::kSwizzle128);
    Buffer cs = MakeBuffer("gemm_c_tile", f32, {PrimExpr(bm), PrimExpr(kWgSlab)}, Scope::kShared);
    Buffer acc =
        MakeBuffer("gemm_acc", f32, {PrimExpr(kWarpgroups), PrimExpr(kWarpgroupRows), PrimExpr(bn)},
                   Scope::kWarpgroupAccumulator);
    auto warpgroups = [&](const std::function<Stmt(const PrimExpr&)>& body) {
      return Loop("wg", kWarpgroups, ForKind::kWarpgroup, body);
    };
    auto fetch = [&](const PrimExpr& t, const PrimExpr& ko) {
      const PrimExpr k0 = ko * kWgStepK, stage = FloorMod(ko, kWgStages);
      const OperandTile a{as, bm, kWgStepK, m0, g.m, k0, g.k, read_a, "la"};
      const OperandTile b{bs, kWgStepK, bn, k0, g.k, n0, g.n, read_b, "lb"};
      return Seq({Stage(a, stage, t, StageMode::kAsync), Stage(b, stage, t, StageMode::kAsync)});
    };
    // Steps 0 .. kWgAhead - 1, each its own group of copies.
    Stmt first = Threads([&](const PrimExpr& t) {
      std::vector<Stmt> s;
      for (int64_t i = 0; i < kWgAhead; ++i) {
        if (i < steps) s.push_back(fetch(t, PrimExpr(i)));
        s.push_back(AsyncFence(kWgAhead));
      }
      return Seq(std::move(s));
    });
    Stmt kloop = Loop("k0", steps, ForKind::kSerial, [&](const PrimExpr& ko) {
      Stmt load = Threads([&](const PrimExpr& t) {
        return Seq({IfThenElse(LT(ko + kWgAhead, steps), fetch(t, ko + kWgAhead)),
                    AsyncFence(kWgAhead), AsyncProxyFence()});
      });
      Stmt mma = warpgroups([&](const PrimExpr& wg) {
        const PrimExpr stage = FloorMod(ko, kWgStages);
        return WarpgroupMma({acc, {wg}}, {as, {stage, wg * kWarpgroupRows, PrimExpr(0)}},
                            {bs, {stage, PrimExpr(0), PrimExpr(0)}}, NE(ko, PrimExpr(0)));
      });
      return Seq({load, mma});
    });
    // kWgSlab columns at a time through shared memory; thread t then takes
    // elements t, t + 256, ... of the slab, row by row.
    std::vector<Stmt> store;
    for (int64_t slab = 0; slab < bn / kWgSlab; ++slab) {
      store.push_back(warpgroups([&](const PrimExpr& wg) {
        return WarpgroupStore({cs, {wg * kWarpgroupRows, PrimExpr(0)}}, {acc, {wg}},
                              slab * kWgSlab);
      }));
      store.push_back(Threads([&](const PrimExpr& t) {
        return Loop("q", bm * kWgSlab / kThreads, ForKind::kSerial, [&](const PrimExpr& q) {
          const PrimExpr e = t + q * kThreads;
          const PrimExpr r = FloorDiv(e, kWgSlab), c = FloorMod(e, kWgSlab);
          const PrimExpr m = m0 + r, n = n0 + slab * kWgSlab + c;
          Stmt st = g.store(batch, m, n, Load(cs, {r, c}));
          return whole ? st : IfThenElse(And(LT(m, g.m), LT(n, g.n)), st);
        });
      }));
    }
    return Allocate(
        as, Allocate(bs, Allocate(cs, Allocate(acc, Seq({first, kloop, Seq(std::move(store))})))));
  });
}

// Split-K: when the tiles are too few to fill a GPU and k is long, the k
// extent is split into chunks, each a product of its own whose partial C
// goes to scratch, and a second launch sums each element's partials in
// order. Chunks divide k exactly and keep at least kMinChunkSteps steps.
// The skinny schedule, bound by memory, aims at several blocks an SM (so
// that every SM has loads in flight) with chunks of at least 2 steps.
constexpr int64_t kSplitTargetBlocks = 128;  // about one block per SM
constexpr int64_t kMinChunkSteps = 8;
constexpr int64_t kSkinnyTargetBlocks = 4 * kSplitTargetBlocks;
constexpr int64_t kSkinnyMinChunkSteps = 2;

int64_t KSplits(const BlockGemm& g) {
  const bool skinny = WorthSkinnyGemm(g.m);
  const auto [bm, bn] = skinny ? TileShape{SkinnyRows(*g.m.as_int()), kSkinnyCols} : TileOf(g);
  const int64_t* batches = g.batches.as_int();
  const int64_t *m = g.m.as_int(), *n = g.n.as_int(), *k = g.k.as_int();
  if (batches == nullptr || m == nullptr || n == nullptr || k == nullptr) return 1;
  const int64_t tiles = *batches * ((*m + bm - 1) / bm) * ((*n + bn - 1) / bn);
  const int64_t step = skinny                ? kSkinnyStep
                       : UsesWarpgroupMma(g) ? kWgStepK
                       : UsesTensorCores(g)  ? kTcStepK
                                             : kStepK;
  const int64_t most =
      std::min((skinny ? kSkinnyTargetBlocks : kSplitTargetBlocks) / std::max<int64_t>(tiles, 1),
               *k / (step * (skinny ? kSkinnyMinChunkSteps : kMinChunkSteps)));
  for (int64_t d = most; d >= 2; --d) {
    if (*k % d == 0) return d;
  }
  return 1;
}

}  // namespace

bool UsesTensorCores(const BlockGemm& g) {
  if (g.acc_t != DataType::Float(32)) return false;
  if (g.operand_t == DataType::Float(16)) return g.gpu_arch >= 70;
  return g.operand_t.is_bfloat16() && g.gpu_arch >= 80;
}

bool UsesWarpgroupMma(const BlockGemm& g) {
  if (g.gpu_arch < 90 || !UsesTensorCores(g)) return false;
  const int64_t *m = g.m.as_int(), *n = g.n.as_int(), *k = g.k.as_int();
  if (k == nullptr || *k <= 0 || (m != nullptr && *m < kWgRows) || (n != nullptr && *n < 128)) {
    return false;
  }
  Var batch("probe_b");
  const Reader read_a = [&](const PrimExpr& r, const PrimExpr& c) { return g.a(batch, r, c); };
  const Reader read_b = [&](const PrimExpr& r, const PrimExpr& c) { return g.b(batch, r, c); };
  return Copyable(read_a, g.operand_t, g.k) && Copyable(read_b, g.operand_t, g.n);
}

bool WorthSkinnyGemm(const PrimExpr& m) {
  const int64_t* c = m.as_int();
  return c != nullptr && *c >= 1 && *c < kSide;
}

bool WorthBlockGemm(const PrimExpr& m, const PrimExpr& n) {
  const int64_t* mc = m.as_int();
  const int64_t* nc = n.as_int();
  return (mc == nullptr || *mc >= kSide) && (nc == nullptr || *nc >= kSide);
}

namespace {

Stmt SimtSchedule(const BlockGemm& g) {
  const auto [bm, bn] = TileOf(g);
  const int64_t tm = bm / kSide, tn = bn / kSide;
  const PrimExpr zero = MakeConst(g.acc_t, 0);
  // Thread (ty, tx) owns rows ty * gm + (i % gm) + (i / gm) * 16 gm: runs
  // of gm = min(4, tm) adjacent rows, 16 gm apart (columns likewise), so
  // its shared reads are 16-byte vectors and its stores adjacent.
  const int64_t gm = std::min<int64_t>(4, tm), gn = std::min<int64_t>(4, tn);
  auto row_of = [&](const PrimExpr& ty, const PrimExpr& i) {
    return FloorDiv(i, gm) * (kSide * gm) + ty * gm + FloorMod(i, gm);
  };
  auto col_of = [&](const PrimExpr& tx, const PrimExpr& j) {
    return FloorDiv(j, gn) * (kSide * gn) + tx * gn + FloorMod(j, gn);
  };
  const bool whole = Divides(bm, g.m) && Divides(bn, g.n);
  return EachTile(g, bm, bn, [&](const BlockTile& at) {
    const PrimExpr &batch = at.batch, &m0 = at.m0, &n0 = at.n0;
    const Reader &read_a = at.read_a, &read_b = at.read_b;
    // Two stages of the tiles. A is staged k-major with 4 words of padding:
    // a warp's stores, 4 k values of 16 rows, fall in distinct banks.
    Buffer as =
        MakeBuffer("gemm_a_tile", g.acc_t, {PrimExpr(2), PrimExpr(kStepK), PrimExpr(bm + 4)},
                   BufferNode::Scope::kShared);
    Buffer bs = MakeBuffer("gemm_b_tile", g.acc_t, {PrimExpr(2), PrimExpr(kStepK), PrimExpr(bn)},
                           BufferNode::Scope::kShared);
    // Step ko's tiles; A rows are contiguous along k (staged transposed), B
    // rows along n.
    auto a_tile = [&](const PrimExpr& ko) {
      return OperandTile{as, bm, kStepK, m0, g.m, ko * kStepK, g.k, read_a, "la", true};
    };
    auto b_tile = [&](const PrimExpr& ko) {
      return OperandTile{bs, kStepK, bn, ko * kStepK, g.k, n0, g.n, read_b, "lb"};
    };
    auto next = [&](const char* name, const OperandTile& o) {
      return MakeBuffer(name, g.acc_t, {PrimExpr(kThreads), PrimExpr(StageShape(o).slots())},
                        BufferNode::Scope::kPerThread);
    };
    Buffer a_next = next("gemm_a_next", a_tile(PrimExpr(0)));
    Buffer b_next = next("gemm_b_next", b_tile(PrimExpr(0)));
    Buffer acc = MakeBuffer("gemm_acc", g.acc_t, {PrimExpr(kThreads), PrimExpr(tm), PrimExpr(tn)},
                            BufferNode::Scope::kPerThread);
    auto each_acc = [&](const std::function<Stmt(const PrimExpr&, const PrimExpr&)>& body) {
      return Loop("i", tm, ForKind::kUnrolled, [&](const PrimExpr& i) {
        return Loop("j", tn, ForKind::kUnrolled, [&](const PrimExpr& j) { return body(i, j); });
      });
    };
    // Step 0 into stage 0, and the accumulators cleared.
    Stmt init = Threads([&](const PrimExpr& t) {
      Stmt first = Seq({Stage(a_tile(PrimExpr(0)), PrimExpr(0), t, StageMode::kDirect),
                        Stage(b_tile(PrimExpr(0)), PrimExpr(0), t, StageMode::kDirect)});
      if (!(AsConstInt(g.k).value_or(0) > 0)) first = IfThenElse(LT(PrimExpr(0), g.k), first);
      return Seq({first, each_acc([&](const PrimExpr& i, const PrimExpr& j) {
                    return Store(acc, {t, i, j}, zero);
                  })});
    });
    // Thread t accumulates the k step in `stage`.
    auto compute = [&](const PrimExpr& t, const PrimExpr& stage) {
      const PrimExpr ty = FloorDiv(t, kSide), tx = FloorMod(t, kSide);
      Buffer af = MakeBuffer("gemm_a_frag", g.acc_t, {PrimExpr(tm)}, BufferNode::Scope::kLocal);
      Buffer bf = MakeBuffer("gemm_b_frag", g.acc_t, {PrimExpr(tn)}, BufferNode::Scope::kLocal);
      Stmt body = Loop("kk", kStepK, ForKind::kUnrolled, [&](const PrimExpr& kk) {
        Stmt fa = Loop("fa", tm, ForKind::kUnrolled, [&](const PrimExpr& i) {
          return Store(af, {i}, Load(as, {stage, kk, row_of(ty, i)}));
        });
        Stmt fb = Loop("fb", tn, ForKind::kUnrolled, [&](const PrimExpr& j) {
          return Store(bf, {j}, Load(bs, {stage, kk, col_of(tx, j)}));
        });
        Stmt fma = each_acc([&](const PrimExpr& i, const PrimExpr& j) {
          return Store(acc, {t, i, j}, Load(acc, {t, i, j}) + Load(af, {i}) * Load(bf, {j}));
        });
        return Seq({fa, fb, fma});
      });
      return Allocate(af, Allocate(bf, body));
    };
    // Step ko, one barrier each: thread t loads its share of step ko + 1
    // into registers, accumulates step ko, then puts the loaded values in
    // the other stage, which every thread last read in step ko - 1, before
    // the previous barrier. The loads are in flight during the arithmetic.
    const PrimExpr steps = CeilDiv(g.k, kStepK);
    Stmt kloop = Loop("k0", steps, ForKind::kSerial, [&](const PrimExpr& ko) {
      return Threads([&](const PrimExpr& t) {
        const OperandTile a = a_tile(ko + 1), b = b_tile(ko + 1);
        const PrimExpr more = LT(ko + 1, steps), other = FloorMod(ko + 1, 2);
        using enum StageMode;
        Stmt fetch = IfThenElse(
            more, Seq({Stage(a, other, t, kFetch, a_next), Stage(b, other, t, kFetch, b_next)}));
        Stmt put = IfThenElse(
            more, Seq({Stage(a, other, t, kPut, a_next), Stage(b, other, t, kPut, b_next)}));
        return Seq({fetch, compute(t, FloorMod(ko, 2)), put});
      });
    });
    Stmt store = Threads([&](const PrimExpr& t) {
      const PrimExpr ty = FloorDiv(t, kSide), tx = FloorMod(t, kSide);
      return each_acc([&](const PrimExpr& i, const PrimExpr& j) {
        PrimExpr m = m0 + row_of(ty, i), n = n0 + col_of(tx, j);
        Stmt st = g.store(batch, m, n, Load(acc, {t, i, j}));
        return whole ? st : IfThenElse(And(LT(m, g.m), LT(n, g.n)), st);
      });
    });
    return Allocate(
        as,
        Allocate(bs, Allocate(a_next, Allocate(b_next, Allocate(acc, Seq({init, kloop, store}))))));
  });
}

// The skinny schedule (block_gemm.h): a block per (batch, group of up to
// kSkinnyRows rows, kSkinnyCols columns); lane l = t % 32 of warp w = t / 32
// owns column n0 + l and the k values w, w + 8, ... (kSkinnyUnroll of them
// an iteration, so that several loads are in flight), accumulating every
// row of the group in registers. A warp's loads of B are one contiguous run
// of 32 columns; A's element is the same for the whole warp. The 8 warps'
// partial sums meet in shared memory, summed in warp order.
Stmt SkinnySchedule(const BlockGemm& g) {
  const int64_t m = *g.m.as_int();
  const int64_t rows = SkinnyRows(m), groups = (m + rows - 1) / rows;
  const bool whole_groups = m % rows == 0;
  const PrimExpr mt(groups), nt = CeilDiv(g.n, kSkinnyCols);
  const PrimExpr zero = MakeConst(g.acc_t, 0);
  return Loop("skinny_tile", g.batches * mt * nt, ForKind::kBlock, [&](const PrimExpr& tile) {
    const std::vector<PrimExpr> i = Unflatten(tile, {g.batches, mt, nt});
    const PrimExpr batch = i[0], m0 = i[1] * PrimExpr(rows), n0 = i[2] * PrimExpr(kSkinnyCols);
    auto row_in = [&](const PrimExpr& r, Stmt s) {
      return whole_groups ? s : IfThenElse(LT(m0 + r, g.m), s);
    };
    Buffer part = MakeBuffer("skinny_partial", g.acc_t,
                             {PrimExpr(kSkinnyLanes), PrimExpr(rows), PrimExpr(kSkinnyCols)},
                             BufferNode::Scope::kShared);
    Stmt partial = Threads([&](const PrimExpr& t) {
      const PrimExpr w = FloorDiv(t, kSkinnyCols), l = FloorMod(t, kSkinnyCols), n = n0 + l;
      Buffer acc = MakeBuffer("skinny_acc", g.acc_t, {PrimExpr(rows)}, BufferNode::Scope::kLocal);
      auto each_row = [&](const char* name, const std::function<Stmt(const PrimExpr&)>& body) {
        return Loop(name, PrimExpr(rows), ForKind::kUnrolled, body);
      };
      Stmt clear = each_row("zr", [&](const PrimExpr& r) { return Store(acc, {r}, zero); });
      Stmt kloop = Loop("kc", CeilDiv(g.k, kSkinnyStep), ForKind::kSerial, [&](const PrimExpr& kc) {
        return Loop("ku", PrimExpr(kSkinnyUnroll), ForKind::kUnrolled, [&](const PrimExpr& ku) {
          const PrimExpr k = kc * PrimExpr(kSkinnyStep) + ku * PrimExpr(kSkinnyLanes) + w;
          Var bv("skinny_b", g.acc_t);
          Stmt fma = each_row("r", [&](const PrimExpr& r) {
            return row_in(
                r, Store(acc, {r}, Load(acc, {r}) + Cast(g.acc_t, g.a(batch, m0 + r, k)) * bv));
          });
          return IfThenElse(And(LT(k, g.k), LT(n, g.n)),
                            LetStmt(bv, Cast(g.acc_t, g.b(batch, k, n)), fma));
        });
      });
      Stmt keep = each_row("pr", [&](const PrimExpr& r) {
        return Store(part, {w, r, l}, Load(acc, {r}));
      });
      return Allocate(acc, Seq({clear, kloop, keep}));
    });
    // Thread t < rows * 32 sums column l of row r over the warps, in order.
    Stmt sum = Threads([&](const PrimExpr& t) {
      const PrimExpr r = FloorDiv(t, kSkinnyCols), l = FloorMod(t, kSkinnyCols);
      PrimExpr total = Load(part, {PrimExpr(0), r, l});
      for (int64_t w = 1; w < kSkinnyLanes; ++w) total = total + Load(part, {PrimExpr(w), r, l});
      PrimExpr in = And(LT(t, PrimExpr(rows * kSkinnyCols)), LT(n0 + l, g.n));
      if (!whole_groups) in = And(in, LT(m0 + r, g.m));
      return IfThenElse(in, g.store(batch, m0 + r, n0 + l, total));
    });
    return Allocate(part, Seq({partial, sum}));
  });
}

Stmt ScheduleOf(const BlockGemm& g) {
  if (WorthSkinnyGemm(g.m)) return SkinnySchedule(g);
  if (UsesWarpgroupMma(g)) return WarpgroupSchedule(g);
  return UsesTensorCores(g) ? TensorCoreSchedule(g) : SimtSchedule(g);
}

}  // namespace

Stmt BlockGemmSchedule(const BlockGemm& g) {
  if (WorthSkinnyGemm(g.n) && !WorthSkinnyGemm(g.m)) {
    // Few columns: C^T = B^T A^T, whose rows are few.
    BlockGemm t = g;
    t.m = g.n;
    t.n = g.m;
    t.a = [&g](const PrimExpr& b, const PrimExpr& m, const PrimExpr& k) { return g.b(b, k, m); };
    t.b = [&g](const PrimExpr& b, const PrimExpr& k, const PrimExpr& n) { return g.a(b, n, k); };
    t.store = [&g](const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v) {
      return g.store(b, n, m, v);
    };
    return BlockGemmSchedule(t);
  }
  const int64_t splits = KSplits(g);
  if (splits == 1) return ScheduleOf(g);
  // Chunk s of batch b is batch s * batches + b of a product over k / splits.
  const PrimExpr batches = g.batches, m = g.m, n = g.n, chunk(*g.k.as_int() / splits);
  Buffer partial = MakeBuffer("gemm_partial", g.acc_t, {batches * m * n * splits});
  BlockGemm part = g;
  part.batches = batches * splits;
  part.k = chunk;
  part.a = [&](const PrimExpr& b, const PrimExpr& i, const PrimExpr& k) {
    return g.a(FloorMod(b, batches), i, FloorDiv(b, batches) * chunk + k);
  };
  part.b = [&](const PrimExpr& b, const PrimExpr& k, const PrimExpr& j) {
    return g.b(FloorMod(b, batches), FloorDiv(b, batches) * chunk + k, j);
  };
  part.store = [&](const PrimExpr& b, const PrimExpr& i, const PrimExpr& j, const PrimExpr& v) {
    return Store(partial, {(b * m + i) * n + j}, v);
  };
  Stmt products = ScheduleOf(part);
  // One thread per element of C: its partials in chunk order, then the store.
  const PrimExpr elements = batches * m * n;
  Stmt sum = Loop("e", elements, ForKind::kParallel, [&](const PrimExpr& e) {
    PrimExpr total = Load(partial, {e});
    for (int64_t s = 1; s < splits; ++s) total = total + Load(partial, {e + elements * s});
    return g.store(FloorDiv(e, m * n), FloorMod(FloorDiv(e, n), m), FloorMod(e, n), total);
  });
  return Allocate(partial, Seq({products, sum}));
}

}  // namespace tether::compiler
