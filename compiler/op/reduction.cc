// Reductions: sum, mean, max, min, prod over a set of axes (attr "axis", a
// list or an int; absent: all) with "keepdims", and argmax/argmin (attr
// "axis" an int or absent for the flattened tensor, int64 result, the first
// index on ties). Each is a `schedule`: the output elements in the parallel
// loop nest of lower.h, and per element a thread-local accumulator over the
// reduced axes, in serial loops (on a CPU, over trailing axes of 32 or more
// elements, a vector of partial results first). Inputs are read only
// through ctx.inputs, so injective producers can be inlined, and the final
// value goes through the epilogue. Half-precision sums and products accumulate in float32.
// For a GPU, sum/mean/max/min/prod over at least kGpuMinBlockRow elements
// per output (or an unknown count) give each output element a block of
// threads instead (ScheduleReduceBlocks), or several blocks and a second
// launch when there are few outputs (ScheduleReduceSplit); argmax/argmin
// stay per thread.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

using nn_internal::Loop;

enum class Reducer { kSum, kMean, kMax, kMin, kProd, kArgMax, kArgMin };

bool IsArg(Reducer r) { return r == Reducer::kArgMax || r == Reducer::kArgMin; }

// The reduced axes, normalized and sorted; all axes when absent.
absl::StatusOr<std::vector<int64_t>> ReducedAxes(const CallNode& call, int64_t ndim,
                                                 bool single_only) {
  auto it = call.attrs.find("axis");
  std::vector<int64_t> axes;
  if (it == call.attrs.end()) {
    for (int64_t k = 0; k < ndim; ++k) axes.push_back(k);
    return axes;
  }
  if (const auto* v = std::get_if<int64_t>(&it->second)) {
    axes = {*v};
  } else if (const auto* l = std::get_if<std::vector<int64_t>>(&it->second)) {
    if (single_only) return OpError(call, "attribute axis must be one int");
    axes = *l;
  } else {
    return OpError(call, absl::StrCat("attribute axis must be ints, got ", ToString(it->second)));
  }
  absl::StatusOr<std::vector<int64_t>> n = NormalizeAxes(call, axes, ndim);
  if (!n.ok()) return n.status();
  std::sort(n->begin(), n->end());
  return n;
}

absl::StatusOr<StructInfo> InferReduce(const CallNode& call, Reducer r) {
  if (absl::Status s = CheckNumArgs(call, 1); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> t = TensorArg(call, 0);
  if (!t.ok()) return t.status();
  const bool keepdims = GetBoolAttr(call.attrs, "keepdims", false);
  std::optional<DataType> dtype =
      IsArg(r) ? std::optional<DataType>(DataType::Int(64)) : (*t)->dtype;
  if ((*t)->dtype.has_value() && (*t)->dtype->is_bool()) {
    return OpError(call, "cannot reduce a bool tensor");
  }
  if ((*t)->ndim < 0) {
    if (call.attrs.count("axis") == 0 && !keepdims) return TensorSInfo({}, dtype, (*t)->vdevice);
    return TensorSInfoOfRank(-1, dtype, (*t)->vdevice);
  }
  absl::StatusOr<std::vector<int64_t>> axes = ReducedAxes(call, (*t)->ndim, IsArg(r));
  if (!axes.ok()) return axes.status();
  auto reduced = [&](int64_t k) { return std::find(axes->begin(), axes->end(), k) != axes->end(); };
  int out_ndim = 0;
  std::vector<PrimExpr> shape;
  for (int64_t k = 0; k < (*t)->ndim; ++k) {
    if (!reduced(k)) {
      ++out_ndim;
      if ((*t)->shape.has_value()) shape.push_back((*(*t)->shape)[k]);
    } else if (keepdims) {
      ++out_ndim;
      shape.push_back(PrimExpr(1));
    }
  }
  if (!(*t)->shape.has_value()) return TensorSInfoOfRank(out_ndim, dtype, (*t)->vdevice);
  return TensorSInfo(SimplifyShape(std::move(shape)), dtype, (*t)->vdevice);
}

// The lowest (for max) or highest (for min) value of `t`.
PrimExpr Extreme(DataType t, bool lowest) {
  if (t.is_float() || t.is_bfloat16()) {
    return FloatImm(t, lowest ? -std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::infinity());
  }
  if (t.is_uint()) {
    // The all-ones bit pattern is the unsigned maximum.
    return IntImm(t, lowest ? 0 : t.bits() >= 64 ? -1 : (int64_t{1} << t.bits()) - 1);
  }
  const int64_t max =
      t.bits() >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits() - 1)) - 1;
  return IntImm(t, lowest ? -max - 1 : max);
}

// The initial value and the fold of a non-arg reducer.
PrimExpr ReduceInit(Reducer r, DataType t) {
  switch (r) {
    case Reducer::kSum:
    case Reducer::kMean:
      return MakeConst(t, 0);
    case Reducer::kProd:
      return MakeConst(t, 1);
    case Reducer::kMax:
      return Extreme(t, true);
    default:
      return Extreme(t, false);
  }
}
PrimExpr ReduceStep(Reducer r, const PrimExpr& a, const PrimExpr& b) {
  switch (r) {
    case Reducer::kSum:
    case Reducer::kMean:
      return a + b;
    case Reducer::kProd:
      return a * b;
    case Reducer::kMax:
      return Max(a, b);
    default:
      return Min(a, b);
  }
}

// A reduction as the GPU schedules see it: output element `out_idx` folds
// Read(out_idx, i) for i in [0, count) (flat over the reduced axes).
struct GpuReduction {
  const LowerContext& ctx;
  Buffer out;
  Reducer r;
  DataType acc_dtype, in_dtype;
  std::vector<PrimExpr> reduced_dims;
  PrimExpr count;
  std::function<std::vector<PrimExpr>(const std::vector<PrimExpr>&, const std::vector<PrimExpr>&)>
      input_index;
  Epilogue epilogue;

  PrimExpr Read(const std::vector<PrimExpr>& out_idx, const PrimExpr& i) const {
    return Cast(acc_dtype, ctx.inputs[0](input_index(out_idx, Unflatten(i, reduced_dims))));
  }
  // A block's fold of read(i), i < extent, into red[0] (BlockReduce).
  Stmt Fold(const char* name, const PrimExpr& extent,
            const std::function<PrimExpr(const PrimExpr&)>& read, const Buffer& red) const {
    return BlockReduce(
        name, extent, acc_dtype, ReduceInit(r, acc_dtype), read,
        [this](const PrimExpr& a, const PrimExpr& b) { return ReduceStep(r, a, b); }, red);
  }
  Buffer Tree(const char* name) const {
    return MakeBuffer(name, acc_dtype, {PrimExpr(kDeviceBlockThreads)}, BufferNode::Scope::kShared);
  }
  // Thread 0 stores the reduced red[0] to output element `out_idx`.
  Stmt Finish(const Buffer& red, const std::vector<PrimExpr>& out_idx) const {
    PrimExpr value = Load(red, {PrimExpr(0)});
    if (r == Reducer::kMean) value = Div(value, Cast(acc_dtype, count));
    return ByThread0(Store(out, out_idx, epilogue(Cast(in_dtype, value), out_idx)));
  }
  static Stmt ByThread0(const Stmt& s) {
    return nn_internal::Loop("t", kDeviceBlockThreads, ForKind::kThread,
                             [&](const PrimExpr& t) { return IfThenElse(EQ(t, PrimExpr(0)), s); });
  }
};

// For a GPU, when each output element reduces many input elements: a block
// per output element (a kBlock loop), its threads reading the reduced
// elements strided (flat over the reduced axes) and finishing through a
// shared-memory tree (lower.h BlockReduce); thread 0 stores.
Stmt ScheduleReduceBlocks(const GpuReduction& g) {
  return nn_internal::Loop("o", Product(g.out->shape), ForKind::kBlock, [&](const PrimExpr& o) {
    const std::vector<PrimExpr> out_idx = Unflatten(o, g.out->shape);
    Buffer red = g.Tree("reduce_tree");
    Stmt fold = g.Fold(
        "r", g.count, [&](const PrimExpr& i) { return g.Read(out_idx, i); }, red);
    return Allocate(red, Seq({fold, g.Finish(red, out_idx)}));
  });
}

// For a GPU, when few outputs each reduce many elements (a sum of a whole
// tensor, a mean over a large image): one block per output would leave most
// SMs idle, so each output's elements are split into `splits` chunks, a
// block per (output, chunk) writes its partial to scratch, and a second
// launch folds each output's partials in order (deterministic).
constexpr int64_t kSplitBlocks = 512;     // about the blocks a large GPU keeps resident
constexpr int64_t kSplitMinChunk = 4096;  // elements per block: 16 per thread
constexpr int64_t kSplitMaxOutputs = 64;  // more outputs fill the GPU already

// The chunks per output, or 1 when splitting is not worth it.
int64_t ReduceSplits(const PrimExpr& outputs, const PrimExpr& count) {
  const int64_t* o = outputs.as_int();
  if (o == nullptr || *o < 1 || *o > kSplitMaxOutputs) return 1;
  int64_t splits = kSplitBlocks / *o;
  if (const int64_t* c = count.as_int()) {
    splits = std::min(splits, *c / kSplitMinChunk);
  }
  return std::max<int64_t>(splits, 1);
}

Stmt ScheduleReduceSplit(const GpuReduction& g, int64_t splits) {
  const PrimExpr outputs = Product(g.out->shape);
  const PrimExpr chunk = nn_internal::CeilDiv(g.count, splits);
  Buffer partial = MakeBuffer("reduce_partial", g.acc_dtype, {outputs * splits});
  // Launch 1: block b reduces chunk b % splits of output b / splits.
  Stmt chunks = nn_internal::Loop("b", outputs * splits, ForKind::kBlock, [&](const PrimExpr& b) {
    const std::vector<PrimExpr> out_idx = Unflatten(FloorDiv(b, splits), g.out->shape);
    const PrimExpr lo = FloorMod(b, splits) * chunk;
    Buffer red = g.Tree("reduce_chunk_tree");
    Stmt fold = g.Fold(
        "r", Max(Min(chunk, g.count - lo), PrimExpr(0)),
        [&](const PrimExpr& i) { return g.Read(out_idx, lo + i); }, red);
    Stmt store = GpuReduction::ByThread0(Store(partial, {b}, Load(red, {PrimExpr(0)})));
    return Allocate(red, Seq({fold, store}));
  });
  // Launch 2: block o folds output o's partials.
  Stmt finish = nn_internal::Loop("o", outputs, ForKind::kBlock, [&](const PrimExpr& o) {
    Buffer red = g.Tree("reduce_tree");
    Stmt fold = g.Fold(
        "p", PrimExpr(splits), [&](const PrimExpr& i) { return Load(partial, {o * splits + i}); },
        red);
    return Allocate(red, Seq({fold, g.Finish(red, Unflatten(o, g.out->shape))}));
  });
  return Allocate(partial, Seq({chunks, finish}));
}

absl::StatusOr<Stmt> ScheduleReduce(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue, Reducer r) {
  const CallNode& call = *ctx.call;
  const std::vector<PrimExpr>& in_shape = ArgShape(ctx, 0);
  const int64_t ndim = static_cast<int64_t>(in_shape.size());
  absl::StatusOr<std::vector<int64_t>> axes = ReducedAxes(call, ndim, IsArg(r));
  if (!axes.ok()) return axes.status();
  const bool keepdims = GetBoolAttr(call.attrs, "keepdims", false);
  const Buffer& out = outputs[0];
  const DataType in_dtype = call.args[0].struct_info().as<TensorStructInfoNode>()->dtype.value();
  const bool half = (in_dtype.is_float() && in_dtype.bits() == 16) || in_dtype.is_bfloat16();
  const DataType acc_dtype =
      half && (r == Reducer::kSum || r == Reducer::kMean || r == Reducer::kProd)
          ? DataType::Float(32)
          : in_dtype;
  std::vector<Var> rvars;
  for (int64_t a : *axes) rvars.emplace_back(absl::StrCat("r", a));
  PrimExpr count = 1;
  for (int64_t a : *axes) count = count * in_shape[a];

  // Input indices: reduced axes from `reduced` (one per axis), the others
  // from the output indices (skipping kept size-1 dims).
  auto input_index = [&](const std::vector<PrimExpr>& out_idx,
                         const std::vector<PrimExpr>& reduced) {
    std::vector<PrimExpr> in_idx(in_shape.size());
    size_t j = 0, rv = 0;
    for (int64_t k = 0; k < ndim; ++k) {
      if (rv < axes->size() && (*axes)[rv] == k) {
        in_idx[k] = reduced[rv++];
        if (keepdims) ++j;
      } else {
        in_idx[k] = out_idx[j++];
      }
    }
    return in_idx;
  };
  if (ctx.target.gpu && !IsArg(r) && WorthBlockRow(count)) {
    GpuReduction g{ctx, out, r, acc_dtype, in_dtype, {}, count, input_index, epilogue};
    for (int64_t a : *axes) g.reduced_dims.push_back(in_shape[a]);
    if (int64_t splits = ReduceSplits(Product(out->shape), count); splits > 1) {
      return ScheduleReduceSplit(g, splits);
    }
    return ScheduleReduceBlocks(g);
  }

  // On a CPU, a reduction over the trailing axes (contiguous elements per
  // output) of at least 2 x kLanes elements folds kLanes partial results in
  // one vector accumulator (lane l takes elements l, l + kLanes, ...), then
  // the lanes in order and the last count % kLanes elements: a serial fold
  // is one add per add latency (MobileNetV3's squeeze-excite means ran at
  // 5 GB/s), and LLVM does not reorder float folds itself. The order is
  // fixed, so the result is the same from run to run; it may differ from a
  // serial sum in the last bits, as BLAS and ONNX Runtime do.
  constexpr int64_t kLanes = 16;
  std::vector<PrimExpr> reduced_dims;
  for (int64_t a : *axes) reduced_dims.push_back(in_shape[a]);
  const bool trailing = !axes->empty() && axes->back() == ndim - 1 &&
                        axes->front() == ndim - static_cast<int64_t>(axes->size());
  const std::optional<int64_t> const_count = AsConstInt(count);
  const bool lanes_over_tail = !ctx.target.gpu && !IsArg(r) && trailing &&
                               (!const_count.has_value() || *const_count >= 2 * kLanes);
  // Output `out_idx`: the lanes' fold, `init` of acc[0], the lanes and the
  // tail folded into acc[0], the final store.
  auto LaneReduction = [&](const std::vector<PrimExpr>& out_idx, const Buffer& acc,
                           const Stmt& init) -> Stmt {
    auto element = [&](const PrimExpr& flat) {
      return Cast(acc_dtype, ctx.inputs[0](input_index(out_idx, Unflatten(flat, reduced_dims))));
    };
    Buffer lanes =
        MakeBuffer("acc_lanes", acc_dtype, {PrimExpr(kLanes)}, BufferNode::Scope::kLocal);
    const PrimExpr L(kLanes), chunks = FloorDiv(count, L);
    Stmt lanes_init = Loop("li", L, ForKind::kVectorized, [&](const PrimExpr& l) {
      return Store(lanes, {l}, ReduceInit(r, acc_dtype));
    });
    Stmt fold = Loop("rc", chunks, ForKind::kSerial, [&](const PrimExpr& c) {
      return Loop("rl", L, ForKind::kVectorized, [&](const PrimExpr& l) {
        return Store(lanes, {l}, ReduceStep(r, Load(lanes, {l}), element(c * L + l)));
      });
    });
    Stmt combine = Loop("lc", L, ForKind::kSerial, [&](const PrimExpr& l) {
      return Store(acc, {0}, ReduceStep(r, Load(acc, {0}), Load(lanes, {l})));
    });
    Stmt tail = Loop("rt", count - chunks * L, ForKind::kSerial, [&](const PrimExpr& j) {
      return Store(acc, {0}, ReduceStep(r, Load(acc, {0}), element(chunks * L + j)));
    });
    PrimExpr value = Load(acc, {0});
    if (r == Reducer::kMean) value = Div(value, Cast(acc_dtype, count));
    Stmt finish = Store(out, out_idx, epilogue(Cast(in_dtype, value), out_idx));
    return Allocate(lanes, Seq({lanes_init, fold, init, combine, tail, finish}));
  };

  auto body = [&](const std::vector<PrimExpr>& out_idx) -> Stmt {
    std::vector<PrimExpr> in_idx = input_index(out_idx, {rvars.begin(), rvars.end()});
    PrimExpr x = Cast(acc_dtype, ctx.inputs[0](in_idx));
    Buffer acc = MakeBuffer("acc", acc_dtype, {1}, BufferNode::Scope::kLocal);
    PrimExpr cur = Load(acc, {0});
    Stmt init, update, finish;
    if (IsArg(r)) {
      Buffer acc_idx = MakeBuffer("acc_idx", DataType::Int(64), {1}, BufferNode::Scope::kLocal);
      // The position among the reduced elements: the flat index for a
      // flattened argmax, else the index along the axis.
      PrimExpr pos = 0;
      for (size_t q = 0; q < rvars.size(); ++q) pos = pos * in_shape[(*axes)[q]] + rvars[q];
      init = Seq({Store(acc, {0}, Extreme(acc_dtype, r == Reducer::kArgMax)),
                  Store(acc_idx, {0}, IntImm(DataType::Int(64), 0))});
      PrimExpr better = r == Reducer::kArgMax ? GT(x, cur) : LT(x, cur);
      update = IfThenElse(
          better, Seq({Store(acc, {0}, x), Store(acc_idx, {0}, Cast(DataType::Int(64), pos))}));
      finish = Store(out, out_idx, epilogue(Load(acc_idx, {0}), out_idx));
      Stmt loops = update;
      for (size_t q = rvars.size(); q-- > 0;) {
        loops = For(rvars[q], 0, in_shape[(*axes)[q]], ForKind::kSerial, loops);
      }
      return Allocate(acc, Allocate(acc_idx, Seq({init, loops, finish})));
    }
    init = Store(acc, {0}, ReduceInit(r, acc_dtype));
    if (lanes_over_tail) return Allocate(acc, LaneReduction(out_idx, acc, init));
    update = Store(acc, {0}, ReduceStep(r, cur, x));
    PrimExpr value = Load(acc, {0});
    if (r == Reducer::kMean) value = Div(value, Cast(acc_dtype, count));
    finish = Store(out, out_idx, epilogue(Cast(in_dtype, value), out_idx));
    Stmt loops = update;
    for (size_t q = rvars.size(); q-- > 0;) {
      loops = For(rvars[q], 0, in_shape[(*axes)[q]], ForKind::kSerial, loops);
    }
    return Allocate(acc, Seq({init, loops, finish}));
  };
  // For a GPU: one thread per output element (MakeFlatParallelLoop).
  return MakeParallelLoopNest(out->shape, body, ForKind::kSerial, ctx.target.gpu);
}

void RegisterReduce(const std::string& name, Reducer r) {
  OpInfo info;
  info.name = name;
  info.pattern = OpPattern::kCommReduce;
  info.num_args = 1;
  info.infer = [r](const CallNode& call) { return InferReduce(call, r); };
  info.schedule = [r](const LowerContext& ctx, const std::vector<Buffer>& outputs,
                      const Epilogue& epilogue) {
    return ScheduleReduce(ctx, outputs, epilogue, r);
  };
  RegisterOp(std::move(info));
}

}  // namespace

void RegisterReductionOps() {
  RegisterReduce("relax.sum", Reducer::kSum);
  RegisterReduce("relax.mean", Reducer::kMean);
  RegisterReduce("relax.max", Reducer::kMax);
  RegisterReduce("relax.min", Reducer::kMin);
  RegisterReduce("relax.prod", Reducer::kProd);
  RegisterReduce("relax.argmax", Reducer::kArgMax);
  RegisterReduce("relax.argmin", Reducer::kArgMin);
}

}  // namespace tether::compiler
