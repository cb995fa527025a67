// relax.nn.max_pool3d and relax.nn.avg_pool3d (NCDHW), with their schedule.
//
// The 3-D forms of pooling.cc's window pools, with the same semantics:
// out-of-bounds taps read a clamped element and are masked (-inf for max,
// 0 for the sum), and avg's divisor is counted with the same mask, so
// padding, dilation, ceil_mode and count_include_pad need no special cases.
// Output sizes follow TVM's relax pooling: floor((in + pads - dilation *
// (k - 1) - 1 [+ stride - 1 when ceil_mode]) / stride) + 1.
//
// The CPU schedule runs in parallel over batch x channel x output depth x
// output row; each task walks its row in tiles of kTile output columns held
// in kLocal arrays and sweeps the window (kd, kh, kw) over the tile with the
// column loop vectorized. For a GPU (LowerContext::gpu) one parallel loop
// runs over the output elements, each sweeping its window serially.
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::Loop;
using nn_internal::ShapeString;

constexpr int64_t kTile = 64;

struct Pool3dParams {
  std::vector<int64_t> pool, strides, dilation;
  std::vector<int64_t> padding;  // front, top, left, back, bottom, right
  bool ceil_mode = false;
  bool count_include_pad = false;
};

absl::StatusOr<Pool3dParams> ParsePool3dAttrs(const Attrs& attrs, absl::string_view op) {
  Pool3dParams p;
  absl::StatusOr<std::vector<int64_t>> v =
      nn_internal::Triple(attrs, "pool_size", {1, 1, 1}, 1, op);
  if (!v.ok()) return v.status();
  p.pool = *v;
  v = nn_internal::Triple(attrs, "strides", {1, 1, 1}, 1, op);
  if (!v.ok()) return v.status();
  p.strides = *v;
  v = nn_internal::Triple(attrs, "dilation", {1, 1, 1}, 1, op);
  if (!v.ok()) return v.status();
  p.dilation = *v;
  v = nn_internal::Padding6(attrs, op);
  if (!v.ok()) return v.status();
  p.padding = *v;
  p.ceil_mode = GetBoolAttr(attrs, "ceil_mode", false);
  p.count_include_pad = GetBoolAttr(attrs, "count_include_pad", false);
  if (absl::Status s = nn_internal::CheckLayout(attrs, "layout", "NCDHW", op); !s.ok()) return s;
  if (absl::Status s = nn_internal::CheckLayout(attrs, "out_layout", "NCDHW", op); !s.ok()) {
    return s;
  }
  return p;
}

PrimExpr PoolOutDim(const PrimExpr& in, int64_t k, int64_t pads, int64_t dil, int64_t stride,
                    bool ceil_mode) {
  PrimExpr num = in + PrimExpr(pads - dil * (k - 1) - 1);
  if (ceil_mode) num = num + PrimExpr(stride - 1);
  return FloorDiv(num, PrimExpr(stride)) + 1;
}

absl::StatusOr<StructInfo> InferPool3d(const CallNode& call, absl::string_view op) {
  if (absl::Status s = nn_internal::CheckArity(call, 1, op); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = nn_internal::TensorArg(call, 0, op);
  if (!x.ok()) return x.status();
  if ((*x)->ndim != -1 && (*x)->ndim != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": data must have 5 dims (NCDHW), got ", (*x)->ndim));
  }
  absl::StatusOr<Pool3dParams> p = ParsePool3dAttrs(call.attrs, op);
  if (!p.ok()) return p.status();
  if (!(*x)->shape.has_value()) return TensorSInfoOfRank(5, (*x)->dtype);
  const std::vector<PrimExpr>& s = *(*x)->shape;
  std::vector<PrimExpr> out = {s[0], s[1]};
  for (int i = 0; i < 3; ++i) {
    PrimExpr d = PoolOutDim(s[2 + i], p->pool[i], p->padding[i] + p->padding[3 + i], p->dilation[i],
                            p->strides[i], p->ceil_mode);
    if (const int64_t* v = d.as_int(); v && *v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": pool_size (", absl::StrJoin(p->pool, ", "),
                       ") does not fit the padded input ", ShapeString(s)));
    }
    out.push_back(d);
  }
  return TensorSInfo(out, (*x)->dtype);
}

absl::StatusOr<Stmt> SchedulePool3d(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue, absl::string_view op, bool is_max) {
  absl::StatusOr<TensorReader> x = nn_internal::InputReader(ctx, 0, op);
  if (!x.ok()) return x.status();
  absl::StatusOr<std::vector<PrimExpr>> xs =
      nn_internal::KnownShape(ctx.call->args[0].struct_info(), op, "data");
  if (!xs.ok()) return xs.status();
  absl::StatusOr<Pool3dParams> p = ParsePool3dAttrs(ctx.call->attrs, op);
  if (!p.ok()) return p.status();
  if (outputs.size() != 1 || outputs[0]->shape.size() != 5 || xs->size() != 5) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expects 5-d data and one 5-d output"));
  }
  const Buffer& Y = outputs[0];
  const PrimExpr N = (*xs)[0], C = (*xs)[1];
  const std::vector<PrimExpr> in = {(*xs)[2], (*xs)[3], (*xs)[4]};
  const PrimExpr OD = Y->shape[2], OH = Y->shape[3], OW = Y->shape[4];
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const TensorReader& read = *x;
  const PrimExpr init = is_max ? nn_internal::LowestValue(acc_t) : MakeConst(acc_t, 0);
  const PrimExpr zero = MakeConst(acc_t, 0), one = MakeConst(acc_t, 1);
  // Accumulates the tap (kd, kh, kw) of output position `o` (depth, row,
  // column) into acc[slot] and cnt[slot].
  auto accumulate = [&](const Buffer& acc, const Buffer& cnt, const PrimExpr& slot,
                        const PrimExpr& n, const PrimExpr& c, const std::vector<PrimExpr>& o,
                        const std::vector<PrimExpr>& k) {
    std::vector<PrimExpr> idx = {n, c};
    PrimExpr inside, counted;
    for (int i = 0; i < 3; ++i) {
      PrimExpr e = o[i] * PrimExpr(p->strides[i]) - PrimExpr(p->padding[i]) +
                   k[i] * PrimExpr(p->dilation[i]);
      PrimExpr in_i = And(GE(e, 0), LT(e, in[i]));
      PrimExpr pad_i = LT(e, in[i] + PrimExpr(p->padding[3 + i]));
      inside = inside.defined() ? And(inside, in_i) : in_i;
      counted = counted.defined() ? And(counted, pad_i) : pad_i;
      idx.push_back(Max(Min(e, in[i] - 1), 0));
    }
    PrimExpr v = Cast(acc_t, read(idx));
    if (is_max) return Store(acc, {slot}, Max(Load(acc, {slot}), Select(inside, v, init)));
    if (!p->count_include_pad) counted = inside;
    return Seq({Store(acc, {slot}, Load(acc, {slot}) + Select(inside, v, zero)),
                Store(cnt, {slot}, Load(cnt, {slot}) + Select(counted, one, zero))});
  };
  auto finish = [&](const Buffer& acc, const Buffer& cnt, const PrimExpr& slot,
                    const std::vector<PrimExpr>& yi) {
    PrimExpr v = Load(acc, {slot});
    if (!is_max) v = v / Max(Load(cnt, {slot}), one);
    v = Cast(Y->dtype, v);
    return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
  };
  auto window = [&](const std::function<Stmt(const std::vector<PrimExpr>&)>& body) {
    return Loop("kd", PrimExpr(p->pool[0]), ForKind::kSerial, [&](const PrimExpr& kd) {
      return Loop("kh", PrimExpr(p->pool[1]), ForKind::kSerial, [&](const PrimExpr& kh) {
        return Loop("kw", PrimExpr(p->pool[2]), ForKind::kSerial, [&](const PrimExpr& kw) {
          return body({kd, kh, kw});
        });
      });
    });
  };
  if (ctx.target.gpu) {
    return MakeFlatParallelLoop(Y->shape, [&](const std::vector<PrimExpr>& yi) {
      Buffer acc = MakeBuffer("pool_acc", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Buffer cnt = MakeBuffer("pool_count", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      const PrimExpr s0(0);
      Stmt sweep = window([&](const std::vector<PrimExpr>& k) {
        return accumulate(acc, cnt, s0, yi[0], yi[1], {yi[2], yi[3], yi[4]}, k);
      });
      Stmt init_all = Seq({Store(acc, {s0}, init), Store(cnt, {s0}, zero)});
      return Allocate(acc, Allocate(cnt, Seq({init_all, sweep, finish(acc, cnt, s0, yi)})));
    });
  }
  const PrimExpr T(kTile);
  return Loop("pr", N * C * OD * OH, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, C, OD, OH});
    const PrimExpr n = i[0], c = i[1], od = i[2], oh = i[3];
    return Loop("wo", CeilDiv(OW, kTile), ForKind::kSerial, [&](const PrimExpr& wo) {
      Buffer acc = MakeBuffer("pool_acc", acc_t, {T}, BufferNode::Scope::kLocal);
      Buffer cnt = MakeBuffer("pool_count", acc_t, {T}, BufferNode::Scope::kLocal);
      PrimExpr width = Min(T, OW - wo * T);
      Stmt init_all = Loop("zw", width, ForKind::kVectorized, [&](const PrimExpr& w) {
        return Seq({Store(acc, {w}, init), Store(cnt, {w}, zero)});
      });
      Stmt sweep = window([&](const std::vector<PrimExpr>& k) {
        return Loop("w", width, ForKind::kVectorized, [&](const PrimExpr& w) {
          return accumulate(acc, cnt, w, n, c, {od, oh, wo * T + w}, k);
        });
      });
      Stmt store = Loop("sw", width, ForKind::kVectorized, [&](const PrimExpr& w) {
        return finish(acc, cnt, w, {n, c, od, oh, wo * T + w});
      });
      return Allocate(acc, Allocate(cnt, Seq({init_all, sweep, store})));
    });
  });
}

}  // namespace

void RegisterPool3dOps() {
  for (bool is_max : {true, false}) {
    std::string name = is_max ? "relax.nn.max_pool3d" : "relax.nn.avg_pool3d";
    OpInfo info;
    info.name = name;
    info.pattern = OpPattern::kOutEWiseFusable;
    info.num_args = 1;
    info.infer = [name](const CallNode& call) { return InferPool3d(call, name); };
    info.schedule = [name, is_max](const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                   const Epilogue& epilogue) {
      return SchedulePool3d(ctx, outputs, epilogue, name, is_max);
    };
    RegisterOp(std::move(info));
  }
}

}  // namespace tether::compiler
