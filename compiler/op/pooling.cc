// relax.nn.max_pool2d, relax.nn.avg_pool2d and relax.nn.adaptive_avg_pool2d
// (NCHW), with their schedules, and relax.nn.max_pool2d_indices (the
// argmax of max_pool2d's windows, a per-element compute).
//
// Window pools run in parallel over batch x channel x output row; each task
// walks its row in tiles of kTile output columns held in kLocal arrays and
// sweeps the window (kh, kw) over the tile with the column loop vectorized.
// Out-of-bounds taps read a clamped element and are masked (-inf for max,
// 0 for the sum), and avg's divisor is counted with the same mask, so
// padding, dilation, ceil_mode and count_include_pad need no special cases.
// Output sizes follow TVM's relax pooling: floor((in + pads - dilation *
// (k - 1) - 1 [+ stride - 1 when ceil_mode]) / stride) + 1.
//
// For a GPU (LowerContext::gpu) every pool is one parallel loop over the
// output elements, each sweeping its window serially into kLocal scalars
// with the same masking.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"
#include "compiler/op/op_common.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::Loop;
using nn_internal::ShapeString;

constexpr int64_t kTile = 64;

struct PoolParams {
  std::vector<int64_t> pool, strides, padding, dilation;
  bool ceil_mode = false;
  bool count_include_pad = false;
};

absl::StatusOr<PoolParams> ParsePoolAttrs(const Attrs& attrs, absl::string_view op) {
  PoolParams p;
  absl::StatusOr<std::vector<int64_t>> v = nn_internal::Pair(attrs, "pool_size", {1, 1}, 1, op);
  if (!v.ok()) return v.status();
  p.pool = *v;
  v = nn_internal::Pair(attrs, "strides", {1, 1}, 1, op);
  if (!v.ok()) return v.status();
  p.strides = *v;
  v = nn_internal::Pair(attrs, "dilation", {1, 1}, 1, op);
  if (!v.ok()) return v.status();
  p.dilation = *v;
  v = nn_internal::Padding4(attrs, op);
  if (!v.ok()) return v.status();
  p.padding = *v;
  p.ceil_mode = GetBoolAttr(attrs, "ceil_mode", false);
  p.count_include_pad = GetBoolAttr(attrs, "count_include_pad", false);
  if (absl::Status s = nn_internal::CheckLayout(attrs, "layout", "NCHW", op); !s.ok()) return s;
  if (absl::Status s = nn_internal::CheckLayout(attrs, "out_layout", "NCHW", op); !s.ok()) return s;
  return p;
}

PrimExpr PoolOutDim(const PrimExpr& in, int64_t k, int64_t pads, int64_t dil, int64_t stride,
                    bool ceil_mode) {
  PrimExpr num = in + PrimExpr(pads - dil * (k - 1) - 1);
  if (ceil_mode) num = num + PrimExpr(stride - 1);
  return FloorDiv(num, PrimExpr(stride)) + 1;
}

absl::StatusOr<const TensorStructInfoNode*> Data4d(const CallNode& call, absl::string_view op) {
  if (absl::Status s = nn_internal::CheckArity(call, 1, op); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = nn_internal::TensorArg(call, 0, op);
  if (!x.ok()) return x.status();
  if ((*x)->ndim != -1 && (*x)->ndim != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": data must have 4 dims (NCHW), got ", (*x)->ndim));
  }
  return *x;
}

absl::StatusOr<StructInfo> InferPool(const CallNode& call, absl::string_view op) {
  absl::StatusOr<const TensorStructInfoNode*> x = Data4d(call, op);
  if (!x.ok()) return x.status();
  absl::StatusOr<PoolParams> p = ParsePoolAttrs(call.attrs, op);
  if (!p.ok()) return p.status();
  if (!(*x)->shape.has_value()) return TensorSInfoOfRank(4, (*x)->dtype);
  const std::vector<PrimExpr>& s = *(*x)->shape;
  PrimExpr oh = PoolOutDim(s[2], p->pool[0], p->padding[0] + p->padding[2], p->dilation[0],
                           p->strides[0], p->ceil_mode);
  PrimExpr ow = PoolOutDim(s[3], p->pool[1], p->padding[1] + p->padding[3], p->dilation[1],
                           p->strides[1], p->ceil_mode);
  for (const PrimExpr& d : {oh, ow}) {
    if (const int64_t* v = d.as_int(); v && *v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": pool_size (", p->pool[0], ", ",
                                                     p->pool[1], ") does not fit the padded input ",
                                                     ShapeString(s)));
    }
  }
  return TensorSInfo({s[0], s[1], oh, ow}, (*x)->dtype);
}

absl::StatusOr<Stmt> SchedulePool(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                  const Epilogue& epilogue, absl::string_view op, bool is_max) {
  absl::StatusOr<TensorReader> x = nn_internal::InputReader(ctx, 0, op);
  if (!x.ok()) return x.status();
  absl::StatusOr<std::vector<PrimExpr>> xs =
      nn_internal::KnownShape(ctx.call->args[0].struct_info(), op, "data");
  if (!xs.ok()) return xs.status();
  absl::StatusOr<PoolParams> p = ParsePoolAttrs(ctx.call->attrs, op);
  if (!p.ok()) return p.status();
  if (outputs.size() != 1 || outputs[0]->shape.size() != 4 || xs->size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expects 4-d data and one 4-d output"));
  }
  const Buffer& Y = outputs[0];
  const PrimExpr N = (*xs)[0], C = (*xs)[1], H = (*xs)[2], W = (*xs)[3];
  const PrimExpr OH = Y->shape[2], OW = Y->shape[3];
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const PrimExpr T(kTile);
  const int64_t pt = p->padding[0], pl = p->padding[1], pb = p->padding[2], pr = p->padding[3];
  const TensorReader& read = *x;
  if (ctx.target.gpu) {
    return MakeFlatParallelLoop(Y->shape, [&](const std::vector<PrimExpr>& yi) {
      const PrimExpr n = yi[0], c = yi[1], oh = yi[2], ow = yi[3];
      Buffer acc = MakeBuffer("pool_acc", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Buffer cnt = MakeBuffer("pool_count", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      const PrimExpr zero(0);
      PrimExpr init = is_max ? nn_internal::LowestValue(acc_t) : MakeConst(acc_t, 0);
      Stmt sweep = Loop("kh", PrimExpr(p->pool[0]), ForKind::kSerial, [&](const PrimExpr& kh) {
        PrimExpr ih = oh * PrimExpr(p->strides[0]) - PrimExpr(pt) + kh * PrimExpr(p->dilation[0]);
        PrimExpr h_in = And(GE(ih, 0), LT(ih, H));
        PrimExpr h_pad = LT(ih, H + PrimExpr(pb));
        return Loop("kw", PrimExpr(p->pool[1]), ForKind::kSerial, [&](const PrimExpr& kw) {
          PrimExpr iw = ow * PrimExpr(p->strides[1]) - PrimExpr(pl) + kw * PrimExpr(p->dilation[1]);
          PrimExpr inside = And(h_in, And(GE(iw, 0), LT(iw, W)));
          PrimExpr v = Cast(acc_t, read({n, c, Max(Min(ih, H - 1), 0), Max(Min(iw, W - 1), 0)}));
          if (is_max) return Store(acc, {zero}, Max(Load(acc, {zero}), Select(inside, v, init)));
          PrimExpr counted = p->count_include_pad ? And(h_pad, LT(iw, W + PrimExpr(pr))) : inside;
          return Seq(
              {Store(acc, {zero}, Load(acc, {zero}) + Select(inside, v, MakeConst(acc_t, 0))),
               Store(
                   cnt, {zero},
                   Load(cnt, {zero}) + Select(counted, MakeConst(acc_t, 1), MakeConst(acc_t, 0)))});
        });
      });
      PrimExpr v = Load(acc, {zero});
      if (!is_max) v = v / Max(Load(cnt, {zero}), MakeConst(acc_t, 1));
      v = Cast(Y->dtype, v);
      Stmt store = Store(Y, yi, epilogue ? epilogue(v, yi) : v);
      Stmt init_all = Seq({Store(acc, {zero}, init), Store(cnt, {zero}, MakeConst(acc_t, 0))});
      return Allocate(acc, Allocate(cnt, Seq({init_all, sweep, store})));
    });
  }
  return Loop("pr", N * C * OH, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, C, OH});
    PrimExpr n = i[0], c = i[1], oh = i[2];
    return Loop("wo", CeilDiv(OW, kTile), ForKind::kSerial, [&](const PrimExpr& wo) {
      Buffer acc = MakeBuffer("pool_acc", acc_t, {T}, BufferNode::Scope::kLocal);
      Buffer cnt = MakeBuffer("pool_count", acc_t, {T}, BufferNode::Scope::kLocal);
      PrimExpr width = Min(T, OW - wo * T);
      PrimExpr init = is_max ? nn_internal::LowestValue(acc_t) : MakeConst(acc_t, 0);
      Stmt zero = Loop("zw", width, ForKind::kVectorized, [&](const PrimExpr& w) {
        return Seq({Store(acc, {w}, init), Store(cnt, {w}, MakeConst(acc_t, 0))});
      });
      Stmt sweep = Loop("kh", PrimExpr(p->pool[0]), ForKind::kSerial, [&](const PrimExpr& kh) {
        PrimExpr ih = oh * PrimExpr(p->strides[0]) - PrimExpr(pt) + kh * PrimExpr(p->dilation[0]);
        PrimExpr h_in = And(GE(ih, 0), LT(ih, H));
        PrimExpr h_pad = LT(ih, H + PrimExpr(pb));
        return Loop("kw", PrimExpr(p->pool[1]), ForKind::kSerial, [&](const PrimExpr& kw) {
          return Loop("w", width, ForKind::kVectorized, [&](const PrimExpr& w) {
            PrimExpr iw = (wo * T + w) * PrimExpr(p->strides[1]) - PrimExpr(pl) +
                          kw * PrimExpr(p->dilation[1]);
            PrimExpr inside = And(h_in, And(GE(iw, 0), LT(iw, W)));
            PrimExpr v = Cast(acc_t, read({n, c, Max(Min(ih, H - 1), 0), Max(Min(iw, W - 1), 0)}));
            if (is_max) return Store(acc, {w}, Max(Load(acc, {w}), Select(inside, v, init)));
            PrimExpr counted = p->count_include_pad ? And(h_pad, LT(iw, W + PrimExpr(pr))) : inside;
            return Seq({Store(acc, {w}, Load(acc, {w}) + Select(inside, v, MakeConst(acc_t, 0))),
                        Store(cnt, {w},
                              Load(cnt, {w}) +
                                  Select(counted, MakeConst(acc_t, 1), MakeConst(acc_t, 0)))});
          });
        });
      });
      Stmt store = Loop("sw", width, ForKind::kVectorized, [&](const PrimExpr& w) {
        std::vector<PrimExpr> yi = {n, c, oh, wo * T + w};
        PrimExpr v = Load(acc, {w});
        if (!is_max) v = v / Max(Load(cnt, {w}), MakeConst(acc_t, 1));
        v = Cast(Y->dtype, v);
        return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
      });
      return Allocate(acc, Allocate(cnt, Seq({zero, sweep, store})));
    });
  });
}

constexpr char kAdaptive[] = "relax.nn.adaptive_avg_pool2d";

// output_size: absent (TVM: the input's size), one value or two.
absl::StatusOr<std::vector<PrimExpr>> AdaptiveOutSize(const CallNode& call,
                                                      const std::vector<PrimExpr>& in) {
  if (call.attrs.find("output_size") == call.attrs.end())
    return std::vector<PrimExpr>{in[2], in[3]};
  std::vector<int64_t> v = GetIntsAttr(call.attrs, "output_size");
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2 || v[0] < 1 || v[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kAdaptive, ": output_size must be 1 or 2 positive ints, got ",
                     ToString(call.attrs.at("output_size"))));
  }
  return std::vector<PrimExpr>{PrimExpr(v[0]), PrimExpr(v[1])};
}

absl::StatusOr<StructInfo> InferAdaptive(const CallNode& call) {
  absl::StatusOr<const TensorStructInfoNode*> x = Data4d(call, kAdaptive);
  if (!x.ok()) return x.status();
  for (const char* key : {"layout", "out_layout"}) {
    if (absl::Status s = nn_internal::CheckLayout(call.attrs, key, "NCHW", kAdaptive); !s.ok())
      return s;
  }
  if (!(*x)->shape.has_value()) return TensorSInfoOfRank(4, (*x)->dtype);
  const std::vector<PrimExpr>& s = *(*x)->shape;
  absl::StatusOr<std::vector<PrimExpr>> o = AdaptiveOutSize(call, s);
  if (!o.ok()) return o.status();
  return TensorSInfo({s[0], s[1], (*o)[0], (*o)[1]}, (*x)->dtype);
}

// Output cell (oh, ow) averages rows [floor(oh*H/OH), ceil((oh+1)*H/OH)) and
// the same for columns.
absl::StatusOr<Stmt> ScheduleAdaptive(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                      const Epilogue& epilogue) {
  absl::StatusOr<TensorReader> x = nn_internal::InputReader(ctx, 0, kAdaptive);
  if (!x.ok()) return x.status();
  absl::StatusOr<std::vector<PrimExpr>> xs =
      nn_internal::KnownShape(ctx.call->args[0].struct_info(), kAdaptive, "data");
  if (!xs.ok()) return xs.status();
  if (outputs.size() != 1 || outputs[0]->shape.size() != 4 || xs->size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(kAdaptive, ": expects 4-d data and one 4-d output"));
  }
  const Buffer& Y = outputs[0];
  const PrimExpr N = (*xs)[0], C = (*xs)[1], H = (*xs)[2], W = (*xs)[3];
  const PrimExpr OH = Y->shape[2], OW = Y->shape[3];
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const TensorReader& read = *x;
  if (ctx.target.gpu) {
    return MakeFlatParallelLoop(Y->shape, [&](const std::vector<PrimExpr>& yi) {
      const PrimExpr n = yi[0], c = yi[1], oh = yi[2], ow = yi[3];
      const PrimExpr zero(0);
      PrimExpr hs = FloorDiv(oh * H, OH), he = FloorDiv((oh + 1) * H + OH - 1, OH);
      PrimExpr ws = FloorDiv(ow * W, OW), we = FloorDiv((ow + 1) * W + OW - 1, OW);
      Buffer sum = MakeBuffer("adaptive_sum", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Stmt sweep = Loop("h", he - hs, ForKind::kSerial, [&](const PrimExpr& h) {
        return Loop("w", we - ws, ForKind::kSerial, [&](const PrimExpr& w) {
          return Store(sum, {zero}, Load(sum, {zero}) + Cast(acc_t, read({n, c, hs + h, ws + w})));
        });
      });
      PrimExpr v = Cast(Y->dtype, Load(sum, {zero}) / Cast(acc_t, (he - hs) * (we - ws)));
      Stmt store = Store(Y, yi, epilogue ? epilogue(v, yi) : v);
      return Allocate(sum, Seq({Store(sum, {zero}, MakeConst(acc_t, 0)), sweep, store}));
    });
  }
  return Loop("ar", N * C * OH, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, C, OH});
    PrimExpr n = i[0], c = i[1], oh = i[2];
    PrimExpr hs = FloorDiv(oh * H, OH), he = FloorDiv((oh + 1) * H + OH - 1, OH);
    return Loop("ow", OW, ForKind::kSerial, [&](const PrimExpr& ow) {
      PrimExpr ws = FloorDiv(ow * W, OW), we = FloorDiv((ow + 1) * W + OW - 1, OW);
      Buffer sum = MakeBuffer("adaptive_sum", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Buffer row = MakeBuffer("adaptive_row", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      Stmt rows = Loop("h", he - hs, ForKind::kSerial, [&](const PrimExpr& h) {
        Stmt reduce = nn_internal::LaneReduce(
            "aw", we - ws, acc_t, MakeConst(acc_t, 0),
            [&](const PrimExpr& r) {
              return Cast(acc_t, read({n, c, hs + h, ws + r}));
            },
            [](const PrimExpr& a, const PrimExpr& b) { return a + b; }, row);
        return Seq({reduce, Store(sum, {PrimExpr(0)},
                                  Load(sum, {PrimExpr(0)}) + Load(row, {PrimExpr(0)}))});
      });
      std::vector<PrimExpr> yi = {n, c, oh, ow};
      PrimExpr v = Cast(Y->dtype, Load(sum, {PrimExpr(0)}) / Cast(acc_t, (he - hs) * (we - ws)));
      Stmt store = Store(Y, yi, epilogue ? epilogue(v, yi) : v);
      return Allocate(
          sum, Allocate(row, Seq({Store(sum, {PrimExpr(0)}, MakeConst(acc_t, 0)), rows, store})));
    });
  });
}

// relax.nn.max_pool2d_indices(data): max_pool2d's attributes, the int64
// flat index into data of each window's maximum (the first one on ties;
// padding taps never win), row-major ((n * C + c) * H + h) * W + w, or
// with storage_order 1 column-major within the image, (n * C + c) * H * W
// + w * H + h (ONNX MaxPool's Indices). A per-element compute over the
// unrolled window, so the window may have at most kMaxArgmaxTaps taps.
constexpr int64_t kMaxArgmaxTaps = 64;

absl::StatusOr<StructInfo> InferPoolIndices(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.nn.max_pool2d_indices";
  TETHER_ASSIGN_OR_RETURN(PoolParams p, ParsePoolAttrs(call.attrs, kOp));
  if (p.pool[0] * p.pool[1] > kMaxArgmaxTaps) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": a window of ", p.pool[0], " x ",
                                                   p.pool[1], " has more than ", kMaxArgmaxTaps,
                                                   " taps"));
  }
  TETHER_ASSIGN_OR_RETURN(StructInfo s, InferPool(call, kOp));
  const auto* t = s.as<TensorStructInfoNode>();
  if (t->shape.has_value()) return TensorSInfo(*t->shape, DataType::Int(64));
  return TensorSInfoOfRank(4, DataType::Int(64));
}

PrimExpr ComputePoolIndices(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const PoolParams p = *ParsePoolAttrs(ctx.call->attrs, "relax.nn.max_pool2d_indices");
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  const bool column_major = GetIntAttr(ctx.call->attrs, "storage_order", 0) != 0;
  struct Tap {
    PrimExpr valid, value, index;
  };
  std::vector<Tap> taps;
  for (int64_t a = 0; a < p.pool[0]; ++a) {
    for (int64_t b = 0; b < p.pool[1]; ++b) {
      const PrimExpr h = idx[2] * p.strides[0] + (a * p.dilation[0] - p.padding[0]);
      const PrimExpr w = idx[3] * p.strides[1] + (b * p.dilation[1] - p.padding[1]);
      const PrimExpr valid = And(And(GE(h, 0), LT(h, in[2])), And(GE(w, 0), LT(w, in[3])));
      const PrimExpr hc = Max(Min(h, in[2] - 1), 0), wc = Max(Min(w, in[3] - 1), 0);
      const PrimExpr plane = (idx[0] * in[1] + idx[1]) * in[2] * in[3];
      taps.push_back({valid, ctx.inputs[0]({idx[0], idx[1], hc, wc}),
                      plane + (column_major ? wc * in[2] + hc : hc * in[3] + wc)});
    }
  }
  // The window's maximum over the valid taps, then the first tap holding it.
  PrimExpr best;
  for (const Tap& t : taps) {
    const PrimExpr v = Select(t.valid, t.value, nn_internal::LowestValue(t.value.dtype()));
    best = best.defined() ? Max(best, v) : v;
  }
  PrimExpr out = taps.back().index;
  for (size_t k = taps.size(); k-- > 0;) {
    out = Select(And(taps[k].valid, EQ(taps[k].value, best)), taps[k].index, out);
  }
  return Cast(DataType::Int(64), out);
}

}  // namespace

void RegisterPoolingOps() {
  for (bool is_max : {true, false}) {
    std::string name = is_max ? "relax.nn.max_pool2d" : "relax.nn.avg_pool2d";
    OpInfo info;
    info.name = name;
    info.pattern = OpPattern::kOutEWiseFusable;
    info.num_args = 1;
    info.infer = [name](const CallNode& call) { return InferPool(call, name); };
    info.schedule = [name, is_max](const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                   const Epilogue& epilogue) {
      return SchedulePool(ctx, outputs, epilogue, name, is_max);
    };
    RegisterOp(std::move(info));
  }
  RegisterComputeOp("relax.nn.max_pool2d_indices", OpPattern::kInjective, 1, InferPoolIndices,
                    ComputePoolIndices);
  OpInfo info;
  info.name = kAdaptive;
  info.pattern = OpPattern::kOutEWiseFusable;
  info.num_args = 1;
  info.infer = InferAdaptive;
  info.schedule = ScheduleAdaptive;
  RegisterOp(std::move(info));
}

}  // namespace tether::compiler
