// Device lowering (device_split.h): leading lets, the split at the top-level
// sequence, loop fusion inside a parallel launch, the grid-stride loop, and
// the manifest description of the result. What a launch may contain is
// checked by device_verify.h.
#include "compiler/backend/cuda/device_split.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/backend/cuda/device_verify.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

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
// Whether every store in `s` indexes with `var`: then the iterations of a
// loop over `var` write different elements and may run on different
// threads. A store that does not (a reduction's accumulator, C[i, j] in a
// loop over k), or a statement this cannot see into, keeps the loop
// serial.
bool EveryStoreIndexes(const Stmt& s, const Var& var) {
  const absl::flat_hash_set<const PrimVarNode*> v{var.get()};
  if (!s.defined()) return true;
  switch (s.kind()) {
    case StmtKind::kStore: {
      for (const PrimExpr& i : s.as<StoreNode>()->indices) {
        if (UsesAny(i, v)) return true;
      }
      return false;
    }
    case StmtKind::kFor:
      return EveryStoreIndexes(s.as<ForNode>()->body, var);
    case StmtKind::kLet:
      return EveryStoreIndexes(s.as<LetStmtNode>()->body, var);
    case StmtKind::kIf:
      return EveryStoreIndexes(s.as<IfThenElseNode>()->then_case, var) &&
             EveryStoreIndexes(s.as<IfThenElseNode>()->else_case, var);
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) {
        if (!EveryStoreIndexes(c, var)) return false;
      }
      return true;
    case StmtKind::kEvaluate:
      return true;
    default:
      return false;
  }
}

Stmt ParallelBody(const ForNode* loop, const Var& tid, const Var& nthreads, PrimExpr* count) {
  std::vector<const ForNode*> nest{loop};
  absl::flat_hash_set<const PrimVarNode*> bound{loop->var.get()};
  Stmt inner = loop->body;
  while (const ForNode* f = inner.as<ForNode>()) {
    if (UsesAny(f->min, bound) || UsesAny(f->extent, bound)) break;
    // A nested loop joins the launch's index space only if its iterations
    // are independent; a serial reduction loop stays in each thread's body.
    if (f->for_kind != ForKind::kParallel && !EveryStoreIndexes(f->body, f->var)) break;
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
  for (const LetStmtNode* l : lets)
    TETHER_RETURN_IF_ERROR(CheckDeviceLoads(kernel, l->value, DeviceWhere()));
  // Scratch: 1-D, its size an expression of the arguments.
  const RefMap refs = ArgRefs(kernel->params);
  for (const Buffer& b : out.scratch) {
    std::vector<std::string> size;
    if (b->shape.size() != 1 || !Postfix(Simplify(AsInt64(b->shape[0])), refs, &size)) {
      return RejectForDevice(kernel,
                             absl::StrCat("the workspace allocation ", b->name,
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
      DeviceWhere w;
      w.in_block = true;
      w.block = BlockThreads(f->body);
      if (w.block < 1 || w.block > kDeviceBlockThreads) {
        return RejectForDevice(
            kernel, absl::StrCat("the kBlock loop over ", f->var.name(), " with ", w.block,
                                 " threads (1 to ", kDeviceBlockThreads, ")"));
      }
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(kernel, f->min, DeviceWhere()));
      TETHER_RETURN_IF_ERROR(CheckDeviceLoads(kernel, f->extent, DeviceWhere()));
      TETHER_RETURN_IF_ERROR(CheckDeviceStmt(kernel, f->body, w));
      TETHER_RETURN_IF_ERROR(CheckSharedReads(kernel, f->body));
      flush();
      groups.emplace_back(p, Kind::kBlock);
      continue;
    }
    TETHER_RETURN_IF_ERROR(CheckDeviceStmt(kernel, p, DeviceWhere()));
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
    li.dynamic_shared_bytes = DynamicSharedBytes(l.kernel->body);
    if (!Postfix(l.count, refs, &li.count)) li.count.clear();
    info.launches.push_back(std::move(li));
  }
  return info;
}

}  // namespace tether::compiler
