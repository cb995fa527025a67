// Kernel IR construction and TVMScript-like printing.
#include "compiler/tir/kernel_ir.h"

#include "absl/strings/str_cat.h"

namespace tether::compiler {
namespace {

template <typename T, typename... Args>
Stmt MakeStmt(Args&&... args) {
  return Stmt(Ref<const StmtNode>(MakeRef<T>(std::forward<Args>(args)...)));
}

void Indent(int n, std::string* out) { out->append(static_cast<size_t>(n) * 4, ' '); }

std::string Indices(const std::vector<PrimExpr>& idx) {
  std::string s;
  for (size_t i = 0; i < idx.size(); ++i) absl::StrAppend(&s, i ? ", " : "", ToString(idx[i]));
  return s;
}

std::string BufferType(const Buffer& b) {
  std::string s = "T.Buffer((";
  for (size_t i = 0; i < b->shape.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", ToString(b->shape[i]));
  if (b->shape.size() == 1) s += ",";
  absl::StrAppend(&s, "), \"", b->dtype.ToString(), "\"");
  switch (b->scope) {
    case BufferNode::Scope::kGlobal:
      break;
    case BufferNode::Scope::kLocal:
      s += ", scope=\"local\"";
      break;
    case BufferNode::Scope::kShared:
      s += ", scope=\"shared\"";
      break;
    case BufferNode::Scope::kPerThread:
      s += ", scope=\"per_thread\"";
      break;
    case BufferNode::Scope::kMatrixA:
      s += ", scope=\"wmma.matrix_a\"";
      break;
    case BufferNode::Scope::kMatrixB:
      s += ", scope=\"wmma.matrix_b\"";
      break;
    case BufferNode::Scope::kAccumulator:
      s += ", scope=\"wmma.accumulator\"";
      break;
    case BufferNode::Scope::kWarpgroupAccumulator:
      s += ", scope=\"wgmma.accumulator\"";
      break;
  }
  if (b->layout == BufferNode::Layout::kSwizzle128) s += ", layout=\"swizzle128\"";
  s += ")";
  return s;
}

const char* ForKindName(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "T.serial";
    case ForKind::kParallel:
      return "T.parallel";
    case ForKind::kVectorized:
      return "T.vectorized";
    case ForKind::kUnrolled:
      return "T.unroll";
    case ForKind::kBlock:
      return "T.blocks";
    case ForKind::kThread:
      return "T.threads";
    case ForKind::kWarp:
      return "T.warps";
    case ForKind::kWarpgroup:
      return "T.warpgroups";
  }
  return "T.serial";
}

std::string Tile(const TileRef& t) { return absl::StrCat(t.buffer->name, "[", Indices(t.at), "]"); }

void PrintMatrixTile(const MatrixTileNode& n, std::string* out) {
  switch (n.op) {
    case MatrixOp::kFill:
      absl::StrAppend(out, "T.fill_fragment(", Tile(n.frag), ", ", ToString(n.value), ")\n");
      return;
    case MatrixOp::kLoad:
      absl::StrAppend(out, "T.load_matrix_sync(", Tile(n.frag), ", ", Tile(n.args[0]), ")\n");
      return;
    case MatrixOp::kMma:
      absl::StrAppend(out, "T.mma_sync(", Tile(n.frag), ", ", Tile(n.args[0]), ", ",
                      Tile(n.args[1]), ")\n");
      return;
    case MatrixOp::kStore:
      absl::StrAppend(out, "T.store_matrix_sync(", Tile(n.args[0]), ", ", Tile(n.frag), ")\n");
      return;
    case MatrixOp::kWarpgroupMma:
      absl::StrAppend(out, "T.wgmma_async(", Tile(n.frag), ", ", Tile(n.args[0]), ", ",
                      Tile(n.args[1]), ", accumulate=", ToString(n.value), ")\n");
      return;
    case MatrixOp::kWarpgroupStore:
      absl::StrAppend(out, "T.wgmma_store(", Tile(n.args[0]), ", ", Tile(n.frag),
                      ", col=", ToString(n.value), ")\n");
      return;
  }
}

void PrintAsyncCopy(const AsyncCopyNode& n, std::string* out) {
  if (n.op == AsyncOp::kFence) {
    absl::StrAppend(out, "T.ptx_wait_group(", n.pending, ")\n");
    return;
  }
  if (n.op == AsyncOp::kProxyFence) {
    out->append("T.ptx_fence_proxy_async()\n");
    return;
  }
  absl::StrAppend(out, "T.ptx_cp_async(", Tile(n.dst), ", ", Tile(n.src), ", ", n.lanes);
  if (n.valid.defined()) absl::StrAppend(out, ", valid=", ToString(n.valid));
  out->append(")\n");
}

void PrintStmt(const Stmt& s, int indent, std::string* out) {
  if (!s.defined()) {
    Indent(indent, out);
    out->append("pass\n");
    return;
  }
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* f = s.as<ForNode>();
      Indent(indent, out);
      absl::StrAppend(out, "for ", f->var.name(), " in ", ForKindName(f->for_kind), "(");
      if (const int64_t* m = f->min.as_int(); m && *m == 0) {
        absl::StrAppend(out, ToString(f->extent));
      } else {
        absl::StrAppend(out, ToString(f->min), ", ", ToString(f->min + f->extent));
      }
      out->append("):\n");
      PrintStmt(f->body, indent + 1, out);
      return;
    }
    case StmtKind::kStore: {
      const auto* st = s.as<StoreNode>();
      Indent(indent, out);
      absl::StrAppend(out, st->buffer->name, "[", Indices(st->indices), "] = ", ToString(st->value),
                      "\n");
      return;
    }
    case StmtKind::kLet: {
      const auto* l = s.as<LetStmtNode>();
      Indent(indent, out);
      absl::StrAppend(out, l->var.name(), ": T.", l->var.dtype().ToString(), " = ",
                      ToString(l->value), "\n");
      PrintStmt(l->body, indent, out);
      return;
    }
    case StmtKind::kAllocate: {
      const auto* a = s.as<AllocateNode>();
      Indent(indent, out);
      absl::StrAppend(out, a->buffer->name, " = T.alloc_buffer", BufferType(a->buffer).substr(8),
                      "\n");
      PrintStmt(a->body, indent, out);
      return;
    }
    case StmtKind::kSeq:
      if (s.as<SeqStmtNode>()->seq.empty()) {
        // An empty body (a parsed `pass`, a block of annotations only).
        Indent(indent, out);
        out->append("pass\n");
        return;
      }
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) PrintStmt(c, indent, out);
      return;
    case StmtKind::kIf: {
      const auto* i = s.as<IfThenElseNode>();
      Indent(indent, out);
      absl::StrAppend(out, "if ", ToString(i->cond), ":\n");
      PrintStmt(i->then_case, indent + 1, out);
      if (i->else_case.defined()) {
        Indent(indent, out);
        out->append("else:\n");
        PrintStmt(i->else_case, indent + 1, out);
      }
      return;
    }
    case StmtKind::kAssert: {
      const auto* a = s.as<AssertStmtNode>();
      Indent(indent, out);
      absl::StrAppend(out, "assert ", ToString(a->cond), ", \"", a->message, "\"\n");
      PrintStmt(a->body, indent, out);
      return;
    }
    case StmtKind::kEvaluate:
      Indent(indent, out);
      absl::StrAppend(out, "T.evaluate(", ToString(s.as<EvaluateNode>()->value), ")\n");
      return;
    case StmtKind::kMatrixTile:
      Indent(indent, out);
      PrintMatrixTile(*s.as<MatrixTileNode>(), out);
      return;
    case StmtKind::kAsyncCopy:
      Indent(indent, out);
      PrintAsyncCopy(*s.as<AsyncCopyNode>(), out);
      return;
  }
}

// `t`'s indices for element (i, j) of its tile.
std::vector<PrimExpr> TileElement(const TileRef& t, const PrimExpr& i, const PrimExpr& j) {
  std::vector<PrimExpr> at = t.at;
  const bool fragment = at.size() + 2 == t.buffer->shape.size();
  if (fragment) {
    at.push_back(i);
    at.push_back(j);
  } else {
    at[at.size() - 2] = at[at.size() - 2] + i;
    at.back() = at.back() + j;
  }
  return at;
}

}  // namespace

Stmt For(Var var, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body) {
  return MakeStmt<ForNode>(std::move(var), std::move(min), std::move(extent), kind,
                           std::move(body));
}

Stmt Store(Buffer buffer, std::vector<PrimExpr> indices, PrimExpr value) {
  if (value.dtype() != buffer->dtype) value = Cast(buffer->dtype, std::move(value));
  return MakeStmt<StoreNode>(std::move(buffer), std::move(indices), std::move(value));
}

Stmt LetStmt(Var var, PrimExpr value, Stmt body) {
  return MakeStmt<LetStmtNode>(std::move(var), std::move(value), std::move(body));
}

Stmt Allocate(Buffer buffer, Stmt body) {
  return MakeStmt<AllocateNode>(std::move(buffer), std::move(body));
}

Stmt Seq(std::vector<Stmt> seq) {
  std::vector<Stmt> flat;
  for (Stmt& s : seq) {
    if (!s.defined()) continue;
    if (const auto* inner = s.as<SeqStmtNode>()) {
      flat.insert(flat.end(), inner->seq.begin(), inner->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return MakeStmt<SeqStmtNode>(std::move(flat));
}

Stmt IfThenElse(PrimExpr cond, Stmt then_case, Stmt else_case) {
  return MakeStmt<IfThenElseNode>(std::move(cond), std::move(then_case), std::move(else_case));
}

Stmt AssertStmt(PrimExpr cond, std::string message, Stmt body) {
  return MakeStmt<AssertStmtNode>(std::move(cond), std::move(message), std::move(body));
}

Stmt Evaluate(PrimExpr value) { return MakeStmt<EvaluateNode>(std::move(value)); }
Stmt Prefetch(Buffer buffer, std::vector<PrimExpr> indices) {
  return Evaluate(
      Call(DataType::Int(32), kPrefetchOp, {Load(std::move(buffer), std::move(indices))}));
}

Stmt MatrixFill(TileRef acc, PrimExpr value) {
  return MakeStmt<MatrixTileNode>(MatrixOp::kFill, std::move(acc), std::vector<TileRef>{},
                                  std::move(value));
}

Stmt MatrixLoad(TileRef frag, TileRef src) {
  return MakeStmt<MatrixTileNode>(MatrixOp::kLoad, std::move(frag),
                                  std::vector<TileRef>{std::move(src)}, PrimExpr());
}

Stmt MatrixMma(TileRef acc, TileRef a, TileRef b) {
  return MakeStmt<MatrixTileNode>(MatrixOp::kMma, std::move(acc),
                                  std::vector<TileRef>{std::move(a), std::move(b)}, PrimExpr());
}

Stmt MatrixStore(TileRef dst, TileRef acc) {
  return MakeStmt<MatrixTileNode>(MatrixOp::kStore, std::move(acc),
                                  std::vector<TileRef>{std::move(dst)}, PrimExpr());
}

Stmt WarpgroupMma(TileRef acc, TileRef a, TileRef b, PrimExpr accumulate) {
  return MakeStmt<MatrixTileNode>(MatrixOp::kWarpgroupMma, std::move(acc),
                                  std::vector<TileRef>{std::move(a), std::move(b)},
                                  std::move(accumulate));
}

Stmt WarpgroupStore(TileRef dst, TileRef acc, int64_t first_col) {
  return MakeStmt<MatrixTileNode>(MatrixOp::kWarpgroupStore, std::move(acc),
                                  std::vector<TileRef>{std::move(dst)}, PrimExpr(first_col));
}

namespace {

// `t` (a shared tile at its first element) moved by (i, j) in its last two dims.
std::vector<PrimExpr> SharedElement(const TileRef& t, const PrimExpr& i, const PrimExpr& j) {
  std::vector<PrimExpr> at = t.at;
  at[at.size() - 2] = at[at.size() - 2] + i;
  at.back() = at.back() + j;
  return at;
}

// The warpgroup statements' loops (kernel_ir.h, "Warpgroup MMA").
Stmt ExpandWarpgroup(const MatrixTileNode& n) {
  const Buffer& acc = n.frag.buffer;
  const PrimExpr wg = n.frag.at[0];
  Var i("tile_i"), j("tile_j");
  Stmt element;
  PrimExpr cols;
  if (n.op == MatrixOp::kWarpgroupMma) {
    const TileRef &a = n.args[0], &b = n.args[1];
    const PrimExpr k_ext = a.buffer->shape.back();
    cols = acc->shape.back();
    Var k("tile_k");
    const std::vector<PrimExpr> c = {wg, i, j};
    PrimExpr product = Cast(acc->dtype, Load(a.buffer, SharedElement(a, i, k))) *
                       Cast(acc->dtype, Load(b.buffer, SharedElement(b, k, j)));
    Stmt clear = IfThenElse(Not(n.value), Store(acc, c, MakeConst(acc->dtype, 0)));
    element = Seq({clear, For(k, PrimExpr(0), k_ext, ForKind::kSerial,
                              Store(acc, c, Load(acc, c) + product))});
  } else {
    const TileRef& dst = n.args[0];
    cols = dst.buffer->shape.back();
    element = Store(dst.buffer, SharedElement(dst, i, j), Load(acc, {wg, i, n.value + j}));
  }
  return For(i, PrimExpr(0), PrimExpr(int64_t{kWarpgroupRows}), ForKind::kSerial,
             For(j, PrimExpr(0), cols, ForKind::kSerial, element));
}

}  // namespace

Stmt ExpandMatrixTile(const MatrixTileNode& n) {
  if (n.op == MatrixOp::kWarpgroupMma || n.op == MatrixOp::kWarpgroupStore) {
    return ExpandWarpgroup(n);
  }
  const PrimExpr side(int64_t{kMatrixTileSide});
  Var i("tile_i"), j("tile_j");
  Stmt element;
  switch (n.op) {
    case MatrixOp::kFill:
      element = Store(n.frag.buffer, TileElement(n.frag, i, j), n.value);
      break;
    case MatrixOp::kLoad: {
      const TileRef& src = n.args[0];
      element =
          Store(n.frag.buffer, TileElement(n.frag, i, j), Load(src.buffer, TileElement(src, i, j)));
      break;
    }
    case MatrixOp::kMma: {
      const DataType acc_t = n.frag.buffer->dtype;
      Var k("tile_k");
      const std::vector<PrimExpr> c = TileElement(n.frag, i, j);
      PrimExpr product = Cast(acc_t, Load(n.args[0].buffer, TileElement(n.args[0], i, k))) *
                         Cast(acc_t, Load(n.args[1].buffer, TileElement(n.args[1], k, j)));
      element = For(k, PrimExpr(0), side, ForKind::kSerial,
                    Store(n.frag.buffer, c, Load(n.frag.buffer, c) + product));
      break;
    }
    case MatrixOp::kStore: {
      const TileRef& dst = n.args[0];
      element =
          Store(dst.buffer, TileElement(dst, i, j), Load(n.frag.buffer, TileElement(n.frag, i, j)));
      break;
    }
    case MatrixOp::kWarpgroupMma:
    case MatrixOp::kWarpgroupStore:
      break;  // ExpandWarpgroup
  }
  return For(i, PrimExpr(0), side, ForKind::kSerial,
             For(j, PrimExpr(0), side, ForKind::kSerial, element));
}

Stmt AsyncCopy(TileRef dst, TileRef src, int lanes, PrimExpr valid) {
  return MakeStmt<AsyncCopyNode>(AsyncOp::kCopy, std::move(dst), std::move(src), lanes,
                                 std::move(valid), 0);
}

Stmt AsyncFence(int pending) {
  return MakeStmt<AsyncCopyNode>(AsyncOp::kFence, TileRef{}, TileRef{}, 0, PrimExpr(), pending);
}

Stmt AsyncProxyFence() {
  return MakeStmt<AsyncCopyNode>(AsyncOp::kProxyFence, TileRef{}, TileRef{}, 0, PrimExpr(), 0);
}

Stmt ExpandAsyncCopy(const AsyncCopyNode& n) {
  if (n.op != AsyncOp::kCopy) return Stmt();
  Var e("copy_e");
  std::vector<PrimExpr> dst = n.dst.at, src = n.src.at;
  dst.back() = dst.back() + e;
  src.back() = src.back() + e;
  PrimExpr v = Load(n.src.buffer, src);
  if (n.valid.defined()) v = Select(n.valid, v, MakeConst(n.dst.buffer->dtype, 0));
  return For(e, PrimExpr(0), PrimExpr(int64_t{n.lanes}), ForKind::kSerial,
             Store(n.dst.buffer, dst, v));
}

KernelFunc MakeKernelFunc(std::string name, std::vector<KernelParam> params, Stmt body,
                          int num_outputs) {
  return KernelFunc(
      MakeRef<KernelFuncNode>(std::move(name), std::move(params), std::move(body), num_outputs));
}

std::string ToString(const Stmt& stmt, int indent) {
  std::string out;
  PrintStmt(stmt, indent, &out);
  return out;
}

std::string ToString(const KernelFunc& func) {
  std::string out = absl::StrCat("@T.prim_func\ndef ", func->name, "(");
  for (size_t i = 0; i < func->params.size(); ++i) {
    const KernelParam& p = func->params[i];
    if (i) out += ", ";
    if (p.is_tensor()) {
      absl::StrAppend(&out, p.buffer->name, ": ", BufferType(p.buffer));
    } else {
      absl::StrAppend(&out, p.var.name(), ": T.", p.var.dtype().ToString());
    }
  }
  out += "):\n";
  PrintStmt(func->body, 1, &out);
  return out;
}

namespace {

// Calls f for each Allocate in `s`, in statement order.
void VisitAllocations(const Stmt& s, const std::function<void(const Buffer&)>& f) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::kAllocate:
      f(s.as<AllocateNode>()->buffer);
      return VisitAllocations(s.as<AllocateNode>()->body, f);
    case StmtKind::kFor:
      return VisitAllocations(s.as<ForNode>()->body, f);
    case StmtKind::kLet:
      return VisitAllocations(s.as<LetStmtNode>()->body, f);
    case StmtKind::kAssert:
      return VisitAllocations(s.as<AssertStmtNode>()->body, f);
    case StmtKind::kIf:
      VisitAllocations(s.as<IfThenElseNode>()->then_case, f);
      return VisitAllocations(s.as<IfThenElseNode>()->else_case, f);
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) VisitAllocations(c, f);
      return;
    default:
      return;
  }
}

}  // namespace

int64_t DynamicSharedBytes(const Stmt& body) {
  bool swizzled = false;
  int64_t bytes = kSharedAlignment;
  VisitAllocations(body, [&](const Buffer& b) {
    if (b->scope != BufferNode::Scope::kShared) return;
    swizzled |= b->layout == BufferNode::Layout::kSwizzle128;
    int64_t n = b->dtype.bytes();
    for (const PrimExpr& d : b->shape) n *= d.as_int() != nullptr ? *d.as_int() : 0;
    bytes += (n + kSharedAlignment - 1) / kSharedAlignment * kSharedAlignment;
  });
  return swizzled ? bytes : 0;
}

void VisitStoredBuffers(const Stmt& s, const std::function<void(const Buffer&)>& f) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::kStore:
      return f(s.as<StoreNode>()->buffer);
    case StmtKind::kMatrixTile: {
      const MatrixTileNode* m = s.as<MatrixTileNode>();
      if (m->op == MatrixOp::kStore || m->op == MatrixOp::kWarpgroupStore) f(m->args[0].buffer);
      return;
    }
    case StmtKind::kAsyncCopy: {
      const AsyncCopyNode* c = s.as<AsyncCopyNode>();
      if (c->op == AsyncOp::kCopy) f(c->dst.buffer);
      return;
    }
    case StmtKind::kFor:
      return VisitStoredBuffers(s.as<ForNode>()->body, f);
    case StmtKind::kLet:
      return VisitStoredBuffers(s.as<LetStmtNode>()->body, f);
    case StmtKind::kAllocate:
      return VisitStoredBuffers(s.as<AllocateNode>()->body, f);
    case StmtKind::kAssert:
      return VisitStoredBuffers(s.as<AssertStmtNode>()->body, f);
    case StmtKind::kIf:
      VisitStoredBuffers(s.as<IfThenElseNode>()->then_case, f);
      return VisitStoredBuffers(s.as<IfThenElseNode>()->else_case, f);
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) VisitStoredBuffers(c, f);
      return;
    case StmtKind::kEvaluate:
      return;
  }
}

}  // namespace tether::compiler
