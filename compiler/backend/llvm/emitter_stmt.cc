// The Emitter (emitter.h): statements, loops (unrolled, vectorized,
// parallel through the runtime's service), buffers, block schedules and
// tensor cores.
#include <algorithm>
#include <cctype>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/backend/cuda/wgmma.h"
#include "compiler/backend/cuda/wmma.h"
#include "compiler/backend/llvm/emitter.h"
#include "compiler/backend/llvm/math_emitter.h"
#include "compiler/backend/llvm/math_f32.h"
#include "compiler/backend/llvm/vectorize.h"
#include "compiler/backend/llvm/work_estimate.h"
#include "compiler/tir/arith.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"
#include "runtime/core/error.h"
#include "runtime/kernel/kernel_library.h"

namespace tether::compiler::codegen::emitter_internal {

absl::Status Emitter::EmitStmt(const Stmt& s) {
  if (!s.defined()) return absl::OkStatus();
  switch (s.kind()) {
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) TETHER_RETURN_IF_ERROR(EmitStmt(c));
      return absl::OkStatus();
    case StmtKind::kStore: {
      const StoreNode* n = s.as<StoreNode>();
      if (vec_.lanes > 0) return EmitVectorStore(n);
      TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, ElementAddress(n->buffer, n->indices));
      TETHER_ASSIGN_OR_RETURN(llvm::Value * raw, EmitStorageCopy(n->value, n->buffer->dtype));
      if (raw != nullptr) {
        b_.CreateStore(raw, addr);
        return absl::OkStatus();
      }
      TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExprAs(n->value, n->buffer->dtype));
      b_.CreateStore(ToStorage(v, n->buffer->dtype), addr);
      return absl::OkStatus();
    }
    case StmtKind::kLet: {
      const LetStmtNode* n = s.as<LetStmtNode>();
      TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExprAs(n->value, n->var.dtype()));
      vars_[n->var.get()] = v;
      bool varying = vec_.lanes > 0 && IsVarying(n->value, vec_.varying);
      if (varying) vec_.varying.insert(n->var.get());
      absl::Status st = EmitStmt(n->body);
      if (varying) vec_.varying.erase(n->var.get());
      vars_.erase(n->var.get());
      return st;
    }
    case StmtKind::kEvaluate: {
      const PrimExpr& value = s.as<EvaluateNode>()->value;
      if (const PrimCallNode* c = value.as<PrimCallNode>(); c != nullptr && c->op == kPrefetchOp) {
        return EmitPrefetch(*c);
      }
      return EmitExpr(value).status();
    }
    case StmtKind::kMatrixTile:
      // On a CPU, the loops that define it.
      if (!device_) return EmitStmt(ExpandMatrixTile(*s.as<MatrixTileNode>()));
      return EmitMatrixTile(*s.as<MatrixTileNode>());
    case StmtKind::kAsyncCopy:
      if (!device_) return EmitStmt(ExpandAsyncCopy(*s.as<AsyncCopyNode>()));
      return EmitAsyncCopy(*s.as<AsyncCopyNode>());
    case StmtKind::kIf: {
      const IfThenElseNode* n = s.as<IfThenElseNode>();
      TETHER_ASSIGN_OR_RETURN(llvm::Value * c, EmitExprAs(n->cond, DataType::Bool()));
      auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fs_.fn);
      auto* else_bb = llvm::BasicBlock::Create(ctx_, "else", fs_.fn);
      auto* end_bb = llvm::BasicBlock::Create(ctx_, "endif", fs_.fn);
      b_.CreateCondBr(c, then_bb, else_bb);
      b_.SetInsertPoint(then_bb);
      TETHER_RETURN_IF_ERROR(EmitStmt(n->then_case));
      b_.CreateBr(end_bb);
      b_.SetInsertPoint(else_bb);
      TETHER_RETURN_IF_ERROR(EmitStmt(n->else_case));
      b_.CreateBr(end_bb);
      b_.SetInsertPoint(end_bb);
      return absl::OkStatus();
    }
    case StmtKind::kAssert: {
      const AssertStmtNode* n = s.as<AssertStmtNode>();
      if (device_) return Unsupported("assertion on a gpu: ", n->message);
      TETHER_ASSIGN_OR_RETURN(llvm::Value * c, EmitExprAs(n->cond, DataType::Bool()));
      EmitCheck(c, {n->message}, TETHER_KERNEL_INVALID_ARGUMENT);
      return EmitStmt(n->body);
    }
    case StmtKind::kAllocate:
      return EmitAllocate(s.as<AllocateNode>());
    case StmtKind::kFor: {
      const ForNode* n = s.as<ForNode>();
      if (n->for_kind == ForKind::kParallel && !fs_.in_parallel) return EmitParallelFor(n);
      // On a CPU a block schedule's loops are serial (kernel_ir.h).
      if (device_ && n->for_kind == ForKind::kThread) return EmitThreadLoop(n, 0);
      if (device_ && n->for_kind == ForKind::kWarp) return EmitThreadLoop(n, 5);
      if (device_ && n->for_kind == ForKind::kWarpgroup) return EmitThreadLoop(n, 7);
      if (device_ && n->for_kind == ForKind::kBlock) {
        return Unsupported("a kBlock loop not split into a launch: ", n->var.name());
      }
      return EmitLoop(n);
    }
  }
  return Unsupported("statement");
}

absl::Status Emitter::EmitThreadLoop(const ForNode* n, int shift) {
  llvm::Value* t =
      b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}), i64_);
  if (shift != 0) t = b_.CreateLShr(t, shift);
  TETHER_ASSIGN_OR_RETURN(llvm::Value * min, EmitIndex(n->min));
  TETHER_ASSIGN_OR_RETURN(vars_[n->var.get()],
                          CastValue(b_.CreateAdd(min, t), DataType::Int(64), n->var.dtype()));
  absl::Status st = EmitStmt(n->body);
  vars_.erase(n->var.get());
  TETHER_RETURN_IF_ERROR(st);
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
  return absl::OkStatus();
}

absl::StatusOr<llvm::Value*> Emitter::FragmentSlot(const TileRef& t) {
  auto it = fragments_.find(t.buffer.get());
  if (it == fragments_.end()) {
    return Unsupported("fragment ", t.buffer->name, " not allocated in this kernel");
  }
  llvm::Value* flat = b_.getInt64(0);
  for (size_t d = 1; d < t.at.size(); ++d) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * idx, EmitIndex(t.at[d]));
    flat = b_.CreateAdd(b_.CreateMul(flat, b_.getInt64(*t.buffer->shape[d].as_int())), idx);
  }
  const FragmentRegisters r = Registers(ctx_, t.buffer->scope, t.buffer->dtype);
  return b_.CreateInBoundsGEP(r.type, it->second, b_.CreateMul(flat, b_.getInt64(r.count)));
}

absl::Status Emitter::EmitMatrixTile(const MatrixTileNode& n) {
  if (n.op == MatrixOp::kWarpgroupMma) return EmitWarpgroupMma(n);
  if (n.op == MatrixOp::kWarpgroupStore) return EmitWarpgroupStore(n);
  TETHER_ASSIGN_OR_RETURN(llvm::Value * frag, FragmentSlot(n.frag));
  switch (n.op) {
    case MatrixOp::kFill: {
      TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExprAs(n.value, DataType::Float(32)));
      EmitWmmaFill(b_, frag, v);
      return absl::OkStatus();
    }
    case MatrixOp::kMma: {
      TETHER_ASSIGN_OR_RETURN(llvm::Value * a, FragmentSlot(n.args[0]));
      TETHER_ASSIGN_OR_RETURN(llvm::Value * b, FragmentSlot(n.args[1]));
      EmitWmmaMma(b_, n.args[0].buffer->dtype, frag, a, b);
      return absl::OkStatus();
    }
    case MatrixOp::kLoad:
    case MatrixOp::kStore: {
      const TileRef& mem = n.args[0];
      TETHER_ASSIGN_OR_RETURN(llvm::Value * tile, ElementAddress(mem.buffer, mem.at));
      llvm::Value* stride = b_.getInt32(static_cast<int32_t>(*mem.buffer->shape.back().as_int()));
      if (n.op == MatrixOp::kLoad) {
        EmitWmmaLoad(b_, n.frag.buffer->scope, n.frag.buffer->dtype, tile, stride, frag);
      } else {
        EmitWmmaStore(b_, tile, stride, frag);
      }
      return absl::OkStatus();
    }
    case MatrixOp::kWarpgroupMma:
    case MatrixOp::kWarpgroupStore:
      break;  // above
  }
  return Unsupported("tensor-core statement");
}

absl::Status Emitter::EmitWarpgroupMma(const MatrixTileNode& n) {
  if (sm_ < 90) return Unsupported("warpgroup MMA on sm_", sm_, " (wgmma needs sm_90a)");
  auto it = fragments_.find(n.frag.buffer.get());
  if (it == fragments_.end()) {
    return Unsupported("accumulator ", n.frag.buffer->name, " not allocated in this kernel");
  }
  const TileRef &a = n.args[0], &b = n.args[1];
  TETHER_ASSIGN_OR_RETURN(llvm::Value * a_at, ElementAddress(a.buffer, a.at));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * b_at, ElementAddress(b.buffer, b.at));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * accumulate, EmitExprAs(n.value, DataType::Bool()));
  const WarpgroupShape shape{*n.frag.buffer->shape[2].as_int(), *a.buffer->shape.back().as_int(),
                             *b.buffer->shape[b.buffer->shape.size() - 2].as_int(),
                             n.args[0].buffer->dtype};
  EmitWgmma(b_, shape, it->second, a_at, b_at, accumulate);
  if (module_->getModuleFlag(kSm90aFlag) == nullptr) {
    module_->addModuleFlag(llvm::Module::Max, kSm90aFlag, 1);
  }
  return absl::OkStatus();
}

absl::Status Emitter::EmitWarpgroupStore(const MatrixTileNode& n) {
  auto it = fragments_.find(n.frag.buffer.get());
  if (it == fragments_.end()) {
    return Unsupported("accumulator ", n.frag.buffer->name, " not allocated in this kernel");
  }
  const TileRef& dst = n.args[0];
  TETHER_ASSIGN_OR_RETURN(llvm::Value * at, ElementAddress(dst.buffer, dst.at));
  llvm::Value* tid =
      b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}), i32_);
  EmitWgmmaStore(b_, it->second, tid, *n.value.as_int(), *dst.buffer->shape.back().as_int(), at);
  return absl::OkStatus();
}

absl::Status Emitter::EmitAsyncCopy(const AsyncCopyNode& n) {
  if (sm_ < 80) return Unsupported("asynchronous copy on sm_", sm_, " (cp.async needs sm_80)");
  if (n.op == AsyncOp::kProxyFence) {
    if (sm_ < 90) return Unsupported("async-proxy fence on sm_", sm_, " (needs sm_90)");
    EmitAsyncProxyFence(b_);
    return absl::OkStatus();
  }
  if (n.op == AsyncOp::kFence) {
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {b_.getInt32(n.pending)});
    return absl::OkStatus();
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Value * dst, ElementAddress(n.dst.buffer, n.dst.at));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * src, ElementAddress(n.src.buffer, n.src.at));
  dst = b_.CreateAddrSpaceCast(dst, b_.getPtrTy(3));
  src = b_.CreateAddrSpaceCast(src, b_.getPtrTy(1));
  if (!n.valid.defined()) {
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16, {}, {dst, src});
    return absl::OkStatus();
  }
  // Where not valid, 0 bytes are read and the 16 written are zeros.
  TETHER_ASSIGN_OR_RETURN(llvm::Value * ok, EmitExprAs(n.valid, DataType::Bool()));
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s, {},
                     {dst, src, b_.CreateSelect(ok, b_.getInt32(16), b_.getInt32(0))});
  return absl::OkStatus();
}

absl::Status Emitter::EmitAllocate(const AllocateNode* n) {
  const Buffer& buf = n->buffer;
  if (device_ && IsFragmentScope(buf->scope)) {
    // The thread's registers of each fragment: dim 0 (the warp) and the
    // 16 x 16 tile dropped; of a warpgroup's accumulator, its 64 x n / 128.
    int64_t count = 1;
    for (size_t i = 1; i + 2 < buf->shape.size(); ++i) count *= *buf->shape[i].as_int();
    FragmentRegisters r = Registers(ctx_, buf->scope, buf->dtype);
    if (buf->scope == BufferNode::Scope::kWarpgroupAccumulator) {
      r = {llvm::Type::getFloatTy(ctx_), static_cast<int>(WgmmaRegisters(*buf->shape[2].as_int()))};
    }
    fragments_[buf.get()] =
        EntryAlloca(llvm::ArrayType::get(r.type, count * r.count), buf->name.c_str());
    absl::Status status = EmitStmt(n->body);
    fragments_.erase(buf.get());
    return status;
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Type * st, StorageType(buf->dtype));
  if (buf->scope != BufferNode::Scope::kGlobal) {
    // On a GPU a kPerThread buffer is one thread's slice: dim 0 dropped.
    const bool slice = device_ && buf->scope == BufferNode::Scope::kPerThread;
    const bool shared = device_ && buf->scope == BufferNode::Scope::kShared;
    int64_t count = 1;
    for (size_t i = slice ? 1 : 0; i < buf->shape.size(); ++i) {
      const PrimExpr& d = buf->shape[i];
      if (d.as_int() == nullptr || *d.as_int() < 0) {
        return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": local buffer ",
                                                       buf->name, " needs a constant shape, got ",
                                                       ToString(d)));
      }
      count *= *d.as_int();
    }
    if (!shared && count * buf->dtype.bytes() > (int64_t{1} << 20)) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": local buffer ",
                                                     buf->name, " of ", count,
                                                     " elements is too large for the stack"));
    }
    // Shared buffers are static and all live at once: their sum counts, each
    // rounded up to its 128-byte alignment. With dynamic shared memory
    // (DynamicSharedBytes) each starts at the next 1024-byte boundary.
    if (shared && fs_.dynamic_shared != nullptr) {
      const int64_t bytes = count * buf->dtype.bytes();
      const int64_t offset = fs_.dynamic_offset;
      fs_.dynamic_offset += (bytes + kSharedAlignment - 1) / kSharedAlignment * kSharedAlignment;
      if (fs_.dynamic_offset + kSharedAlignment > kMaxDynamicSharedBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel ", fs_.kernel, ": shared buffers of ", fs_.dynamic_offset + kSharedAlignment,
            " bytes (with ", buf->name, ") exceed the ", kMaxDynamicSharedBytes,
            " of dynamic shared memory a block may have"));
      }
      buffers_[buf.get()] =
          b_.CreateInBoundsGEP(i8_, fs_.dynamic_shared, b_.getInt64(offset), buf->name);
      absl::Status status = EmitStmt(n->body);
      buffers_.erase(buf.get());
      return status;
    }
    if (shared &&
        (fs_.shared_bytes += (count * buf->dtype.bytes() + 127) / 128 * 128) > kMaxSharedBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel ", fs_.kernel, ": shared buffers of ", fs_.shared_bytes, " bytes (with ",
          buf->name, ") exceed the ", kMaxSharedBytes, " a block may have"));
    }
    llvm::ArrayType* type = llvm::ArrayType::get(st, count);
    if (shared) {
      auto* gv = new llvm::GlobalVariable(
          *module_, type, /*isConstant=*/false, llvm::GlobalValue::InternalLinkage,
          llvm::UndefValue::get(type), buf->name, nullptr, llvm::GlobalValue::NotThreadLocal,
          /*AddressSpace=*/3);
      gv->setAlignment(llvm::Align(128));  // tensor-core tiles need 32
      buffers_[buf.get()] = gv;            // addrspace(3): ld/st.shared, alignment known
    } else {
      buffers_[buf.get()] = EntryAlloca(type, buf->name.c_str());
    }
    if (slice) slices_.insert(buf.get());
    absl::Status status = EmitStmt(n->body);
    buffers_.erase(buf.get());
    slices_.erase(buf.get());
    return status;
  }
  if (device_) return Unsupported("workspace allocation on a gpu: ", buf->name);
  llvm::Value* count = b_.getInt64(1);
  for (const PrimExpr& d : buf->shape) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitIndex(d));
    count = b_.CreateMul(count, v);
  }
  llvm::Value* bytes = b_.CreateMul(count, b_.getInt64(buf->dtype.bytes()));
  llvm::Value* p =
      b_.CreateCall(llvm::FunctionType::get(ptr_, {ptr_, i64_, i64_}, false),
                    Service(kSvcWorkspaceAlloc), {Service(kSvcCtx), bytes, b_.getInt64(64)});
  EmitCheck(b_.CreateIsNotNull(p),
            {absl::StrCat("kernel ", fs_.kernel, ": cannot allocate workspace ", buf->name, " of "),
             bytes, " bytes"},
            TETHER_KERNEL_OUT_OF_MEMORY);
  fs_.workspaces.push_back(p);
  buffers_[buf.get()] = p;
  absl::Status status = EmitStmt(n->body);
  buffers_.erase(buf.get());
  fs_.workspaces.pop_back();
  if (status.ok()) FreeWorkspace(p);
  return status;
}

llvm::MDNode* Emitter::LoopMetadata(ForKind kind) {
  llvm::SmallVector<llvm::Metadata*, 3> ops;
  ops.push_back(nullptr);  // self reference
  if (kind == ForKind::kVectorized) {
    ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                                           llvm::ConstantAsMetadata::get(b_.getTrue())}));
  } else if (kind == ForKind::kUnrolled) {
    ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.full")}));
  } else {
    return nullptr;
  }
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
  md->replaceOperandWith(0, md);
  return md;
}

absl::Status Emitter::EmitRange(const Var& var, llvm::Value* begin, llvm::Value* end, ForKind kind,
                                const Stmt& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "for.header", fs_.fn);
  auto* body_bb = llvm::BasicBlock::Create(ctx_, "for.body", fs_.fn);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.end", fs_.fn);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(i64_, 2, var.name());
  i->addIncoming(begin, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body_bb, exit);
  b_.SetInsertPoint(body_bb);
  TETHER_ASSIGN_OR_RETURN(vars_[var.get()], CastValue(i, DataType::Int(64), var.dtype()));
  TETHER_RETURN_IF_ERROR(EmitStmt(body));
  vars_.erase(var.get());
  llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1), "", /*HasNUW=*/false, /*HasNSW=*/true);
  llvm::BranchInst* latch = b_.CreateBr(header);
  if (llvm::MDNode* md = LoopMetadata(kind)) latch->setMetadata(llvm::LLVMContext::MD_loop, md);
  i->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit);
  return absl::OkStatus();
}

// Prefetch (kernel_ir.h): llvm.prefetch of the element's address, a read
// kept in all cache levels; nothing on a GPU or inside a vector loop.
absl::Status Emitter::EmitPrefetch(const PrimCallNode& call) {
  const LoadNode* l = call.args.size() == 1 ? call.args[0].as<LoadNode>() : nullptr;
  if (l == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", fs_.kernel, ": T.", kPrefetchOp, " takes one buffer element"));
  }
  if (device_ || vec_.lanes > 0) return absl::OkStatus();
  TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, ElementAddress(l->buffer, l->indices));
  llvm::Function* prefetch =
      llvm::Intrinsic::getDeclaration(module_.get(), llvm::Intrinsic::prefetch, {addr->getType()});
  b_.CreateCall(prefetch, {addr, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
  return absl::OkStatus();
}

absl::Status Emitter::EmitLoop(const ForNode* n) {
  if (n->for_kind == ForKind::kVectorized && vec_.lanes == 0 && !device_) {
    if (std::optional<TransposeTile> t = AsTransposeTile(*n)) return EmitTransposeTile(n, *t);
    if (std::optional<int64_t> lanes = VectorizableLanes(*n)) return EmitVectorLoop(n, *lanes);
  }
  if (n->for_kind == ForKind::kUnrolled) {
    std::optional<int64_t> extent = AsConstInt(n->extent);
    if (extent.has_value() && *extent >= 0 && *extent <= kMaxUnroll) {
      return EmitUnrolled(n, *extent);
    }
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Value * min, EmitIndex(n->min));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * extent, EmitIndex(n->extent));
  ForKind kind = n->for_kind == ForKind::kParallel ? ForKind::kSerial : n->for_kind;
  return EmitRange(n->var, min, b_.CreateAdd(min, extent), kind, n->body);
}

absl::Status Emitter::EmitUnrolled(const ForNode* n, int64_t extent) {
  TETHER_ASSIGN_OR_RETURN(llvm::Value * min, EmitIndex(n->min));
  for (int64_t i = 0; i < extent; ++i) {
    llvm::Value* at = b_.CreateAdd(min, b_.getInt64(i), "", false, true);
    TETHER_ASSIGN_OR_RETURN(vars_[n->var.get()], CastValue(at, DataType::Int(64), n->var.dtype()));
    absl::Status st = EmitStmt(n->body);
    vars_.erase(n->var.get());
    TETHER_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

absl::Status Emitter::EmitVectorLoop(const ForNode* n, int64_t lanes) {
  TETHER_ASSIGN_OR_RETURN(llvm::Value * min, EmitIndex(n->min));
  std::vector<llvm::Constant*> steps;
  for (int64_t i = 0; i < lanes; ++i) steps.push_back(b_.getInt64(i));
  llvm::Value* ramp = b_.CreateAdd(b_.CreateVectorSplat(lanes, min),
                                   llvm::ConstantVector::get(steps), "", false, true);
  TETHER_ASSIGN_OR_RETURN(llvm::Value * lane0, CastValue(min, DataType::Int(64), n->var.dtype()));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * all, CastValue(ramp, DataType::Int(64), n->var.dtype()));
  vec_ = VecState{lanes, n->var, lane0, {n->var.get()}};
  vars_[n->var.get()] = all;
  absl::Status st = EmitStmt(n->body);
  vars_.erase(n->var.get());
  vec_ = VecState();
  return st;
}

absl::Status Emitter::EmitTransposeTile(const ForNode* outer, const TransposeTile& t) {
  const ForNode* inner = t.inner;
  TETHER_ASSIGN_OR_RETURN(llvm::Value * outer_min, EmitIndex(outer->min));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * inner_min, EmitIndex(inner->min));
  // The address of `indices` with the outer var at outer_min + o and the
  // inner one at inner_min + i (an error leaves the vars bound; the
  // kernel's emission fails as a whole).
  auto address = [&](const Buffer& buffer, const std::vector<PrimExpr>& indices, int64_t o,
                     int64_t i) -> absl::StatusOr<llvm::Value*> {
    for (auto [loop, min, k] : {std::tuple{outer, outer_min, o}, {inner, inner_min, i}}) {
      llvm::Value* at = b_.CreateAdd(min, b_.getInt64(k), "", false, true);
      TETHER_ASSIGN_OR_RETURN(vars_[loop->var.get()],
                              CastValue(at, DataType::Int(64), loop->var.dtype()));
    }
    return ElementAddress(buffer, indices);
  };
  // The n addresses of an access, the k-th at step k of the var it is not
  // contiguous in: from the first by a constant stride where there is one.
  auto addresses = [&](const Buffer& buffer, const std::vector<PrimExpr>& indices, bool steps_outer,
                       std::optional<int64_t> stride) -> absl::StatusOr<std::vector<llvm::Value*>> {
    std::vector<llvm::Value*> out;
    TETHER_ASSIGN_OR_RETURN(llvm::Type * st, StorageType(buffer->dtype));
    for (int64_t k = 0; k < t.lanes; ++k) {
      if (k > 0 && stride.has_value()) {
        out.push_back(b_.CreateInBoundsGEP(st, out[0], b_.getInt64(k * *stride)));
        continue;
      }
      TETHER_ASSIGN_OR_RETURN(llvm::Value * a, steps_outer ? address(buffer, indices, k, 0)
                                                           : address(buffer, indices, 0, k));
      out.push_back(a);
    }
    return out;
  };
  // The casts between the load and the store, innermost first.
  std::vector<const CastNode*> casts;
  for (PrimExpr v = t.store->value; v.as<CastNode>() != nullptr; v = v.as<CastNode>()->value) {
    casts.insert(casts.begin(), v.as<CastNode>());
  }
  const Buffer& src = t.load->buffer;
  TETHER_ASSIGN_OR_RETURN(llvm::Type * load_t, StorageType(src->dtype));
  auto* load_vt = llvm::FixedVectorType::get(load_t, t.lanes);
  TETHER_ASSIGN_OR_RETURN(std::vector<llvm::Value*> from,
                          addresses(src, t.load->indices, !t.load_along_outer, t.load_stride));
  std::vector<llvm::Value*> rows;
  for (llvm::Value* addr : from) {
    llvm::Value* v = b_.CreateAlignedLoad(load_vt, addr, llvm::Align(src->dtype.bytes()));
    DataType dt = src->dtype;
    for (const CastNode* c : casts) {
      TETHER_ASSIGN_OR_RETURN(v, CastValue(v, dt, c->dtype()));
      dt = c->dtype();
    }
    rows.push_back(v);
  }
  std::vector<llvm::Value*> cols = TransposeInRegisters(std::move(rows));
  const Buffer& dst = t.store->buffer;
  TETHER_ASSIGN_OR_RETURN(std::vector<llvm::Value*> to,
                          addresses(dst, t.store->indices, t.load_along_outer, t.store_stride));
  for (int64_t k = 0; k < t.lanes; ++k) {
    b_.CreateAlignedStore(cols[k], to[k], llvm::Align(dst->dtype.bytes()));
  }
  vars_.erase(outer->var.get());
  vars_.erase(inner->var.get());
  return absl::OkStatus();
}

// Eklundh's transpose: step s swaps the off-diagonal s x s blocks of every
// 2s x 2s block (bit s of the row and the column index trade places), two
// shuffles of two vectors per pair of rows. Halfway through (from 8 lanes
// on), the rows pass through an arithmetic fence, which emits no
// instruction: without it, LLVM's x86 DAG combiner searches each shuffle's
// whole tree of shuffles (up to 16 rows deep) for a cheaper equivalent and
// finds the same instructions, at about 10 ms a 16 x 16 transpose, a third
// of a depthwise kernel's machine-code time (the same instruction count
// with the fence, on AVX-512, AVX2, SSE, NEON and PTX).
std::vector<llvm::Value*> Emitter::TransposeInRegisters(std::vector<llvm::Value*> r) {
  const int n = static_cast<int>(r.size());
  const int fence_after = n >= 16 ? 2 : n >= 8 ? 1 : n;  // the step that the fence follows
  for (int s = 1; s < n; s *= 2) {
    if (s / 2 == fence_after) {
      for (llvm::Value*& v : r) v = ArithmeticFence(v);
    }
    llvm::SmallVector<int, kMaxTransposeLanes> lo(n), hi(n);
    for (int j = 0; j < n; ++j) {
      lo[j] = (j & s) != 0 ? n + j - s : j;
      hi[j] = (j & s) != 0 ? n + j : j + s;
    }
    for (int i = 0; i < n; ++i) {
      if ((i & s) != 0) continue;
      llvm::Value *a = r[i], *b = r[i + s];
      r[i] = b_.CreateShuffleVector(a, b, lo);
      r[i + s] = b_.CreateShuffleVector(a, b, hi);
    }
  }
  return r;
}

llvm::Value* Emitter::ArithmeticFence(llvm::Value* v) {
  auto* vt = llvm::cast<llvm::FixedVectorType>(v->getType());
  if (vt->getElementType()->isFloatingPointTy()) return b_.CreateArithmeticFence(v, vt);
  // The fence takes floating-point values only: other lanes pass as float
  // lanes of the same bits (none where the bits are not a multiple of 32).
  const uint64_t bits = vt->getPrimitiveSizeInBits().getFixedValue();
  if (bits == 0 || bits % 32 != 0) return v;
  auto* ft = llvm::FixedVectorType::get(b_.getFloatTy(), bits / 32);
  return b_.CreateBitCast(b_.CreateArithmeticFence(b_.CreateBitCast(v, ft), ft), vt);
}

absl::StatusOr<llvm::Value*> Emitter::Lane0Address(const Buffer& buffer,
                                                   const std::vector<PrimExpr>& indices) {
  llvm::Value* all = vars_[vec_.var.get()];
  vars_[vec_.var.get()] = vec_.lane0;
  absl::StatusOr<llvm::Value*> addr = ElementAddress(buffer, indices);
  vars_[vec_.var.get()] = all;
  return addr;
}

absl::Status Emitter::EmitVectorStore(const StoreNode* n) {
  TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, Lane0Address(n->buffer, n->indices));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExprAs(n->value, n->buffer->dtype));
  v = Widen(v);
  b_.CreateAlignedStore(v, addr, llvm::Align(n->buffer->dtype.bytes()));
  return absl::OkStatus();
}

absl::StatusOr<llvm::Value*> Emitter::EmitVectorLoad(const LoadNode* l) {
  TETHER_ASSIGN_OR_RETURN(llvm::Type * st, StorageType(l->buffer->dtype));
  llvm::Align align(l->buffer->dtype.bytes());
  switch (ClassifyAccess(l->buffer, l->indices, vec_.var, vec_.varying)) {
    case LaneAccess::kUniform:
      break;
    case LaneAccess::kContiguous: {
      TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, Lane0Address(l->buffer, l->indices));
      return b_.CreateAlignedLoad(llvm::FixedVectorType::get(st, vec_.lanes), addr, align);
    }
    case LaneAccess::kGather: {
      TETHER_ASSIGN_OR_RETURN(llvm::Value * addrs, ElementAddress(l->buffer, l->indices));
      addrs = Widen(addrs);
      return b_.CreateMaskedGather(llvm::FixedVectorType::get(st, vec_.lanes), addrs, align);
    }
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, ElementAddress(l->buffer, l->indices));
  return b_.CreateLoad(st, addr);
}

llvm::Value* Emitter::Widen(llvm::Value* v) {
  if (vec_.lanes == 0 || v->getType()->isVectorTy()) return v;
  return b_.CreateVectorSplat(vec_.lanes, v);
}

void Emitter::Unify(llvm::Value*& a, llvm::Value*& c) {
  if (a->getType()->isVectorTy() != c->getType()->isVectorTy()) {
    a = Widen(a);
    c = Widen(c);
  }
}

std::vector<Emitter::Capture> Emitter::LiveCaptures() {
  std::vector<Capture> out;
  for (auto& [k, v] : vars_) out.push_back({k, false, v});
  for (auto& [k, v] : buffers_) out.push_back({k, true, v});
  // The maps iterate in address order, which differs from run to run; the
  // closure's layout must not, or the same model builds to different bytes
  // (and a new content hash on the daemon). By kind, then name.
  auto name = [](const Capture& c) -> const std::string& {
    return c.is_buffer ? static_cast<const BufferNode*>(c.key)->name
                       : static_cast<const PrimVarNode*>(c.key)->name;
  };
  std::sort(out.begin(), out.end(), [&](const Capture& a, const Capture& b) {
    if (a.is_buffer != b.is_buffer) return a.is_buffer < b.is_buffer;
    if (name(a) != name(b)) return name(a) < name(b);
    return a.value->getName() < b.value->getName();
  });
  return out;
}

llvm::Function* Emitter::BeginInner(const std::string& name, const std::vector<Capture>& caps,
                                    std::vector<llvm::Type*> leading) {
  std::vector<llvm::Type*> params = std::move(leading);
  size_t first = params.size();
  params.push_back(ptr_);
  for (const Capture& c : caps) params.push_back(c.value->getType());
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(i32_, params, false),
                                    llvm::GlobalValue::InternalLinkage, name, module_.get());
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  // Its one caller takes it in before LLVM simplifies either: inlined later,
  // its body would go through the simplification pipeline twice (once as
  // itself, once in the caller), a quarter of a CNN's optimization time.
  // Its noalias arguments become alias scopes on its loads and stores.
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  vars_.clear();
  buffers_.clear();
  for (size_t i = 0; i < caps.size(); ++i) {
    llvm::Argument* arg = fn->getArg(first + 1 + i);
    if (caps[i].is_buffer) {
      arg->addAttr(llvm::Attribute::NoAlias);
      buffers_[static_cast<const BufferNode*>(caps[i].key)] = arg;
    } else {
      vars_[static_cast<const PrimExprNode*>(caps[i].key)] = arg;
    }
  }
  fs_.fn = fn;
  fs_.services = fn->getArg(first);
  fs_.workspaces.clear();
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
  return fn;
}

absl::Status Emitter::EmitParallelFor(const ForNode* n) {
  TETHER_ASSIGN_OR_RETURN(llvm::Value * min, EmitIndex(n->min));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * extent, EmitIndex(n->extent));
  std::vector<Capture> caps = LiveCaptures();
  // Save the parent's state.
  FnState parent = fs_;
  auto saved_vars = vars_;
  auto saved_buffers = buffers_;
  llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
  std::string base = absl::StrCat(parent.fn->getName().str(), ".par", parallel_count_++);

  // Inner: (begin, end, min, services, captures...) runs the chunk.
  llvm::Function* inner = BeginInner(base + ".inner", caps, {i64_, i64_, i64_});
  fs_.in_parallel = true;
  llvm::Value* cmin = inner->getArg(2);
  absl::Status status = EmitRange(n->var, b_.CreateAdd(cmin, inner->getArg(0)),
                                  b_.CreateAdd(cmin, inner->getArg(1)), ForKind::kSerial, n->body);
  if (status.ok()) b_.CreateRet(b_.getInt32(0));

  // Trampoline: (begin, end, closure) unpacks the closure and calls inner.
  std::vector<llvm::Type*> fields = {i64_, ptr_};
  for (const Capture& c : caps) fields.push_back(c.value->getType());
  llvm::StructType* closure_ty = llvm::StructType::get(ctx_, fields);
  auto* tramp = llvm::Function::Create(llvm::FunctionType::get(i32_, {i64_, i64_, ptr_}, false),
                                       llvm::GlobalValue::InternalLinkage, base, module_.get());
  tramp->addFnAttr(llvm::Attribute::NoUnwind);
  {
    llvm::IRBuilder<> t(llvm::BasicBlock::Create(ctx_, "entry", tramp));
    std::vector<llvm::Value*> args = {tramp->getArg(0), tramp->getArg(1)};
    for (size_t i = 0; i < fields.size(); ++i) {
      args.push_back(t.CreateLoad(fields[i], t.CreateStructGEP(closure_ty, tramp->getArg(2), i)));
    }
    t.CreateRet(t.CreateCall(inner, args));
  }

  // Restore the parent and call parallel_for.
  fs_ = parent;
  vars_ = std::move(saved_vars);
  buffers_ = std::move(saved_buffers);
  b_.restoreIP(ip);
  TETHER_RETURN_IF_ERROR(status);
  llvm::Value* closure = EntryAlloca(closure_ty, "closure");
  b_.CreateStore(min, b_.CreateStructGEP(closure_ty, closure, 0));
  b_.CreateStore(fs_.services, b_.CreateStructGEP(closure_ty, closure, 1));
  for (size_t i = 0; i < caps.size(); ++i) {
    b_.CreateStore(caps[i].value, b_.CreateStructGEP(closure_ty, closure, i + 2));
  }
  // Small loops run inline: the whole range in one call of the trampoline.
  // The body's work per iteration is a compile-time estimate, the trip
  // count a run-time one.
  const int64_t per_iter = std::max<int64_t>(1, WorkEstimate(n->body));
  llvm::Value* small =
      b_.CreateICmpSLT(extent, b_.getInt64(std::max<int64_t>(1, kMinParallelWork / per_iter)));
  llvm::BasicBlock* launch_bb = llvm::BasicBlock::Create(ctx_, "par.launch", fs_.fn);
  llvm::BasicBlock* inline_bb = llvm::BasicBlock::Create(ctx_, "par.inline", fs_.fn);
  llvm::BasicBlock* join_bb = llvm::BasicBlock::Create(ctx_, "par.join", fs_.fn);
  b_.CreateCondBr(small, inline_bb, launch_bb);
  b_.SetInsertPoint(inline_bb);
  llvm::Value* inline_code = b_.CreateCall(tramp, {b_.getInt64(0), extent, closure});
  b_.CreateBr(join_bb);
  b_.SetInsertPoint(launch_bb);
  llvm::Value* launch_code =
      b_.CreateCall(llvm::FunctionType::get(i32_, {ptr_, i64_, ptr_, ptr_}, false),
                    Service(kSvcParallelFor), {Service(kSvcCtx), extent, tramp, closure});
  b_.CreateBr(join_bb);
  b_.SetInsertPoint(join_bb);
  llvm::PHINode* code = b_.CreatePHI(i32_, 2);
  code->addIncoming(inline_code, inline_bb);
  code->addIncoming(launch_code, launch_bb);
  auto* fail = llvm::BasicBlock::Create(ctx_, "par.fail", fs_.fn);
  auto* cont = llvm::BasicBlock::Create(ctx_, "par.ok", fs_.fn);
  b_.CreateCondBr(b_.CreateICmpEQ(code, b_.getInt32(0)), cont, fail);
  b_.SetInsertPoint(fail);
  for (auto it = fs_.workspaces.rbegin(); it != fs_.workspaces.rend(); ++it) FreeWorkspace(*it);
  b_.CreateRet(code);
  b_.SetInsertPoint(cont);
  return absl::OkStatus();
}

}  // namespace tether::compiler::codegen::emitter_internal
