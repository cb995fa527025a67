// relax.matmul: numpy matmul semantics (1-D promotion, batched with
// broadcasting of the batch dims). On a CPU the product is the packed,
// register-blocked schedule of cpu_gemm.h, the batch dims flattened into its
// batch and B packed once per B batch; the epilogue is applied at the single
// final store.
//
// For a GPU (LowerContext::gpu) nothing is packed. Products of at least 16
// rows and columns (or of unknown size) are the shared-memory block GEMM of
// block_gemm.h, the batch dims flattened into its batch, and so are those
// of fewer than 16 rows or columns (its skinny schedule: k split across a
// block's warps); an empty product is one thread per output element.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/block_gemm.h"
#include "compiler/op/cpu_gemm.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"

namespace tether::compiler {
namespace {

using nn_internal::BroadcastDim;
using nn_internal::CeilDiv;
using nn_internal::IsConst;
using nn_internal::Loop;
using nn_internal::ShapeString;

constexpr char kMatmul[] = "relax.matmul";
absl::StatusOr<StructInfo> InferMatmul(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 2, kMatmul); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> a = nn_internal::TensorArg(call, 0, kMatmul);
  if (!a.ok()) return a.status();
  absl::StatusOr<const TensorStructInfoNode*> b = nn_internal::TensorArg(call, 1, kMatmul);
  if (!b.ok()) return b.status();
  std::optional<DataType> out_dtype = GetDTypeAttr(call.attrs, "out_dtype");
  if (!out_dtype.has_value()) {
    if ((*a)->dtype.has_value() && (*b)->dtype.has_value() && *(*a)->dtype != *(*b)->dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(kMatmul, ": operand dtypes differ: ", (*a)->dtype->ToString(), " and ",
                       (*b)->dtype->ToString(), " (set out_dtype to mix them)"));
    }
    out_dtype = (*a)->dtype.has_value() ? (*a)->dtype : (*b)->dtype;
  }
  const int an = (*a)->ndim, bn = (*b)->ndim;
  if (an == 0 || bn == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kMatmul, ": operands must have at least 1 dimension, got ranks ", an, " and ", bn));
  }
  if (an < 0 || bn < 0) return TensorSInfoOfRank(-1, out_dtype);
  const int out_ndim = std::max(std::max(an, bn) - (an == 1 ? 1 : 0) - (bn == 1 ? 1 : 0), 0);
  if (!(*a)->shape.has_value() || !(*b)->shape.has_value()) {
    return TensorSInfoOfRank(out_ndim, out_dtype);
  }
  const std::vector<PrimExpr>& as = *(*a)->shape;
  const std::vector<PrimExpr>& bs = *(*b)->shape;
  const PrimExpr& ak = as[an - 1];
  const PrimExpr& bk = bn == 1 ? bs[0] : bs[bn - 2];
  const int64_t* akc = ak.as_int();
  const int64_t* bkc = bk.as_int();
  if (akc && bkc && *akc != *bkc) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmul, ": reduction dims differ: ", ToString(ak), " in ", ShapeString(as),
                     " and ", ToString(bk), " in ", ShapeString(bs)));
  }
  const int a_batch = std::max(an - 2, 0), b_batch = std::max(bn - 2, 0);
  const int batch = std::max(a_batch, b_batch);
  std::vector<PrimExpr> out;
  for (int i = 0; i < batch; ++i) {
    int ai = i - (batch - a_batch), bi = i - (batch - b_batch);
    PrimExpr d;
    if (ai < 0) {
      d = bs[bi];
    } else if (bi < 0) {
      d = as[ai];
    } else if (!BroadcastDim(as[ai], bs[bi], &d)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kMatmul, ": cannot broadcast batch dims ", ToString(as[ai]), " and ",
                       ToString(bs[bi]), " of ", ShapeString(as), " and ", ShapeString(bs)));
    }
    out.push_back(d);
  }
  if (an > 1) out.push_back(as[an - 2]);
  if (bn > 1) out.push_back(bs[bn - 1]);
  return TensorSInfo(std::move(out), out_dtype);
}

// The index of one operand's batch dims given the output's batch indices
// (right-aligned, broadcast dims of extent 1 read index 0).
std::vector<PrimExpr> OperandBatchIndex(const std::vector<PrimExpr>& operand_batch,
                                        const std::vector<PrimExpr>& out_batch,
                                        const std::vector<PrimExpr>& out_idx) {
  std::vector<PrimExpr> idx;
  const size_t off = out_batch.size() - operand_batch.size();
  for (size_t d = 0; d < operand_batch.size(); ++d) {
    bool broadcast = IsConst(operand_batch[d], 1) && !IsConst(out_batch[off + d], 1);
    idx.push_back(broadcast ? PrimExpr(0) : out_idx[off + d]);
  }
  return idx;
}

// Where an operand's element sits, given the output's batch index.
struct MatmulOperands {
  Buffer a, b, c;
  bool a_vec = false, b_vec = false;
  std::vector<PrimExpr> a_batch, b_batch, out_batch;
  std::vector<PrimExpr> AIndex(const std::vector<PrimExpr>& oidx, const PrimExpr& row,
                               const PrimExpr& k) const {
    std::vector<PrimExpr> idx = OperandBatchIndex(a_batch, out_batch, oidx);
    if (!a_vec) idx.push_back(row);
    idx.push_back(k);
    return idx;
  }
  std::vector<PrimExpr> BIndex(const std::vector<PrimExpr>& oidx, const PrimExpr& k,
                               const PrimExpr& col) const {
    std::vector<PrimExpr> idx = OperandBatchIndex(b_batch, out_batch, oidx);
    idx.push_back(k);
    if (!b_vec) idx.push_back(col);
    return idx;
  }
  std::vector<PrimExpr> CIndex(std::vector<PrimExpr> oidx, const PrimExpr& row,
                               const PrimExpr& col) const {
    if (!a_vec) oidx.push_back(row);
    if (!b_vec) oidx.push_back(col);
    return oidx;
  }
};

absl::StatusOr<Stmt> ScheduleMatmul(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue) {
  absl::StatusOr<Buffer> a_or = nn_internal::InputBuffer(ctx, 0, kMatmul);
  if (!a_or.ok()) return a_or.status();
  absl::StatusOr<Buffer> b_or = nn_internal::InputBuffer(ctx, 1, kMatmul);
  if (!b_or.ok()) return b_or.status();
  if (outputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmul, ": expected 1 output buffer, got ", outputs.size()));
  }
  const Buffer& A = *a_or;
  const Buffer& B = *b_or;
  const Buffer& C = outputs[0];
  const size_t an = A->shape.size(), bn = B->shape.size();
  if (an == 0 || bn == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmul, ": operands must have at least 1 dimension"));
  }
  const bool a_vec = an == 1, b_vec = bn == 1;
  const std::vector<PrimExpr> a_batch(A->shape.begin(), A->shape.end() - (a_vec ? 1 : 2));
  const std::vector<PrimExpr> b_batch(B->shape.begin(), B->shape.end() - (b_vec ? 1 : 2));
  const size_t out_batch_n = C->shape.size() - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  if (C->shape.size() < (a_vec ? 0u : 1u) + (b_vec ? 0u : 1u) ||
      out_batch_n < std::max(a_batch.size(), b_batch.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmul, ": output ", ShapeString(C->shape), " does not match operands ",
                     ShapeString(A->shape), " and ", ShapeString(B->shape)));
  }
  const std::vector<PrimExpr> out_batch(C->shape.begin(), C->shape.begin() + out_batch_n);
  const PrimExpr M = a_vec ? PrimExpr(1) : A->shape[an - 2];
  const PrimExpr K = A->shape[an - 1];
  const PrimExpr N = b_vec ? PrimExpr(1) : B->shape[bn - 1];

  const DataType acc_t = nn_internal::ComputeType(C->dtype);
  if (ctx.target.gpu && (WorthBlockGemm(M, N) || WorthSkinnyGemm(M) || WorthSkinnyGemm(N))) {
    const MatmulOperands op{A, B, C, a_vec, b_vec, a_batch, b_batch, out_batch};
    BlockGemm g;
    g.batches = Product(out_batch);
    g.m = M;
    g.n = N;
    g.k = K;
    g.acc_t = acc_t;
    g.operand_t = A->dtype == B->dtype ? A->dtype : acc_t;
    g.gpu_arch = ctx.target.gpu_arch;
    g.a = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& k) {
      return Cast(g.operand_t, Load(A, op.AIndex(Unflatten(b, out_batch), m, k)));
    };
    g.b = [&](const PrimExpr& b, const PrimExpr& k, const PrimExpr& n) {
      return Cast(g.operand_t, Load(B, op.BIndex(Unflatten(b, out_batch), k, n)));
    };
    g.store = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v) {
      std::vector<PrimExpr> ci = op.CIndex(Unflatten(b, out_batch), m, n);
      PrimExpr cv = Cast(C->dtype, v);
      return Store(C, ci, epilogue ? epilogue(cv, ci) : cv);
    };
    return BlockGemmSchedule(g);
  }
  if (ctx.target.gpu) {
    // One thread per output element, the k loop serial into a kLocal
    // accumulator (device_split fuses nothing here: the loop is already flat).
    return MakeFlatParallelLoop(C->shape, [&](const std::vector<PrimExpr>& ci) {
      const std::vector<PrimExpr> oidx(ci.begin(), ci.begin() + out_batch_n);
      std::vector<PrimExpr> ai = OperandBatchIndex(a_batch, out_batch, oidx);
      std::vector<PrimExpr> bi = OperandBatchIndex(b_batch, out_batch, oidx);
      const PrimExpr row = a_vec ? PrimExpr(0) : ci[out_batch_n];
      const PrimExpr col = b_vec ? PrimExpr(0) : ci.back();
      Buffer acc = MakeBuffer("matmul_acc", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Stmt kloop = Loop("k", K, ForKind::kSerial, [&](const PrimExpr& k) {
        std::vector<PrimExpr> a_at = ai;
        if (!a_vec) a_at.push_back(row);
        a_at.push_back(k);
        std::vector<PrimExpr> b_at = bi;
        b_at.push_back(k);
        if (!b_vec) b_at.push_back(col);
        return Store(
            acc, {PrimExpr(0)},
            Load(acc, {PrimExpr(0)}) + Cast(acc_t, Load(A, a_at)) * Cast(acc_t, Load(B, b_at)));
      });
      PrimExpr v = Cast(C->dtype, Load(acc, {PrimExpr(0)}));
      Stmt store = Store(C, ci, epilogue ? epilogue(v, ci) : v);
      return Allocate(acc, Seq({Store(acc, {PrimExpr(0)}, MakeConst(acc_t, 0)), kloop, store}));
    });
  }
  const MatmulOperands op{A, B, C, a_vec, b_vec, a_batch, b_batch, out_batch};
  CpuGemm g;
  g.cache_budget_bytes = CpuGemmCacheBudget(ctx.target);
  g.batches = Product(out_batch);
  g.b_batches = Product(b_batch);
  g.m = M;
  g.n = N;
  g.k = K;
  g.acc_t = acc_t;
  // B's flat operand index of an output batch (its broadcast dims read 0).
  g.b_of = [&](const PrimExpr& b) {
    std::vector<PrimExpr> bidx = OperandBatchIndex(b_batch, out_batch, Unflatten(b, out_batch));
    PrimExpr bb(0);
    for (size_t d = 0; d < b_batch.size(); ++d) bb = bb * b_batch[d] + bidx[d];
    return bb;
  };
  g.a = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& k) {
    return Cast(acc_t, Load(A, op.AIndex(Unflatten(b, out_batch), m, k)));
  };
  g.b = [&](const PrimExpr& bb, const PrimExpr& k, const PrimExpr& n) {
    std::vector<PrimExpr> idx = Unflatten(bb, b_batch);
    idx.push_back(k);
    if (!b_vec) idx.push_back(n);
    return Cast(acc_t, Load(B, idx));
  };
  g.store = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v) {
    std::vector<PrimExpr> ci = op.CIndex(Unflatten(b, out_batch), m, n);
    PrimExpr cv = Cast(C->dtype, v);
    return Store(C, ci, epilogue ? epilogue(cv, ci) : cv);
  };
  return CpuGemmSchedule(g);
}

// relax.matmul_packed(a, bp, n=N): matmul(a, b) for a constant b of shape
// [k, N] that PackConstantWeights (compiler/transform/pack_weights.h) packed
// at compile time into the CPU GEMM's panels, bp = PackGemmPanels(b) of
// shape [ceil(N / NR), k, NR]. The output is a's shape with its last dim
// N. CPU only.
constexpr char kMatmulPacked[] = "relax.matmul_packed";

absl::StatusOr<StructInfo> InferMatmulPacked(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 2, kMatmulPacked); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> a = nn_internal::TensorArg(call, 0, kMatmulPacked);
  if (!a.ok()) return a.status();
  absl::StatusOr<const TensorStructInfoNode*> bp = nn_internal::TensorArg(call, 1, kMatmulPacked);
  if (!bp.ok()) return bp.status();
  const int64_t n = GetIntAttr(call.attrs, "n", -1);
  const auto& bs = (*bp)->shape;
  if (n < 1 || !bs.has_value() || bs->size() != 3 || !(*bs)[0].as_int() || !(*bs)[1].as_int() ||
      !(*bs)[2].as_int() || *(*bs)[2].as_int() != CpuGemmPanelWidth(n) ||
      *(*bs)[0].as_int() != (n + CpuGemmPanelWidth(n) - 1) / CpuGemmPanelWidth(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmulPacked, ": the packed operand must be PackGemmPanels of a [k, n] ",
                     "matrix with n = ", n, ", got ", bs.has_value() ? ShapeString(*bs) : "?"));
  }
  if ((*a)->ndim < 1 || !(*a)->shape.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmulPacked, ": the first operand needs a known shape"));
  }
  std::vector<PrimExpr> out = *(*a)->shape;
  // The kernel reads k of the panels for every k of a: they must agree
  // before it runs.
  const int64_t* ak = out.back().as_int();
  if (ak == nullptr || *ak != *(*bs)[1].as_int()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMatmulPacked, ": reduction dims differ: ", ToString(out.back()), " and ",
                     *(*bs)[1].as_int()));
  }
  out.back() = PrimExpr(n);
  return TensorSInfo(std::move(out), (*a)->dtype);
}

absl::StatusOr<Stmt> ScheduleMatmulPacked(const LowerContext& ctx,
                                          const std::vector<Buffer>& outputs,
                                          const Epilogue& epilogue) {
  if (ctx.target.gpu) {
    return absl::InvalidArgumentError(absl::StrCat(kMatmulPacked, " runs on the CPU only"));
  }
  absl::StatusOr<Buffer> a_or = nn_internal::InputBuffer(ctx, 0, kMatmulPacked);
  if (!a_or.ok()) return a_or.status();
  absl::StatusOr<Buffer> b_or = nn_internal::InputBuffer(ctx, 1, kMatmulPacked);
  if (!b_or.ok()) return b_or.status();
  const Buffer &A = *a_or, &Bp = *b_or, &C = outputs.at(0);
  const bool a_vec = A->shape.size() == 1;
  const std::vector<PrimExpr> batch(A->shape.begin(), A->shape.end() - (a_vec ? 1 : 2));
  const DataType acc_t = nn_internal::ComputeType(C->dtype);
  CpuGemm g;
  g.cache_budget_bytes = CpuGemmCacheBudget(ctx.target);
  g.batches = Product(batch);
  g.b_batches = PrimExpr(1);
  g.m = a_vec ? PrimExpr(1) : A->shape[A->shape.size() - 2];
  g.n = PrimExpr(GetIntAttr(ctx.call->attrs, "n", 1));
  g.k = A->shape.back();
  g.acc_t = acc_t;
  g.b_of = [](const PrimExpr&) { return PrimExpr(0); };
  // B is one matrix for every batch, so A's batches are rows of one
  // product: [..., M, K] as [prod(...) * M, K] (a recurrent layer's input
  // projection, [seq, 1, K], is then one GEMM, not seq vector products).
  std::vector<PrimExpr> rows = batch;
  const bool flat = !a_vec && !batch.empty();
  if (flat) {
    rows.push_back(g.m);
    g.batches = PrimExpr(1);
    g.m = Product(rows);
  }
  g.a = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& k) {
    std::vector<PrimExpr> idx = flat ? Unflatten(m, rows) : Unflatten(b, batch);
    if (!a_vec && !flat) idx.push_back(m);
    idx.push_back(k);
    return Cast(acc_t, Load(A, idx));
  };
  g.b_panel = [&](const PrimExpr&, const PrimExpr& jo, const PrimExpr& k, const PrimExpr& jj) {
    return Cast(acc_t, Load(Bp, {jo, k, jj}));
  };
  g.store = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v) {
    std::vector<PrimExpr> ci = flat ? Unflatten(m, rows) : Unflatten(b, batch);
    if (!a_vec && !flat) ci.push_back(m);
    ci.push_back(n);
    PrimExpr cv = Cast(C->dtype, v);
    return Store(C, ci, epilogue ? epilogue(cv, ci) : cv);
  };
  return CpuGemmSchedule(g);
}

}  // namespace

void RegisterLinearAlgebraOps() {
  OpInfo info;
  info.name = kMatmul;
  info.pattern = OpPattern::kOutEWiseFusable;
  info.num_args = 2;
  info.infer = InferMatmul;
  info.schedule = ScheduleMatmul;
  RegisterOp(info);
  info.name = kMatmulPacked;
  info.infer = InferMatmulPacked;
  info.schedule = ScheduleMatmulPacked;
  RegisterOp(std::move(info));
}

}  // namespace tether::compiler
