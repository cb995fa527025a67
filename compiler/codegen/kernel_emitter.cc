// Lowering of the kernel IR to LLVM IR. Values are kept in a "compute" type
// (bool as i1, float16/bfloat16 as float) and converted at loads and stores to
// their "storage" type (bool as i8, float16/bfloat16 as i16), with the half
// conversions done in integer IR so no compiler-rt call is ever needed.
#include "compiler/codegen/kernel_emitter.h"

#include <cctype>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/codegen/math_emitter.h"
#include "compiler/codegen/math_f32.h"
#include "compiler/codegen/vectorize.h"
#include "compiler/codegen/wmma.h"
#include "compiler/codegen/work_estimate.h"
#include "compiler/ir/arith.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"
#include "runtime/core/error.h"
#include "runtime/vm/kernel_library.h"

namespace tether::compiler::codegen {
namespace {

constexpr int kMessageBytes = 512;

// DLTensor field indices (DLPack 0.6).
enum DLField {
  kDLData = 0,
  kDLDevice = 1,
  kDLNdim = 2,
  kDLDtype = 3,
  kDLShape = 4,
  kDLStrides = 5,
  kDLByteOffset = 6
};
// TetherKernelServices field indices.
enum ServiceField {
  kSvcVersion = 0,
  kSvcCtx = 2,
  kSvcParallelFor = 3,
  kSvcWorkspaceAlloc = 4,
  kSvcWorkspaceFree = 5,
  kSvcSetError = 6
};

bool IsCIdentifier(absl::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// A piece of a runtime error message: text, or an i64 value printed in decimal.
struct MsgPart {
  std::string text;
  llvm::Value* value = nullptr;
  MsgPart(std::string t) : text(std::move(t)) {}  // NOLINT
  MsgPart(const char* t) : text(t) {}             // NOLINT
  MsgPart(llvm::Value* v) : value(v) {}           // NOLINT
};

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, const EmitOptions& options)
      : ctx_(ctx),
        options_(options),
        module_(std::make_unique<llvm::Module>("tether_kernels", ctx)),
        b_(ctx),
        math_(module_.get()) {
    i8_ = b_.getInt8Ty();
    i16_ = b_.getInt16Ty();
    i32_ = b_.getInt32Ty();
    i64_ = b_.getInt64Ty();
    ptr_ = b_.getPtrTy();
    dltensor_ty_ =
        llvm::StructType::create(ctx,
                                 {ptr_, llvm::StructType::get(ctx, {i32_, i32_}), i32_,
                                  llvm::StructType::get(ctx, {i8_, i8_, i16_}), ptr_, ptr_, i64_},
                                 "DLTensor");
    services_ty_ = llvm::StructType::create(ctx, {i32_, i32_, ptr_, ptr_, ptr_, ptr_, ptr_},
                                            "TetherKernelServices");
  }

  absl::StatusOr<std::unique_ptr<llvm::Module>> Run(const std::vector<KernelFunc>& kernels) {
    if (!options_.emit.empty() && (options_.system_lib || options_.emit.size() != kernels.size())) {
      return absl::InvalidArgumentError(
          "sharded emission needs one flag per kernel and no system library");
    }
    std::vector<KernelInfo> infos;
    absl::flat_hash_map<std::string, int> names;
    std::vector<llvm::Function*> entries;
    for (const KernelFunc& k : kernels) {
      if (!k) return absl::InvalidArgumentError("null kernel");
      if (!IsCIdentifier(k->name) || k->name.starts_with("tether_") ||
          k->name.starts_with("__tether")) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel name \"", k->name, "\" is not a usable C symbol name"));
      }
      if (!names.emplace(k->name, 0).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate kernel name ", k->name));
      }
      KernelInfo info;
      info.name = k->name;
      for (const KernelParam& p : k->params) {
        KernelParamInfo pi;
        pi.is_tensor = p.is_tensor();
        if (pi.is_tensor) {
          pi.dtype = p.buffer->dtype;
          pi.ndim = static_cast<int>(p.buffer->shape.size());
        } else if (!p.var.defined()) {
          return absl::InvalidArgumentError(
              absl::StrCat("kernel ", k->name, ": parameter is neither a tensor nor a var"));
        }
        info.params.push_back(pi);
      }
      infos.push_back(std::move(info));
      if (!options_.emit.empty() && !options_.emit[infos.size() - 1]) continue;
      TETHER_ASSIGN_OR_RETURN(llvm::Function * entry, EmitKernel(k));
      entries.push_back(entry);
    }
    if (!options_.library_globals) {
      EmitMemoryBuiltins();
      return std::move(module_);
    }
    std::string manifest = FormatKernelManifest(infos);
    llvm::Constant* manifest_init = llvm::ConstantDataArray::getString(ctx_, manifest, true);
    auto linkage = options_.system_lib ? llvm::GlobalValue::InternalLinkage
                                       : llvm::GlobalValue::ExternalLinkage;
    auto* manifest_gv = new llvm::GlobalVariable(*module_, manifest_init->getType(), true, linkage,
                                                 manifest_init, "tether_kernel_manifest");
    auto* version_gv = new llvm::GlobalVariable(*module_, i32_, true, linkage,
                                                b_.getInt32(TETHER_KERNEL_ABI_VERSION),
                                                "tether_kernel_abi_version");
    (void)version_gv;
    if (options_.system_lib) EmitRegistration(infos, entries, manifest_gv);
    EmitMemoryBuiltins();
    return std::move(module_);
  }

  // Device launch kernels (device_split.h) as PTX entries.
  absl::StatusOr<std::unique_ptr<llvm::Module>> RunDevice(const std::vector<KernelFunc>& launches) {
    device_ = true;
    absl::flat_hash_map<std::string, int> names;
    for (const KernelFunc& k : launches) {
      if (!k) return absl::InvalidArgumentError("null kernel");
      if (!IsCIdentifier(k->name) || !names.emplace(k->name, 0).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel name \"", k->name, "\" is not a usable, unique PTX entry name"));
      }
      TETHER_RETURN_IF_ERROR(EmitDeviceEntry(k));
    }
    return std::move(module_);
  }

 private:
  // ---- Per-function state ----
  struct FnState {
    llvm::Function* fn = nullptr;
    llvm::Value* services = nullptr;
    std::vector<llvm::Value*> workspaces;  // live, freed on error returns
    bool in_parallel = false;
    std::string kernel;
    int64_t shared_bytes = 0;  // of the kShared buffers so far (device entries)
  };

  // ---- Types ----
  absl::StatusOr<llvm::Type*> ComputeType(DataType t) {
    if (t.lanes() != 1) return Unsupported("vector dtype ", t.ToString());
    if (t.is_bool()) return b_.getInt1Ty();
    if (t.is_int() || t.is_uint()) return static_cast<llvm::Type*>(b_.getIntNTy(t.bits()));
    if (t.is_float() && (t.bits() == 16 || t.bits() == 32)) return b_.getFloatTy();
    if (t.is_bfloat16()) return b_.getFloatTy();
    if (t.is_float() && t.bits() == 64) return b_.getDoubleTy();
    return Unsupported("dtype ", t.ToString());
  }
  absl::StatusOr<llvm::Type*> StorageType(DataType t) {
    if (t.is_bool()) return i8_;
    if ((t.is_float() && t.bits() == 16) || t.is_bfloat16()) return i16_;
    return ComputeType(t);
  }
  template <typename... A>
  absl::Status Unsupported(const A&... a) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": unsupported ", a...));
  }

  // ---- Services and errors ----
  llvm::Value* Service(ServiceField field) {
    llvm::Value* p = b_.CreateStructGEP(services_ty_, fs_.services, field);
    return b_.CreateLoad(field == kSvcVersion ? static_cast<llvm::Type*>(i32_) : ptr_, p);
  }
  llvm::FunctionType* SetErrorTy() {
    return llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_}, false);
  }
  // Emits: build the message, set_error, free live workspaces, return `code`.
  // Leaves the builder in a fresh (unreachable) block.
  void EmitFail(const std::vector<MsgPart>& parts, int32_t code) {
    llvm::Value* buf = EntryAlloca(llvm::ArrayType::get(i8_, kMessageBytes), "msg");
    llvm::Value* pos = b_.getInt64(0);
    for (const MsgPart& p : parts) {
      if (p.value != nullptr) {
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
  // if (!ok) fail; continues on the ok path.
  void EmitCheck(llvm::Value* ok, const std::vector<MsgPart>& parts, int32_t code) {
    auto* fail = llvm::BasicBlock::Create(ctx_, "check.fail", fs_.fn);
    auto* cont = llvm::BasicBlock::Create(ctx_, "check.ok", fs_.fn);
    b_.CreateCondBr(ok, cont, fail, llvm::MDBuilder(ctx_).createBranchWeights(1 << 20, 1));
    b_.SetInsertPoint(fail);
    EmitFail(parts, code);
    b_.CreateUnreachable();
    b_.SetInsertPoint(cont);
  }
  void FreeWorkspace(llvm::Value* p) {
    b_.CreateCall(llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_}, false),
                  Service(kSvcWorkspaceFree), {Service(kSvcCtx), p});
  }
  llvm::Value* EntryAlloca(llvm::Type* ty, const char* name) {
    llvm::IRBuilder<> eb(&fs_.fn->getEntryBlock(), fs_.fn->getEntryBlock().begin());
    llvm::AllocaInst* a = eb.CreateAlloca(ty, nullptr, name);
    a->setAlignment(llvm::Align(64));
    return a;
  }

  // i64 append_str(ptr buf, i64 pos, ptr str): copies until NUL or the buffer is full.
  llvm::Function* AppendStrFn() {
    if (append_str_ != nullptr) return append_str_;
    append_str_ = NewHelper("tether.append_str", {ptr_, i64_, ptr_});
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
  // i64 append_i64(ptr buf, i64 pos, i64 v): decimal digits.
  llvm::Function* AppendI64Fn() {
    if (append_i64_ != nullptr) return append_i64_;
    append_i64_ = NewHelper("tether.append_i64", {ptr_, i64_, i64_});
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
  llvm::Function* NewHelper(const char* name, std::vector<llvm::Type*> params) {
    auto* f = llvm::Function::Create(llvm::FunctionType::get(i64_, params, false),
                                     llvm::GlobalValue::InternalLinkage, name, module_.get());
    f->addFnAttr(llvm::Attribute::NoInline);
    f->addFnAttr(llvm::Attribute::Cold);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::BasicBlock::Create(ctx_, "entry", f);
    return f;
  }

  // ---- half <-> float: the GPU's cvt instructions, in integer IR on a CPU ----
  llvm::Value* HalfToFloat(llvm::Value* h16) {
    if (device_) return b_.CreateFPExt(b_.CreateBitCast(h16, b_.getHalfTy()), b_.getFloatTy());
    llvm::Value* h = b_.CreateZExt(h16, i32_);
    llvm::Value* sign = b_.CreateShl(b_.CreateAnd(h, 0x8000), 16);
    llvm::Value* exp = b_.CreateAnd(b_.CreateLShr(h, 10), 0x1f);
    llvm::Value* mant = b_.CreateAnd(h, 0x3ff);
    llvm::Value* normal =
        b_.CreateOr(b_.CreateShl(b_.CreateAdd(exp, b_.getInt32(112)), 23), b_.CreateShl(mant, 13));
    llvm::Value* special = b_.CreateOr(b_.getInt32(0x7f800000), b_.CreateShl(mant, 13));
    llvm::Value* sub = b_.CreateBitCast(
        b_.CreateFMul(b_.CreateUIToFP(mant, b_.getFloatTy()),
                      llvm::ConstantFP::get(b_.getFloatTy(), 5.9604644775390625e-8)),
        i32_);
    llvm::Value* bits =
        b_.CreateSelect(b_.CreateICmpEQ(exp, b_.getInt32(0)), sub,
                        b_.CreateSelect(b_.CreateICmpEQ(exp, b_.getInt32(31)), special, normal));
    return b_.CreateBitCast(b_.CreateOr(bits, sign), b_.getFloatTy());
  }
  llvm::Value* FloatToHalf(llvm::Value* f) {
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
  llvm::Value* BF16ToFloat(llvm::Value* h) {
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(h, i32_), 16), b_.getFloatTy());
  }
  llvm::Value* FloatToBF16(llvm::Value* f) {
    llvm::Value* x = b_.CreateBitCast(f, i32_);
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(x, 16), 1);
    llvm::Value* r = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(x, b_.getInt32(0x7fff)), lsb), 16);
    llvm::Value* is_nan = b_.CreateFCmpUNO(f, f);
    return b_.CreateTrunc(b_.CreateSelect(is_nan, b_.getInt32(0x7fc0), r), i16_);
  }

  absl::StatusOr<llvm::Value*> ToCompute(llvm::Value* v, DataType t) {
    if (t.is_bool()) return b_.CreateICmpNE(v, b_.getInt8(0));
    if (t.is_float() && t.bits() == 16) return HalfToFloat(v);
    if (t.is_bfloat16()) return BF16ToFloat(v);
    return v;
  }
  llvm::Value* ToStorage(llvm::Value* v, DataType t) {
    if (t.is_bool()) return b_.CreateZExt(v, i8_);
    if (t.is_float() && t.bits() == 16) return FloatToHalf(v);
    if (t.is_bfloat16()) return FloatToBF16(v);
    return v;
  }

  // ---- Casts between compute values ----
  absl::StatusOr<llvm::Value*> CastValue(llvm::Value* v, DataType from, DataType to) {
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

  // ---- Expressions ----
  absl::StatusOr<llvm::Value*> EmitExprAs(const PrimExpr& e, DataType t) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExpr(e));
    return CastValue(v, e.dtype(), t);
  }
  absl::StatusOr<llvm::Value*> EmitIndex(const PrimExpr& e) {
    return EmitExprAs(e, DataType::Int(64));
  }

  absl::StatusOr<llvm::Value*> EmitExpr(const PrimExpr& e) {
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
          return absl::InvalidArgumentError(absl::StrCat(
              "kernel ", fs_.kernel, ": variable ", e.as<PrimVarNode>()->name, " is not bound"));
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

  absl::StatusOr<llvm::Value*> EmitBinary(const PrimExpr& e) {
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

  // Row-major flat address of buffer[indices].
  absl::StatusOr<llvm::Value*> ElementAddress(const Buffer& buffer,
                                              const std::vector<PrimExpr>& indices) {
    auto it = buffers_.find(buffer.get());
    if (it == buffers_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": buffer ",
                                                     buffer->name,
                                                     " is neither a parameter nor allocated"));
    }
    if (indices.size() != buffer->shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": buffer ",
                                                     buffer->name, " has ", buffer->shape.size(),
                                                     " dims but is indexed with ", indices.size()));
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

  // A 16-bit float value that is a load of the same dtype (or a select of
  // such loads and constants) in its storage form, with no conversion to
  // float and back: copies, staging and padding of float16 / bfloat16 data.
  // Null when `e` is anything else.
  absl::StatusOr<llvm::Value*> EmitStorageCopy(const PrimExpr& e, DataType t) {
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
  static bool IsStorageCopy(const PrimExpr& e) {
    if (e.as<LoadNode>() != nullptr || e.as<FloatImmNode>() != nullptr) return true;
    const SelectNode* sel = e.as<SelectNode>();
    return sel != nullptr && IsStorageCopy(sel->true_value) && IsStorageCopy(sel->false_value);
  }

  // ---- Statements ----
  absl::Status EmitStmt(const Stmt& s) {
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
      case StmtKind::kEvaluate:
        return EmitExpr(s.as<EvaluateNode>()->value).status();
      case StmtKind::kMatrixTile:
        // On a CPU, the loops that define it.
        if (!device_) return EmitStmt(ExpandMatrixTile(*s.as<MatrixTileNode>()));
        return EmitMatrixTile(*s.as<MatrixTileNode>());
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
        if (device_ && n->for_kind == ForKind::kBlock) {
          return Unsupported("a kBlock loop not split into a launch: ", n->var.name());
        }
        return EmitLoop(n);
      }
    }
    return Unsupported("statement");
  }

  // A kThread loop on a GPU: the body once, var = the thread's index in its
  // block (the loop's extent is the block size), then a barrier. A kWarp
  // loop likewise with var = the warp's index (`shift` 5: the thread's / 32).
  absl::Status EmitThreadLoop(const ForNode* n, int shift) {
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

  // ---- Tensor cores (device entries; rules checked by SplitForDevice) ----

  // The thread's registers of the fragment `t`.
  absl::StatusOr<llvm::Value*> FragmentSlot(const TileRef& t) {
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

  absl::Status EmitMatrixTile(const MatrixTileNode& n) {
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
    }
    return Unsupported("tensor-core statement");
  }

  absl::Status EmitAllocate(const AllocateNode* n) {
    const Buffer& buf = n->buffer;
    if (device_ && IsFragmentScope(buf->scope)) {
      // The thread's registers of each fragment: dim 0 (the warp) and the
      // 16 x 16 tile dropped.
      int64_t count = 1;
      for (size_t i = 1; i + 2 < buf->shape.size(); ++i) count *= *buf->shape[i].as_int();
      const FragmentRegisters r = Registers(ctx_, buf->scope, buf->dtype);
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
      // Shared buffers are static and all live at once: their sum counts.
      if (shared && (fs_.shared_bytes += count * buf->dtype.bytes()) > kMaxSharedBytes) {
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
        buffers_[buf.get()] = b_.CreateAddrSpaceCast(gv, ptr_);
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
    EmitCheck(
        b_.CreateIsNotNull(p),
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

  llvm::MDNode* LoopMetadata(ForKind kind) {
    llvm::SmallVector<llvm::Metadata*, 3> ops;
    ops.push_back(nullptr);  // self reference
    if (kind == ForKind::kVectorized) {
      ops.push_back(
          llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
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

  // for var in [begin, end): body, with `var` = the induction variable.
  absl::Status EmitRange(const Var& var, llvm::Value* begin, llvm::Value* end, ForKind kind,
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

  absl::Status EmitLoop(const ForNode* n) {
    if (n->for_kind == ForKind::kVectorized && vec_.lanes == 0 && !device_) {
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

  // A kUnrolled loop with a small constant extent: the body once per
  // iteration, the var a constant offset from min, so the accesses of a
  // register tile have constant offsets before any LLVM pass runs.
  static constexpr int64_t kMaxUnroll = 16;
  absl::Status EmitUnrolled(const ForNode* n, int64_t extent) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * min, EmitIndex(n->min));
    for (int64_t i = 0; i < extent; ++i) {
      llvm::Value* at = b_.CreateAdd(min, b_.getInt64(i), "", false, true);
      TETHER_ASSIGN_OR_RETURN(vars_[n->var.get()],
                              CastValue(at, DataType::Int(64), n->var.dtype()));
      absl::Status st = EmitStmt(n->body);
      vars_.erase(n->var.get());
      TETHER_RETURN_IF_ERROR(st);
    }
    return absl::OkStatus();
  }

  // A loop VectorizableLanes accepted (vectorize.h): the body once, with the
  // loop var a vector <min, min+1, ...>; contiguous accesses become vector
  // loads and stores at the lane-0 address, others gathers.
  absl::Status EmitVectorLoop(const ForNode* n, int64_t lanes) {
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

  // The address of lane 0's element of a contiguous access.
  absl::StatusOr<llvm::Value*> Lane0Address(const Buffer& buffer,
                                            const std::vector<PrimExpr>& indices) {
    llvm::Value* all = vars_[vec_.var.get()];
    vars_[vec_.var.get()] = vec_.lane0;
    absl::StatusOr<llvm::Value*> addr = ElementAddress(buffer, indices);
    vars_[vec_.var.get()] = all;
    return addr;
  }

  absl::Status EmitVectorStore(const StoreNode* n) {
    TETHER_ASSIGN_OR_RETURN(llvm::Value * addr, Lane0Address(n->buffer, n->indices));
    TETHER_ASSIGN_OR_RETURN(llvm::Value * v, EmitExprAs(n->value, n->buffer->dtype));
    v = Widen(v);
    b_.CreateAlignedStore(v, addr, llvm::Align(n->buffer->dtype.bytes()));
    return absl::OkStatus();
  }

  absl::StatusOr<llvm::Value*> EmitVectorLoad(const LoadNode* l) {
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

  // `v` as a vector of the current lane count (a splat when scalar).
  llvm::Value* Widen(llvm::Value* v) {
    if (vec_.lanes == 0 || v->getType()->isVectorTy()) return v;
    return b_.CreateVectorSplat(vec_.lanes, v);
  }
  // Splats the scalar one when the other is a vector.
  void Unify(llvm::Value*& a, llvm::Value*& c) {
    if (a->getType()->isVectorTy() != c->getType()->isVectorTy()) {
      a = Widen(a);
      c = Widen(c);
    }
  }

  // The state one function sees: bound vars and buffers. Captured by value
  // into outlined functions.
  struct Capture {
    const Object* key;
    bool is_buffer;
    llvm::Value* value;
  };
  std::vector<Capture> LiveCaptures() {
    std::vector<Capture> out;
    for (auto& [k, v] : vars_) out.push_back({k, false, v});
    for (auto& [k, v] : buffers_) out.push_back({k, true, v});
    return out;
  }

  // Creates `name`(services, captures...) with noalias buffer pointers, maps
  // the captures to its arguments and leaves the builder in its entry block.
  llvm::Function* BeginInner(const std::string& name, const std::vector<Capture>& caps,
                             std::vector<llvm::Type*> leading) {
    std::vector<llvm::Type*> params = std::move(leading);
    size_t first = params.size();
    params.push_back(ptr_);
    for (const Capture& c : caps) params.push_back(c.value->getType());
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(i32_, params, false),
                                      llvm::GlobalValue::InternalLinkage, name, module_.get());
    fn->addFnAttr(llvm::Attribute::NoUnwind);
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

  absl::Status EmitParallelFor(const ForNode* n) {
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
    absl::Status status =
        EmitRange(n->var, b_.CreateAdd(cmin, inner->getArg(0)),
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

  // ---- Kernel entry ----
  absl::StatusOr<llvm::Function*> EmitKernel(const KernelFunc& k) {
    fs_ = FnState();
    fs_.kernel = k->name;
    vars_.clear();
    buffers_.clear();
    auto linkage = options_.system_lib ? llvm::GlobalValue::InternalLinkage
                                       : llvm::GlobalValue::ExternalLinkage;
    auto* entry = llvm::Function::Create(llvm::FunctionType::get(i32_, {ptr_, i32_, ptr_}, false),
                                         linkage, k->name, module_.get());
    entry->addFnAttr(llvm::Attribute::NoUnwind);
    fs_.fn = entry;
    fs_.services = entry->getArg(2);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
    const std::string& name = k->name;
    const int num_params = static_cast<int>(k->params.size());
    EmitCheck(b_.CreateICmpEQ(entry->getArg(1), b_.getInt32(num_params)),
              {absl::StrCat("kernel ", name, ": expected ", num_params, " arguments, got "),
               entry->getArg(1)},
              TETHER_KERNEL_INVALID_ARGUMENT);

    std::vector<Capture> caps;  // data pointers and bound vars, in binding order
    std::vector<std::vector<llvm::Value*>> dims(num_params);
    for (int i = 0; i < num_params; ++i) {
      const KernelParam& p = k->params[i];
      llvm::Value* slot = b_.CreateInBoundsGEP(i64_, entry->getArg(0), b_.getInt64(i));
      if (!p.is_tensor()) {
        llvm::Value* v = b_.CreateLoad(i64_, slot);
        TETHER_RETURN_IF_ERROR(
            BindOrCheck(p.var, v, {absl::StrCat("kernel ", name, ": argument ", i, " is ")}));
        continue;
      }
      const Buffer& buf = p.buffer;
      std::string arg = absl::StrCat("kernel ", name, ": argument ", i, " (", buf->name, ")");
      llvm::Value* t = b_.CreateLoad(ptr_, slot);
      EmitCheck(b_.CreateIsNotNull(t), {arg + " is null"}, TETHER_KERNEL_INVALID_ARGUMENT);
      llvm::Value* dev = b_.CreateLoad(i32_, b_.CreateStructGEP(dltensor_ty_, t, kDLDevice));
      EmitCheck(b_.CreateICmpEQ(dev, b_.getInt32(kDLCPU)),
                {arg + " is not on the cpu (device type ", dev, ")"},
                TETHER_KERNEL_INVALID_ARGUMENT);
      int ndim = static_cast<int>(buf->shape.size());
      llvm::Value* nd = b_.CreateLoad(i32_, b_.CreateStructGEP(dltensor_ty_, t, kDLNdim));
      EmitCheck(b_.CreateICmpEQ(nd, b_.getInt32(ndim)),
                {arg + " has ", nd, absl::StrCat(" dims, expected ", ndim)},
                TETHER_KERNEL_INVALID_ARGUMENT);
      llvm::Value* dt = b_.CreateStructGEP(dltensor_ty_, t, kDLDtype);
      llvm::Type* dt_ty = llvm::StructType::get(ctx_, {i8_, i8_, i16_});
      llvm::Value* code = b_.CreateLoad(i8_, b_.CreateStructGEP(dt_ty, dt, 0));
      llvm::Value* bits = b_.CreateLoad(i8_, b_.CreateStructGEP(dt_ty, dt, 1));
      llvm::Value* lanes = b_.CreateLoad(i16_, b_.CreateStructGEP(dt_ty, dt, 2));
      llvm::Value* dtype_ok =
          b_.CreateAnd(b_.CreateAnd(b_.CreateICmpEQ(code, b_.getInt8(buf->dtype.code())),
                                    b_.CreateICmpEQ(bits, b_.getInt8(buf->dtype.bits()))),
                       b_.CreateICmpEQ(lanes, b_.getInt16(buf->dtype.lanes())));
      EmitCheck(dtype_ok, {arg + " has the wrong dtype, expected " + buf->dtype.ToString()},
                TETHER_KERNEL_INVALID_ARGUMENT);
      llvm::Value* shape = b_.CreateLoad(ptr_, b_.CreateStructGEP(dltensor_ty_, t, kDLShape));
      for (int d = 0; d < ndim; ++d) {
        dims[i].push_back(b_.CreateLoad(i64_, b_.CreateInBoundsGEP(i64_, shape, b_.getInt64(d))));
      }
      // Compact row-major strides (or none).
      llvm::Value* strides = b_.CreateLoad(ptr_, b_.CreateStructGEP(dltensor_ty_, t, kDLStrides));
      if (ndim > 0) {
        auto* check_bb = llvm::BasicBlock::Create(ctx_, "strides", entry);
        auto* done_bb = llvm::BasicBlock::Create(ctx_, "strides.ok", entry);
        b_.CreateCondBr(b_.CreateIsNull(strides), done_bb, check_bb);
        b_.SetInsertPoint(check_bb);
        llvm::Value* expected = b_.getInt64(1);
        llvm::Value* ok = b_.getTrue();
        for (int d = ndim - 1; d >= 0; --d) {
          llvm::Value* st =
              b_.CreateLoad(i64_, b_.CreateInBoundsGEP(i64_, strides, b_.getInt64(d)));
          ok = b_.CreateAnd(ok, b_.CreateOr(b_.CreateICmpEQ(dims[i][d], b_.getInt64(1)),
                                            b_.CreateICmpEQ(st, expected)));
          expected = b_.CreateMul(expected, dims[i][d]);
        }
        EmitCheck(ok, {arg + " is not compact row-major"}, TETHER_KERNEL_INVALID_ARGUMENT);
        b_.CreateBr(done_bb);
        b_.SetInsertPoint(done_bb);
      }
      llvm::Value* data = b_.CreateLoad(ptr_, b_.CreateStructGEP(dltensor_ty_, t, kDLData));
      llvm::Value* offset = b_.CreateLoad(i64_, b_.CreateStructGEP(dltensor_ty_, t, kDLByteOffset));
      buffers_[buf.get()] = b_.CreateGEP(i8_, data, offset);
      // Shape vars bind on first occurrence and are checked afterwards.
      for (int d = 0; d < ndim; ++d) {
        const PrimExpr& e = buf->shape[d];
        if (e.kind() != PrimKind::kVar) continue;
        TETHER_RETURN_IF_ERROR(BindOrCheck(
            e, dims[i][d], {absl::StrCat("kernel ", name, ": argument ", i, " dim ", d, " is ")}));
      }
    }
    // Shape expressions and constants, now that every var is bound.
    for (int i = 0; i < num_params; ++i) {
      const KernelParam& p = k->params[i];
      if (!p.is_tensor()) continue;
      for (size_t d = 0; d < p.buffer->shape.size(); ++d) {
        const PrimExpr& e = p.buffer->shape[d];
        if (e.kind() == PrimKind::kVar) continue;
        absl::StatusOr<llvm::Value*> expected = EmitIndex(e);
        if (!expected.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("kernel ", name, ": shape of parameter ", p.buffer->name, " dim ", d,
                           " (", ToString(e), ") uses a variable no parameter binds"));
        }
        std::vector<MsgPart> msg = {
            absl::StrCat("kernel ", name, ": argument ", i, " dim ", d, " is "), dims[i][d]};
        if (e.as_int() != nullptr) {
          msg.push_back(absl::StrCat(", expected ", *e.as_int()));
        } else {
          msg.push_back(absl::StrCat(", expected ", ToString(e), " = "));
          msg.push_back(*expected);
        }
        EmitCheck(b_.CreateICmpEQ(dims[i][d], *expected), msg, TETHER_KERNEL_INVALID_ARGUMENT);
      }
    }
    // Call the body with noalias data pointers.
    std::vector<Capture> body_caps = LiveCaptures();
    llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
    auto saved_vars = vars_;
    auto saved_buffers = buffers_;
    llvm::Function* body = BeginInner(name + ".body", body_caps, {});
    TETHER_RETURN_IF_ERROR(EmitStmt(k->body));
    b_.CreateRet(b_.getInt32(0));
    vars_ = std::move(saved_vars);
    buffers_ = std::move(saved_buffers);
    fs_.fn = entry;
    fs_.services = entry->getArg(2);
    b_.restoreIP(ip);
    std::vector<llvm::Value*> args = {entry->getArg(2)};
    for (const Capture& c : body_caps) args.push_back(c.value);
    b_.CreateRet(b_.CreateCall(body, args));
    return entry;
  }

  // One PTX entry (docs/design/kernel-abi.md, "PTX entries"): the kernel's
  // parameters but the last two as 64-bit values, then every tensor dim;
  // tether_tid and tether_nthreads from the special registers.
  absl::Status EmitDeviceEntry(const KernelFunc& k) {
    fs_ = FnState();
    fs_.kernel = k->name;
    fs_.in_parallel = true;  // nested parallel loops run inside the thread
    vars_.clear();
    buffers_.clear();
    slices_.clear();
    fragments_.clear();
    const size_t n = k->params.size();
    if (n < 2 || k->params[n - 2].is_tensor() || k->params[n - 1].is_tensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", k->name, ": a device launch ends with tid and nthreads scalars"));
    }
    std::vector<llvm::Type*> types;
    for (size_t i = 0; i + 2 < n; ++i) types.push_back(k->params[i].is_tensor() ? ptr_ : i64_);
    for (size_t i = 0; i + 2 < n; ++i) {
      if (k->params[i].is_tensor())
        types.insert(types.end(), k->params[i].buffer->shape.size(), i64_);
    }
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), types, false),
                                      llvm::GlobalValue::ExternalLinkage, k->name, module_.get());
    fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::NamedMDNode* annotations = module_->getOrInsertNamedMetadata("nvvm.annotations");
    annotations->addOperand(llvm::MDNode::get(
        ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "kernel"),
               llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
    // No launch has more threads per block: ptxas may budget registers for it.
    annotations->addOperand(llvm::MDNode::get(
        ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "maxntidx"),
               llvm::ConstantAsMetadata::get(b_.getInt32(kDeviceBlockThreads))}));
    fs_.fn = fn;
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    unsigned arg = 0;
    for (size_t i = 0; i + 2 < n; ++i, ++arg) {
      const KernelParam& p = k->params[i];
      if (p.is_tensor()) {
        fn->addParamAttr(arg, llvm::Attribute::NoAlias);
        buffers_[p.buffer.get()] = fn->getArg(arg);
      } else if (!vars_.contains(p.var.get())) {
        TETHER_ASSIGN_OR_RETURN(vars_[p.var.get()],
                                CastValue(fn->getArg(arg), DataType::Int(64), p.var.dtype()));
      }
    }
    for (size_t i = 0; i + 2 < n; ++i) {
      const KernelParam& p = k->params[i];
      if (!p.is_tensor()) continue;
      for (const PrimExpr& d : p.buffer->shape) {
        llvm::Value* v = fn->getArg(arg++);
        if (d.kind() == PrimKind::kVar && !vars_.contains(d.get())) {
          TETHER_ASSIGN_OR_RETURN(vars_[d.get()], CastValue(v, DataType::Int(64), d.dtype()));
        }
      }
    }
    auto sreg = [&](llvm::Intrinsic::ID id) {
      return b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), i64_);
    };
    llvm::Value* ntid = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
    llvm::Value* tid =
        b_.CreateAdd(b_.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), ntid),
                     sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
    llvm::Value* nthreads = b_.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x), ntid);
    TETHER_ASSIGN_OR_RETURN(vars_[k->params[n - 2].var.get()],
                            CastValue(tid, DataType::Int(64), k->params[n - 2].var.dtype()));
    TETHER_ASSIGN_OR_RETURN(vars_[k->params[n - 1].var.get()],
                            CastValue(nthreads, DataType::Int(64), k->params[n - 1].var.dtype()));
    TETHER_RETURN_IF_ERROR(EmitStmt(k->body));
    b_.CreateRetVoid();
    return absl::OkStatus();
  }

  // Binds `var` to `value` (an i64) or, when bound, checks equality.
  absl::Status BindOrCheck(const PrimExpr& var, llvm::Value* value, std::vector<MsgPart> msg) {
    auto it = vars_.find(var.get());
    if (it == vars_.end()) {
      TETHER_ASSIGN_OR_RETURN(vars_[var.get()], CastValue(value, DataType::Int(64), var.dtype()));
      return absl::OkStatus();
    }
    TETHER_ASSIGN_OR_RETURN(llvm::Value * bound,
                            CastValue(it->second, var.dtype(), DataType::Int(64)));
    msg.push_back(value);
    msg.push_back(absl::StrCat(", expected ", var.as<PrimVarNode>()->name, " = "));
    msg.push_back(bound);
    EmitCheck(b_.CreateICmpEQ(value, bound), msg, TETHER_KERNEL_INVALID_ARGUMENT);
    return absl::OkStatus();
  }

  // The backend lowers llvm.memset/memcpy/memmove (which the optimizer forms
  // from loops) to calls of the C functions; the library defines its own,
  // local and kept alive through llvm.compiler.used, so nothing is undefined.
  void EmitMemoryBuiltins() {
    llvm::SmallVector<llvm::GlobalValue*, 3> used;
    for (const char* name : {"memset", "memcpy", "memmove"}) {
      bool is_set = std::string(name) == "memset";
      std::vector<llvm::Type*> params = {ptr_, is_set ? static_cast<llvm::Type*>(i32_) : ptr_,
                                         i64_};
      auto* f = llvm::Function::Create(llvm::FunctionType::get(ptr_, params, false),
                                       llvm::GlobalValue::InternalLinkage, name, module_.get());
      f->addFnAttr("no-builtins");
      f->addFnAttr(llvm::Attribute::NoUnwind);
      f->addFnAttr(llvm::Attribute::NoInline);
      llvm::IRBuilder<> h(llvm::BasicBlock::Create(ctx_, "entry", f));
      llvm::Value* dst = f->getArg(0);
      llvm::Value* n = f->getArg(2);
      // memmove copies backwards when dst lies above src.
      llvm::Value* backwards =
          std::string(name) == "memmove"
              ? h.CreateICmpUGT(h.CreatePtrToInt(dst, i64_), h.CreatePtrToInt(f->getArg(1), i64_))
              : h.getFalse();
      llvm::BasicBlock* entry = h.GetInsertBlock();
      auto* loop = llvm::BasicBlock::Create(ctx_, "loop", f);
      auto* body = llvm::BasicBlock::Create(ctx_, "body", f);
      auto* done = llvm::BasicBlock::Create(ctx_, "done", f);
      h.CreateBr(loop);
      h.SetInsertPoint(loop);
      llvm::PHINode* i = h.CreatePHI(i64_, 2);
      i->addIncoming(h.getInt64(0), entry);
      h.CreateCondBr(h.CreateICmpULT(i, n), body, done);
      h.SetInsertPoint(body);
      llvm::Value* at = h.CreateSelect(backwards, h.CreateSub(h.CreateSub(n, h.getInt64(1)), i), i);
      llvm::Value* byte =
          is_set ? h.CreateTrunc(f->getArg(1), i8_)
                 : static_cast<llvm::Value*>(h.CreateLoad(i8_, h.CreateGEP(i8_, f->getArg(1), at)));
      h.CreateStore(byte, h.CreateGEP(i8_, dst, at));
      i->addIncoming(h.CreateAdd(i, h.getInt64(1)), body);
      h.CreateBr(loop);
      h.SetInsertPoint(done);
      h.CreateRet(dst);
      used.push_back(f);
    }
    llvm::appendToCompilerUsed(*module_, used);
  }

  // ---- System library registration ----
  void EmitRegistration(const std::vector<KernelInfo>& infos,
                        const std::vector<llvm::Function*>& entries,
                        llvm::GlobalVariable* manifest) {
    auto* reg_ty = llvm::FunctionType::get(i32_, {ptr_, ptr_, ptr_}, false);
    llvm::FunctionCallee reg = module_->getOrInsertFunction("TetherSystemLibRegister", reg_ty);
    auto* fn = llvm::Function::Create(
        llvm::FunctionType::get(i32_, {}, false), llvm::GlobalValue::ExternalLinkage,
        "tether_system_lib_register_" + options_.system_lib_prefix, module_.get());
    llvm::IRBuilder<> r(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* prefix = r.CreateGlobalStringPtr(options_.system_lib_prefix);
    llvm::Value* failed = r.getInt32(0);
    auto add = [&](const std::string& name, llvm::Value* ptr) {
      llvm::Value* rc = r.CreateCall(reg, {prefix, r.CreateGlobalStringPtr(name), ptr});
      failed = r.CreateOr(failed, rc);
    };
    for (size_t i = 0; i < infos.size(); ++i) add(infos[i].name, entries[i]);
    add("__tether_kernel_manifest", manifest);
    r.CreateRet(failed);
    // A constructor too, for --whole-archive links.
    auto* ctor = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {}, false),
                                        llvm::GlobalValue::InternalLinkage,
                                        "tether.system_lib.ctor", module_.get());
    llvm::IRBuilder<> c(llvm::BasicBlock::Create(ctx_, "entry", ctor));
    c.CreateCall(fn);
    c.CreateRetVoid();
    llvm::appendToGlobalCtors(*module_, ctor, 65535);
  }

  llvm::LLVMContext& ctx_;
  EmitOptions options_;
  std::unique_ptr<llvm::Module> module_;
  llvm::IRBuilder<> b_;
  MathEmitter math_;
  llvm::Type* i8_;
  llvm::Type* i16_;
  llvm::IntegerType* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  llvm::StructType* dltensor_ty_;
  llvm::StructType* services_ty_;
  llvm::Function* append_str_ = nullptr;
  llvm::Function* append_i64_ = nullptr;
  int parallel_count_ = 0;
  bool device_ = false;  // emitting PTX entries (RunDevice)
  FnState fs_;
  // Inside EmitVectorLoop: the lane count (0 outside), the loop var, its
  // lane-0 value and the vars that vary across lanes.
  struct VecState {
    int64_t lanes = 0;
    Var var;
    llvm::Value* lane0 = nullptr;
    VaryingVars varying;
  };
  VecState vec_;
  absl::flat_hash_map<const PrimExprNode*, llvm::Value*> vars_;
  absl::flat_hash_map<const BufferNode*, llvm::Value*> buffers_;
  // kPerThread buffers emitted as one thread's slice (device kernels).
  absl::flat_hash_set<const BufferNode*> slices_;
  // Fragment buffers: the thread's registers of each (device kernels).
  absl::flat_hash_map<const BufferNode*, llvm::Value*> fragments_;
  // Static shared memory a block may have on every architecture we target.
  static constexpr int64_t kMaxSharedBytes = 48 << 10;
};

}  // namespace

absl::StatusOr<std::unique_ptr<llvm::Module>> EmitKernels(llvm::LLVMContext& context,
                                                          const std::vector<KernelFunc>& kernels,
                                                          const EmitOptions& options) {
  if (options.system_lib && !options.system_lib_prefix.empty() &&
      !IsCIdentifier(options.system_lib_prefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "system library prefix \"", options.system_lib_prefix, "\" is not a C identifier"));
  }
  Emitter emitter(context, options);
  return emitter.Run(kernels);
}

absl::StatusOr<std::unique_ptr<llvm::Module>> EmitDeviceKernels(
    llvm::LLVMContext& context, const std::vector<KernelFunc>& launches) {
  Emitter emitter(context, EmitOptions());
  return emitter.RunDevice(launches);
}

}  // namespace tether::compiler::codegen
