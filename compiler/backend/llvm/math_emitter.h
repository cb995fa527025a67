// MathEmitter: the float math intrinsics of the kernel IR ("exp", "tanh",
// "erf", ...) as inline LLVM IR, so a kernel library never calls libm. Each
// intrinsic is an internal, always-inline function on double built from
// selects only (no branches), which the loop vectorizer can widen; float32
// and float16 callers extend to double and round back, so their results are
// accurate to an ulp or two of float32.
//
// Thread contract: thread-hostile (builds into one llvm::Module).
#ifndef TETHER_COMPILER_BACKEND_LLVM_MATH_EMITTER_H_
#define TETHER_COMPILER_BACKEND_LLVM_MATH_EMITTER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace tether::compiler::codegen {

class MathEmitter {
 public:
  explicit MathEmitter(llvm::Module* module) : module_(module) {}

  // Calls math op `op` on `args` (doubles; one, or two for "pow") at the
  // builder's insertion point. INVALID_ARGUMENT for an unknown op or arity.
  absl::StatusOr<llvm::Value*> Call(llvm::IRBuilder<>& b, absl::string_view op,
                                    const std::vector<llvm::Value*>& args);

 private:
  llvm::Function* GetOrCreate(const std::string& op, int arity);
  llvm::Value* Build(llvm::IRBuilder<>& b, const std::string& op, llvm::Value* x, llvm::Value* y);

  llvm::Module* module_;
  absl::flat_hash_map<std::string, llvm::Function*> functions_;
};

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_MATH_EMITTER_H_
