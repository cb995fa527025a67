// Warpgroup MMA as inline PTX (wgmma.h).
#include "compiler/backend/cuda/wgmma.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llvm/IR/InlineAsm.h"

namespace tether::compiler::codegen {
namespace {

// A PTX statement with no operands that orders memory (asm volatile, "memory").
void Statement(llvm::IRBuilder<>& b, const std::string& text) {
  llvm::FunctionType* ty = llvm::FunctionType::get(b.getVoidTy(), false);
  b.CreateCall(llvm::InlineAsm::get(ty, text, "~{memory}", /*hasSideEffects=*/true));
}

// The descriptor of a shared-memory matrix at `at` (wgmma.h): 128-byte
// swizzle, `lbo` and `sbo` the leading and stride byte offsets.
llvm::Value* Descriptor(llvm::IRBuilder<>& b, llvm::Value* at, uint64_t lbo, uint64_t sbo) {
  llvm::Value* shared = b.CreateAddrSpaceCast(at, b.getPtrTy(3));
  llvm::Value* addr = b.CreatePtrToInt(shared, b.getInt64Ty());
  llvm::Value* start = b.CreateLShr(b.CreateAnd(addr, b.getInt64(0x3FFFF)), 4);
  const uint64_t fixed = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (uint64_t{1} << 62);
  return b.CreateOr(start, b.getInt64(fixed));
}

}  // namespace

void EmitWgmma(llvm::IRBuilder<>& b, const WarpgroupShape& shape, llvm::Value* acc, llvm::Value* a,
               llvm::Value* bt, llvm::Value* accumulate) {
  constexpr uint64_t kRow = 128, kPeriod = 1024;
  const int64_t regs = WgmmaRegisters(shape.n);
  llvm::Type* f32 = b.getFloatTy();
  // A: K-major, its leading offset unused; B: N-major, column blocks
  // b_rows rows apart. A k step of 16 moves A 32 bytes along its rows and
  // B 16 rows down.
  llvm::Value* da = Descriptor(b, a, 16, kPeriod);
  llvm::Value* db = Descriptor(b, bt, static_cast<uint64_t>(shape.b_rows) * kRow, kPeriod);
  const char* t = shape.dtype.is_bfloat16() ? "bf16" : "f16";
  std::string text =
      absl::StrCat("{\n.reg .pred p;\nsetp.ne.b32 p, $", regs + 2,
                   ", 0;\nwgmma.mma_async.sync.aligned.m64n", shape.n, "k16.f32.", t, ".", t, " {");
  std::string constraints;
  for (int64_t r = 0; r < regs; ++r) {
    absl::StrAppend(&text, r ? ", " : "", "$", r);
    absl::StrAppend(&constraints, r ? "," : "", "=f");
  }
  absl::StrAppend(&text, "}, $", regs, ", $", regs + 1, ", p, 1, 1, 0, 1;\n}");
  absl::StrAppend(&constraints, ",l,l,r");
  for (int64_t r = 0; r < regs; ++r) absl::StrAppend(&constraints, ",", r);
  std::vector<llvm::Type*> params = {b.getInt64Ty(), b.getInt64Ty(), b.getInt32Ty()};
  params.insert(params.end(), static_cast<size_t>(regs), f32);
  llvm::StructType* out = llvm::StructType::get(
      b.getContext(), std::vector<llvm::Type*>(static_cast<size_t>(regs), f32));
  llvm::InlineAsm* mma = llvm::InlineAsm::get(llvm::FunctionType::get(out, params, false), text,
                                              constraints, /*hasSideEffects=*/true);
  Statement(b, "wgmma.fence.sync.aligned;");
  llvm::Value* scale = b.CreateZExt(accumulate, b.getInt32Ty());
  for (int64_t kk = 0; kk < shape.k / 16; ++kk) {
    std::vector<llvm::Value*> args = {
        b.CreateAdd(da, b.getInt64(static_cast<uint64_t>(kk) * 32 / 16)),
        b.CreateAdd(db, b.getInt64(static_cast<uint64_t>(kk) * 16 * kRow / 16)),
        kk == 0 ? scale : b.getInt32(1)};
    for (int64_t r = 0; r < regs; ++r) {
      args.push_back(b.CreateLoad(f32, b.CreateConstInBoundsGEP1_32(f32, acc, r)));
    }
    llvm::Value* d = b.CreateCall(mma, args);
    for (int64_t r = 0; r < regs; ++r) {
      b.CreateStore(b.CreateExtractValue(d, {static_cast<unsigned>(r)}),
                    b.CreateConstInBoundsGEP1_32(f32, acc, r));
    }
  }
  Statement(b, "wgmma.commit_group.sync.aligned;");
  Statement(b, "wgmma.wait_group.sync.aligned 1;");
}

void EmitWgmmaStore(llvm::IRBuilder<>& b, llvm::Value* acc, llvm::Value* tid, int64_t first_col,
                    int64_t width, llvm::Value* dst) {
  Statement(b, "wgmma.wait_group.sync.aligned 0;");
  llvm::Type* f32 = b.getFloatTy();
  llvm::Value* lane = b.CreateAnd(tid, 31);
  llvm::Value* warp = b.CreateAnd(b.CreateLShr(tid, 5), 3);
  // Row 16 w + lane / 4 (+ 8), column 2 (lane % 4) (+ 1, + 8 (r / 4)).
  llvm::Value* row = b.CreateAdd(b.CreateMul(warp, b.getInt32(16)), b.CreateLShr(lane, 2));
  llvm::Value* col = b.CreateMul(b.CreateAnd(lane, 3), b.getInt32(2));
  llvm::Value* base = b.CreateAdd(b.CreateMul(row, b.getInt32(static_cast<int32_t>(width))), col);
  for (int64_t r = first_col / 2; r < (first_col + width) / 2; ++r) {
    const int64_t offset = (r / 2 % 2) * 8 * width + (r / 4) * 8 + r % 2 - first_col;
    llvm::Value* at = b.CreateAdd(base, b.getInt32(static_cast<int32_t>(offset)));
    llvm::Value* v = b.CreateLoad(f32, b.CreateConstInBoundsGEP1_32(f32, acc, r));
    b.CreateStore(v, b.CreateInBoundsGEP(f32, dst, b.CreateZExt(at, b.getInt64Ty())));
  }
}

void EmitAsyncProxyFence(llvm::IRBuilder<>& b) { Statement(b, "fence.proxy.async.shared::cta;"); }

}  // namespace tether::compiler::codegen
