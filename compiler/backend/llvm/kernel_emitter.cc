// Lowering of the kernel IR to LLVM IR (kernel_emitter.h): the Emitter's
// kernel and device entries and the library's globals (emitter.h), and the
// public functions.
#include "compiler/backend/llvm/kernel_emitter.h"

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
#include "runtime/cuda/cuda_kernel_library.h"
#include "runtime/kernel/kernel_library.h"

namespace tether::compiler::codegen::emitter_internal {

absl::StatusOr<std::unique_ptr<llvm::Module>> Emitter::Run(const std::vector<KernelFunc>& kernels) {
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
  if (!options_.library_globals) return std::move(module_);
  std::string manifest = FormatKernelManifest(infos);
  llvm::Constant* manifest_init = llvm::ConstantDataArray::getString(ctx_, manifest, true);
  auto linkage =
      options_.system_lib ? llvm::GlobalValue::InternalLinkage : llvm::GlobalValue::ExternalLinkage;
  auto* manifest_gv = new llvm::GlobalVariable(*module_, manifest_init->getType(), true, linkage,
                                               manifest_init, "tether_kernel_manifest");
  auto* version_gv =
      new llvm::GlobalVariable(*module_, i32_, true, linkage,
                               b_.getInt32(TETHER_KERNEL_ABI_VERSION), "tether_kernel_abi_version");
  (void)version_gv;
  if (options_.system_lib) EmitRegistration(infos, entries, manifest_gv);
  if (!options_.emit.empty()) {  // the other modules call them
    CheckTensorFn();
    AppendStrFn();
    AppendI64Fn();
  }
  EmitMemoryBuiltins();
  return std::move(module_);
}

absl::StatusOr<std::unique_ptr<llvm::Module>> Emitter::RunDevice(
    const std::vector<KernelFunc>& launches, int sm) {
  device_ = true;
  sm_ = sm;
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

absl::StatusOr<llvm::Function*> Emitter::EmitKernel(const KernelFunc& k) {
  fs_ = FnState();
  fs_.kernel = k->name;
  vars_.clear();
  buffers_.clear();
  auto linkage =
      options_.system_lib ? llvm::GlobalValue::InternalLinkage : llvm::GlobalValue::ExternalLinkage;
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
    llvm::Value* t = b_.CreateLoad(ptr_, slot);
    // Null, device, ndim, dtype, strides and the constant dims: one call
    // of the module's checker with this parameter's descriptor.
    llvm::Value* rc = b_.CreateCall(CheckTensorFn(), {fs_.services, t, TensorCheckDesc(k, i)});
    auto* fail = llvm::BasicBlock::Create(ctx_, "arg.fail", entry);
    auto* cont = llvm::BasicBlock::Create(ctx_, "arg.ok", entry);
    b_.CreateCondBr(b_.CreateICmpEQ(rc, b_.getInt32(0)), cont, fail,
                    llvm::MDBuilder(ctx_).createBranchWeights(1 << 20, 1));
    b_.SetInsertPoint(fail);
    b_.CreateRet(rc);
    b_.SetInsertPoint(cont);
    const int ndim = static_cast<int>(buf->shape.size());
    llvm::Value* shape = nullptr;
    dims[i].assign(ndim, nullptr);
    for (int d = 0; d < ndim; ++d) {
      if (buf->shape[d].as_int() != nullptr) continue;  // checked by the checker
      if (shape == nullptr) {
        shape = b_.CreateLoad(ptr_, b_.CreateStructGEP(dltensor_ty_, t, kDLShape));
      }
      dims[i][d] = b_.CreateLoad(i64_, b_.CreateInBoundsGEP(i64_, shape, b_.getInt64(d)));
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
      if (e.kind() == PrimKind::kVar || e.as_int() != nullptr) continue;
      absl::StatusOr<llvm::Value*> expected = EmitIndex(e);
      if (!expected.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", name, ": shape of parameter ", p.buffer->name, " dim ", d, " (",
                         ToString(e), ") uses a variable no parameter binds"));
      }
      std::vector<MsgPart> msg = {
          absl::StrCat("kernel ", name, ": argument ", i, " dim ", d, " is "), dims[i][d],
          absl::StrCat(", expected ", ToString(e), " = "), *expected};
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

absl::Status Emitter::EmitDeviceEntry(const KernelFunc& k) {
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
  annotations->addOperand(
      llvm::MDNode::get(ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "kernel"),
                               llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
  // No launch has more threads per block: ptxas may budget registers for it.
  annotations->addOperand(llvm::MDNode::get(
      ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "maxntidx"),
             llvm::ConstantAsMetadata::get(b_.getInt32(kDeviceBlockThreads))}));
  fs_.fn = fn;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
  // Read-only tensors are noalias (loads through the non-coherent cache).
  // A tensor the launch stores to is not: LLVM takes a noalias argument that
  // is never captured to be untouched by any call, bar.sync included, and
  // would keep values in registers across a barrier that another thread's
  // store to it precedes.
  absl::flat_hash_set<const BufferNode*> stored;
  VisitStoredBuffers(k->body, [&](const Buffer& b) { stored.insert(b.get()); });
  unsigned arg = 0;
  for (size_t i = 0; i + 2 < n; ++i, ++arg) {
    const KernelParam& p = k->params[i];
    if (p.is_tensor()) {
      if (!stored.contains(p.buffer.get())) fn->addParamAttr(arg, llvm::Attribute::NoAlias);
      // The launcher holds tensor data to this (cuda_kernel_library.h).
      fn->addParamAttr(arg, llvm::Attribute::getWithAlignment(
                                ctx_, llvm::Align(static_cast<uint64_t>(kCudaTensorAlignment))));
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
  if (DynamicSharedBytes(k->body) > 0) {
    // The launch's shared buffers come from dynamic shared memory
    // (kernel_ir.h), its base rounded up to kSharedAlignment: the launcher
    // asks for DynamicSharedBytes, which includes the slack.
    llvm::Type* ty = llvm::ArrayType::get(i8_, 0);
    llvm::GlobalVariable* gv = module_->getGlobalVariable("tether_dynamic_shared", true);
    if (gv == nullptr) {
      gv = new llvm::GlobalVariable(
          *module_, ty, /*isConstant=*/false, llvm::GlobalValue::ExternalLinkage, nullptr,
          "tether_dynamic_shared", nullptr, llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/3);
      gv->setAlignment(llvm::Align(16));
    }
    llvm::Value* addr = b_.CreatePtrToInt(gv, i64_);
    llvm::Value* pad =
        b_.CreateAnd(b_.CreateSub(b_.getInt64(0), addr), b_.getInt64(kSharedAlignment - 1));
    fs_.dynamic_shared = b_.CreateInBoundsGEP(i8_, gv, pad, "dynamic_shared");
  }
  TETHER_RETURN_IF_ERROR(EmitStmt(k->body));
  b_.CreateRetVoid();
  return absl::OkStatus();
}

absl::Status Emitter::BindOrCheck(const PrimExpr& var, llvm::Value* value,
                                  std::vector<MsgPart> msg) {
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

llvm::Function* Emitter::CheckTensorFn() {
  if (check_tensor_ != nullptr) return check_tensor_;
  check_desc_ty_ = llvm::StructType::create(
      ctx_, {i32_, i32_, ptr_, ptr_, ptr_, llvm::ArrayType::get(i64_, 0)}, "TetherTensorCheck");
  llvm::Function* f = HelperFunction(llvm::FunctionType::get(i32_, {ptr_, ptr_, ptr_}, false),
                                     "tether.check_tensor");
  f->addFnAttr(llvm::Attribute::NoInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  check_tensor_ = f;
  if (HelpersElsewhere()) return f;
  // Emitted with the kernel machinery (EmitCheck), as a function of its own.
  FnState saved = std::move(fs_);
  llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
  fs_ = FnState();
  fs_.fn = f;
  fs_.services = f->getArg(0);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
  llvm::Value* t = f->getArg(1);
  llvm::Value* desc = f->getArg(2);
  auto field = [&](unsigned i, llvm::Type* ty) {
    return b_.CreateLoad(ty, b_.CreateStructGEP(check_desc_ty_, desc, i));
  };
  llvm::Value* ndim = field(0, i32_);
  llvm::Value* dtype = field(1, i32_);
  MsgPart arg = MsgPart::String(field(2, ptr_));
  constexpr int32_t kInvalid = TETHER_KERNEL_INVALID_ARGUMENT;
  EmitCheck(b_.CreateIsNotNull(t), {arg, " is null"}, kInvalid);
  llvm::Value* dev = b_.CreateLoad(i32_, b_.CreateStructGEP(dltensor_ty_, t, kDLDevice));
  EmitCheck(b_.CreateICmpEQ(dev, b_.getInt32(kDLCPU)),
            {arg, " is not on the cpu (device type ", dev, ")"}, kInvalid);
  llvm::Value* nd = b_.CreateLoad(i32_, b_.CreateStructGEP(dltensor_ty_, t, kDLNdim));
  EmitCheck(b_.CreateICmpEQ(nd, ndim), {arg, " has ", nd, " dims, expected ", ndim}, kInvalid);
  llvm::Value* dt = b_.CreateStructGEP(dltensor_ty_, t, kDLDtype);
  llvm::Type* dt_ty = llvm::StructType::get(ctx_, {i8_, i8_, i16_});
  auto dt_field = [&](unsigned i, llvm::Type* ty, int shift) {
    llvm::Value* v = b_.CreateZExt(b_.CreateLoad(ty, b_.CreateStructGEP(dt_ty, dt, i)), i32_);
    return b_.CreateShl(v, shift);
  };
  llvm::Value* word =
      b_.CreateOr(b_.CreateOr(dt_field(0, i8_, 0), dt_field(1, i8_, 8)), dt_field(2, i16_, 16));
  EmitCheck(b_.CreateICmpEQ(word, dtype),
            {arg, " has the wrong dtype, expected ", MsgPart::String(field(4, ptr_))}, kInvalid);
  llvm::Value* shape = b_.CreateLoad(ptr_, b_.CreateStructGEP(dltensor_ty_, t, kDLShape));
  llvm::Value* strides = b_.CreateLoad(ptr_, b_.CreateStructGEP(dltensor_ty_, t, kDLStrides));
  llvm::Value* n = b_.CreateZExt(ndim, i64_);
  auto dim_of = [&](llvm::Value* d) {
    return b_.CreateLoad(i64_, b_.CreateInBoundsGEP(i64_, shape, d));
  };
  // Compact row-major strides (or none): from the last dim down, each
  // stride is the product of the dims after it, or its dim is 1.
  auto* stride_loop = llvm::BasicBlock::Create(ctx_, "strides", f);
  auto* stride_body = llvm::BasicBlock::Create(ctx_, "strides.body", f);
  auto* dims_entry = llvm::BasicBlock::Create(ctx_, "dims", f);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  b_.CreateCondBr(b_.CreateIsNull(strides), dims_entry, stride_loop);
  b_.SetInsertPoint(stride_loop);
  llvm::PHINode* left = b_.CreatePHI(i64_, 2);
  llvm::PHINode* expected = b_.CreatePHI(i64_, 2);
  left->addIncoming(n, pre);
  expected->addIncoming(b_.getInt64(1), pre);
  b_.CreateCondBr(b_.CreateICmpSGT(left, b_.getInt64(0)), stride_body, dims_entry);
  b_.SetInsertPoint(stride_body);
  llvm::Value* d = b_.CreateSub(left, b_.getInt64(1));
  llvm::Value* dim = dim_of(d);
  llvm::Value* st = b_.CreateLoad(i64_, b_.CreateInBoundsGEP(i64_, strides, d));
  EmitCheck(b_.CreateOr(b_.CreateICmpEQ(dim, b_.getInt64(1)), b_.CreateICmpEQ(st, expected)),
            {arg, " is not compact row-major"}, kInvalid);
  left->addIncoming(d, b_.GetInsertBlock());
  expected->addIncoming(b_.CreateMul(expected, dim), b_.GetInsertBlock());
  b_.CreateBr(stride_loop);
  // The constant dims.
  b_.SetInsertPoint(dims_entry);
  auto* dims_loop = llvm::BasicBlock::Create(ctx_, "dims.loop", f);
  auto* dims_body = llvm::BasicBlock::Create(ctx_, "dims.body", f);
  auto* done = llvm::BasicBlock::Create(ctx_, "done", f);
  b_.CreateBr(dims_loop);
  b_.SetInsertPoint(dims_loop);
  llvm::PHINode* i = b_.CreatePHI(i64_, 2);
  i->addIncoming(b_.getInt64(0), dims_entry);
  b_.CreateCondBr(b_.CreateICmpSLT(i, n), dims_body, done);
  b_.SetInsertPoint(dims_body);
  llvm::Value* want = b_.CreateLoad(
      i64_, b_.CreateInBoundsGEP(i64_, b_.CreateStructGEP(check_desc_ty_, desc, 5), i));
  llvm::Value* got = dim_of(i);
  EmitCheck(b_.CreateOr(b_.CreateICmpSLT(want, b_.getInt64(0)), b_.CreateICmpEQ(got, want)),
            {MsgPart::String(field(3, ptr_)), i, " is ", got, ", expected ", want}, kInvalid);
  i->addIncoming(b_.CreateAdd(i, b_.getInt64(1)), b_.GetInsertBlock());
  b_.CreateBr(dims_loop);
  b_.SetInsertPoint(done);
  b_.CreateRet(b_.getInt32(0));
  fs_ = std::move(saved);
  b_.restoreIP(ip);
  return f;
}

llvm::Constant* Emitter::TensorCheckDesc(const KernelFunc& k, int i) {
  const Buffer& buf = k->params[i].buffer;
  std::vector<llvm::Constant*> dims;
  for (const PrimExpr& e : buf->shape) {
    const int64_t* c = e.as_int();
    dims.push_back(b_.getInt64(c != nullptr ? *c : -1));
  }
  const DataType dt = buf->dtype;
  const uint32_t word = static_cast<uint32_t>(dt.code()) | (static_cast<uint32_t>(dt.bits()) << 8) |
                        (static_cast<uint32_t>(dt.lanes()) << 16);
  std::string arg = absl::StrCat("kernel ", k->name, ": argument ", i);
  llvm::Constant* init = llvm::ConstantStruct::getAnon(
      {b_.getInt32(static_cast<uint32_t>(dims.size())), b_.getInt32(word),
       b_.CreateGlobalStringPtr(absl::StrCat(arg, " (", buf->name, ")")),
       b_.CreateGlobalStringPtr(absl::StrCat(arg, " dim ")),
       b_.CreateGlobalStringPtr(dt.ToString()),
       llvm::ConstantArray::get(llvm::ArrayType::get(i64_, dims.size()), dims)});
  auto* gv = new llvm::GlobalVariable(*module_, init->getType(), /*isConstant=*/true,
                                      llvm::GlobalValue::PrivateLinkage, init,
                                      absl::StrCat(k->name, ".arg", i));
  gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return gv;
}

void Emitter::EmitMemoryBuiltins() {
  if (HelpersElsewhere()) return;  // llvm.memcpy's calls resolve to them when linked
  llvm::SmallVector<llvm::GlobalValue*, 3> used;
  for (const char* name : {"memset", "memcpy", "memmove"}) {
    bool is_set = std::string(name) == "memset";
    std::vector<llvm::Type*> params = {ptr_, is_set ? static_cast<llvm::Type*>(i32_) : ptr_, i64_};
    llvm::Function* f = HelperFunction(llvm::FunctionType::get(ptr_, params, false), name);
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

void Emitter::EmitRegistration(const std::vector<KernelInfo>& infos,
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
                                      llvm::GlobalValue::InternalLinkage, "tether.system_lib.ctor",
                                      module_.get());
  llvm::IRBuilder<> c(llvm::BasicBlock::Create(ctx_, "entry", ctor));
  c.CreateCall(fn);
  c.CreateRetVoid();
  llvm::appendToGlobalCtors(*module_, ctor, 65535);
}

}  // namespace tether::compiler::codegen::emitter_internal

namespace tether::compiler::codegen {

using emitter_internal::Emitter;
using emitter_internal::IsCIdentifier;

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
    llvm::LLVMContext& context, const std::vector<KernelFunc>& launches, int sm) {
  Emitter emitter(context, EmitOptions());
  return emitter.RunDevice(launches, sm);
}

}  // namespace tether::compiler::codegen
