// Bytecode functions to native code (vm_function_emitter.h).
#include "compiler/backend/llvm/vm_function_emitter.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/IRBuilder.h"
#include "runtime/vm/compiled_function.h"

namespace tether::compiler::codegen {
namespace {

// Emits one function; the types are the module's.
class FunctionEmitter {
 public:
  FunctionEmitter(llvm::Module* module, const vm::Executable& exec)
      : module_(module), exec_(exec), ctx_(module->getContext()), b_(ctx_) {
    i32_ = b_.getInt32Ty();
    i64_ = b_.getInt64Ty();
    ptr_ = b_.getPtrTy();
    // TetherVMServices: abi_version, reserved, ctx, call, cond, ret.
    services_ = llvm::StructType::get(ctx_, {i32_, i32_, ptr_, ptr_, ptr_, ptr_});
    call_ty_ = llvm::FunctionType::get(i32_, {ptr_, i64_}, false);
    cond_ty_ = llvm::FunctionType::get(i32_, {ptr_, i64_, ptr_}, false);
    ret_ty_ = llvm::FunctionType::get(i32_, {ptr_, i64_}, false);
  }

  void Emit(const vm::FunctionInfo& f) {
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(i32_, {ptr_}, false),
                                      llvm::GlobalValue::ExternalLinkage,
                                      absl::StrCat(vm::kCompiledFunctionPrefix, f.name), module_);
    fn_ = fn;
    fail_ = nullptr;
    fail_code_ = nullptr;
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn);
    b_.SetInsertPoint(entry);
    llvm::Value* services = fn->getArg(0);
    auto field = [&](unsigned i, const char* name) {
      return b_.CreateLoad(ptr_, b_.CreateStructGEP(services_, services, i), name);
    };
    vm_ctx_ = field(2, "ctx");
    call_ = field(3, "call");
    cond_ = field(4, "cond");
    ret_ = field(5, "ret");
    cond_slot_ = b_.CreateAlloca(i64_, nullptr, "cond");
    std::vector<llvm::BasicBlock*> blocks;
    for (vm::Index pc = f.start_instr; pc < f.end_instr; ++pc) {
      blocks.push_back(llvm::BasicBlock::Create(ctx_, absl::StrCat("pc", pc - f.start_instr), fn));
    }
    b_.CreateBr(blocks.front());
    // The site table: {total words, sites, then each site's words}.
    std::vector<uint64_t> sites = {0, 0};
    int64_t num_sites = 0;
    // Validate() keeps every target inside the function and a Call or If off
    // its last instruction.
    for (size_t i = 0; i < blocks.size(); ++i) {
      b_.SetInsertPoint(blocks[i]);
      const vm::Instruction instr = exec_.GetInstruction(f.start_instr + static_cast<vm::Index>(i));
      switch (instr.op) {
        case vm::Opcode::kCall: {
          llvm::Value* code = b_.CreateCall(call_ty_, call_, {vm_ctx_, b_.getInt64(num_sites)});
          ++num_sites;
          sites.push_back(static_cast<uint64_t>(instr.func_idx));
          sites.push_back(static_cast<uint64_t>(instr.dst));
          sites.push_back(static_cast<uint64_t>(instr.num_args));
          sites.insert(sites.end(), instr.args, instr.args + instr.num_args);
          BranchUnlessFailed(code, blocks[i + 1]);
          break;
        }
        case vm::Opcode::kIf: {
          llvm::Value* code =
              b_.CreateCall(cond_ty_, cond_, {vm_ctx_, b_.getInt64(instr.cond), cond_slot_});
          auto* test = llvm::BasicBlock::Create(ctx_, "", fn);
          BranchUnlessFailed(code, test);
          b_.SetInsertPoint(test);
          llvm::Value* c = b_.CreateLoad(i64_, cond_slot_);
          b_.CreateCondBr(b_.CreateICmpNE(c, b_.getInt64(0)), blocks[i + 1],
                          blocks[i + static_cast<size_t>(instr.false_offset)]);
          break;
        }
        case vm::Opcode::kGoto:
          b_.CreateBr(blocks[i + static_cast<size_t>(instr.pc_offset)]);
          break;
        case vm::Opcode::kRet:
          b_.CreateRet(b_.CreateCall(ret_ty_, ret_, {vm_ctx_, b_.getInt64(instr.result)}));
          break;
      }
    }
    sites[0] = sites.size();
    sites[1] = static_cast<uint64_t>(num_sites);
    llvm::Constant* data = llvm::ConstantDataArray::get(ctx_, sites);
    auto* table = new llvm::GlobalVariable(*module_, data->getType(), /*isConstant=*/true,
                                           llvm::GlobalValue::ExternalLinkage, data,
                                           absl::StrCat(vm::kCompiledSitesPrefix, f.name));
    table->setAlignment(llvm::Align(8));
  }

 private:
  // Continues at `next` when `code` is 0; otherwise returns it.
  void BranchUnlessFailed(llvm::Value* code, llvm::BasicBlock* next) {
    if (fail_ == nullptr) {
      llvm::IRBuilderBase::InsertPoint here = b_.saveIP();
      fail_ = llvm::BasicBlock::Create(ctx_, "fail", fn_);
      b_.SetInsertPoint(fail_);
      fail_code_ = b_.CreatePHI(i32_, 2, "code");
      b_.CreateRet(fail_code_);
      b_.restoreIP(here);
    }
    fail_code_->addIncoming(code, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpEQ(code, b_.getInt32(0)), next, fail_);
  }

  llvm::Module* module_;
  const vm::Executable& exec_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  llvm::StructType* services_;
  llvm::FunctionType* call_ty_;
  llvm::FunctionType* cond_ty_;
  llvm::FunctionType* ret_ty_;
  // Of the function being emitted.
  llvm::Function* fn_ = nullptr;
  llvm::Value* vm_ctx_ = nullptr;
  llvm::Value* call_ = nullptr;
  llvm::Value* cond_ = nullptr;
  llvm::Value* ret_ = nullptr;
  llvm::Value* cond_slot_ = nullptr;
  llvm::BasicBlock* fail_ = nullptr;
  llvm::PHINode* fail_code_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<llvm::Module>> EmitVMFunctions(llvm::LLVMContext& context,
                                                              const vm::Executable& exec) {
  if (absl::Status valid = exec.Validate(); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot compile an invalid executable: ", valid.message()));
  }
  auto module = std::make_unique<llvm::Module>("tether_vm_functions", context);
  FunctionEmitter emitter(module.get(), exec);
  for (const vm::FunctionInfo& f : exec.functions) {
    if (f.kind == vm::FunctionKind::kVMFunc) emitter.Emit(f);
  }
  return module;
}

}  // namespace tether::compiler::codegen
