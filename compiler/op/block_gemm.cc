// The block GEMM schedule (block_gemm.h).
#include "compiler/op/block_gemm.h"

#include <algorithm>
#include <string>
#include <vector>

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

// Values per thread along a side of constant extent `e` (unknown: kMaxPer):
// the smallest power of two whose tile, 16 times it, covers e.
int64_t PerThread(const PrimExpr& e) {
  const int64_t* c = e.as_int();
  if (c == nullptr) return kMaxPer;
  int64_t per = 1;
  while (per < kMaxPer && kSide * per < *c) per *= 2;
  return per;
}

}  // namespace

bool WorthBlockGemm(const PrimExpr& m, const PrimExpr& n) {
  const int64_t* mc = m.as_int();
  const int64_t* nc = n.as_int();
  return (mc == nullptr || *mc >= kSide) && (nc == nullptr || *nc >= kSide);
}

Stmt BlockGemmSchedule(const BlockGemm& g) {
  const int64_t tm = PerThread(g.m), tn = PerThread(g.n);
  const int64_t bm = kSide * tm, bn = kSide * tn;
  const PrimExpr mt = CeilDiv(g.m, bm), nt = CeilDiv(g.n, bn);
  const PrimExpr zero = MakeConst(g.acc_t, 0);
  return Loop("tile", g.batches * mt * nt, ForKind::kBlock, [&](const PrimExpr& tile) {
    const PrimExpr in_batch = FloorMod(tile, mt * nt);
    const PrimExpr batch = FloorDiv(tile, mt * nt);
    const PrimExpr m0 = FloorDiv(in_batch, nt) * bm, n0 = FloorMod(in_batch, nt) * bn;
    // A is staged k-major with 4 words of padding: a warp's stores, 8 k
    // values of 4 rows, fall in distinct banks.
    Buffer as = MakeBuffer("gemm_a_tile", g.acc_t, {PrimExpr(kStepK), PrimExpr(bm + 4)},
                           BufferNode::Scope::kShared);
    Buffer bs = MakeBuffer("gemm_b_tile", g.acc_t, {PrimExpr(kStepK), PrimExpr(bn)},
                           BufferNode::Scope::kShared);
    Buffer acc = MakeBuffer("gemm_acc", g.acc_t, {PrimExpr(kThreads), PrimExpr(tm), PrimExpr(tn)},
                            BufferNode::Scope::kPerThread);
    auto threads = [&](const std::function<Stmt(const PrimExpr&)>& body) {
      return Loop("t", kThreads, ForKind::kThread, body);
    };
    auto each_acc = [&](const std::function<Stmt(const PrimExpr&, const PrimExpr&)>& body) {
      return Loop("i", tm, ForKind::kUnrolled, [&](const PrimExpr& i) {
        return Loop("j", tn, ForKind::kUnrolled, [&](const PrimExpr& j) { return body(i, j); });
      });
    };
    Stmt init = threads([&](const PrimExpr& t) {
      return each_acc([&](const PrimExpr& i, const PrimExpr& j) {
        return Store(acc, {t, i, j}, zero);
      });
    });
    Stmt kloop = Loop("k0", CeilDiv(g.k, kStepK), ForKind::kSerial, [&](const PrimExpr& ko) {
      const PrimExpr k0 = ko * kStepK;
      // Stages `rows` x kStepK elements (row-major over (row, kk) when
      // `k_inner`, else (kk, row)) into dst[kk][row]; zero outside.
      auto stage = [&](const Buffer& dst, int64_t rows, bool k_inner, const PrimExpr& base,
                       const PrimExpr& extent,
                       const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& read,
                       const PrimExpr& t, const std::string& name) {
        const int64_t count = rows * kStepK;
        return Loop(name, CeilDiv(PrimExpr(count), kThreads), ForKind::kUnrolled,
                    [&](const PrimExpr& r) {
                      PrimExpr e = t + r * kThreads;
                      PrimExpr row = k_inner ? FloorDiv(e, kStepK) : FloorMod(e, rows);
                      PrimExpr kk = k_inner ? FloorMod(e, kStepK) : FloorDiv(e, rows);
                      PrimExpr ok = And(LT(base + row, extent), LT(k0 + kk, g.k));
                      PrimExpr v = read(Min(base + row, extent - 1), Min(k0 + kk, g.k - 1));
                      Stmt st = Store(dst, {kk, row}, Select(ok, v, zero));
                      return count % kThreads == 0 ? st : IfThenElse(LT(e, PrimExpr(count)), st);
                    });
      };
      Stmt load = threads([&](const PrimExpr& t) {
        // A rows are contiguous along k; B rows along n.
        Stmt a = stage(
            as, bm, /*k_inner=*/true, m0, g.m,
            [&](const PrimExpr& m, const PrimExpr& k) { return g.a(batch, m, k); }, t, "la");
        Stmt b = stage(
            bs, bn, /*k_inner=*/false, n0, g.n,
            [&](const PrimExpr& n, const PrimExpr& k) { return g.b(batch, k, n); }, t, "lb");
        return Seq({a, b});
      });
      Stmt compute = threads([&](const PrimExpr& t) {
        const PrimExpr ty = FloorDiv(t, kSide), tx = FloorMod(t, kSide);
        Buffer af = MakeBuffer("gemm_a_frag", g.acc_t, {PrimExpr(tm)}, BufferNode::Scope::kLocal);
        Buffer bf = MakeBuffer("gemm_b_frag", g.acc_t, {PrimExpr(tn)}, BufferNode::Scope::kLocal);
        Stmt body = Loop("kk", kStepK, ForKind::kUnrolled, [&](const PrimExpr& kk) {
          Stmt fa = Loop("fa", tm, ForKind::kUnrolled, [&](const PrimExpr& i) {
            return Store(af, {i}, Load(as, {kk, ty + i * kSide}));
          });
          Stmt fb = Loop("fb", tn, ForKind::kUnrolled, [&](const PrimExpr& j) {
            return Store(bf, {j}, Load(bs, {kk, tx + j * kSide}));
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
    Stmt store = threads([&](const PrimExpr& t) {
      const PrimExpr ty = FloorDiv(t, kSide), tx = FloorMod(t, kSide);
      return each_acc([&](const PrimExpr& i, const PrimExpr& j) {
        PrimExpr m = m0 + ty + i * kSide, n = n0 + tx + j * kSide;
        return IfThenElse(And(LT(m, g.m), LT(n, g.n)), g.store(batch, m, n, Load(acc, {t, i, j})));
      });
    });
    return Allocate(as, Allocate(bs, Allocate(acc, Seq({init, kloop, store}))));
  });
}

}  // namespace tether::compiler
