// Lowering of one operator call to a kernel (see lower.h).
#include "compiler/lower/lower.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler/relax/op_registry.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

// A parallel loop with fewer iterations than this is widened by fusing the
// next dimension into it (or, for the last one, by chunking it).
constexpr int64_t kMinParallelIterations = 64;
// Elements of the innermost dimension one parallel iteration handles when
// that dimension is chunked.
constexpr int64_t kChunk = 4096;

// The tensor struct infos of a Tuple struct info's fields (nested tuples
// flattened), or of `sinfo` itself.
void FlattenTensors(const StructInfo& sinfo, std::vector<StructInfo>* out) {
  if (const auto* t = sinfo.as<TupleStructInfoNode>()) {
    for (const StructInfo& f : t->fields) FlattenTensors(f, out);
    return;
  }
  out->push_back(sinfo);
}

// Elements of the flat rows' vectors (FlatRowNest): an AVX-512 register
// of float32.
constexpr int64_t kFlatRowLanes = 16;

// How many leading dimensions of `outer` a parallel loop fuses: until their
// product is a symbolic or constant extent of at least
// kMinParallelIterations (all of them if it never is).
size_t FusedDims(const std::vector<PrimExpr>& outer) {
  PrimExpr prod = 1;
  for (size_t k = 0; k < outer.size(); ++k) {
    prod = prod * outer[k];
    if (prod.as_int() == nullptr || *prod.as_int() >= kMinParallelIterations) return k + 1;
  }
  return outer.size();
}

// The indices of the first `count` dimensions of `dims`, fused row-major
// into one loop variable `fused`.
std::vector<PrimExpr> FusedIndices(const Var& fused, const std::vector<PrimExpr>& dims,
                                   size_t count) {
  std::vector<PrimExpr> indices(count);
  PrimExpr stride = 1;
  for (size_t k = count; k-- > 0;) {
    PrimExpr idx = FloorDiv(fused, stride);
    if (k > 0) idx = FloorMod(idx, dims[k]);
    indices[k] = idx;
    stride = stride * dims[k];
  }
  return indices;
}

// Whether buffer[indices] steps by 0 (uniform) or 1 (contiguous) elements as
// `lane` steps by one.
bool ContiguousOrUniform(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                         const Var& lane) {
  const std::optional<int64_t> step = ElementStride(buffer, indices, lane);
  return step == 0 || step == 1;
}

// Whether every load in `e` is ContiguousOrUniform.
bool LoadsContiguousOrUniform(const PrimExpr& e, const Var& lane) {
  return AllOf(e, [&](const PrimExpr& x) {
    const LoadNode* l = x.as<LoadNode>();
    return l == nullptr || ContiguousOrUniform(l->buffer, l->indices, lane);
  });
}

// The elementwise nest with the dimensions inside the parallel loop walked
// as one flat row in vectors of kFlatRowLanes (and one shorter vector for
// the rest), where those dimensions are constants, the innermost is short
// and not whole vectors (a 28 x 28 feature map: the row nest's vectors of
// 28 were 16 + 8 + 4 lanes, each row unrolled by LLVM), and every load is
// contiguous or uniform along the flat row (an operand broadcast along the
// innermost dimension is not, and keeps the row nest). nullopt otherwise.
std::optional<Stmt> FlatRowNest(
    const Buffer& out, const std::function<PrimExpr(const std::vector<PrimExpr>&)>& compute) {
  const std::vector<PrimExpr>& shape = out->shape;
  const size_t rank = shape.size();
  if (rank < 2) return std::nullopt;
  const int64_t* inner = shape[rank - 1].as_int();
  if (inner == nullptr || *inner % kFlatRowLanes == 0 || *inner >= 4 * kFlatRowLanes) {
    return std::nullopt;
  }
  std::vector<PrimExpr> outer(shape.begin(), shape.end() - 1);
  const size_t fused_dims = FusedDims(outer);
  std::vector<PrimExpr> row(shape.begin() + fused_dims, shape.end());
  const PrimExpr row_size = Product(row), outer_size = Product(outer);
  const int64_t *row_const = row_size.as_int(), *outer_const = outer_size.as_int();
  if (row.size() < 2 || row_const == nullptr || *row_const < kFlatRowLanes ||
      (outer_const != nullptr && *outer_const < kMinParallelIterations)) {
    return std::nullopt;
  }
  const int64_t length = *row_const, whole = length / kFlatRowLanes * kFlatRowLanes;
  Var fused("fused"), vec("v"), lane("i");
  std::vector<PrimExpr> indices = FusedIndices(fused, outer, fused_dims);
  indices.resize(rank);
  // The store at flat element `first + lane` of the row.
  auto store = [&](const PrimExpr& first) -> std::optional<Stmt> {
    std::vector<PrimExpr> row_idx = Unflatten(first + lane, row);
    std::copy(row_idx.begin(), row_idx.end(), indices.begin() + fused_dims);
    PrimExpr value = compute(indices);
    if (!ContiguousOrUniform(out, indices, lane) || !LoadsContiguousOrUniform(value, lane)) {
      return std::nullopt;
    }
    return Store(out, indices, value);
  };
  std::optional<Stmt> body = store(vec * PrimExpr(kFlatRowLanes));
  if (!body.has_value()) return std::nullopt;
  std::vector<Stmt> parts = {
      For(vec, 0, PrimExpr(length / kFlatRowLanes), ForKind::kSerial,
          For(lane, 0, PrimExpr(kFlatRowLanes), ForKind::kVectorized, *body))};
  if (whole < length) {
    std::optional<Stmt> rest = store(PrimExpr(whole));
    if (!rest.has_value()) return std::nullopt;
    parts.push_back(For(lane, 0, PrimExpr(length - whole), ForKind::kVectorized, *rest));
  }
  Stmt nest = parts.size() == 1 ? parts[0] : Seq(parts);
  if (fused_dims == 0) return nest;
  return For(fused, 0, Product(std::vector<PrimExpr>(outer.begin(), outer.begin() + fused_dims)),
             ForKind::kParallel, nest);
}

}  // namespace

Stmt MakeElementwiseLoopNest(const Buffer& out,
                             const std::function<PrimExpr(const std::vector<PrimExpr>&)>& compute,
                             bool gpu) {
  if (!gpu) {
    if (std::optional<Stmt> flat = FlatRowNest(out, compute)) return *flat;
  }
  return MakeParallelLoopNest(
      out->shape, [&](const std::vector<PrimExpr>& idx) { return Store(out, idx, compute(idx)); },
      ForKind::kVectorized, gpu);
}

std::vector<PrimExpr> Unflatten(const PrimExpr& flat, const std::vector<PrimExpr>& dims) {
  std::vector<PrimExpr> idx(dims.size());
  PrimExpr rest = flat;
  for (size_t i = dims.size(); i-- > 0;) {
    if (i == 0) {
      idx[i] = rest;
    } else if (dims[i].as_int() != nullptr && *dims[i].as_int() == 1) {
      idx[i] = PrimExpr(0);
    } else {
      idx[i] = FloorMod(rest, dims[i]);
      rest = FloorDiv(rest, dims[i]);
    }
  }
  return idx;
}

Stmt MakeFlatParallelLoop(const std::vector<PrimExpr>& shape,
                          const std::function<Stmt(const std::vector<PrimExpr>&)>& make_body) {
  Var flat("flat");
  return For(flat, 0, Product(shape), ForKind::kParallel, make_body(Unflatten(flat, shape)));
}

Stmt MakeParallelLoopNest(const std::vector<PrimExpr>& shape,
                          const std::function<Stmt(const std::vector<PrimExpr>&)>& make_body,
                          ForKind inner_kind, bool gpu) {
  if (gpu) return MakeFlatParallelLoop(shape, make_body);
  const size_t rank = shape.size();
  if (rank == 0) return make_body({});

  const PrimExpr& inner = shape[rank - 1];
  std::vector<PrimExpr> outer(shape.begin(), shape.end() - 1);
  PrimExpr outer_size = Product(outer);
  const int64_t* outer_const = outer_size.as_int();
  // Chunk the innermost dimension when the outer ones give too little
  // parallel work and the innermost one is big (or unknown).
  const bool chunk_inner = outer_const != nullptr && *outer_const < kMinParallelIterations &&
                           !(inner.as_int() && *inner.as_int() <= kChunk);

  // How many leading dimensions the parallel loop fuses: until the product
  // is a symbolic or constant extent of at least kMinParallelIterations,
  // never the innermost one.
  const size_t num_fused = chunk_inner ? outer.size() : FusedDims(outer);

  Var fused("fused");
  Var inner_var(absl::StrCat("i", rank - 1));
  Var chunk("chunk");
  std::vector<PrimExpr> indices = FusedIndices(fused, outer, num_fused);
  indices.resize(rank);
  std::vector<Var> serial_vars;
  for (size_t k = num_fused; k < outer.size(); ++k) {
    serial_vars.emplace_back(absl::StrCat("i", k));
    indices[k] = serial_vars.back();
  }

  if (chunk_inner) {
    // for fused in parallel(outer_size * ceil(inner / kChunk)):
    //   for i in vectorized(min(kChunk, inner - c * kChunk)): ...
    PrimExpr num_chunks = FloorDiv(inner + (kChunk - 1), kChunk);
    // Recompute the outer indices from fused / num_chunks.
    PrimExpr row = FloorDiv(fused, num_chunks);
    PrimExpr c = FloorMod(fused, num_chunks);
    PrimExpr s = 1;
    for (size_t k = outer.size(); k-- > 0;) {
      PrimExpr idx = FloorDiv(row, s);
      if (k > 0) idx = FloorMod(idx, outer[k]);
      indices[k] = idx;
      s = s * outer[k];
    }
    Var base("base");
    indices[rank - 1] = base + inner_var;
    Stmt body = make_body(indices);
    body = For(inner_var, 0, Min(PrimExpr(kChunk), inner - base), inner_kind, body);
    body = LetStmt(base, c * kChunk, body);
    return For(fused, 0, outer_size * num_chunks, ForKind::kParallel, body);
  }

  indices[rank - 1] = inner_var;
  Stmt body = make_body(indices);
  body = For(inner_var, 0, inner, inner_kind, body);
  for (size_t k = serial_vars.size(); k-- > 0;) {
    body = For(serial_vars[k], 0, outer[num_fused + k], ForKind::kSerial, body);
  }
  if (num_fused == 0) return body;  // rank 1 with a small constant extent
  PrimExpr fused_extent = Product(std::vector<PrimExpr>(outer.begin(), outer.begin() + num_fused));
  const bool single = fused_extent.as_int() != nullptr && *fused_extent.as_int() <= 1;
  return For(fused, 0, fused_extent, single ? ForKind::kSerial : ForKind::kParallel, body);
}

bool WorthBlockRow(const PrimExpr& length) {
  const int64_t* n = length.as_int();
  return n == nullptr || *n >= kGpuMinBlockRow;
}

namespace {

constexpr int64_t kThreads = kDeviceBlockThreads;

// for t in T.threads(kThreads): body(t)
Stmt Threads(const std::string& name, const std::function<Stmt(const PrimExpr&)>& body) {
  Var t(name, DataType::Int(64));
  return For(t, 0, PrimExpr(kThreads), ForKind::kThread, body(t));
}

// for i in T.serial(trips of thread t over [0, extent)): body(t + i * kThreads)
Stmt ThreadShare(const std::string& name, const PrimExpr& t, const PrimExpr& extent,
                 const std::function<Stmt(const PrimExpr&)>& body) {
  // t < kThreads and extent >= 0: the numerator is never negative.
  Var i(name, DataType::Int(64));
  PrimExpr trips = FloorDiv(extent - t + (kThreads - 1), PrimExpr(kThreads));
  return For(i, 0, trips, ForKind::kSerial, body(t + i * kThreads));
}

// A block-wide fold: each thread folds its share (share(t, fold), fold(v)
// adding v to the thread's accumulator) into red[t], then a tree halves the
// live entries, one kThread loop (one barrier) per step.
using ShareStmt =
    std::function<Stmt(const PrimExpr& t, const std::function<Stmt(const PrimExpr&)>& fold)>;
Stmt BlockFold(const std::string& name, DataType dtype, const PrimExpr& init,
               const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
               const Buffer& red, const ShareStmt& share) {
  static_assert((kThreads & (kThreads - 1)) == 0, "the tree halves a power of two");
  const PrimExpr zero(0);
  std::vector<Stmt> steps;
  steps.push_back(Threads(name + "_t", [&](const PrimExpr& t) {
    Buffer acc = MakeBuffer(name + "_acc", dtype, {PrimExpr(1)}, BufferNode::Scope::kLocal);
    Stmt fold = share(
        t, [&](const PrimExpr& v) { return Store(acc, {zero}, combine(Load(acc, {zero}), v)); });
    return Allocate(acc, Seq({Store(acc, {zero}, init), fold, Store(red, {t}, Load(acc, {zero}))}));
  }));
  for (int64_t half = kThreads / 2; half >= 1; half /= 2) {
    steps.push_back(Threads(name + "_tree", [&](const PrimExpr& t) {
      return IfThenElse(LT(t, PrimExpr(half)),
                        Store(red, {t}, combine(Load(red, {t}), Load(red, {t + half}))));
    }));
  }
  return Seq(std::move(steps));
}

// fold(value), with each(value) first where given (value then a let,
// computed once).
Stmt FoldValue(const std::string& name, DataType dtype, const PrimExpr& value,
               const std::function<Stmt(const PrimExpr&)>& each,
               const std::function<Stmt(const PrimExpr&)>& fold) {
  if (!each) return fold(value);
  Var v(name + "_v", dtype);
  return LetStmt(v, value, Seq({each(v), fold(v)}));
}

// for i in T.unroll(RowSlots(length)): body(slot i of thread t), the slots
// past the row skipped.
Stmt ThreadSlots(const std::string& name, const PrimExpr& t, int64_t length,
                 const std::function<Stmt(const RowSlot&)>& body) {
  Var i(name, DataType::Int(64));
  const PrimExpr r = t + i * kThreads;
  Stmt each = body(RowSlot{r, t, i});
  if (length % kThreads != 0) each = IfThenElse(LT(r, PrimExpr(length)), each);
  return For(i, 0, PrimExpr(RowSlots(length)), ForKind::kUnrolled, each);
}

}  // namespace

Stmt BlockStrided(const std::string& name, const PrimExpr& extent,
                  const std::function<Stmt(const PrimExpr&)>& body) {
  return Threads(name + "_t",
                 [&](const PrimExpr& t) { return ThreadShare(name, t, extent, body); });
}

Stmt BlockReduce(const std::string& name, const PrimExpr& extent, DataType dtype,
                 const PrimExpr& init, const std::function<PrimExpr(const PrimExpr&)>& reader,
                 const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
                 const Buffer& red, const ElementStmt& each) {
  return BlockFold(name, dtype, init, combine, red, [&](const PrimExpr& t, const auto& fold) {
    return ThreadShare(name, t, extent, [&](const PrimExpr& r) {
      return FoldValue(name, dtype, reader(r),
                       each ? [&](const PrimExpr& v) { return each(r, v); }
                            : std::function<Stmt(const PrimExpr&)>(),
                       fold);
    });
  });
}

int64_t RowSlots(int64_t length) { return (length + kThreads - 1) / kThreads; }

Buffer RowSlotBuffer(const std::string& name, int64_t length, DataType dtype) {
  return MakeBuffer(name, dtype, {PrimExpr(kThreads), PrimExpr(RowSlots(length))},
                    BufferNode::Scope::kPerThread);
}

Stmt BlockSlots(const std::string& name, int64_t length,
                const std::function<Stmt(const RowSlot&)>& body) {
  return Threads(name + "_t",
                 [&](const PrimExpr& t) { return ThreadSlots(name, t, length, body); });
}

Stmt BlockSlotReduce(const std::string& name, int64_t length, DataType dtype, const PrimExpr& init,
                     const SlotExpr& reader,
                     const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
                     const Buffer& red, const SlotStmt& each) {
  return BlockFold(name, dtype, init, combine, red, [&](const PrimExpr& t, const auto& fold) {
    return ThreadSlots(name, t, length, [&](const RowSlot& s) {
      return FoldValue(name, dtype, reader(s),
                       each ? [&](const PrimExpr& v) { return each(s, v); }
                            : std::function<Stmt(const PrimExpr&)>(),
                       fold);
    });
  });
}

absl::StatusOr<Buffer> BufferForStructInfo(const StructInfo& sinfo, const std::string& name) {
  if (!sinfo.defined()) {
    return absl::InvalidArgumentError(absl::StrCat("buffer ", name, ": no struct info"));
  }
  const auto* t = sinfo.as<TensorStructInfoNode>();
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer ", name, ": ", ToString(sinfo), " is not a tensor"));
  }
  if (!t->shape.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer ", name, ": the shape of ", ToString(sinfo), " is unknown"));
  }
  if (!t->dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer ", name, ": the dtype of ", ToString(sinfo), " is unknown"));
  }
  return MakeBuffer(name, *t->dtype, *t->shape);
}

absl::StatusOr<KernelFunc> LowerCallToKernel(const CallNode& call, const std::string& kernel_name,
                                             const KernelTarget& target) {
  const auto* op = call.op.as<OpNode>();
  if (op == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", kernel_name, ": the callee is not an operator"));
  }
  const OpInfo* info = FindOp(op->name);
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", kernel_name, ": unknown operator ", op->name));
  }
  if (!info->lowers_to_kernel()) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel_name, ": operator ", op->name,
                                                   " does not lower to a kernel"));
  }
  if (!call.struct_info().defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", kernel_name, ": the call to ", op->name, " has no struct info"));
  }

  LowerContext ctx;
  ctx.call = &call;
  ctx.out_sinfo = call.struct_info();
  ctx.target = target;
  ctx.inputs.resize(call.args.size());
  ctx.input_buffers.resize(call.args.size());
  std::vector<KernelParam> params;
  std::vector<Buffer> tuple_buffers;

  auto reader_of = [](Buffer b) -> TensorReader {
    return [b](const std::vector<PrimExpr>& idx) { return Load(b, idx); };
  };
  auto add_param = [&](const StructInfo& sinfo, const std::string& name) -> absl::StatusOr<Buffer> {
    absl::StatusOr<Buffer> b = BufferForStructInfo(sinfo, name);
    if (!b.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op->name, ": kernel ", kernel_name, ": ", b.status().message()));
    }
    params.push_back(KernelParam::Tensor(*b));
    return b;
  };

  for (size_t i = 0; i < call.args.size(); ++i) {
    const Expr& arg = call.args[i];
    const StructInfo& s = arg.struct_info();
    if (!s.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op->name, ": argument ", i, " has no struct info"));
    }
    if (s.as<TensorStructInfoNode>() != nullptr) {
      absl::StatusOr<Buffer> b = add_param(s, absl::StrCat("A", i));
      if (!b.ok()) return b.status();
      ctx.inputs[i] = reader_of(*b);
      ctx.input_buffers[i] = *b;
    } else if (const auto* tup = s.as<TupleStructInfoNode>()) {
      for (size_t f = 0; f < tup->fields.size(); ++f) {
        if (tup->fields[f].as<TensorStructInfoNode>() == nullptr) continue;
        absl::StatusOr<Buffer> b = add_param(tup->fields[f], absl::StrCat("A", i, "_", f));
        if (!b.ok()) return b.status();
        tuple_buffers.push_back(*b);
      }
    }
  }
  for (const Buffer& b : tuple_buffers) {
    ctx.inputs.push_back(reader_of(b));
    ctx.input_buffers.push_back(b);
  }

  std::vector<StructInfo> out_sinfos;
  FlattenTensors(call.struct_info(), &out_sinfos);
  std::vector<Buffer> outputs;
  for (size_t k = 0; k < out_sinfos.size(); ++k) {
    absl::StatusOr<Buffer> b =
        add_param(out_sinfos[k], out_sinfos.size() == 1 ? "out" : absl::StrCat("out", k));
    if (!b.ok()) return b.status();
    outputs.push_back(*b);
  }

  // A symbolic variable that no parameter's shape binds (a dimension that is
  // the variable itself) -- one that appears only in expressions such as
  // (h - 1) // 2 + 1 -- becomes a scalar parameter after the outputs, which
  // the caller passes (call_tir's tir_vars).
  std::vector<Var> bound;
  std::vector<Var> used;
  for (const KernelParam& p : params) {
    for (const PrimExpr& d : p.buffer->shape) {
      if (d.kind() == PrimKind::kVar) CollectVars(d, &bound);
      CollectVars(d, &used);
    }
  }
  for (const Expr& arg : call.args) {
    if (const auto* pv = arg.as<PrimValueNode>()) CollectVars(pv->value, &used);
    if (const auto* se = arg.as<ShapeExprNode>()) {
      for (const PrimExpr& v : se->values) CollectVars(v, &used);
    }
  }
  for (const Var& v : used) {
    bool ok = false;
    for (const Var& b : bound) ok = ok || b.same_as(v);
    if (!ok) {
      params.push_back(KernelParam::Scalar(v));
      bound.push_back(v);
    }
  }

  Stmt body;
  if (info->compute != nullptr) {
    if (outputs.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          op->name, ": a per-element operator must have one output, got ", outputs.size()));
    }
    body = MakeElementwiseLoopNest(
        outputs[0], [&](const std::vector<PrimExpr>& idx) { return info->compute(ctx, idx); },
        target.gpu);
  } else {
    Epilogue identity = [](const PrimExpr& v, const std::vector<PrimExpr>&) { return v; };
    absl::StatusOr<Stmt> s = info->schedule(ctx, outputs, identity);
    if (!s.ok()) return s.status();
    body = *s;
  }
  return MakeKernelFunc(kernel_name, std::move(params), std::move(body),
                        static_cast<int>(outputs.size()));
}

}  // namespace tether::compiler
