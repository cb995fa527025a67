// WMMA intrinsics for MatrixTile statements (wmma.h). The intrinsics are
// named as LLVM's NVPTX backend spells them ("llvm.nvvm.wmma.m16n16k16...");
// the ".p3" forms take shared-memory pointers.
#include "compiler/backend/cuda/wmma.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llvm/IR/Module.h"

namespace tether::compiler::codegen {
namespace {

llvm::Type* SharedPtr(llvm::IRBuilder<>& b) { return b.getPtrTy(3); }

std::vector<llvm::Value*> LoadRegisters(llvm::IRBuilder<>& b, const FragmentRegisters& r,
                                        llvm::Value* regs) {
  std::vector<llvm::Value*> out;
  for (int i = 0; i < r.count; ++i)
    out.push_back(b.CreateLoad(r.type, b.CreateConstInBoundsGEP1_32(r.type, regs, i)));
  return out;
}

// Stores the `count` fields of the struct `v` to regs.
void StoreRegisters(llvm::IRBuilder<>& b, const FragmentRegisters& r, llvm::Value* v,
                    llvm::Value* regs) {
  for (int i = 0; i < r.count; ++i) {
    b.CreateStore(b.CreateExtractValue(v, {static_cast<unsigned>(i)}),
                  b.CreateConstInBoundsGEP1_32(r.type, regs, i));
  }
}

llvm::StructType* RegisterStruct(const FragmentRegisters& r) {
  return llvm::StructType::get(r.type->getContext(),
                               std::vector<llvm::Type*>(static_cast<size_t>(r.count), r.type));
}

llvm::FunctionCallee Intrinsic(llvm::IRBuilder<>& b, const std::string& name, llvm::Type* ret,
                               const std::vector<llvm::Type*>& params) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  return m->getOrInsertFunction(name, llvm::FunctionType::get(ret, params, false));
}

const char* OperandName(DataType dtype) { return dtype.is_bfloat16() ? "bf16" : "f16"; }

// A pointer into shared memory, as the .p3 intrinsics take it.
llvm::Value* AsShared(llvm::IRBuilder<>& b, llvm::Value* p) {
  return p->getType() == SharedPtr(b) ? p : b.CreateAddrSpaceCast(p, SharedPtr(b));
}

}  // namespace

FragmentRegisters Registers(llvm::LLVMContext& ctx, BufferNode::Scope scope, DataType dtype) {
  if (scope == BufferNode::Scope::kAccumulator) return {llvm::Type::getFloatTy(ctx), 8};
  // m16n16k16 operands: 16 float16 values as 8 pairs, or 8 bfloat16 as 4 words.
  if (dtype.is_bfloat16()) return {llvm::Type::getInt32Ty(ctx), 4};
  return {llvm::FixedVectorType::get(llvm::Type::getHalfTy(ctx), 2), 8};
}

void EmitWmmaLoad(llvm::IRBuilder<>& b, BufferNode::Scope scope, DataType dtype, llvm::Value* tile,
                  llvm::Value* stride, llvm::Value* regs) {
  const FragmentRegisters r = Registers(b.getContext(), scope, dtype);
  const char* which = scope == BufferNode::Scope::kMatrixA ? "a" : "b";
  llvm::FunctionCallee f = Intrinsic(b,
                                     absl::StrCat("llvm.nvvm.wmma.m16n16k16.load.", which,
                                                  ".row.stride.", OperandName(dtype), ".p3"),
                                     RegisterStruct(r), {SharedPtr(b), b.getInt32Ty()});
  StoreRegisters(b, r, b.CreateCall(f, {AsShared(b, tile), stride}), regs);
}

void EmitWmmaMma(llvm::IRBuilder<>& b, DataType dtype, llvm::Value* acc, llvm::Value* a,
                 llvm::Value* bregs) {
  const FragmentRegisters ro = Registers(b.getContext(), BufferNode::Scope::kMatrixA, dtype);
  const FragmentRegisters rc =
      Registers(b.getContext(), BufferNode::Scope::kAccumulator, DataType::Float(32));
  std::vector<llvm::Value*> args = LoadRegisters(b, ro, a);
  for (llvm::Value* v : LoadRegisters(b, ro, bregs)) args.push_back(v);
  for (llvm::Value* v : LoadRegisters(b, rc, acc)) args.push_back(v);
  std::vector<llvm::Type*> params;
  for (llvm::Value* v : args) params.push_back(v->getType());
  const std::string name = dtype.is_bfloat16() ? "llvm.nvvm.wmma.m16n16k16.mma.row.row.bf16"
                                               : "llvm.nvvm.wmma.m16n16k16.mma.row.row.f32.f32";
  llvm::FunctionCallee f = Intrinsic(b, name, RegisterStruct(rc), params);
  StoreRegisters(b, rc, b.CreateCall(f, args), acc);
}

void EmitWmmaStore(llvm::IRBuilder<>& b, llvm::Value* tile, llvm::Value* stride, llvm::Value* acc) {
  const FragmentRegisters rc =
      Registers(b.getContext(), BufferNode::Scope::kAccumulator, DataType::Float(32));
  std::vector<llvm::Value*> args{AsShared(b, tile)};
  for (llvm::Value* v : LoadRegisters(b, rc, acc)) args.push_back(v);
  args.push_back(stride);
  std::vector<llvm::Type*> params;
  for (llvm::Value* v : args) params.push_back(v->getType());
  llvm::FunctionCallee f =
      Intrinsic(b, "llvm.nvvm.wmma.m16n16k16.store.d.row.stride.f32.p3", b.getVoidTy(), params);
  b.CreateCall(f, args);
}

void EmitWmmaFill(llvm::IRBuilder<>& b, llvm::Value* acc, llvm::Value* value) {
  const FragmentRegisters rc =
      Registers(b.getContext(), BufferNode::Scope::kAccumulator, DataType::Float(32));
  for (int i = 0; i < rc.count; ++i)
    b.CreateStore(value, b.CreateConstInBoundsGEP1_32(rc.type, acc, i));
}

}  // namespace tether::compiler::codegen
