// The block GEMM schedule (block_gemm.h).
#include "compiler/op/block_gemm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/ir/arith.h"
#include "compiler/kernel/lower.h"
#include "compiler/op/nn_common.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::Loop;

constexpr int64_t kSide = 16;  // threads per tile side
constexpr int64_t kThreads = kSide * kSide;
constexpr int64_t kStepK = 8;
constexpr int64_t kMaxPer = 8;  // values per thread and side: tiles up to 128
static_assert(kThreads == kDeviceBlockThreads);

// Tensor cores: warps over the tile, k step, and the padding of staged rows.
constexpr int64_t kWarps = kThreads / kWarpThreads;
constexpr int64_t kWarpRows = 2, kWarpCols = kWarps / kWarpRows;
constexpr int64_t kFrag = kMatrixTileSide;
constexpr int64_t kTcStepK = 32;
constexpr int64_t kTcPad = 8;  // 16 bytes: rows start in other banks

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

// Stages the `rows` x `cols` tile at (r0, c0) of an operand of extents
// (r_ext, c_ext) into dst[stage][row][col] (dst[row][col] without a stage):
// read(r, c) where in range, zero
// elsewhere (reads clamped into range). A side whose extent is a constant
// multiple of the tile needs neither. Each thread copies 16 contiguous bytes
// of a row (cols a multiple of them, 256 threads a multiple of a row's
// share; with `transpose`, into dst[stage][col][row]): with whole tiles of an
// operand whose rows are 16-byte multiples, LLVM merges them into one 128-bit
// load and store (the launcher holds tensor data 16-byte aligned). With
// `async` (the operand is Copyable), each thread's 16 bytes are one
// asynchronous copy instead, zero-filled outside the operand. A warp reads
// whole rows, and a thread's addresses differ by constants.
Stmt Stage(const Buffer& dst, const PrimExpr& stage, int64_t rows, int64_t cols, const PrimExpr& t,
           const PrimExpr& r0, const PrimExpr& r_ext, const PrimExpr& c0, const PrimExpr& c_ext,
           const Reader& read, const std::string& name, bool transpose = false,
           bool async = false) {
  const int64_t vec = std::min<int64_t>(16 / dst->dtype.bytes(), cols);
  const int64_t per_row = cols / vec, step = kThreads / per_row;
  const bool whole_r = Divides(rows, r_ext), whole_c = Divides(cols, c_ext);
  return Loop(name, (rows + step - 1) / step, ForKind::kUnrolled, [&](const PrimExpr& i) {
    const PrimExpr row = FloorDiv(t, per_row) + i * step;
    const PrimExpr r = r0 + row;
    PrimExpr row_ok;
    if (!whole_r) row_ok = LT(r, r_ext);
    auto in_range = [&](const PrimExpr& c) {
      if (whole_c) return row_ok;
      return row_ok.defined() ? And(row_ok, LT(c, c_ext)) : LT(c, c_ext);
    };
    // dst's indices of (row, col).
    auto place = [&](const PrimExpr& col) {
      std::vector<PrimExpr> at = {row, col};
      if (transpose) std::swap(at[0], at[1]);
      if (stage.defined()) at.insert(at.begin(), stage);
      return at;
    };
    Stmt copy;
    // The run's first column, clamped to the operand's last run.
    const PrimExpr run = FloorMod(t, per_row) * vec, run_c = c0 + run;
    const PrimExpr first =
        async ? read(whole_r ? r : Min(r, r_ext - 1), whole_c ? run_c : Min(run_c, c_ext - vec))
              : PrimExpr();
    if (const LoadNode* src = first.defined() ? first.as<LoadNode>() : nullptr) {
      copy = AsyncCopy({dst, place(run)}, {src->buffer, src->indices}, static_cast<int>(vec),
                       in_range(run_c));
    } else {
      copy = Loop(name + "v", vec, ForKind::kUnrolled, [&](const PrimExpr& e) {
        const PrimExpr col = run + e, c = c0 + col;
        PrimExpr v = read(whole_r ? r : Min(r, r_ext - 1), whole_c ? c : Min(c, c_ext - 1));
        const PrimExpr ok = in_range(c);
        return Store(dst, place(col), ok.defined() ? Select(ok, v, MakeConst(dst->dtype, 0)) : v);
      });
    }
    return rows % step == 0 ? copy : IfThenElse(LT(row, PrimExpr(rows)), copy);
  });
}

// The tensor-core schedule (block_gemm.h).
Stmt TensorCoreSchedule(const BlockGemm& g) {
  const int64_t fm = PerThread(g.m, kWarpRows * kFrag, 4),
                fn = PerThread(g.n, kWarpCols * kFrag, 2);
  const int64_t bm = kWarpRows * kFrag * fm, bn = kWarpCols * kFrag * fn;
  const PrimExpr mt = CeilDiv(g.m, bm), nt = CeilDiv(g.n, bn);
  const DataType f32 = DataType::Float(32);
  const bool whole = Divides(bm, g.m) && Divides(bn, g.n);
  using Scope = BufferNode::Scope;
  return Loop("tile", g.batches * mt * nt, ForKind::kBlock, [&](const PrimExpr& tile) {
    const PrimExpr in_batch = FloorMod(tile, mt * nt);
    const PrimExpr batch = FloorDiv(tile, mt * nt);
    const Reader read_a = [&](const PrimExpr& m, const PrimExpr& k) { return g.a(batch, m, k); };
    const Reader read_b = [&](const PrimExpr& k, const PrimExpr& n) { return g.b(batch, k, n); };
    // From sm_80, operands that are plain tensors are fetched with
    // asynchronous copies into two stages of tiles.
    const bool async_a = g.gpu_arch >= 80 && Copyable(read_a, g.operand_t, g.k);
    const bool async_b = g.gpu_arch >= 80 && Copyable(read_b, g.operand_t, g.n);
    const int64_t stages = async_a || async_b ? 2 : 1;
    const PrimExpr m0 = FloorDiv(in_batch, nt) * bm, n0 = FloorMod(in_batch, nt) * bn;
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
      Stmt a = Stage(as, stage, bm, kTcStepK, t, m0, g.m, k0, g.k, read_a, "la", false, async_a);
      Stmt b = Stage(bs, stage, kTcStepK, bn, t, k0, g.k, n0, g.n, read_b, "lb", false, async_b);
      return Seq({a, b});
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

}  // namespace

bool UsesTensorCores(const BlockGemm& g) {
  if (g.acc_t != DataType::Float(32)) return false;
  if (g.operand_t == DataType::Float(16)) return g.gpu_arch >= 70;
  return g.operand_t.is_bfloat16() && g.gpu_arch >= 80;
}

bool WorthBlockGemm(const PrimExpr& m, const PrimExpr& n) {
  const int64_t* mc = m.as_int();
  const int64_t* nc = n.as_int();
  return (mc == nullptr || *mc >= kSide) && (nc == nullptr || *nc >= kSide);
}

Stmt BlockGemmSchedule(const BlockGemm& g) {
  if (UsesTensorCores(g)) return TensorCoreSchedule(g);
  const int64_t tm = PerThread(g.m), tn = PerThread(g.n);
  const int64_t bm = kSide * tm, bn = kSide * tn;
  const PrimExpr mt = CeilDiv(g.m, bm), nt = CeilDiv(g.n, bn);
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
  return Loop("tile", g.batches * mt * nt, ForKind::kBlock, [&](const PrimExpr& tile) {
    const PrimExpr in_batch = FloorMod(tile, mt * nt);
    const PrimExpr batch = FloorDiv(tile, mt * nt);
    const PrimExpr m0 = FloorDiv(in_batch, nt) * bm, n0 = FloorMod(in_batch, nt) * bn;
    // A is staged k-major with 4 words of padding: a warp's stores, 4 k
    // values of 16 rows, fall in distinct banks.
    Buffer as = MakeBuffer("gemm_a_tile", g.acc_t, {PrimExpr(kStepK), PrimExpr(bm + 4)},
                           BufferNode::Scope::kShared);
    Buffer bs = MakeBuffer("gemm_b_tile", g.acc_t, {PrimExpr(kStepK), PrimExpr(bn)},
                           BufferNode::Scope::kShared);
    Buffer acc = MakeBuffer("gemm_acc", g.acc_t, {PrimExpr(kThreads), PrimExpr(tm), PrimExpr(tn)},
                            BufferNode::Scope::kPerThread);
    auto each_acc = [&](const std::function<Stmt(const PrimExpr&, const PrimExpr&)>& body) {
      return Loop("i", tm, ForKind::kUnrolled, [&](const PrimExpr& i) {
        return Loop("j", tn, ForKind::kUnrolled, [&](const PrimExpr& j) { return body(i, j); });
      });
    };
    Stmt init = Threads([&](const PrimExpr& t) {
      return each_acc([&](const PrimExpr& i, const PrimExpr& j) {
        return Store(acc, {t, i, j}, zero);
      });
    });
    Stmt kloop = Loop("k0", CeilDiv(g.k, kStepK), ForKind::kSerial, [&](const PrimExpr& ko) {
      const PrimExpr k0 = ko * kStepK;
      // A rows are contiguous along k (staged transposed); B rows along n.
      Stmt load = Threads([&](const PrimExpr& t) {
        Stmt a = Stage(
            as, PrimExpr(), bm, kStepK, t, m0, g.m, k0, g.k,
            [&](const PrimExpr& m, const PrimExpr& k) { return g.a(batch, m, k); }, "la",
            /*transpose=*/true);
        Stmt b = Stage(
            bs, PrimExpr(), kStepK, bn, t, k0, g.k, n0, g.n,
            [&](const PrimExpr& k, const PrimExpr& n) { return g.b(batch, k, n); }, "lb");
        return Seq({a, b});
      });
      Stmt compute = Threads([&](const PrimExpr& t) {
        const PrimExpr ty = FloorDiv(t, kSide), tx = FloorMod(t, kSide);
        Buffer af = MakeBuffer("gemm_a_frag", g.acc_t, {PrimExpr(tm)}, BufferNode::Scope::kLocal);
        Buffer bf = MakeBuffer("gemm_b_frag", g.acc_t, {PrimExpr(tn)}, BufferNode::Scope::kLocal);
        Stmt body = Loop("kk", kStepK, ForKind::kUnrolled, [&](const PrimExpr& kk) {
          Stmt fa = Loop("fa", tm, ForKind::kUnrolled, [&](const PrimExpr& i) {
            return Store(af, {i}, Load(as, {kk, row_of(ty, i)}));
          });
          Stmt fb = Loop("fb", tn, ForKind::kUnrolled, [&](const PrimExpr& j) {
            return Store(bf, {j}, Load(bs, {kk, col_of(tx, j)}));
          });
          Stmt fma = each_acc([&](const PrimExpr& i, const PrimExpr& j) {
            return Store(acc, {t, i, j}, Load(acc, {t, i, j}) + Load(af, {i}) * Load(bf, {j}));
          });
          return Seq({fa, fb, fma});
        });
        return Allocate(af, Allocate(bf, body));
      });
      return Seq({load, compute});
    });
    Stmt store = Threads([&](const PrimExpr& t) {
      const PrimExpr ty = FloorDiv(t, kSide), tx = FloorMod(t, kSide);
      return each_acc([&](const PrimExpr& i, const PrimExpr& j) {
        PrimExpr m = m0 + row_of(ty, i), n = n0 + col_of(tx, j);
        Stmt st = g.store(batch, m, n, Load(acc, {t, i, j}));
        return whole ? st : IfThenElse(And(LT(m, g.m), LT(n, g.n)), st);
      });
    });
    return Allocate(as, Allocate(bs, Allocate(acc, Seq({init, kloop, store}))));
  });
}

}  // namespace tether::compiler
