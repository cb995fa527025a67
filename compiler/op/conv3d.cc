// relax.nn.conv3d in NCDHW / OIDHW with strides, padding, dilation and
// groups, and its schedule.
//
// The CPU schedule runs in parallel over batch x output channel x output
// depth x output row; each task walks its row in tiles of kTile output
// columns held in a kLocal accumulator and, for each tap (input channel of
// the group, kd, kh, kw), adds the weight times the tap's input columns
// with the column loop vectorized. A depth or row tap in the padding skips
// its whole inner nest (one check per task and tap, not per column); a
// column tap in the padding reads a clamped element and is masked to zero.
// The epilogue applies at the final store.
//
// For a GPU (LowerContext::gpu) one parallel loop runs over the output
// elements, each a serial reduction over its group's input channels and
// the window into a kLocal scalar, with taps in the padding skipped by
// bounds checks.
//
// 3-D convolutions are rare enough (video, volumetric models) that this
// is the direct form; conv2d.cc holds the tuned 2-D schedules.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::Loop;
using nn_internal::ShapeString;

constexpr char kConv3d[] = "relax.nn.conv3d";
constexpr int64_t kTile = 64;  // output columns per tile (CPU)

struct Conv3dParams {
  std::vector<int64_t> strides, dilation;
  std::vector<int64_t> padding;  // front, top, left, back, bottom, right
  int64_t groups = 1;
};

absl::StatusOr<Conv3dParams> ParseConv3dAttrs(const Attrs& attrs) {
  Conv3dParams p;
  absl::StatusOr<std::vector<int64_t>> v =
      nn_internal::Triple(attrs, "strides", {1, 1, 1}, 1, kConv3d);
  if (!v.ok()) return v.status();
  p.strides = *v;
  v = nn_internal::Triple(attrs, "dilation", {1, 1, 1}, 1, kConv3d);
  if (!v.ok()) return v.status();
  p.dilation = *v;
  v = nn_internal::Padding6(attrs, kConv3d);
  if (!v.ok()) return v.status();
  p.padding = *v;
  p.groups = GetIntAttr(attrs, "groups", 1);
  if (p.groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConv3d, ": groups must be positive, got ", p.groups));
  }
  for (const char* key : {"data_layout", "kernel_layout", "out_layout"}) {
    std::string expected = std::string(key) == "kernel_layout" ? "OIDHW" : "NCDHW";
    if (absl::Status s = nn_internal::CheckLayout(attrs, key, expected, kConv3d); !s.ok()) return s;
  }
  return p;
}

// (extent + pads - dilation * (k - 1) - 1) / stride + 1
PrimExpr OutDim(const PrimExpr& in, const PrimExpr& k, int64_t pads, int64_t dil, int64_t stride) {
  return FloorDiv(in + PrimExpr(pads) - PrimExpr(dil) * (k - 1) - 1, PrimExpr(stride)) + 1;
}

absl::StatusOr<StructInfo> InferConv3d(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 2, kConv3d); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = nn_internal::TensorArg(call, 0, kConv3d);
  if (!x.ok()) return x.status();
  absl::StatusOr<const TensorStructInfoNode*> w = nn_internal::TensorArg(call, 1, kConv3d);
  if (!w.ok()) return w.status();
  absl::StatusOr<Conv3dParams> p = ParseConv3dAttrs(call.attrs);
  if (!p.ok()) return p.status();
  std::optional<DataType> dtype = GetDTypeAttr(call.attrs, "out_dtype");
  if (!dtype.has_value()) dtype = (*x)->dtype;
  for (const auto* t : {*x, *w}) {
    if (t->ndim != -1 && t->ndim != 5) {
      return absl::InvalidArgumentError(absl::StrCat(kConv3d, ": ", t == *x ? "data" : "weight",
                                                     " must have 5 dims, got ", t->ndim));
    }
  }
  if (!(*x)->shape.has_value() || !(*w)->shape.has_value()) return TensorSInfoOfRank(5, dtype);
  const std::vector<PrimExpr>& xs = *(*x)->shape;
  const std::vector<PrimExpr>& ws = *(*w)->shape;
  const int64_t g = p->groups;
  const int64_t* c = xs[1].as_int();
  const int64_t* o = ws[0].as_int();
  const int64_t* cg = ws[1].as_int();
  if (c && cg && *c != *cg * g) {
    return absl::InvalidArgumentError(absl::StrCat(kConv3d, ": data has ", *c,
                                                   " channels but weight ", ShapeString(ws),
                                                   " with ", g, " groups expects ", *cg * g));
  }
  if (o && *o % g != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConv3d, ": ", *o, " output channels do not divide into ", g, " groups"));
  }
  std::vector<PrimExpr> out = {xs[0], ws[0]};
  for (int i = 0; i < 3; ++i) {
    PrimExpr d = OutDim(xs[2 + i], ws[2 + i], p->padding[i] + p->padding[3 + i], p->dilation[i],
                        p->strides[i]);
    if (const int64_t* v = d.as_int(); v && *v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(kConv3d, ": the kernel ", ShapeString(ws),
                                                     " does not fit the padded input ",
                                                     ShapeString(xs)));
    }
    out.push_back(d);
  }
  return TensorSInfo(out, dtype);
}

// `lo <= e < hi` with only the bounds that can fail (the padding on that
// side); undefined when neither can.
PrimExpr TapInside(const PrimExpr& e, bool check_lo, bool check_hi, const PrimExpr& hi) {
  PrimExpr cond;
  if (check_lo) cond = GE(e, 0);
  if (check_hi) cond = cond.defined() ? And(cond, LT(e, hi)) : LT(e, hi);
  return cond;
}

Stmt Guarded(const PrimExpr& cond, Stmt body) {
  return cond.defined() ? IfThenElse(cond, std::move(body)) : body;
}

absl::StatusOr<Stmt> ScheduleConv3d(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue) {
  absl::StatusOr<Buffer> x_or = nn_internal::InputBuffer(ctx, 0, kConv3d);
  if (!x_or.ok()) return x_or.status();
  absl::StatusOr<Buffer> w_or = nn_internal::InputBuffer(ctx, 1, kConv3d);
  if (!w_or.ok()) return w_or.status();
  absl::StatusOr<Conv3dParams> p = ParseConv3dAttrs(ctx.call->attrs);
  if (!p.ok()) return p.status();
  const Buffer& X = *x_or;
  const Buffer& W = *w_or;
  if (outputs.size() != 1 || X->shape.size() != 5 || W->shape.size() != 5 ||
      outputs[0]->shape.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConv3d, ": expects 5-d data, weight and one 5-d output"));
  }
  const Buffer& Y = outputs[0];
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const PrimExpr N = X->shape[0], D = X->shape[2], H = X->shape[3], Wd = X->shape[4];
  const PrimExpr O = W->shape[0], Cg = W->shape[1], KD = W->shape[2], KH = W->shape[3],
                 KW = W->shape[4];
  const PrimExpr OD = Y->shape[2], OH = Y->shape[3], OW = Y->shape[4];
  const PrimExpr Og = FloorDiv(O, PrimExpr(p->groups));
  const std::vector<int64_t>& s = p->strides;
  const std::vector<int64_t>& dl = p->dilation;
  const std::vector<int64_t>& pad = p->padding;
  // The input index of output position `o` and tap `k` along spatial axis `i`.
  auto tap = [&](int i, const PrimExpr& o, const PrimExpr& k) {
    return o * PrimExpr(s[i]) + k * PrimExpr(dl[i]) - PrimExpr(pad[i]);
  };
  const PrimExpr zero = MakeConst(acc_t, 0);
  if (ctx.target.gpu) {
    return MakeFlatParallelLoop(Y->shape, [&](const std::vector<PrimExpr>& yi) {
      const PrimExpr n = yi[0], oc = yi[1], od = yi[2], oh = yi[3], ow = yi[4];
      const PrimExpr g = FloorDiv(oc, Og);
      Buffer acc = MakeBuffer("conv_acc", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
      const PrimExpr a0(0);
      Stmt red = Loop("rc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
        return Loop("rd", KD, ForKind::kSerial, [&](const PrimExpr& kd) {
          PrimExpr id = tap(0, od, kd);
          Stmt plane = Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
            PrimExpr ih = tap(1, oh, kh);
            Stmt row = Loop("rw", KW, ForKind::kSerial, [&](const PrimExpr& kw) {
              PrimExpr iw = tap(2, ow, kw);
              PrimExpr xv = Cast(acc_t, Load(X, {n, g * Cg + c, id, ih, iw}));
              PrimExpr wv = Cast(acc_t, Load(W, {oc, c, kd, kh, kw}));
              return Guarded(TapInside(iw, pad[2] > 0, pad[5] > 0, Wd),
                             Store(acc, {a0}, Load(acc, {a0}) + xv * wv));
            });
            return Guarded(TapInside(ih, pad[1] > 0, pad[4] > 0, H), row);
          });
          return Guarded(TapInside(id, pad[0] > 0, pad[3] > 0, D), plane);
        });
      });
      PrimExpr v = Cast(Y->dtype, Load(acc, {a0}));
      Stmt store = Store(Y, yi, epilogue ? epilogue(v, yi) : v);
      return Allocate(acc, Seq({Store(acc, {a0}, zero), red, store}));
    });
  }
  const PrimExpr T(kTile);
  return Loop("cb", N * O * OD * OH, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, O, OD, OH});
    const PrimExpr n = i[0], oc = i[1], od = i[2], oh = i[3];
    const PrimExpr g = FloorDiv(oc, Og);
    return Loop("wo", CeilDiv(OW, kTile), ForKind::kSerial, [&](const PrimExpr& wo) {
      Buffer acc = MakeBuffer("conv_acc", acc_t, {T}, BufferNode::Scope::kLocal);
      PrimExpr width = Min(T, OW - wo * T);
      Stmt init = Loop("zw", width, ForKind::kVectorized,
                       [&](const PrimExpr& w) { return Store(acc, {w}, zero); });
      Stmt red = Loop("rc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
        return Loop("rd", KD, ForKind::kSerial, [&](const PrimExpr& kd) {
          PrimExpr id = tap(0, od, kd);
          Stmt plane = Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
            PrimExpr ih = tap(1, oh, kh);
            Stmt row = Loop("rw", KW, ForKind::kSerial, [&](const PrimExpr& kw) {
              PrimExpr wv = Cast(acc_t, Load(W, {oc, c, kd, kh, kw}));
              return Loop("w", width, ForKind::kVectorized, [&](const PrimExpr& w) {
                PrimExpr iw = tap(2, wo * T + w, kw);
                PrimExpr inside = TapInside(iw, pad[2] > 0, pad[5] > 0, Wd);
                PrimExpr col = inside.defined() ? Max(Min(iw, Wd - 1), 0) : iw;
                PrimExpr xv = Cast(acc_t, Load(X, {n, g * Cg + c, id, ih, col}));
                if (inside.defined()) xv = Select(inside, xv, zero);
                return Store(acc, {w}, Load(acc, {w}) + xv * wv);
              });
            });
            return Guarded(TapInside(ih, pad[1] > 0, pad[4] > 0, H), row);
          });
          return Guarded(TapInside(id, pad[0] > 0, pad[3] > 0, D), plane);
        });
      });
      Stmt store = Loop("sw", width, ForKind::kVectorized, [&](const PrimExpr& w) {
        std::vector<PrimExpr> yi = {n, oc, od, oh, wo * T + w};
        PrimExpr v = Cast(Y->dtype, Load(acc, {w}));
        return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
      });
      return Allocate(acc, Seq({init, red, store}));
    });
  });
}

}  // namespace

// Registered from registry.cc with the other operator files.
void RegisterConv3dOp() {
  OpInfo info;
  info.name = kConv3d;
  info.pattern = OpPattern::kOutEWiseFusable;
  info.num_args = 2;
  info.infer = InferConv3d;
  info.schedule = ScheduleConv3d;
  RegisterOp(std::move(info));
}

}  // namespace tether::compiler
