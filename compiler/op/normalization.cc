// relax.nn.batch_norm (inference), relax.nn.layer_norm, relax.nn.softmax and
// relax.nn.log_softmax, with their schedules.
//
// batch_norm folds the per-channel statistics into one scale and shift
// (computed once per channel and row, outside the vectorized loop) and
// returns TVM's (normalized, moving_mean, moving_var) tuple. layer_norm and
// the softmaxes are row reductions: the parallel loop runs over the
// non-reduced elements, and each row makes numerically stable passes —
// mean then centered variance for layer_norm; max, then the sum of
// exp(x - max), then the store for the softmaxes — each reduction over
// kReduceLanes partial accumulators so it vectorizes. Arithmetic runs in
// float32 for 16-bit inputs. Inputs are read through TensorReaders, so
// injective producers may be inlined.
//
// For a GPU (LowerContext::gpu) batch_norm is one parallel loop over every
// element (threads below the channel count also copy the statistics).
// layer_norm and the softmaxes give each row of at least kGpuMinBlockRow
// elements (or of unknown length) a block of threads (a kBlock loop over
// rows): each pass reads the row coalesced, strided over the threads, and
// the reductions finish as shared-memory trees (nn_common.h BlockReduce).
// Shorter rows are one parallel loop over rows, each row's passes serial
// loops into kLocal scalars (one thread per row).
#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"

namespace tether::compiler {
namespace {

using nn_internal::Loop;
using nn_internal::ShapeString;

constexpr char kBatchNorm[] = "relax.nn.batch_norm";
constexpr char kLayerNorm[] = "relax.nn.layer_norm";

// `axis` normalized into [0, ndim); INVALID_ARGUMENT when out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int ndim, absl::string_view op) {
  if (axis < -ndim || axis >= ndim) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": axis ", axis, " is out of range for ", ndim, " dims"));
  }
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

// Checks that parameter `i` of `call` (gamma, beta, ...) has `expected_shape`.
absl::Status CheckParam(const CallNode& call, size_t i, const std::vector<PrimExpr>& expected_shape,
                        absl::string_view op, absl::string_view what) {
  absl::StatusOr<const TensorStructInfoNode*> t = nn_internal::TensorArg(call, i, op);
  if (!t.ok()) return t.status();
  if ((*t)->ndim != -1 && (*t)->ndim != static_cast<int>(expected_shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", what, " must have ", expected_shape.size(), " dims, got ", (*t)->ndim));
  }
  if ((*t)->shape.has_value()) {
    for (size_t d = 0; d < expected_shape.size(); ++d) {
      const int64_t* a = (*t)->shape->at(d).as_int();
      const int64_t* b = expected_shape[d].as_int();
      if (a && b && *a != *b) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " has shape ",
                                                       ShapeString(*(*t)->shape), ", expected ",
                                                       ShapeString(expected_shape)));
      }
    }
  }
  return absl::OkStatus();
}

// ---- batch_norm -------------------------------------------------------

absl::StatusOr<StructInfo> InferBatchNorm(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 5, kBatchNorm); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = nn_internal::TensorArg(call, 0, kBatchNorm);
  if (!x.ok()) return x.status();
  const std::optional<DataType> dtype = (*x)->dtype;
  int64_t axis_attr = GetIntAttr(call.attrs, "axis", 1);
  if ((*x)->ndim < 0 || !(*x)->shape.has_value()) {
    StructInfo stat = TensorSInfoOfRank(1, dtype);
    return TupleSInfo({TensorSInfoOfRank((*x)->ndim, dtype), stat, stat});
  }
  absl::StatusOr<int> axis = NormalizeAxis(axis_attr, (*x)->ndim, kBatchNorm);
  if (!axis.ok()) return axis.status();
  const PrimExpr ch = (*(*x)->shape)[*axis];
  const char* names[] = {"gamma", "beta", "moving_mean", "moving_var"};
  for (size_t i = 1; i < 5; ++i) {
    if (absl::Status s = CheckParam(call, i, {ch}, kBatchNorm, names[i - 1]); !s.ok()) return s;
  }
  return TupleSInfo(
      {TensorSInfo(*(*x)->shape, dtype), TensorSInfo({ch}, dtype), TensorSInfo({ch}, dtype)});
}

absl::StatusOr<Stmt> ScheduleBatchNorm(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                       const Epilogue& epilogue) {
  if (GetBoolAttr(ctx.call->attrs, "training", false)) {
    return absl::UnimplementedError(
        absl::StrCat(kBatchNorm, ": only inference (training=False) is supported"));
  }
  std::vector<TensorReader> in;
  for (size_t i = 0; i < 5; ++i) {
    absl::StatusOr<TensorReader> r = nn_internal::InputReader(ctx, i, kBatchNorm);
    if (!r.ok()) return r.status();
    in.push_back(*r);
  }
  if (outputs.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(kBatchNorm, ": expected 3 output buffers, got ", outputs.size()));
  }
  const Buffer& Y = outputs[0];
  const std::vector<PrimExpr>& shape = Y->shape;
  absl::StatusOr<int> axis = NormalizeAxis(GetIntAttr(ctx.call->attrs, "axis", 1),
                                           static_cast<int>(shape.size()), kBatchNorm);
  if (!axis.ok()) return axis.status();
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const double eps = GetFloatAttr(ctx.call->attrs, "epsilon", 1e-5);
  const bool center = GetBoolAttr(ctx.call->attrs, "center", true);
  const bool scale = GetBoolAttr(ctx.call->attrs, "scale", true);
  const std::vector<PrimExpr> prefix(shape.begin(), shape.begin() + *axis);
  const PrimExpr ch = shape[*axis];
  const std::vector<PrimExpr> suffix(shape.begin() + *axis + 1, shape.end());
  auto param = [&](size_t i, const PrimExpr& c) { return Cast(acc_t, in[i]({c})); };
  auto shift_of = [&](const PrimExpr& c, const PrimExpr& k) {
    return center ? param(2, c) - param(3, c) * k : MakeConst(acc_t, 0) - param(3, c) * k;
  };
  if (ctx.target.gpu) {
    // One loop over max(elements, channels): iteration t normalizes element
    // t (when there is one) and copies the statistics of channel t (when
    // there is one), so an empty batch still gets its statistics.
    const PrimExpr total = Product(shape);
    return Loop("bn", Max(total, ch), ForKind::kParallel, [&](const PrimExpr& t) {
      std::vector<PrimExpr> idx = Unflatten(t, shape);
      const PrimExpr c = idx[*axis];
      Var k("bn_scale", acc_t), b("bn_shift", acc_t);
      PrimExpr inv = Call(acc_t, "rsqrt", {param(4, c) + MakeConst(acc_t, eps)});
      PrimExpr v = Cast(Y->dtype, Cast(acc_t, in[0](idx)) * k + b);
      Stmt normalize = IfThenElse(
          LT(t, total),
          LetStmt(k, scale ? param(1, c) * inv : inv,
                  LetStmt(b, shift_of(c, k), Store(Y, idx, epilogue ? epilogue(v, idx) : v))));
      Stmt stats = IfThenElse(
          LT(t, ch), Seq({Store(outputs[1], {t}, in[3]({t})), Store(outputs[2], {t}, in[4]({t}))}));
      return Seq({normalize, stats});
    });
  }

  Stmt normalize = Loop("bn", Product(prefix) * ch, ForKind::kParallel, [&](const PrimExpr& t) {
    PrimExpr c = FloorMod(t, ch);
    std::vector<PrimExpr> pre = Unflatten(FloorDiv(t, ch), prefix);
    Var k("bn_scale", acc_t), b("bn_shift", acc_t);
    PrimExpr inv = Call(acc_t, "rsqrt", {param(4, c) + MakeConst(acc_t, eps)});
    PrimExpr kv = scale ? param(1, c) * inv : inv;
    PrimExpr bv = shift_of(c, k);
    // Nested loops over the suffix dims, the innermost vectorized.
    std::function<Stmt(size_t, std::vector<PrimExpr>)> nest = [&](size_t d,
                                                                  std::vector<PrimExpr> idx) {
      if (d == suffix.size()) {
        PrimExpr v = Cast(Y->dtype, Cast(acc_t, in[0](idx)) * k + b);
        return Store(Y, idx, epilogue ? epilogue(v, idx) : v);
      }
      return Loop(absl::StrCat("bs", d), suffix[d],
                  d + 1 == suffix.size() ? ForKind::kVectorized : ForKind::kSerial,
                  [&](const PrimExpr& i) {
                    std::vector<PrimExpr> next = idx;
                    next.push_back(i);
                    return nest(d + 1, next);
                  });
    };
    std::vector<PrimExpr> idx = pre;
    idx.push_back(c);
    return LetStmt(k, kv, LetStmt(b, bv, nest(0, idx)));
  });
  Stmt stats = Loop("bc", ch, ForKind::kVectorized, [&](const PrimExpr& c) {
    return Seq({Store(outputs[1], {c}, in[3]({c})), Store(outputs[2], {c}, in[4]({c}))});
  });
  return Seq({normalize, stats});
}

// ---- layer_norm ---------------------------------------------------------

// The sorted, normalized reduction axes of layer_norm (default: the last).
absl::StatusOr<std::vector<int>> LayerNormAxes(const Attrs& attrs, int ndim) {
  std::vector<int64_t> raw = GetIntsAttr(attrs, "axes", {-1});
  std::set<int> axes;
  for (int64_t a : raw) {
    absl::StatusOr<int> n = NormalizeAxis(a, ndim, kLayerNorm);
    if (!n.ok()) return n.status();
    if (!axes.insert(*n).second) {
      return absl::InvalidArgumentError(absl::StrCat(kLayerNorm, ": axis ", a, " is repeated"));
    }
  }
  if (axes.empty())
    return absl::InvalidArgumentError(absl::StrCat(kLayerNorm, ": axes must not be empty"));
  return std::vector<int>(axes.begin(), axes.end());
}

absl::StatusOr<StructInfo> InferLayerNorm(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 3, kLayerNorm); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = nn_internal::TensorArg(call, 0, kLayerNorm);
  if (!x.ok()) return x.status();
  if ((*x)->ndim < 0 || !(*x)->shape.has_value()) return TensorSInfoOfRank((*x)->ndim, (*x)->dtype);
  absl::StatusOr<std::vector<int>> axes = LayerNormAxes(call.attrs, (*x)->ndim);
  if (!axes.ok()) return axes.status();
  std::vector<PrimExpr> param_shape;
  for (int a : *axes) param_shape.push_back((*(*x)->shape)[a]);
  for (size_t i = 1; i < 3; ++i) {
    if (absl::Status s = CheckParam(call, i, param_shape, kLayerNorm, i == 1 ? "gamma" : "beta");
        !s.ok()) {
      return s;
    }
  }
  return TensorSInfo(*(*x)->shape, (*x)->dtype);
}

// Splits the dims of `shape` into the reduced `axes` and the rest, and
// merges indices back.
struct RowSplit {
  std::vector<PrimExpr> outer_dims, inner_dims;
  std::vector<bool> reduced;  // per dim of shape
  RowSplit(const std::vector<PrimExpr>& shape, const std::vector<int>& axes)
      : reduced(shape.size(), false) {
    for (int a : axes) reduced[a] = true;
    for (size_t d = 0; d < shape.size(); ++d)
      (reduced[d] ? inner_dims : outer_dims).push_back(shape[d]);
  }
  std::vector<PrimExpr> Merge(const std::vector<PrimExpr>& outer,
                              const std::vector<PrimExpr>& inner) const {
    std::vector<PrimExpr> idx;
    size_t o = 0, i = 0;
    for (bool r : reduced) idx.push_back(r ? inner[i++] : outer[o++]);
    return idx;
  }
};

// How a row schedule reduces and walks its rows: on a CPU with kReduceLanes
// lane accumulators and vector loops; on a GPU one thread per row (serial
// loops into kLocal scalars) or, for long rows, a block per row (lower.h
// BlockReduce and BlockStrided, the results in kShared trees), the row held
// in registers when its length is a constant of at most kMaxRowSlots slots
// a thread (kRegisters: lower.h BlockSlotReduce and BlockSlots; the first
// pass stores each element with Cache, later passes read Cached, so the row
// crosses memory once each way).
struct RowForm {
  enum class Kind { kLanes, kThread, kBlock, kRegisters };
  RowForm(const LowerContext& ctx, PrimExpr length_in, DataType acc_t)
      : kind(Choose(ctx, length_in)), length(std::move(length_in)), acc_t(acc_t) {
    if (kind == Kind::kRegisters) cache = RowSlotBuffer("row", *length.as_int(), acc_t);
  }
  static Kind Choose(const LowerContext& ctx, const PrimExpr& length) {
    if (!ctx.target.gpu) return Kind::kLanes;
    if (!WorthBlockRow(length)) return Kind::kThread;
    const int64_t* n = length.as_int();
    return n != nullptr && RowSlots(*n) <= kMaxRowSlots ? Kind::kRegisters : Kind::kBlock;
  }
  bool InBlock() const { return kind == Kind::kBlock || kind == Kind::kRegisters; }
  bool InRegisters() const { return kind == Kind::kRegisters; }

  // The loop over rows.
  ForKind RowLoop() const { return InBlock() ? ForKind::kBlock : ForKind::kParallel; }
  // A row's statements (the register form's buffer allocated around them).
  Stmt Row(Stmt body) const { return InRegisters() ? Allocate(cache, std::move(body)) : body; }
  // Where a reduction's result goes: element 0 of this buffer.
  Buffer Result(const std::string& name) const {
    if (InBlock()) {
      return MakeBuffer(name, acc_t, {PrimExpr(kDeviceBlockThreads)}, BufferNode::Scope::kShared);
    }
    return MakeBuffer(name, acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
  }
  // into[0] = the fold of reader(slot) over the row; in the block forms,
  // with `each`, each(slot, value) too.
  Stmt Reduce(const std::string& name, const PrimExpr& init, const SlotExpr& reader,
              const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
              const Buffer& into, const SlotStmt& each = nullptr) const {
    const PrimExpr zero(0);
    auto at = [&](const PrimExpr& r) { return reader(RowSlot{r, PrimExpr(), PrimExpr()}); };
    switch (kind) {
      case Kind::kLanes:
        return nn_internal::LaneReduce(name, length, acc_t, init, at, combine, into);
      case Kind::kBlock: {
        ElementStmt each_r;
        if (each) {
          each_r = [&](const PrimExpr& r, const PrimExpr& v) {
            return each(RowSlot{r, PrimExpr(), PrimExpr()}, v);
          };
        }
        return BlockReduce(name, length, acc_t, init, at, combine, into, each_r);
      }
      case Kind::kRegisters:
        return BlockSlotReduce(name, *length.as_int(), acc_t, init, reader, combine, into, each);
      case Kind::kThread:
        break;
    }
    return Seq(
        {Store(into, {zero}, init), Loop(name, length, ForKind::kSerial, [&](const PrimExpr& r) {
           return Store(into, {zero}, combine(Load(into, {zero}), at(r)));
         })});
  }
  // body(slot) for every element of the row.
  Stmt Each(const std::string& name, const std::function<Stmt(const RowSlot&)>& body) const {
    if (InRegisters()) return BlockSlots(name, *length.as_int(), body);
    auto at = [&](const PrimExpr& r) { return body(RowSlot{r, PrimExpr(), PrimExpr()}); };
    if (kind == Kind::kBlock) return BlockStrided(name, length, at);
    return Loop(name, length, kind == Kind::kLanes ? ForKind::kVectorized : ForKind::kSerial, at);
  }
  // The register form's copy of an element (kRegisters only).
  Stmt Cache(const RowSlot& s, const PrimExpr& v) const { return Store(cache, {s.t, s.i}, v); }
  PrimExpr Cached(const RowSlot& s) const { return Load(cache, {s.t, s.i}); }

  Kind kind;
  PrimExpr length;
  DataType acc_t;
  Buffer cache;  // kRegisters: RowSlotBuffer
};

absl::StatusOr<Stmt> ScheduleLayerNorm(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                       const Epilogue& epilogue) {
  std::vector<TensorReader> in;
  for (size_t i = 0; i < 3; ++i) {
    absl::StatusOr<TensorReader> r = nn_internal::InputReader(ctx, i, kLayerNorm);
    if (!r.ok()) return r.status();
    in.push_back(*r);
  }
  if (outputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kLayerNorm, ": expected 1 output buffer, got ", outputs.size()));
  }
  const Buffer& Y = outputs[0];
  absl::StatusOr<std::vector<int>> axes =
      LayerNormAxes(ctx.call->attrs, static_cast<int>(Y->shape.size()));
  if (!axes.ok()) return axes.status();
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const double eps = GetFloatAttr(ctx.call->attrs, "epsilon", 1e-5);
  const bool center = GetBoolAttr(ctx.call->attrs, "center", true);
  const bool scale = GetBoolAttr(ctx.call->attrs, "scale", true);
  const RowSplit split(Y->shape, *axes);
  const PrimExpr R = Product(split.inner_dims);
  const RowForm form(ctx, R, acc_t);
  auto add = [](const PrimExpr& a, const PrimExpr& b) { return a + b; };
  return Loop("ln", Product(split.outer_dims), form.RowLoop(), [&](const PrimExpr& t) {
    std::vector<PrimExpr> outer = Unflatten(t, split.outer_dims);
    auto x_at = [&](const RowSlot& s) {
      return Cast(acc_t, in[0](split.Merge(outer, Unflatten(s.r, split.inner_dims))));
    };
    // After the first pass: the element, from registers in that form.
    auto x_again = [&](const RowSlot& s) { return form.InRegisters() ? form.Cached(s) : x_at(s); };
    SlotStmt cache;
    if (form.InRegisters()) {
      cache = [&](const RowSlot& s, const PrimExpr& v) { return form.Cache(s, v); };
    }
    Buffer mean = form.Result("ln_mean");
    Buffer var = form.Result("ln_var");
    const PrimExpr count = Cast(acc_t, R), zero(0);
    Stmt sum = form.Reduce("lm", MakeConst(acc_t, 0), x_at, add, mean, cache);
    Var mu("ln_mu", acc_t), rstd("ln_rstd", acc_t);
    Stmt sq = form.Reduce(
        "lv", MakeConst(acc_t, 0),
        [&](const RowSlot& s) {
          PrimExpr d = x_again(s) - mu;
          return d * d;
        },
        add, var);
    Stmt store = form.Each("ls", [&](const RowSlot& s) {
      std::vector<PrimExpr> inner = Unflatten(s.r, split.inner_dims);
      PrimExpr v = (x_again(s) - mu) * rstd;
      if (scale) v = v * Cast(acc_t, in[1](inner));
      if (center) v = v + Cast(acc_t, in[2](inner));
      std::vector<PrimExpr> yi = split.Merge(outer, inner);
      v = Cast(Y->dtype, v);
      return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
    });
    PrimExpr rstd_value = Call(acc_t, "rsqrt", {Load(var, {zero}) / count + MakeConst(acc_t, eps)});
    Stmt rest =
        LetStmt(mu, Load(mean, {zero}) / count, Seq({sq, LetStmt(rstd, rstd_value, store)}));
    return Allocate(mean, Allocate(var, form.Row(Seq({sum, rest}))));
  });
}

// ---- softmax / log_softmax ----------------------------------------------

absl::StatusOr<StructInfo> InferSoftmax(const CallNode& call, absl::string_view op) {
  if (absl::Status s = nn_internal::CheckArity(call, 1, op); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> x = nn_internal::TensorArg(call, 0, op);
  if (!x.ok()) return x.status();
  if ((*x)->dtype.has_value() && !(*x)->dtype->is_float() && !(*x)->dtype->is_bfloat16()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": requires a float tensor, got ", (*x)->dtype->ToString()));
  }
  if ((*x)->ndim >= 0) {
    absl::StatusOr<int> axis = NormalizeAxis(GetIntAttr(call.attrs, "axis", -1), (*x)->ndim, op);
    if (!axis.ok()) return axis.status();
  }
  if (!(*x)->shape.has_value()) return TensorSInfoOfRank((*x)->ndim, (*x)->dtype);
  return TensorSInfo(*(*x)->shape, (*x)->dtype);
}

absl::StatusOr<Stmt> ScheduleSoftmax(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                     const Epilogue& epilogue, absl::string_view op, bool log) {
  absl::StatusOr<TensorReader> x = nn_internal::InputReader(ctx, 0, op);
  if (!x.ok()) return x.status();
  if (outputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expected 1 output buffer, got ", outputs.size()));
  }
  const Buffer& Y = outputs[0];
  absl::StatusOr<int> axis =
      NormalizeAxis(GetIntAttr(ctx.call->attrs, "axis", -1), static_cast<int>(Y->shape.size()), op);
  if (!axis.ok()) return axis.status();
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  const RowSplit split(Y->shape, {*axis});
  const PrimExpr R = split.inner_dims[0];
  const TensorReader& read = *x;
  const RowForm form(ctx, R, acc_t);
  return Loop("sm", Product(split.outer_dims), form.RowLoop(), [&](const PrimExpr& t) {
    std::vector<PrimExpr> outer = Unflatten(t, split.outer_dims);
    auto x_at = [&](const RowSlot& s) { return Cast(acc_t, read(split.Merge(outer, {s.r}))); };
    const bool regs = form.InRegisters();
    // After the first pass: the element, from registers in that form.
    auto x_again = [&](const RowSlot& s) { return regs ? form.Cached(s) : x_at(s); };
    const PrimExpr zero(0);
    Buffer mx = form.Result("sm_max");
    Buffer sum = form.Result("sm_sum");
    Var m("sm_m", acc_t), s("sm_s", acc_t);
    SlotStmt cache;
    if (regs) cache = [&](const RowSlot& e, const PrimExpr& v) { return form.Cache(e, v); };
    Stmt max_pass = form.Reduce(
        "sx", nn_internal::LowestValue(acc_t), x_at,
        [](const PrimExpr& a, const PrimExpr& b) { return Max(a, b); }, mx, cache);
    // A softmax computes one exp per element: in registers, the sum's pass
    // replaces each element with its exp(x - max) and the store's pass
    // scales it; in a block per row with float32 output, it keeps them in
    // the output (on a GPU the exps, not the row's bytes, bound it).
    const bool keep_exp = !log && form.kind == RowForm::Kind::kBlock && Y->dtype == acc_t;
    SlotStmt keep;
    if (regs && !log) {
      keep = cache;
    } else if (keep_exp) {
      keep = [&](const RowSlot& e, const PrimExpr& v) {
        return Store(Y, split.Merge(outer, {e.r}), v);
      };
    }
    Stmt sum_pass = form.Reduce(
        "se", MakeConst(acc_t, 0),
        [&](const RowSlot& e) { return Call(acc_t, "exp", {x_again(e) - m}); },
        [](const PrimExpr& a, const PrimExpr& b) { return a + b; }, sum, keep);
    Stmt store = form.Each("ss", [&](const RowSlot& e) {
      std::vector<PrimExpr> yi = split.Merge(outer, {e.r});
      PrimExpr v = log        ? x_again(e) - m - s
                   : regs     ? form.Cached(e) * s
                   : keep_exp ? Load(Y, yi) * s
                              : Call(acc_t, "exp", {x_at(e) - m}) * s;
      v = Cast(Y->dtype, v);
      return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
    });
    // s: log(sum) for log_softmax, 1 / sum for softmax.
    PrimExpr sv =
        log ? Call(acc_t, "log", {Load(sum, {zero})}) : MakeConst(acc_t, 1) / Load(sum, {zero});
    Stmt body =
        Seq({max_pass, LetStmt(m, Load(mx, {zero}), Seq({sum_pass, LetStmt(s, sv, store)}))});
    return Allocate(mx, Allocate(sum, form.Row(body)));
  });
}

}  // namespace

void RegisterNormalizationOps() {
  OpInfo bn;
  bn.name = kBatchNorm;
  bn.pattern = OpPattern::kOpaque;
  bn.num_args = 5;
  bn.infer = InferBatchNorm;
  bn.schedule = ScheduleBatchNorm;
  RegisterOp(std::move(bn));

  OpInfo ln;
  ln.name = kLayerNorm;
  ln.pattern = OpPattern::kCommReduce;
  ln.num_args = 3;
  ln.infer = InferLayerNorm;
  ln.schedule = ScheduleLayerNorm;
  RegisterOp(std::move(ln));

  for (bool log : {false, true}) {
    std::string name = log ? "relax.nn.log_softmax" : "relax.nn.softmax";
    OpInfo info;
    info.name = name;
    info.pattern = OpPattern::kCommReduce;
    info.num_args = 1;
    info.infer = [name](const CallNode& call) { return InferSoftmax(call, name); };
    info.schedule = [name, log](const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                const Epilogue& epilogue) {
      return ScheduleSoftmax(ctx, outputs, epilogue, name, log);
    };
    RegisterOp(std::move(info));
  }
}

}  // namespace tether::compiler
