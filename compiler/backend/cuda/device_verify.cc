// The device-IR verifier (device_verify.h): what a GPU can run, statement
// by statement, and the block-schedule rules of kernel_ir.h.
#include "compiler/backend/cuda/device_verify.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler {

namespace {
const char* ForKindLabel(ForKind kind) {
  return kind == ForKind::kWarpgroup ? "kWarpgroup" : kind == ForKind::kWarp ? "kWarp" : "kThread";
}
}  // namespace

absl::Status RejectForDevice(const KernelFunc& k, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("kernel ", k->name, ": ", what, " cannot run on a gpu"));
}

// Loads of kPerThread buffers in `e` index dimension 0 with the enclosing
// kThread loop's var.
absl::Status CheckDeviceLoads(const KernelFunc& k, const PrimExpr& e, const DeviceWhere& w) {
  absl::Status status;
  std::function<PrimExpr(const PrimExpr&)> visit = [&](const PrimExpr& x) {
    const LoadNode* l = x.as<LoadNode>();
    if (l != nullptr && l->buffer->scope == BufferNode::Scope::kPerThread && status.ok() &&
        (w.thread == nullptr || !l->indices[0].same_as(w.thread->var))) {
      status = RejectForDevice(k, absl::StrCat("a read of the per-thread buffer ", l->buffer->name,
                                               " not indexed by its kThread loop's var"));
    }
    if (l != nullptr && IsFragmentScope(l->buffer->scope) && status.ok()) {
      status = RejectForDevice(k, absl::StrCat("an element read of the fragment ", l->buffer->name,
                                               " (opaque: only MatrixTile statements use it)"));
    }
    return MapChildren(x, visit);
  };
  if (e.defined()) visit(e);
  return status;
}

namespace {

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
absl::Status CheckAsyncCopy(const KernelFunc& k, const AsyncCopyNode& n, const DeviceWhere& w) {
  if (w.thread == nullptr) {
    return RejectForDevice(k,
                           n.op != AsyncOp::kCopy
                               ? std::string("the asynchronous-copy fence outside a kThread loop")
                               : absl::StrCat("the asynchronous copy to ", n.dst.buffer->name,
                                              " outside a kThread loop"));
  }
  if (n.op == AsyncOp::kProxyFence) return absl::OkStatus();
  if (n.op == AsyncOp::kFence) {
    if (n.pending < 0 || n.pending > 7) {
      return RejectForDevice(k, absl::StrCat("the asynchronous-copy fence leaving ", n.pending,
                                             " groups in flight (0 to 7)"));
    }
    return absl::OkStatus();
  }
  const Buffer &dst = n.dst.buffer, &src = n.src.buffer;
  if (dst->scope != BufferNode::Scope::kShared || src->scope != BufferNode::Scope::kGlobal ||
      dst->dtype != src->dtype || n.dst.at.size() != dst->shape.size() ||
      n.src.at.size() != src->shape.size() || n.lanes * dst->dtype.bytes() != 16) {
    return RejectForDevice(
        k, absl::StrCat("the asynchronous copy from ", src->name, " to ", dst->name,
                        " (16 bytes from a tensor to a shared buffer of its dtype)"));
  }
  for (const TileRef* t : {&n.dst, &n.src}) {
    for (const PrimExpr& i : t->at) TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, i, w));
    if (OffsetFactor(*t) * dst->dtype.bytes() % 16 != 0) {
      return RejectForDevice(
          k, absl::StrCat("the asynchronous copy from ", src->name, " to ", dst->name, ", whose ",
                          t == &n.dst ? "destination" : "source",
                          " is not known to be 16-byte aligned"));
    }
  }
  return CheckDeviceLoads(k, n.valid, w);
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

// The rules of warpgroup statements (kernel_ir.h, "Warpgroup MMA"): inside
// a kWarpgroup loop, on the warpgroup's accumulator; a WarpgroupMma's tiles
// kSwizzle128 shared buffers of its operand dtype, A's 64 rows x K, B's
// K x N with N the accumulator's, each tile starting a 1024-byte swizzle
// period; a WarpgroupStore's tile 64 rows of a float32 shared buffer, from
// a constant column that leaves W columns of the accumulator.
absl::Status CheckWarpgroupStatement(const KernelFunc& k, const MatrixTileNode& n,
                                     const DeviceWhere& w) {
  using Scope = BufferNode::Scope;
  const Buffer& acc = n.frag.buffer;
  if (w.warp == nullptr || w.warp->for_kind != ForKind::kWarpgroup) {
    return RejectForDevice(
        k, absl::StrCat("the warpgroup statement on ", acc->name, " outside a kWarpgroup loop"));
  }
  if (acc->scope != Scope::kWarpgroupAccumulator || n.frag.at.size() != 1 ||
      !n.frag.at[0].same_as(w.warp->var)) {
    return RejectForDevice(k, absl::StrCat("the warpgroup accumulator ", acc->name,
                                           " (of the wrong scope, or not indexed by its "
                                           "kWarpgroup var alone)"));
  }
  const int64_t n_cols = *acc->shape[2].as_int();
  auto tile = [&](const TileRef& t, int64_t rows, int64_t cols, DataType dtype,
                  bool swizzled) -> absl::Status {
    const Buffer& b = t.buffer;
    const size_t nd = b->shape.size();
    const bool shape_ok = nd >= 2 && t.at.size() == nd &&
                          (rows == 0 || AsConstInt(b->shape[nd - 2]).value_or(0) >= rows) &&
                          AsConstInt(b->shape[nd - 1]) == cols;
    const bool layout_ok = (b->layout == BufferNode::Layout::kSwizzle128) == swizzled;
    if (b->scope != Scope::kShared || b->dtype != dtype || !shape_ok || !layout_ok) {
      return RejectForDevice(
          k, absl::StrCat("the warpgroup tile of ", b->name, " (a ", dtype.ToString(),
                          swizzled ? " swizzled" : "", " shared buffer of ", cols, " columns)"));
    }
    for (const PrimExpr& i : t.at) TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, i, w));
    // The tile's first element starts a 1024-byte swizzle period (rows a
    // multiple of 8, column 0), or for a plain tile a 16-byte boundary.
    if (swizzled ? KnownFactor(t.at[nd - 2]) % 8 != 0 || AsConstInt(t.at[nd - 1]).value_or(1) != 0
                 : OffsetFactor(t) * dtype.bytes() % 16 != 0) {
      return RejectForDevice(k, absl::StrCat("the warpgroup tile of ", b->name,
                                             " not known to start a swizzle period"));
    }
    return absl::OkStatus();
  };
  if (n.op == MatrixOp::kWarpgroupStore) {
    const Buffer& dst = n.args[0].buffer;
    const int64_t cols = AsConstInt(dst->shape.back()).value_or(0);
    const std::optional<int64_t> first = AsConstInt(n.value);
    if (!first || *first < 0 || *first % 8 != 0 || cols % 8 != 0 || *first + cols > n_cols) {
      return RejectForDevice(k, absl::StrCat("the warpgroup store to ", dst->name,
                                             " from a column that is not a constant multiple "
                                             "of 8 inside ",
                                             acc->name, " (or of a width not a multiple of 8)"));
    }
    return tile(n.args[0], kWarpgroupRows, cols, DataType::Float(32), false);
  }
  const Buffer& a = n.args[0].buffer;
  const DataType t = a->dtype;
  const int64_t kk = AsConstInt(a->shape.back()).value_or(0);
  if (!(t == DataType::Float(16) || t.is_bfloat16()) || kk % 16 != 0 || kk * t.bytes() != 128) {
    return RejectForDevice(k, absl::StrCat("the warpgroup product of ", a->name,
                                           " (float16 or bfloat16 rows of 128 bytes)"));
  }
  TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, n.value, w));
  TETHER_RETURN_IF_ERROR(tile(n.args[0], kWarpgroupRows, kk, t, true));
  return tile(n.args[1], kk, n_cols, t, true);
}

// The rules of MatrixTile statements (kernel_ir.h): inside a kWarp loop,
// on fragments of the right scope indexed by the warp, and tiles of shared
// memory that the hardware can address (rows 16-byte aligned, the tile's
// first element 32-byte aligned).
absl::Status CheckMatrixTile(const KernelFunc& k, const MatrixTileNode& n, const DeviceWhere& w) {
  using Scope = BufferNode::Scope;
  const bool warpgroup = n.op == MatrixOp::kWarpgroupMma || n.op == MatrixOp::kWarpgroupStore;
  if (warpgroup) return CheckWarpgroupStatement(k, n, w);
  if (w.warp == nullptr || w.warp->for_kind != ForKind::kWarp) {
    return RejectForDevice(k, absl::StrCat("the tensor-core statement on ", n.frag.buffer->name,
                                           " outside a kWarp loop"));
  }
  auto fragment = [&](const TileRef& t, std::initializer_list<Scope> scopes) -> absl::Status {
    const Buffer& b = t.buffer;
    if (std::find(scopes.begin(), scopes.end(), b->scope) == scopes.end() ||
        t.at.size() + 2 != b->shape.size() || t.at.empty() || !t.at[0].same_as(w.warp->var)) {
      return RejectForDevice(
          k, absl::StrCat("the fragment ", b->name,
                          " (of the wrong scope, or not indexed by its kWarp var)"));
    }
    for (const PrimExpr& i : t.at) TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, i, w));
    return absl::OkStatus();
  };
  auto shared_tile = [&](const TileRef& t, DataType dtype) -> absl::Status {
    const Buffer& b = t.buffer;
    if (b->scope != Scope::kShared || b->dtype != dtype || t.at.size() != b->shape.size() ||
        b->shape.size() < 2) {
      return RejectForDevice(k, absl::StrCat("the tile of ", b->name, " (a ", dtype.ToString(),
                                             " shared buffer of 2 or more dims)"));
    }
    for (const PrimExpr& i : t.at) TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, i, w));
    const int64_t bytes = dtype.bytes();
    if (KnownFactor(b->shape.back()) * bytes % 16 != 0 || OffsetFactor(t) * bytes % 32 != 0) {
      return RejectForDevice(
          k, absl::StrCat("the tile of ", b->name,
                          " not known to be aligned (rows of a multiple of 16 bytes, "
                          "a first element at a multiple of 32)"));
    }
    return absl::OkStatus();
  };
  switch (n.op) {
    case MatrixOp::kFill:
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, n.value, w));
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
    case MatrixOp::kWarpgroupMma:
    case MatrixOp::kWarpgroupStore:
      break;  // CheckWarpgroupStatement
  }
  return absl::OkStatus();
}

// A fragment buffer's allocation: at block level, [warps, ..., 16, 16] of
// float16 or bfloat16 (operands) or float32 (accumulators).
absl::Status CheckFragment(const KernelFunc& k, const Buffer& b, const DeviceWhere& w) {
  const std::vector<PrimExpr>& shape = b->shape;
  const DataType t = b->dtype;
  if (b->scope == BufferNode::Scope::kWarpgroupAccumulator) {
    // [warpgroups, 64, n]: n a multiple of 8 from 8 to 256, wgmma's shapes.
    const int64_t cols = shape.size() == 3 ? AsConstInt(shape[2]).value_or(0) : 0;
    if (shape.size() != 3 || AsConstInt(shape[0]) != w.block / kWarpgroupThreads ||
        w.block % kWarpgroupThreads != 0 || AsConstInt(shape[1]) != kWarpgroupRows || cols < 8 ||
        cols > 256 || cols % 8 != 0 || t != DataType::Float(32)) {
      return RejectForDevice(k, absl::StrCat("the warpgroup accumulator ", b->name,
                                             " (float32 [warpgroups, 64, n], n a multiple of 8 "
                                             "up to 256)"));
    }
    return absl::OkStatus();
  }
  const bool dtype_ok = b->scope == BufferNode::Scope::kAccumulator
                            ? t == DataType::Float(32)
                            : t == DataType::Float(16) || t.is_bfloat16();
  const bool constant = std::all_of(
      shape.begin(), shape.end(), [](const PrimExpr& d) { return AsConstInt(d).value_or(0) > 0; });
  if (shape.size() < 3 || !constant || AsConstInt(shape[0]) != w.block / kWarpThreads ||
      AsConstInt(shape[shape.size() - 1]) != kMatrixTileSide ||
      AsConstInt(shape[shape.size() - 2]) != kMatrixTileSide || !dtype_ok) {
    return RejectForDevice(
        k, absl::StrCat("the fragment ", b->name,
                        " (a constant shape [warps, ..., 16, 16]; float16 or bfloat16 "
                        "operands, float32 accumulators)"));
  }
  return absl::OkStatus();
}

}  // namespace

// Rejects statements a device cannot run anywhere in `s`.
absl::Status CheckDeviceStmt(const KernelFunc& k, const Stmt& s, const DeviceWhere& w) {
  if (!s.defined()) return absl::OkStatus();
  switch (s.kind()) {
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) {
        TETHER_RETURN_IF_ERROR(CheckDeviceStmt(k, c, w));
      }
      return absl::OkStatus();
    case StmtKind::kFor: {
      const ForNode* f = s.as<ForNode>();
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, f->min, w));
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, f->extent, w));
      DeviceWhere inner = w;
      if (f->for_kind == ForKind::kBlock) {
        return RejectForDevice(k, absl::StrCat("the kBlock loop over ", f->var.name(),
                                               ", not a top-level statement,"));
      }
      if (f->for_kind == ForKind::kThread || f->for_kind == ForKind::kWarp ||
          f->for_kind == ForKind::kWarpgroup) {
        const bool warps = f->for_kind != ForKind::kThread;
        const int width = f->for_kind == ForKind::kWarpgroup ? kWarpgroupThreads
                          : warps                            ? kWarpThreads
                                                             : 1;
        std::optional<int64_t> extent = AsConstInt(f->extent);
        if (!w.in_block || w.thread != nullptr || w.warp != nullptr || extent != w.block / width ||
            w.block % width != 0) {
          return RejectForDevice(
              k, absl::StrCat("the ", ForKindLabel(f->for_kind), " loop over ", f->var.name(),
                              " (one level inside a kBlock body, extent its block size",
                              width > 1 ? absl::StrCat(" / ", width, ")") : ")"));
        }
        (warps ? inner.warp : inner.thread) = f;
        TETHER_RETURN_IF_ERROR(CheckDeviceStmt(k, f->body, inner));
        if (Unfenced(f->body, false)) {
          return RejectForDevice(
              k, absl::StrCat("the kThread loop over ", f->var.name(),
                              " whose asynchronous copies are not all followed by a "
                              "fence"));
        }
        return absl::OkStatus();
      }
      return CheckDeviceStmt(k, f->body, inner);
    }
    case StmtKind::kLet:
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, s.as<LetStmtNode>()->value, w));
      return CheckDeviceStmt(k, s.as<LetStmtNode>()->body, w);
    case StmtKind::kAllocate: {
      const AllocateNode* n = s.as<AllocateNode>();
      switch (n->buffer->scope) {
        case BufferNode::Scope::kGlobal:
          return RejectForDevice(
              k, absl::StrCat("the workspace allocation ", n->buffer->name,
                              " below the top level (scratch is allocated for the whole "
                              "kernel)"));
        case BufferNode::Scope::kLocal:
          // At block level a thread's registers would look like one buffer
          // of the block (as they are on the CPU); a value from a kThread
          // loop read there could differ per thread and split the barriers.
          if (w.in_block && w.thread == nullptr && w.warp == nullptr) {
            return RejectForDevice(
                k, absl::StrCat("the local buffer ", n->buffer->name,
                                " at block level (allocate it in a kThread loop, or "
                                "use a kPerThread buffer)"));
          }
          break;
        case BufferNode::Scope::kShared:
        case BufferNode::Scope::kPerThread:
        case BufferNode::Scope::kMatrixA:
        case BufferNode::Scope::kMatrixB:
        case BufferNode::Scope::kAccumulator:
        case BufferNode::Scope::kWarpgroupAccumulator:
          if (!w.in_block || w.thread != nullptr || w.warp != nullptr) {
            return RejectForDevice(
                k, absl::StrCat("the block buffer ", n->buffer->name,
                                " outside a kBlock body or inside a kThread or kWarp "
                                "loop"));
          }
          if (n->buffer->scope == BufferNode::Scope::kPerThread &&
              AsConstInt(n->buffer->shape[0]) != w.block) {
            return RejectForDevice(k, absl::StrCat("the per-thread buffer ", n->buffer->name,
                                                   " whose dimension 0 is not the block size"));
          }
          if (IsFragmentScope(n->buffer->scope)) {
            TETHER_RETURN_IF_ERROR(CheckFragment(k, n->buffer, w));
          }
          if (n->buffer->layout == BufferNode::Layout::kSwizzle128) {
            // Whole 1024-byte swizzle periods: rows of 128-byte multiples,
            // a multiple of 8 of them (prim_expr.h).
            const std::vector<PrimExpr>& shape = n->buffer->shape;
            const size_t nd = shape.size();
            const bool ok =
                n->buffer->scope == BufferNode::Scope::kShared && nd >= 2 &&
                std::all_of(shape.begin(), shape.end(),
                            [](const PrimExpr& d) { return AsConstInt(d).value_or(0) > 0; }) &&
                *AsConstInt(shape[nd - 1]) * n->buffer->dtype.bytes() % 128 == 0 &&
                *AsConstInt(shape[nd - 2]) % 8 == 0;
            if (!ok) {
              return RejectForDevice(k, absl::StrCat("the swizzled buffer ", n->buffer->name,
                                                     " (shared, constant, rows of 128-byte "
                                                     "multiples, a multiple of 8 of them)"));
            }
          }
          break;
      }
      return CheckDeviceStmt(k, n->body, w);
    }
    case StmtKind::kIf: {
      const IfThenElseNode* n = s.as<IfThenElseNode>();
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, n->cond, w));
      TETHER_RETURN_IF_ERROR(CheckDeviceStmt(k, n->then_case, w));
      return CheckDeviceStmt(k, n->else_case, w);
    }
    case StmtKind::kAssert:
      return RejectForDevice(
          k, absl::StrCat("the assertion \"", s.as<AssertStmtNode>()->message, "\""));
    case StmtKind::kStore: {
      const StoreNode* n = s.as<StoreNode>();
      if (w.in_block && w.thread == nullptr) {
        return RejectForDevice(k, absl::StrCat("the store to ", n->buffer->name,
                                               " in a kBlock body outside its kThread loops"));
      }
      if (IsFragmentScope(n->buffer->scope)) {
        return RejectForDevice(k, absl::StrCat("an element write of the fragment ", n->buffer->name,
                                               " (opaque: only MatrixTile statements use it)"));
      }
      if (n->buffer->scope == BufferNode::Scope::kPerThread &&
          (w.thread == nullptr || !n->indices[0].same_as(w.thread->var))) {
        return RejectForDevice(k, absl::StrCat("a write of the per-thread buffer ", n->buffer->name,
                                               " not indexed by its kThread loop's var"));
      }
      for (const PrimExpr& i : n->indices) TETHER_RETURN_IF_ERROR(CheckDeviceLoads(k, i, w));
      return CheckDeviceLoads(k, n->value, w);
    }
    case StmtKind::kEvaluate:
      return CheckDeviceLoads(k, s.as<EvaluateNode>()->value, w);
    case StmtKind::kMatrixTile:
      return CheckMatrixTile(k, *s.as<MatrixTileNode>(), w);
    case StmtKind::kAsyncCopy:
      return CheckAsyncCopy(k, *s.as<AsyncCopyNode>(), w);
  }
  return absl::OkStatus();
}

namespace {

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
      status_ =
          RejectForDevice(k_, absl::StrCat("the store to the shared buffer ", b->name,
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
        if (f->for_kind == ForKind::kThread || f->for_kind == ForKind::kWarp ||
            f->for_kind == ForKind::kWarpgroup) {
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

}  // namespace

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
      if (f->for_kind == ForKind::kWarpgroup)
        return static_cast<int>(AsConstInt(f->extent).value_or(0) * kWarpgroupThreads);
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

absl::Status CheckSharedReads(const KernelFunc& k, const Stmt& block_body) {
  return SharedReadCheck(k).Run(block_body);
}

}  // namespace tether::compiler
