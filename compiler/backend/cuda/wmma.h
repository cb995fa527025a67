// The NVPTX code of MatrixTile statements (compiler/tir/kernel_ir.h): the
// m16n16k16 WMMA intrinsics, row-major tiles, float32 accumulators. A
// thread's part of a fragment lives in `Registers(...)` values of one type,
// in memory the emitter allocates per fragment (SROA makes registers of it
// once the fragment loops are unrolled).
//
// Thread contract: stateless functions over an IRBuilder; thread-compatible.
#ifndef TETHER_COMPILER_BACKEND_CUDA_WMMA_H_
#define TETHER_COMPILER_BACKEND_CUDA_WMMA_H_

#include "compiler/tir/prim_expr.h"
#include "llvm/IR/IRBuilder.h"

namespace tether::compiler::codegen {

// What one thread holds of a fragment of `scope` and `dtype`.
struct FragmentRegisters {
  llvm::Type* type = nullptr;
  int count = 0;
};
FragmentRegisters Registers(llvm::LLVMContext& ctx, BufferNode::Scope scope, DataType dtype);

// regs = the thread's part of the kMatrixA / kMatrixB tile at `tile` (a
// shared-memory pointer, 32-byte aligned) with rows `stride` elements apart.
void EmitWmmaLoad(llvm::IRBuilder<>& b, BufferNode::Scope scope, DataType dtype, llvm::Value* tile,
                  llvm::Value* stride, llvm::Value* regs);
// acc += a x b, operands of `dtype`.
void EmitWmmaMma(llvm::IRBuilder<>& b, DataType dtype, llvm::Value* acc, llvm::Value* a,
                 llvm::Value* bregs);
// The accumulator `acc` to the float32 tile at `tile` (shared memory).
void EmitWmmaStore(llvm::IRBuilder<>& b, llvm::Value* tile, llvm::Value* stride, llvm::Value* acc);
// Every element of the accumulator `acc` = value (a float).
void EmitWmmaFill(llvm::IRBuilder<>& b, llvm::Value* acc, llvm::Value* value);

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_CUDA_WMMA_H_
