// Device lowering (device_split.h): leading lets, the split at the top-level
// sequence, loop fusion inside a parallel launch, the grid-stride loop, and
// the manifest description of the result.
#include "compiler/backend/cuda/device_split.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

absl::Status Reject(const KernelFunc& k, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("kernel ", k->name, ": ", what, " cannot run on a gpu"));
}

// Where a statement stands, for the rules of block schedules (kernel_ir.h).
struct Where {
  bool in_block = false;            // inside a kBlock body
  const ForNode* thread = nullptr;  // the enclosing kThread loop
  const ForNode* warp = nullptr;    // the enclosing kWarp loop
  int block = 0;                    // the kBlock body's threads
};

// Loads of kPerThread buffers in `e` index dimension 0 with the enclosing
// kThread loop's var.
absl::Status CheckLoads(const KernelFunc& k, const PrimExpr& e, const Where& w) {
  absl::Status status;
  std::function<PrimExpr(const PrimExpr&)> visit = [&](const PrimExpr& x) {
    const LoadNode* l = x.as<LoadNode>();
    if (l != nullptr && l->buffer->scope == BufferNode::Scope::kPerThread && status.ok() &&
        (w.thread == nullptr || !l->indices[0].same_as(w.thread->var))) {
      status = Reject(k, absl::StrCat("a read of the per-thread buffer ", l->buffer->name,
                                      " not indexed by its kThread loop's var"));
    }
    if (l != nullptr && IsFragmentScope(l->buffer->scope) && status.ok()) {
      status = Reject(k, absl::StrCat("an element read of the fragment ", l->buffer->name,
                                      " (opaque: only MatrixTile statements use it)"));
    }
    return MapChildren(x, visit);
  };
  if (e.defined()) visit(e);
  return status;
}

// A factor, in elements, of the offset of `t`'s element from the start of
// its buffer (row-major): the gcd over dims of index factor times stride.
int64_t OffsetFactor(const TileRef& t) {
  const std::vector<PrimExpr>& shape = t.buffer->shape;
  int64_t stride = 1, factor = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    factor = std::gcd(factor, KnownFactor(t.at[d]) * stride);
    stride *= KnownFactor(shape[d]);
  }
  return factor;
}

// The rules of asynchronous copies (kernel_ir.h): inside a kThread loop,
// 16 bytes from a tensor parameter to a shared buffer of the same dtype,
// both ends known to be 16-byte aligned.
absl::Status CheckAsyncCopy(const KernelFunc& k, const AsyncCopyNode& n, const Where& w) {
  if (w.thread == nullptr) {
    return Reject(k, n.op == AsyncOp::kFence
                         ? std::string("the asynchronous-copy fence outside a kThread loop")
                         : absl::StrCat("the asynchronous copy to ", n.dst.buffer->name,
                                        " outside a kThread loop"));
  }
  if (n.op == AsyncOp::kFence) {
    if (n.pending < 0 || n.pending > 7) {
      return Reject(k, absl::StrCat("the asynchronous-copy fence leaving ", n.pending,
                                    " groups in flight (0 to 7)"));
    }
    return absl::OkStatus();
  }
  const Buffer &dst = n.dst.buffer, &src = n.src.buffer;
  if (dst->scope != BufferNode::Scope::kShared || src->scope != BufferNode::Scope::kGlobal ||
      dst->dtype != src->dtype || n.dst.at.size() != dst->shape.size() ||
      n.src.at.size() != src->shape.size() || n.lanes * dst->dtype.bytes() != 16) {
    return Reject(k, absl::StrCat("the asynchronous copy from ", src->name, " to ", dst->name,
                                  " (16 bytes from a tensor to a shared buffer of its dtype)"));
  }
  for (const TileRef* t : {&n.dst, &n.src}) {
    for (const PrimExpr& i : t->at) TETHER_RETURN_IF_ERROR(CheckLoads(k, i, w));
    if (OffsetFactor(*t) * dst->dtype.bytes() % 16 != 0) {
      return Reject(k, absl::StrCat("the asynchronous copy from ", src->name, " to ", dst->name,
                                    ", whose ", t == &n.dst ? "destination" : "source",
                                    " is not known to be 16-byte aligned"));
    }
  }
  return CheckLoads(k, n.valid, w);
}

// Whether copies issued in `s` may be unfenced at its end, given whether
// they may be at its start.
bool Unfenced(const Stmt& s, bool in) {
  if (!s.defined()) return in;
  switch (s.kind()) {
    case StmtKind::kAsyncCopy:
      return s.as<AsyncCopyNode>()->op == AsyncOp::kCopy;
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) in = Unfenced(c, in);
      return in;
    case StmtKind::kFor:  // zero iterations or more (the walk is monotone in `in`)
      return in || Unfenced(s.as<ForNode>()->body, in);
    case StmtKind::kLet:
      return Unfenced(s.as<LetStmtNode>()->body, in);
    case StmtKind::kAllocate:
      return Unfenced(s.as<AllocateNode>()->body, in);
    case StmtKind::kIf:
      return Unfenced(s.as<IfThenElseNode>()->then_case, in) ||
             Unfenced(s.as<IfThenElseNode>()->else_case, in);
    default:
      return in;
  }
}

// The rules of MatrixTile statements (kernel_ir.h): inside a kWarp loop,
// on fragments of the right scope indexed by the warp, and tiles of shared
// memory that the hardware can address (rows 16-byte aligned, the tile's
// first element 32-byte aligned).
absl::Status CheckMatrixTile(const KernelFunc& k, const MatrixTileNode& n, const Where& w) {
  using Scope = BufferNode::Scope;
  if (w.warp == nullptr) {
    return Reject(k, absl::StrCat("the tensor-core statement on ", n.frag.buffer->name,
                                  " outside a kWarp loop"));
  }
  auto fragment = [&](const TileRef& t, std::initializer_list<Scope> scopes) -> absl::Status {
    const Buffer& b = t.buffer;
    if (std::find(scopes.begin(), scopes.end(), b->scope) == scopes.end() ||
        t.at.size() + 2 != b->shape.size() || t.at.empty() || !t.at[0].same_as(w.warp->var)) {
      return Reject(k, absl::StrCat("the fragment ", b->name,
                                    " (of the wrong scope, or not indexed by its kWarp var)"));
    }
    for (const PrimExpr& i : t.at) TETHER_RETURN_IF_ERROR(CheckLoads(k, i, w));
    return absl::OkStatus();
  };
  auto shared_tile = [&](const TileRef& t, DataType dtype) -> absl::Status {
    const Buffer& b = t.buffer;
    if (b->scope != Scope::kShared || b->dtype != dtype || t.at.size() != b->shape.size() ||
        b->shape.size() < 2) {
      return Reject(k, absl::StrCat("the tile of ", b->name, " (a ", dtype.ToString(),
                                    " shared buffer of 2 or more dims)"));
    }
    for (const PrimExpr& i : t.at) TETHER_RETURN_IF_ERROR(CheckLoads(k, i, w));
    const int64_t bytes = dtype.bytes();
    if (KnownFactor(b->shape.back()) * bytes % 16 != 0 || OffsetFactor(t) * bytes % 32 != 0) {
      return Reject(k, absl::StrCat("the tile of ", b->name,
                                    " not known to be aligned (rows of a multiple of 16 bytes, "
                                    "a first element at a multiple of 32)"));
    }
    return absl::OkStatus();
  };
  switch (n.op) {
    case MatrixOp::kFill:
      TETHER_RETURN_IF_ERROR(CheckLoads(k, n.value, w));
      return fragment(n.frag, {Scope::kAccumulator});
    case MatrixOp::kLoad:
      TETHER_RETURN_IF_ERROR(fragment(n.frag, {Scope::kMatrixA, Scope::kMatrixB}));
      return shared_tile(n.args[0], n.frag.buffer->dtype);
    case MatrixOp::kMma:
      TETHER_RETURN_IF_ERROR(fragment(n.frag, {Scope::kAccumulator}));
      TETHER_RETURN_IF_ERROR(fragment(n.args[0], {Scope::kMatrixA}));
      return fragment(n.args[1], {Scope::kMatrixB});
    case MatrixOp::kStore:
      TETHER_RETURN_IF_ERROR(fragment(n.frag, {Scope::kAccumulator}));
      return shared_tile(n.args[0], n.frag.buffer->dtype);
  }
  return absl::OkStatus();
}

// A fragment buffer's allocation: at block level, [warps, ..., 16, 16] of
// float16 or bfloat16 (operands) or float32 (accumulators).
absl::Status CheckFragment(const KernelFunc& k, const Buffer& b, const Where& w) {
  const std::vector<PrimExpr>& shape = b->shape;
  const DataType t = b->dtype;
  const bool dtype_ok = b->scope == BufferNode::Scope::kAccumulator
                            ? t == DataType::Float(32)
                            : t == DataType::Float(16) || t.is_bfloat16();
  const bool constant = std::all_of(
      shape.begin(), shape.end(), [](const PrimExpr& d) { return AsConstInt(d).value_or(0) > 0; });
  if (shape.size() < 3 || !constant || AsConstInt(shape[0]) != w.block / kWarpThreads ||
      AsConstInt(shape[shape.size() - 1]) != kMatrixTileSide ||
      AsConstInt(shape[shape.size() - 2]) != kMatrixTileSide || !dtype_ok) {
    return Reject(k, absl::StrCat("the fragment ", b->name,
                                  " (a constant shape [warps, ..., 16, 16]; float16 or bfloat16 "
                                  "operands, float32 accumulators)"));
  }
  return absl::OkStatus();
}

// Rejects statements a device cannot run anywhere in `s`.
absl::Status CheckDeviceStmt(const KernelFunc& k, const Stmt& s, const Where& w) {
  if (!s.defined()) return absl::OkStatus();
  switch (s.kind()) {
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) {
        TETHER_RETURN_IF_ERROR(CheckDeviceStmt(k, c, w));
      }
      return absl::OkStatus();
    case StmtKind::kFor: {
      const ForNode* f = s.as<ForNode>();
      TETHER_RETURN_IF_ERROR(CheckLoads(k, f->min, w));
      TETHER_RETURN_IF_ERROR(CheckLoads(k, f->extent, w));
      Where inner = w;
      if (f->for_kind == ForKind::kBlock) {
        return Reject(k, absl::StrCat("the kBlock loop over ", f->var.name(),
                                      ", not a top-level statement,"));
      }
      if (f->for_kind == ForKind::kThread || f->for_kind == ForKind::kWarp) {
        const bool warps = f->for_kind == ForKind::kWarp;
        std::optional<int64_t> extent = AsConstInt(f->extent);
        if (!w.in_block || w.thread != nullptr || w.warp != nullptr ||
            extent != (warps ? w.block / kWarpThreads : w.block) ||
            (warps && w.block % kWarpThreads != 0)) {
          return Reject(
              k, absl::StrCat("the ", warps ? "kWarp" : "kThread", " loop over ", f->var.name(),
                              " (one level inside a kBlock body, extent its block "
                              "size",
                              warps ? " / 32)" : ")"));
        }
        (warps ? inner.warp : inner.thread) = f;
        TETHER_RETURN_IF_ERROR(CheckDeviceStmt(k, f->body, inner));
        if (Unfenced(f->body, false)) {
          return Reject(k, absl::StrCat("the kThread loop over ", f->var.name(),
                                        " whose asynchronous copies are not all followed by a "
                                        "fence"));
        }
        return absl::OkStatus();
      }
      return CheckDeviceStmt(k, f->body, inner);
    }
    case StmtKind::kLet:
      TETHER_RETURN_IF_ERROR(CheckLoads(k, s.as<LetStmtNode>()->value, w));
      return CheckDeviceStmt(k, s.as<LetStmtNode>()->body, w);
    case StmtKind::kAllocate: {
      const AllocateNode* n = s.as<AllocateNode>();
      switch (n->buffer->scope) {
        case BufferNode::Scope::kGlobal:
          return Reject(k, absl::StrCat("the workspace allocation ", n->buffer->name,
                                        " below the top level (scratch is allocated for the whole "
                                        "kernel)"));
        case BufferNode::Scope::kLocal:
          // At block level a thread's registers would look like one buffer
          // of the block (as they are on the CPU); a value from a kThread
          // loop read there could differ per thread and split the barriers.
          if (w.in_block && w.thread == nullptr && w.warp == nullptr) {
            return Reject(k, absl::StrCat("the local buffer ", n->buffer->name,
                                          " at block level (allocate it in a kThread loop, or "
                                          "use a kPerThread buffer)"));
          }
          break;
        case BufferNode::Scope::kShared:
        case BufferNode::Scope::kPerThread:
        case BufferNode::Scope::kMatrixA:
        case BufferNode::Scope::kMatrixB:
        case BufferNode::Scope::kAccumulator:
          if (!w.in_block || w.thread != nullptr || w.warp != nullptr) {
            return Reject(k, absl::StrCat("the block buffer ", n->buffer->name,
                                          " outside a kBlock body or inside a kThread or kWarp "
                                          "loop"));
          }
          if (n->buffer->scope == BufferNode::Scope::kPerThread &&
              AsConstInt(n->buffer->shape[0]) != w.block) {
            return Reject(k, absl::StrCat("the per-thread buffer ", n->buffer->name,
                                          " whose dimension 0 is not the block size"));
          }
          if (IsFragmentScope(n->buffer->scope)) {
            TETHER_RETURN_IF_ERROR(CheckFragment(k, n->buffer, w));
          }
          break;
      }
      return CheckDeviceStmt(k, n->body, w);
    }
    case StmtKind::kIf: {
      const IfThenElseNode* n = s.as<IfThenElseNode>();
      TETHER_RETURN_IF_ERROR(CheckLoads(k, n->cond, w));
      TETHER_RETURN_IF_ERROR(CheckDeviceStmt(k, n->then_case, w));
      return CheckDeviceStmt(k, n->else_case, w);
    }
    case StmtKind::kAssert:
      return Reject(k, absl::StrCat("the assertion \"", s.as<AssertStmtNode>()->message, "\""));
    case StmtKind::kStore: {
      const StoreNode* n = s.as<StoreNode>();
      if (w.in_block && w.thread == nullptr) {
        return Reject(k, absl::StrCat("the store to ", n->buffer->name,
                                      " in a kBlock body outside its kThread loops"));
      }
      if (IsFragmentScope(n->buffer->scope)) {
        return Reject(k, absl::StrCat("an element write of the fragment ", n->buffer->name,
                                      " (opaque: only MatrixTile statements use it)"));
      }
      if (n->buffer->scope == BufferNode::Scope::kPerThread &&
          (w.thread == nullptr || !n->indices[0].same_as(w.thread->var))) {
        return Reject(k, absl::StrCat("a write of the per-thread buffer ", n->buffer->name,
                                      " not indexed by its kThread loop's var"));
      }
      for (const PrimExpr& i : n->indices) TETHER_RETURN_IF_ERROR(CheckLoads(k, i, w));
      return CheckLoads(k, n->value, w);
    }
    case StmtKind::kEvaluate:
      return CheckLoads(k, s.as<EvaluateNode>()->value, w);
    case StmtKind::kMatrixTile:
      return CheckMatrixTile(k, *s.as<MatrixTileNode>(), w);
    case StmtKind::kAsyncCopy:
      return CheckAsyncCopy(k, *s.as<AsyncCopyNode>(), w);
  }
  return absl::OkStatus();
}

// The shared-read rule of block schedules (kernel-abi.md, "Block launches"):
// a kShared buffer read outside kThread loops (by every thread, after a
// barrier) must not be stored again before another barrier has passed, or
// a thread that is still to read it sees the new value. Walks the kBlock
// body in program order, every block-level loop (and the body itself, for
// the next iteration of the kBlock loop) twice so a store in the next
// iteration is seen, with `pending` the shared buffers read since the last
// barrier (the end of a kThread loop).
class SharedReadCheck {
 public:
  explicit SharedReadCheck(const KernelFunc& k) : k_(k) {}

  absl::Status Run(const Stmt& body) {
    for (int i = 0; i < 2 && status_.ok(); ++i) Walk(body);
    return status_;
  }

 private:
  void Reads(const PrimExpr& e) {
    std::function<PrimExpr(const PrimExpr&)> visit = [&](const PrimExpr& x) {
      const LoadNode* l = x.as<LoadNode>();
      if (l != nullptr && l->buffer->scope == BufferNode::Scope::kShared) {
        pending_.insert(l->buffer.get());
      }
      return MapChildren(x, visit);
    };
    if (e.defined()) visit(e);
  }

  void Store(const Buffer& b) {
    if (pending_.contains(b.get())) {
      status_ = Reject(k_, absl::StrCat("the store to the shared buffer ", b->name,
                                        " while threads may still read it outside a kThread "
                                        "loop (no barrier between)"));
    }
  }

  // A kThread or kWarp loop: its stores against the pending reads, then the
  // barrier.
  void Stores(const Stmt& s) {
    VisitStoredBuffers(s, [this](const Buffer& b) {
      if (status_.ok()) Store(b);
    });
  }

  // Block-level statements.
  void Walk(const Stmt& s) {
    if (!s.defined() || !status_.ok()) return;
    switch (s.kind()) {
      case StmtKind::kSeq:
        for (const Stmt& c : s.as<SeqStmtNode>()->seq) Walk(c);
        return;
      case StmtKind::kFor: {
        const ForNode* f = s.as<ForNode>();
        if (f->for_kind == ForKind::kThread || f->for_kind == ForKind::kWarp) {
          Stores(f->body);
          pending_.clear();
          return;
        }
        Reads(f->min);
        Reads(f->extent);
        for (int i = 0; i < 2; ++i) Walk(f->body);
        return;
      }
      case StmtKind::kLet:
        Reads(s.as<LetStmtNode>()->value);
        return Walk(s.as<LetStmtNode>()->body);
      case StmtKind::kAllocate:
        return Walk(s.as<AllocateNode>()->body);
      case StmtKind::kIf:
        Reads(s.as<IfThenElseNode>()->cond);
        Walk(s.as<IfThenElseNode>()->then_case);
        return Walk(s.as<IfThenElseNode>()->else_case);
      default:
        return;
    }
  }

  const KernelFunc& k_;
  absl::flat_hash_set<const BufferNode*> pending_;
  absl::Status status_;
};

// The block size of a kBlock body: the extent of its first kThread loop, or
// 32 times its first kWarp loop's (CheckDeviceStmt holds the others to it),
// 0 when it has none.
int BlockThreads(const Stmt& s) {
  if (!s.defined()) return 0;
  switch (s.kind()) {
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) {
        if (int b = BlockThreads(c)) return b;
      }
      return 0;
    case StmtKind::kFor: {
      const ForNode* f = s.as<ForNode>();
      if (f->for_kind == ForKind::kThread)
        return static_cast<int>(AsConstInt(f->extent).value_or(0));
      if (f->for_kind == ForKind::kWarp)
        return static_cast<int>(AsConstInt(f->extent).value_or(0) * kWarpThreads);
      return BlockThreads(f->body);
    }
    case StmtKind::kLet:
      return BlockThreads(s.as<LetStmtNode>()->body);
    case StmtKind::kAllocate:
      return BlockThreads(s.as<AllocateNode>()->body);
    case StmtKind::kIf: {
      const IfThenElseNode* n = s.as<IfThenElseNode>();
      if (int b = BlockThreads(n->then_case)) return b;
      return BlockThreads(n->else_case);
    }
    default:
      return 0;
  }
}

bool UsesAny(const PrimExpr& e, const absl::flat_hash_set<const PrimVarNode*>& vars) {
  std::vector<Var> used;
  CollectVars(e, &used);
  for (const Var& v : used) {
    if (vars.contains(v.get())) return true;
  }
  return false;
}

PrimExpr AsInt64(const PrimExpr& e) {
  return e.dtype() == DataType::Int(64) ? e : Cast(DataType::Int(64), e);
}

// Binds `var` to `value` (converted to the var's dtype) around `body`.
Stmt BindVar(const Var& var, const PrimExpr& value, Stmt body) {
  PrimExpr v = value.dtype() == var.dtype() ? value : Cast(var.dtype(), value);
  return LetStmt(var, std::move(v), std::move(body));
}

// A parallel launch of the loop nest at `loop`: directly nested loops whose
// bounds do not depend on the loops outside them are fused into one index,
// which the grid-stride loop walks. Returns the body and sets `count`.
Stmt ParallelBody(const ForNode* loop, const Var& tid, const Var& nthreads, PrimExpr* count) {
  std::vector<const ForNode*> nest{loop};
  absl::flat_hash_set<const PrimVarNode*> bound{loop->var.get()};
  Stmt inner = loop->body;
  while (const ForNode* f = inner.as<ForNode>()) {
    if (UsesAny(f->min, bound) || UsesAny(f->extent, bound)) break;
    nest.push_back(f);
    bound.insert(f->var.get());
    inner = f->body;
  }
  // Negative extents run no iterations, as on the CPU.
  std::vector<PrimExpr> extents;
  for (const ForNode* f : nest)
    extents.push_back(Max(AsInt64(f->extent), IntImm(DataType::Int(64), 0)));
  PrimExpr total = IntImm(DataType::Int(64), 1);
  for (const PrimExpr& e : extents) total = Mul(total, e);
  *count = Simplify(total);

  // Innermost first: var_k = min_k + floormod(floordiv(t, stride_k), extent_k).
  Var t("tether_iter");
  Stmt body = inner;
  PrimExpr stride = IntImm(DataType::Int(64), 1);
  for (size_t i = nest.size(); i-- > 0;) {
    PrimExpr index = FloorDiv(t, stride);
    if (i > 0) index = FloorMod(index, extents[i]);
    body = BindVar(nest[i]->var, Add(AsInt64(nest[i]->min), index), body);
    stride = Mul(stride, extents[i]);
  }
  // for j in [0, ceil((count - tid) / nthreads)): t = tid + j * nthreads.
  // tid < nthreads and count >= 0, so the numerator is never negative.
  Var j("tether_stride");
  PrimExpr trips =
      FloorDiv(Add(Sub(*count, tid), Sub(nthreads, IntImm(DataType::Int(64), 1))), nthreads);
  // max(.., 0) changes nothing (t >= 0) but tells LLVM so: the floor
  // divisions above become shifts and masks, and flattening them again
  // folds back to t.
  return For(j, IntImm(DataType::Int(64), 0), trips, ForKind::kSerial,
             LetStmt(t, Max(Add(tid, Mul(j, nthreads)), IntImm(DataType::Int(64), 0)), body));
}

// A block launch of the kBlock loop `loop` with `block` threads per block:
// block b of nb runs iterations b, b + nb, ... (the same in all its threads,
// so its barriers are reached by all). The count is extent x block: one
// block per iteration, at most.
Stmt BlockBody(const ForNode* loop, int block, const Var& tid, const Var& nthreads,
               PrimExpr* count) {
  const PrimExpr threads = IntImm(DataType::Int(64), block);
  PrimExpr extent = Max(AsInt64(loop->extent), IntImm(DataType::Int(64), 0));
  *count = Simplify(Mul(extent, threads));
  PrimExpr b = FloorDiv(tid, threads), nb = FloorDiv(nthreads, threads);
  // b < nb and extent >= 0, so the numerator is never negative.
  Var j("tether_block_stride");
  PrimExpr trips = FloorDiv(Add(Sub(extent, b), Sub(nb, IntImm(DataType::Int(64), 1))), nb);
  return For(j, IntImm(DataType::Int(64), 0), trips, ForKind::kSerial,
             BindVar(loop->var, Add(AsInt64(loop->min), Add(b, Mul(j, nb))), loop->body));
}

// ---- Manifest description ---------------------------------------------------

// How a var can be read from the arguments: "d<p>.<i>" or "s<p>".
using RefMap = absl::flat_hash_map<const PrimVarNode*, std::string>;

// Postfix tokens of `e` over `refs`, or false when it has anything else.
bool Postfix(const PrimExpr& e, const RefMap& refs, std::vector<std::string>* out) {
  if (std::optional<int64_t> c = AsConstInt(e)) {
    out->push_back(absl::StrCat(*c));
    return true;
  }
  switch (e.kind()) {
    case PrimKind::kVar: {
      auto it = refs.find(static_cast<const PrimVarNode*>(e.get()));
      if (it == refs.end()) return false;
      out->push_back(it->second);
      return true;
    }
    case PrimKind::kCast: {
      const CastNode* c = e.as<CastNode>();
      if (!c->dtype().is_int() || !c->value.dtype().is_int()) return false;
      return Postfix(c->value, refs, out);
    }
    default:
      break;
  }
  const BinaryNode* b = e.as<BinaryNode>();
  if (b == nullptr || !e.dtype().is_int()) return false;
  const char* op = nullptr;
  switch (e.kind()) {
    case PrimKind::kAdd:
      op = "+";
      break;
    case PrimKind::kSub:
      op = "-";
      break;
    case PrimKind::kMul:
      op = "*";
      break;
    case PrimKind::kFloorDiv:
      op = "/";
      break;
    case PrimKind::kFloorMod:
      op = "%";
      break;
    case PrimKind::kMin:
      op = "min";
      break;
    case PrimKind::kMax:
      op = "max";
      break;
    default:
      return false;
  }
  if (!Postfix(b->a, refs, out) || !Postfix(b->b, refs, out)) return false;
  out->push_back(op);
  return true;
}

// The references of the vars a kernel's parameters bind: a scalar's var, a
// tensor dim that is a var (its first occurrence).
RefMap ArgRefs(const std::vector<KernelParam>& params) {
  RefMap refs;
  for (size_t p = 0; p < params.size(); ++p) {
    if (!params[p].is_tensor()) {
      refs.try_emplace(params[p].var.get(), absl::StrCat("s", p));
      continue;
    }
    const std::vector<PrimExpr>& shape = params[p].buffer->shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d].kind() == PrimKind::kVar) {
        refs.try_emplace(static_cast<const PrimVarNode*>(shape[d].get()),
                         absl::StrCat("d", p, ".", d));
      }
    }
  }
  return refs;
}

// The top-level statements of `s`, with the kGlobal allocations among them
// opened: their buffers go to `scratch`, their bodies' statements in place.
void TopLevel(const Stmt& s, std::vector<Stmt>* parts, std::vector<Buffer>* scratch) {
  if (!s.defined()) return;
  if (const SeqStmtNode* seq = s.as<SeqStmtNode>()) {
    for (const Stmt& p : seq->seq) TopLevel(p, parts, scratch);
    return;
  }
  const AllocateNode* a = s.as<AllocateNode>();
  if (a != nullptr && a->buffer->scope == BufferNode::Scope::kGlobal) {
    scratch->push_back(a->buffer);
    TopLevel(a->body, parts, scratch);
    return;
  }
  parts->push_back(s);
}

}  // namespace

absl::StatusOr<DeviceKernel> SplitForDevice(const KernelFunc& kernel) {
  if (!kernel) return absl::InvalidArgumentError("null kernel");
  std::vector<const LetStmtNode*> lets;
  Stmt rest = kernel->body;
  while (const LetStmtNode* l = rest.as<LetStmtNode>()) {
    lets.push_back(l);
    rest = l->body;
  }
  std::vector<Stmt> parts;
  DeviceKernel out;
  TopLevel(rest, &parts, &out.scratch);
  for (const LetStmtNode* l : lets) TETHER_RETURN_IF_ERROR(CheckLoads(kernel, l->value, Where()));
  // Scratch: 1-D, its size an expression of the arguments.
  const RefMap refs = ArgRefs(kernel->params);
  for (const Buffer& b : out.scratch) {
    std::vector<std::string> size;
    if (b->shape.size() != 1 || !Postfix(Simplify(AsInt64(b->shape[0])), refs, &size)) {
      return Reject(kernel, absl::StrCat("the workspace allocation ", b->name,
                                         " (scratch must be 1-D, its size an expression of the "
                                         "arguments' dims and scalars)"));
    }
  }
  // Consecutive other statements share one serial launch.
  enum class Kind { kSerial, kParallel, kBlock };
  std::vector<std::pair<Stmt, Kind>> groups;
  std::vector<Stmt> serial_run;
  auto flush = [&] {
    if (!serial_run.empty()) groups.emplace_back(Seq(serial_run), Kind::kSerial);
    serial_run.clear();
  };
  for (const Stmt& p : parts) {
    const ForNode* f = p.as<ForNode>();
    if (f != nullptr && f->for_kind == ForKind::kBlock) {
      Where w;
      w.in_block = true;
      w.block = BlockThreads(f->body);
      if (w.block < 1 || w.block > kDeviceBlockThreads) {
        return Reject(kernel, absl::StrCat("the kBlock loop over ", f->var.name(), " with ",
                                           w.block, " threads (1 to ", kDeviceBlockThreads, ")"));
      }
      TETHER_RETURN_IF_ERROR(CheckLoads(kernel, f->min, Where()));
      TETHER_RETURN_IF_ERROR(CheckLoads(kernel, f->extent, Where()));
      TETHER_RETURN_IF_ERROR(CheckDeviceStmt(kernel, f->body, w));
      TETHER_RETURN_IF_ERROR(SharedReadCheck(kernel).Run(f->body));
      flush();
      groups.emplace_back(p, Kind::kBlock);
      continue;
    }
    TETHER_RETURN_IF_ERROR(CheckDeviceStmt(kernel, p, Where()));
    if (f != nullptr && f->for_kind == ForKind::kParallel) {
      flush();
      groups.emplace_back(p, Kind::kParallel);
    } else {
      serial_run.push_back(p);
    }
  }
  flush();
  if (groups.empty()) groups.emplace_back(Seq({}), Kind::kSerial);

  out.source = kernel;
  for (size_t i = 0; i < groups.size(); ++i) {
    Var tid("tether_tid");
    Var nthreads("tether_nthreads");
    DeviceLaunch launch;
    Stmt body;
    if (groups[i].second == Kind::kBlock) {
      const ForNode* loop = groups[i].first.as<ForNode>();
      launch.blocks = true;
      launch.block = BlockThreads(loop->body);
      body = BlockBody(loop, launch.block, tid, nthreads, &launch.count);
    } else if (groups[i].second == Kind::kParallel) {
      body = ParallelBody(groups[i].first.as<ForNode>(), tid, nthreads, &launch.count);
    } else {
      launch.serial = true;
      launch.block = 1;
      launch.count = IntImm(DataType::Int(64), 1);
      body = IfThenElse(EQ(tid, IntImm(DataType::Int(64), 0)), groups[i].first);
    }
    for (size_t l = lets.size(); l-- > 0;) body = LetStmt(lets[l]->var, lets[l]->value, body);
    std::vector<KernelParam> params = kernel->params;
    for (const Buffer& b : out.scratch) params.push_back(KernelParam::Tensor(b));
    params.push_back(KernelParam::Scalar(tid));
    params.push_back(KernelParam::Scalar(nthreads));
    launch.kernel = MakeKernelFunc(absl::StrCat(kernel->name, "_k", i), std::move(params), body,
                                   kernel->num_outputs);
    // The count may use the leading lets' vars: substitute them, innermost
    // last, so it is an expression of the arguments.
    VarMap let_values;
    for (const LetStmtNode* l : lets) let_values[l->var.get()] = Substitute(l->value, let_values);
    launch.count = Simplify(Substitute(launch.count, let_values));
    out.launches.push_back(std::move(launch));
  }
  return out;
}

CudaKernelInfo DescribeDeviceKernel(const DeviceKernel& kernel) {
  CudaKernelInfo info;
  info.name = kernel.source->name;
  RefMap refs;
  const std::vector<KernelParam>& params = kernel.source->params;
  for (size_t p = 0; p < params.size(); ++p) {
    CudaParamInfo pi;
    if (!params[p].is_tensor()) {
      refs.try_emplace(params[p].var.get(), absl::StrCat("s", p));
      info.params.push_back(std::move(pi));
      continue;
    }
    pi.is_tensor = true;
    pi.dtype = params[p].buffer->dtype;
    const std::vector<PrimExpr>& shape = params[p].buffer->shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      std::string here = absl::StrCat("d", p, ".", d);
      if (std::optional<int64_t> c = AsConstInt(shape[d])) {
        pi.dims.push_back(absl::StrCat(*c));
      } else if (shape[d].kind() == PrimKind::kVar) {
        auto [it, fresh] = refs.try_emplace(static_cast<const PrimVarNode*>(shape[d].get()), here);
        pi.dims.push_back(fresh ? "*" : absl::StrCat("=", it->second));
      } else {
        pi.dims.push_back("?");
      }
    }
    info.params.push_back(std::move(pi));
  }
  for (const Buffer& b : kernel.scratch) {
    CudaScratchInfo si;
    si.dtype = b->dtype;
    Postfix(Simplify(AsInt64(b->shape[0])), refs, &si.count);  // checked by SplitForDevice
    info.scratch.push_back(std::move(si));
  }
  for (const DeviceLaunch& l : kernel.launches) {
    CudaLaunchInfo li;
    li.entry = l.kernel->name;
    li.block = l.block;
    if (!Postfix(l.count, refs, &li.count)) li.count.clear();
    info.launches.push_back(std::move(li));
  }
  return info;
}

KernelFunc SimulateOnCpu(const DeviceKernel& kernel, int64_t nthreads) {
  std::vector<Stmt> parts;
  for (const DeviceLaunch& l : kernel.launches) {
    const size_t n = l.kernel->params.size();
    const Var& tid = l.kernel->params[n - 2].var;
    const Var& total = l.kernel->params[n - 1].var;
    if (l.blocks) {
      // Thread 0 of each block stands for the block; its kThread loops run
      // the block's threads in turn.
      const int64_t blocks = std::max<int64_t>(1, nthreads / l.block);
      Var b("tether_sim_block");
      parts.push_back(For(
          b, IntImm(DataType::Int(64), 0), IntImm(DataType::Int(64), blocks), ForKind::kSerial,
          LetStmt(tid, Mul(b, IntImm(DataType::Int(64), l.block)),
                  LetStmt(total, IntImm(DataType::Int(64), blocks * l.block), l.kernel->body))));
      continue;
    }
    const int64_t threads = l.serial ? 1 : nthreads;
    parts.push_back(For(tid, IntImm(DataType::Int(64), 0), IntImm(DataType::Int(64), threads),
                        ForKind::kSerial,
                        LetStmt(total, IntImm(DataType::Int(64), threads), l.kernel->body)));
  }
  Stmt body = Seq(parts);
  for (size_t b = kernel.scratch.size(); b-- > 0;) body = Allocate(kernel.scratch[b], body);
  return MakeKernelFunc(kernel.source->name, kernel.source->params, body,
                        kernel.source->num_outputs);
}

}  // namespace tether::compiler
