// The Emitter (emitter.h): types, services and error messages, half and
// bfloat16 conversions, casts, expressions and element addresses.
#include <cctype>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<llvm::Type*> Emitter::ComputeType(DataType t) {
  if (t.lanes() != 1) return Unsupported("vector dtype ", t.ToString());
  if (t.is_bool()) return b_.getInt1Ty();
  if (t.is_int() || t.is_uint()) return static_cast<llvm::Type*>(b_.getIntNTy(t.bits()));
  if (t.is_float() && (t.bits() == 16 || t.bits() == 32)) return b_.getFloatTy();
  if (t.is_bfloat16()) return b_.getFloatTy();
  if (t.is_float() && t.bits() == 64) return b_.getDoubleTy();
  return Unsupported("dtype ", t.ToString());
}

absl::StatusOr<llvm::Type*> Emitter::StorageType(DataType t) {
  if (t.is_bool()) return i8_;
  if ((t.is_float() && t.bits() == 16) || t.is_bfloat16()) return i16_;
  return ComputeType(t);
}

llvm::Value* Emitter::Service(ServiceField field) {
  llvm::Value* p = b_.CreateStructGEP(services_ty_, fs_.services, field);
  return b_.CreateLoad(field == kSvcVersion ? static_cast<llvm::Type*>(i32_) : ptr_, p);
}

llvm::FunctionType* Emitter::SetErrorTy() {
  return llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_}, false);
}

void Emitter::EmitFail(const std::vector<MsgPart>& parts, int32_t code) {
  llvm::Value* buf = EntryAlloca(llvm::ArrayType::get(i8_, kMessageBytes), "msg");
  llvm::Value* pos = b_.getInt64(0);
  for (const MsgPart& p : parts) {
    if (p.value_is_string) {
      pos = b_.CreateCall(AppendStrFn(), {buf, pos, p.value});
    } else if (p.value != nullptr) {
      pos = b_.CreateCall(AppendI64Fn(), {buf, pos, b_.CreateSExtOrTrunc(p.value, i64_)});
    } else {
      pos = b_.CreateCall(AppendStrFn(), {buf, pos, b_.CreateGlobalStringPtr(p.text)});
    }
  }
  b_.CreateStore(b_.getInt8(0), b_.CreateGEP(i8_, buf, pos));
  b_.CreateCall(SetErrorTy(), Service(kSvcSetError), {Service(kSvcCtx), buf});
  for (auto it = fs_.workspaces.rbegin(); it != fs_.workspaces.rend(); ++it) FreeWorkspace(*it);
  b_.CreateRet(b_.getInt32(code));
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "dead", fs_.fn));
}

void Emitter::EmitCheck(llvm::Value* ok, const std::vector<MsgPart>& parts, int32_t code) {
  auto* fail = llvm::BasicBlock::Create(ctx_, "check.fail", fs_.fn);
  auto* cont = llvm::BasicBlock::Create(ctx_, "check.ok", fs_.fn);
  b_.CreateCondBr(ok, cont, fail, llvm::MDBuilder(ctx_).createBranchWeights(1 << 20, 1));
  b_.SetInsertPoint(fail);
  EmitFail(parts, code);
  b_.CreateUnreachable();
  b_.SetInsertPoint(cont);
}

void Emitter::FreeWorkspace(llvm::Value* p) {
  b_.CreateCall(llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_}, false),
                Service(kSvcWorkspaceFree), {Service(kSvcCtx), p});
}

llvm::Value* Emitter::EntryAlloca(llvm::Type* ty, const char* name) {
  llvm::IRBuilder<> eb(&fs_.fn->getEntryBlock(), fs_.fn->getEntryBlock().begin());
  llvm::AllocaInst* a = eb.CreateAlloca(ty, nullptr, name);
  a->setAlignment(llvm::Align(64));
  return a;
}

llvm::Function* Emitter::AppendStrFn() {
  if (append_str_ != nullptr) return append_str_;
  append_str_ = NewHelper("tether.append_str", {ptr_, i64_, ptr_});
  if (HelpersElsewhere()) return append_str_;
  llvm::IRBuilder<> h(&append_str_->getEntryBlock());
  auto* loop = llvm::BasicBlock::Create(ctx_, "loop", append_str_);
  auto* body = llvm::BasicBlock::Create(ctx_, "body", append_str_);
  auto* done = llvm::BasicBlock::Create(ctx_, "done", append_str_);
  llvm::BasicBlock* entry = h.GetInsertBlock();
  h.CreateBr(loop);
  h.SetInsertPoint(loop);
  llvm::PHINode* pos = h.CreatePHI(i64_, 2);
  llvm::PHINode* i = h.CreatePHI(i64_, 2);
  pos->addIncoming(append_str_->getArg(1), entry);
  i->addIncoming(h.getInt64(0), entry);
  llvm::Value* c = h.CreateLoad(i8_, h.CreateGEP(i8_, append_str_->getArg(2), i));
  llvm::Value* more = h.CreateAnd(h.CreateICmpNE(c, h.getInt8(0)),
                                  h.CreateICmpSLT(pos, h.getInt64(kMessageBytes - 1)));
  h.CreateCondBr(more, body, done);
  h.SetInsertPoint(body);
  h.CreateStore(c, h.CreateGEP(i8_, append_str_->getArg(0), pos));
  pos->addIncoming(h.CreateAdd(pos, h.getInt64(1)), body);
  i->addIncoming(h.CreateAdd(i, h.getInt64(1)), body);
  h.CreateBr(loop);
  h.SetInsertPoint(done);
  h.CreateRet(pos);
  return append_str_;
}

llvm::Function* Emitter::AppendI64Fn() {
  if (append_i64_ != nullptr) return append_i64_;
  append_i64_ = NewHelper("tether.append_i64", {ptr_, i64_, i64_});
  if (HelpersElsewhere()) return append_i64_;
  llvm::Function* f = append_i64_;
  llvm::IRBuilder<> h(&f->getEntryBlock());
  llvm::Value* digits = h.CreateAlloca(llvm::ArrayType::get(i8_, 24));
  llvm::Value* v = f->getArg(2);
  llvm::Value* neg = h.CreateICmpSLT(v, h.getInt64(0));
  llvm::Value* u = h.CreateSelect(neg, h.CreateSub(h.getInt64(0), v), v);
  // Digits in reverse into `digits`, then '-' and the digits into buf.
  auto* dloop = llvm::BasicBlock::Create(ctx_, "digits", f);
  auto* copy = llvm::BasicBlock::Create(ctx_, "copy", f);
  auto* cbody = llvm::BasicBlock::Create(ctx_, "copy.body", f);
  auto* done = llvm::BasicBlock::Create(ctx_, "done", f);
  llvm::BasicBlock* entry = h.GetInsertBlock();
  h.CreateBr(dloop);
  h.SetInsertPoint(dloop);
  llvm::PHINode* x = h.CreatePHI(i64_, 2);
  llvm::PHINode* n = h.CreatePHI(i64_, 2);
  x->addIncoming(u, entry);
  n->addIncoming(h.getInt64(0), entry);
  llvm::Value* digit =
      h.CreateTrunc(h.CreateAdd(h.CreateURem(x, h.getInt64(10)), h.getInt64('0')), i8_);
  h.CreateStore(digit, h.CreateGEP(i8_, digits, n));
  llvm::Value* next = h.CreateUDiv(x, h.getInt64(10));
  llvm::Value* n1 = h.CreateAdd(n, h.getInt64(1));
  x->addIncoming(next, dloop);
  n->addIncoming(n1, dloop);
  h.CreateCondBr(h.CreateICmpNE(next, h.getInt64(0)), dloop, copy);
  h.SetInsertPoint(copy);
  llvm::Value* pos0 = f->getArg(1);
  llvm::Value* room = h.CreateICmpSLT(pos0, h.getInt64(kMessageBytes - 1));
  llvm::Value* put_minus = h.CreateAnd(neg, room);
  h.CreateStore(
      h.getInt8('-'),
      h.CreateGEP(i8_, f->getArg(0), h.CreateSelect(room, pos0, h.getInt64(kMessageBytes - 1))));
  llvm::Value* pos1 = h.CreateAdd(pos0, h.CreateZExt(put_minus, i64_));
  llvm::BasicBlock* copy_entry = h.GetInsertBlock();
  h.CreateBr(cbody);
  h.SetInsertPoint(cbody);
  llvm::PHINode* pos = h.CreatePHI(i64_, 2);
  llvm::PHINode* k = h.CreatePHI(i64_, 2);
  pos->addIncoming(pos1, copy_entry);
  k->addIncoming(n1, copy_entry);
  llvm::Value* more = h.CreateAnd(h.CreateICmpSGT(k, h.getInt64(0)),
                                  h.CreateICmpSLT(pos, h.getInt64(kMessageBytes - 1)));
  auto* store = llvm::BasicBlock::Create(ctx_, "store", f);
  h.CreateCondBr(more, store, done);
  h.SetInsertPoint(store);
  llvm::Value* k1 = h.CreateSub(k, h.getInt64(1));
  h.CreateStore(h.CreateLoad(i8_, h.CreateGEP(i8_, digits, k1)),
                h.CreateGEP(i8_, f->getArg(0), pos));
  pos->addIncoming(h.CreateAdd(pos, h.getInt64(1)), store);
  k->addIncoming(k1, store);
  h.CreateBr(cbody);
  h.SetInsertPoint(done);
  h.CreateRet(pos);
  return f;
}

llvm::Function* Emitter::NewHelper(const char* name, std::vector<llvm::Type*> params) {
  llvm::Function* f = HelperFunction(llvm::FunctionType::get(i64_, params, false), name);
  f->addFnAttr(llvm::Attribute::NoInline);
  f->addFnAttr(llvm::Attribute::Cold);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  if (!HelpersElsewhere()) llvm::BasicBlock::Create(ctx_, "entry", f);
  return f;
}

llvm::Function* Emitter::HelperFunction(llvm::FunctionType* type, const std::string& name) {
  const bool sharded = !options_.emit.empty();
  auto* f = llvm::Function::Create(
      type, sharded ? llvm::GlobalValue::ExternalLinkage : llvm::GlobalValue::InternalLinkage, name,
      module_.get());
  if (sharded) f->setVisibility(llvm::GlobalValue::HiddenVisibility);
  return f;
}

llvm::Value* Emitter::HalfToFloat(llvm::Value* h16) {
  if (device_) return b_.CreateFPExt(b_.CreateBitCast(h16, b_.getHalfTy()), b_.getFloatTy());
  llvm::Value* h = b_.CreateZExt(h16, i32_);
  llvm::Value* sign = b_.CreateShl(b_.CreateAnd(h, 0x8000), 16);
  llvm::Value* exp = b_.CreateAnd(b_.CreateLShr(h, 10), 0x1f);
  llvm::Value* mant = b_.CreateAnd(h, 0x3ff);
  llvm::Value* normal =
      b_.CreateOr(b_.CreateShl(b_.CreateAdd(exp, b_.getInt32(112)), 23), b_.CreateShl(mant, 13));
  llvm::Value* special = b_.CreateOr(b_.getInt32(0x7f800000), b_.CreateShl(mant, 13));
  llvm::Value* sub =
      b_.CreateBitCast(b_.CreateFMul(b_.CreateUIToFP(mant, b_.getFloatTy()),
                                     llvm::ConstantFP::get(b_.getFloatTy(), 5.9604644775390625e-8)),
                       i32_);
  llvm::Value* bits =
      b_.CreateSelect(b_.CreateICmpEQ(exp, b_.getInt32(0)), sub,
                      b_.CreateSelect(b_.CreateICmpEQ(exp, b_.getInt32(31)), special, normal));
  return b_.CreateBitCast(b_.CreateOr(bits, sign), b_.getFloatTy());
}

llvm::Value* Emitter::FloatToHalf(llvm::Value* f) {
  if (device_) return b_.CreateBitCast(b_.CreateFPTrunc(f, b_.getHalfTy()), i16_);
  llvm::Value* x0 = b_.CreateBitCast(f, i32_);
  llvm::Value* sign = b_.CreateAnd(x0, 0x80000000u);
  llvm::Value* x = b_.CreateXor(x0, sign);
  llvm::Value* infnan = b_.CreateSelect(b_.CreateICmpUGT(x, b_.getInt32(0x7f800000)),
                                        b_.getInt32(0x7e00), b_.getInt32(0x7c00));
  llvm::Value* denorm_f = b_.CreateFAdd(b_.CreateBitCast(x, b_.getFloatTy()),
                                        llvm::ConstantFP::get(b_.getFloatTy(), 0.5));
  llvm::Value* denorm = b_.CreateSub(b_.CreateBitCast(denorm_f, i32_), b_.getInt32(0x3f000000));
  llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(x, 13), 1);
  llvm::Value* normal =
      b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(x, b_.getInt32(0xc8000fffu)), odd), 13);
  llvm::Value* o = b_.CreateSelect(
      b_.CreateICmpUGE(x, b_.getInt32(0x47800000)), infnan,
      b_.CreateSelect(b_.CreateICmpULT(x, b_.getInt32(0x38800000)), denorm, normal));
  return b_.CreateTrunc(b_.CreateOr(o, b_.CreateLShr(sign, 16)), i16_);
}

llvm::Value* Emitter::BF16ToFloat(llvm::Value* h) {
  return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(h, i32_), 16), b_.getFloatTy());
}

llvm::Value* Emitter::FloatToBF16(llvm::Value* f) {
  llvm::Value* x = b_.CreateBitCast(f, i32_);
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(x, 16), 1);
  llvm::Value* r = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(x, b_.getInt32(0x7fff)), lsb), 16);
  llvm::Value* is_nan = b_.CreateFCmpUNO(f, f);
  return b_.CreateTrunc(b_.CreateSelect(is_nan, b_.getInt32(0x7fc0), r), i16_);
}

absl::StatusOr<llvm::Value*> Emitter::ToCompute(llvm::Value* v, DataType t) {
  if (t.is_bool()) return b_.CreateICmpNE(v, b_.getInt8(0));
  if (t.is_float() && t.bits() == 16) return HalfToFloat(v);
  if (t.is_bfloat16()) return BF16ToFloat(v);
  return v;
}

llvm::Value* Emitter::ToStorage(llvm::Value* v, DataType t) {
  if (t.is_bool()) return b_.CreateZExt(v, i8_);
  if (t.is_float() && t.bits() == 16) return FloatToHalf(v);
  if (t.is_bfloat16()) return FloatToBF16(v);
  return v;
}

absl::StatusOr<llvm::Value*> Emitter::CastValue(llvm::Value* v, DataType from, DataType to) {
  TETHER_ASSIGN_OR_RETURN(llvm::Type * dst, ComputeType(to));
  if (from == to) return v;
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) {
    dst = llvm::VectorType::get(dst, vt->getElementCount());
  }
  bool from_float = from.is_float() || from.is_bfloat16();
  bool to_float = to.is_float() || to.is_bfloat16();
  if (to.is_bool()) {
    if (from_float) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0));
    return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (from_float && to_float) {
    llvm::Value* r = b_.CreateFPCast(v, dst);
    // Round through the narrow storage type so Cast(float16, x) rounds.
    if (to.is_float() && to.bits() == 16) r = HalfToFloat(FloatToHalf(r));
    if (to.is_bfloat16()) r = BF16ToFloat(FloatToBF16(r));
    return r;
  }
  if (from_float) {
    return to.is_uint() ? b_.CreateFPToUI(v, dst) : b_.CreateFPToSI(v, dst);
  }
  bool from_signed = from.is_int();
  if (to_float) {
    llvm::Value* r = from_signed ? b_.CreateSIToFP(v, dst) : b_.CreateUIToFP(v, dst);
    if (to.is_float() && to.bits() == 16) r = HalfToFloat(FloatToHalf(r));
    if (to.is_bfloat16()) r = BF16ToFloat(FloatToBF16(r));
    return r;
  }
  return b_.CreateIntCast(v, dst, from_signed);
}

absl::StatusOr<llvm::Value*> Emitter::EmitExprAs(const PrimExpr& e, DataType t) {
  TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(e));
  return CastValue(v, e.dtype(), t);
}

absl::StatusOr<llvm::Value*> Emitter::EmitIndex(const PrimExpr& e) {
  return EmitExprAs(e, DataType::Int(64));
}

absl::StatusOr<llvm::Value*> Emitter::EmitExpr(const PrimExpr& e) {
  if (!e.defined()) return Unsupported("undefined expression");
  DataType t = e.dtype();
  switch (e.kind()) {
    case PrimKind::kIntImm: {
      TETHER_ASSIGN_OR_RETURN(llvm::Type * ty, ComputeType(t));
      int64_t v = e.as<IntImmNode>()->value;
      if (ty->isFloatingPointTy()) return llvm::ConstantFP::get(ty, static_cast<double>(v));
      return llvm::ConstantInt::get(ty, static_cast<uint64_t>(v), true);
    }
    case PrimKind::kFloatImm: {
      TETHER_ASSIGN_OR_RETURN(llvm::Type * ty, ComputeType(t));
      double v = e.as<FloatImmNode>()->value;
      if (!ty->isFloatingPointTy())
        return llvm::ConstantInt::get(ty, static_cast<int64_t>(v), true);
      return llvm::ConstantFP::get(ty, v);
    }
    case PrimKind::kVar: {
      auto it = vars_.find(e.get());
      if (it == vars_.end()) {
        return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": variable ",
                                                       e.as<PrimVarNode>()->name, " is not bound"));
      }
      return it->second;
    }
    case PrimKind::kNot: {
      TETHER_ASSIGN_OR_RETURN(llvm::Value * a, EmitExprAs(e.as<NotNode>()->a, DataType::Bool()));
      return b_.CreateNot(a);
    }
    case PrimKind::kSelect: {
      const SelectNode* s = e.as<SelectNode>();
      TETHER_ASSIGN_OR_RETURN(llvm::Value * c, EmitExprAs(s->cond, DataType::Bool()));
      TETHER_ASSIGN_OR_RETURN(llvm::Value * x, EmitExprAs(s->true_value, t));
      TETHER_ASSIGN_OR_RETURN(llvm::Value * y, EmitExprAs(s->false_value, t));
      Unify(x, y);
      if (c->getType()->isVectorTy()) {
        x = Widen(x);
        y = Widen(y);
      }
      return b_.CreateSelect(c, x, y);
    }
    case PrimKind::kCast: {
      const CastNode* c = e.as<CastNode>();
      return EmitExprAs(c->value, t);
    }
    case PrimKind::kLoad: {
      const LoadNode* l = e.as<LoadNode>();
      if (vec_.lanes > 0) return EmitVectorLoad(l);
      TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, ElementAddress(l->buffer, l->indices));
      TETHER_ASSIGN_OR_RETURN(llvm::Type * st, StorageType(l->buffer->dtype));
      return ToCompute(b_.CreateLoad(st, addr), l->buffer->dtype);
    }
    case PrimKind::kCall: {
      const PrimCallNode* c = e.as<PrimCallNode>();
      // float32 (and float16/bfloat16, computed in float) use the
      // single-precision versions where there is one (math_f32.h).
      bool narrow = (t.is_float() && t.bits() <= 32) || t.is_bfloat16();
      if (narrow && c->args.size() == 1 && HasFloat32Math(c->op)) {
        TETHER_ASSIGN_OR_RETURN(llvm::Value * x, EmitExprAs(c->args[0], DataType::Float(32)));
        return CastValue(EmitFloat32Math(b_, c->op, x), DataType::Float(32), t);
      }
      std::vector<llvm::Value*> args;
      for (const PrimExpr& a : c->args) {
        TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExprAs(a, DataType::Float(64)));
        args.push_back(v);
      }
      absl::StatusOr<llvm::Value*> r = math_.Call(b_, c->op, args);
      if (!r.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", fs_.kernel, ": ", r.status().message()));
      }
      return CastValue(*r, DataType::Float(64), t);
    }
    default:
      return EmitBinary(e);
  }
}

absl::StatusOr<llvm::Value*> Emitter::EmitBinary(const PrimExpr& e) {
  const BinaryNode* n = e.as<BinaryNode>();
  if (n == nullptr) return Unsupported("expression kind ", PrimKindName(e.kind()));
  PrimKind k = e.kind();
  bool is_cmp = k >= PrimKind::kEQ && k <= PrimKind::kGE;
  bool is_logic = k == PrimKind::kAnd || k == PrimKind::kOr;
  DataType ot = is_logic ? DataType::Bool() : (is_cmp ? n->a.dtype() : e.dtype());
  if (is_cmp && n->b.dtype().bits() > ot.bits()) ot = n->b.dtype();
  TETHER_ASSIGN_OR_RETURN(llvm::Value * a, EmitExprAs(n->a, ot));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * c, EmitExprAs(n->b, ot));
  Unify(a, c);
  bool fl = ot.is_float() || ot.is_bfloat16();
  bool sg = ot.is_int();
  switch (k) {
    case PrimKind::kAdd:
      return fl ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
    case PrimKind::kSub:
      return fl ? b_.CreateFSub(a, c) : b_.CreateSub(a, c);
    case PrimKind::kMul:
      return fl ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
    case PrimKind::kDiv:
      return fl ? b_.CreateFDiv(a, c) : (sg ? b_.CreateSDiv(a, c) : b_.CreateUDiv(a, c));
    case PrimKind::kFloorDiv:
    case PrimKind::kFloorMod: {
      if (fl) {
        llvm::Value* q = b_.CreateFDiv(a, c);
        TETHER_ASSIGN_OR_RETURN(llvm::Value * qd, CastValue(q, ot, DataType::Float(64)));
        TETHER_ASSIGN_OR_RETURN(llvm::Value * fd, math_.Call(b_, "floor", {qd}));
        TETHER_ASSIGN_OR_RETURN(llvm::Value * f, CastValue(fd, DataType::Float(64), ot));
        return k == PrimKind::kFloorDiv ? f : b_.CreateFSub(a, b_.CreateFMul(f, c));
      }
      if (!sg) return k == PrimKind::kFloorDiv ? b_.CreateUDiv(a, c) : b_.CreateURem(a, c);
      llvm::Value* q = b_.CreateSDiv(a, c);
      llvm::Value* r = b_.CreateSRem(a, c);
      llvm::Value* zero = llvm::ConstantInt::get(a->getType(), 0);
      llvm::Value* adj =
          b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, c), zero));
      if (k == PrimKind::kFloorDiv) return b_.CreateSub(q, b_.CreateZExt(adj, a->getType()));
      return b_.CreateSelect(adj, b_.CreateAdd(r, c), r);
    }
    case PrimKind::kMin:
    case PrimKind::kMax: {
      bool is_min = k == PrimKind::kMin;
      llvm::Value* lt =
          fl ? b_.CreateFCmpOLT(a, c) : (sg ? b_.CreateICmpSLT(a, c) : b_.CreateICmpULT(a, c));
      return is_min ? b_.CreateSelect(lt, a, c) : b_.CreateSelect(lt, c, a);
    }
    case PrimKind::kEQ:
      return fl ? b_.CreateFCmpOEQ(a, c) : b_.CreateICmpEQ(a, c);
    case PrimKind::kNE:
      return fl ? b_.CreateFCmpUNE(a, c) : b_.CreateICmpNE(a, c);
    case PrimKind::kLT:
      return fl ? b_.CreateFCmpOLT(a, c) : (sg ? b_.CreateICmpSLT(a, c) : b_.CreateICmpULT(a, c));
    case PrimKind::kLE:
      return fl ? b_.CreateFCmpOLE(a, c) : (sg ? b_.CreateICmpSLE(a, c) : b_.CreateICmpULE(a, c));
    case PrimKind::kGT:
      return fl ? b_.CreateFCmpOGT(a, c) : (sg ? b_.CreateICmpSGT(a, c) : b_.CreateICmpUGT(a, c));
    case PrimKind::kGE:
      return fl ? b_.CreateFCmpOGE(a, c) : (sg ? b_.CreateICmpSGE(a, c) : b_.CreateICmpUGE(a, c));
    case PrimKind::kAnd:
      return b_.CreateAnd(a, c);
    case PrimKind::kOr:
      return b_.CreateOr(a, c);
    default:
      return Unsupported("binary kind ", PrimKindName(k));
  }
}

absl::StatusOr<llvm::Value*> Emitter::ElementAddress(const Buffer& buffer,
                                                     const std::vector<PrimExpr>& indices) {
  auto it = buffers_.find(buffer.get());
  if (it == buffers_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": buffer ", buffer->name,
                                                   " is neither a parameter nor allocated"));
  }
  if (indices.size() != buffer->shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": buffer ", buffer->name,
                                                   " has ", buffer->shape.size(),
                                                   " dims but is indexed with ", indices.size()));
  }
  if (device_ && buffer->layout == BufferNode::Layout::kSwizzle128) {
    return SwizzledAddress(buffer, indices);
  }
  llvm::Value* flat = b_.getInt64(0);
  const size_t first = slices_.contains(buffer.get()) ? 1 : 0;  // a thread's slice
  for (size_t d = first; d < indices.size(); ++d) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * extent, EmitIndex(buffer->shape[d]));
    TETHER_ASSIGN_OR_RETURN(llvm::Value * idx, EmitIndex(indices[d]));
    if (d == first) {
      flat = idx;
      continue;
    }
    Unify(flat, extent);
    llvm::Value* scaled = b_.CreateMul(flat, extent, "", false, true);
    Unify(scaled, idx);
    flat = b_.CreateAdd(scaled, idx, "", false, true);
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Type * st, StorageType(buffer->dtype));
  return b_.CreateInBoundsGEP(st, it->second, flat);
}

absl::StatusOr<llvm::Value*> Emitter::SwizzledAddress(const Buffer& buffer,
                                                      const std::vector<PrimExpr>& indices) {
  // Byte offset: leading slices of R x L elements, then the 128-byte column
  // block of the column (R rows of 128 bytes each), the row, the byte in
  // the row; then 16-byte chunk bits 4..6 ^= row bits 7..9 (prim_expr.h).
  const size_t nd = buffer->shape.size();
  const int64_t e = buffer->dtype.bytes();
  const int64_t rows = *buffer->shape[nd - 2].as_int(), cols = *buffer->shape[nd - 1].as_int();
  llvm::Value* lead = b_.getInt64(0);
  for (size_t d = 0; d + 2 < nd; ++d) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * idx, EmitIndex(indices[d]));
    lead = b_.CreateAdd(b_.CreateMul(lead, b_.getInt64(*buffer->shape[d].as_int())), idx);
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Value * r, EmitIndex(indices[nd - 2]));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * c, EmitIndex(indices[nd - 1]));
  llvm::Value* cb = b_.CreateMul(c, b_.getInt64(e));
  llvm::Value* off = b_.CreateMul(lead, b_.getInt64(rows * cols * e));
  off = b_.CreateAdd(off, b_.CreateMul(b_.CreateLShr(cb, 7), b_.getInt64(rows * 128)));
  off = b_.CreateAdd(off, b_.CreateMul(r, b_.getInt64(128)));
  off = b_.CreateAdd(off, b_.CreateAnd(cb, b_.getInt64(127)));
  off = b_.CreateXor(off, b_.CreateShl(b_.CreateAnd(b_.CreateLShr(off, 7), b_.getInt64(7)), 4));
  return b_.CreateInBoundsGEP(i8_, buffers_.at(buffer.get()), off);
}

absl::StatusOr<llvm::Value*> Emitter::EmitStorageCopy(const PrimExpr& e, DataType t) {
  const bool narrow = (t.is_float() && t.bits() == 16) || t.is_bfloat16();
  if (!narrow || e.dtype() != t || vec_.lanes > 0) return nullptr;
  if (const LoadNode* l = e.as<LoadNode>()) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, ElementAddress(l->buffer, l->indices));
    return b_.CreateLoad(i16_, addr);
  }
  if (const FloatImmNode* c = e.as<FloatImmNode>()) {
    return ToStorage(llvm::ConstantFP::get(b_.getFloatTy(), c->value), t);
  }
  const SelectNode* sel = e.as<SelectNode>();
  if (sel == nullptr || !IsStorageCopy(sel->true_value) || !IsStorageCopy(sel->false_value)) {
    return nullptr;
  }
  TETHER_ASSIGN_OR_RETURN(llvm::Value * c, EmitExprAs(sel->cond, DataType::Bool()));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * x, EmitStorageCopy(sel->true_value, t));
  TETHER_ASSIGN_OR_RETURN(llvm::Value * y, EmitStorageCopy(sel->false_value, t));
  return b_.CreateSelect(c, x, y);
}

bool Emitter::IsStorageCopy(const PrimExpr& e) {
  if (e.as<LoadNode>() != nullptr || e.as<FloatImmNode>() != nullptr) return true;
  const SelectNode* sel = e.as<SelectNode>();
  return sel != nullptr && IsStorageCopy(sel->true_value) && IsStorageCopy(sel->false_value);
}

}  // namespace tether::compiler::codegen::emitter_internal
