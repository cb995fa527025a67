// Explicit vectorization of short kVectorized loops. A loop with a constant
// extent of 2 to kMaxVectorLanes whose body is only stores and lets (the
// matmul micro-kernel's accumulate, zero and pack loops; short elementwise
// rows) is emitted by the kernel emitter as straight-line LLVM vector code:
// one vector per load and store instead of a scalar loop that LLVM's loop
// vectorizer must analyse, cost and rewrite. That keeps the micro-kernel's
// accumulators in vector registers (SROA promotes the tile) and takes most of
// the optimizer's time per kernel away. Other kVectorized loops keep the
// vectorize metadata and LLVM's vectorizer.
//
// A transpose tile is two kVectorized loops nested, of the same power-of-two
// extent n (2..16), around one store of a load (through casts) from another
// buffer, the load reading consecutive elements along one loop's var and
// the store writing them along the other's: a channel-first image copied
// into a channel-last strip and back (the depthwise convolution's,
// compiler/op/conv2d.cc). It is emitted as n vector loads, a transpose in
// registers (n log2 n two-vector shuffles) and n vector stores, where the
// loops would gather or scatter one element at a time.
//
// This file is the analysis (kernel IR only, no LLVM): which loops qualify
// and how each memory access of the body reads across the lanes.
//
// Thread contract: pure functions.
#ifndef TETHER_COMPILER_BACKEND_LLVM_VECTORIZE_H_
#define TETHER_COMPILER_BACKEND_LLVM_VECTORIZE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "compiler/tir/kernel_ir.h"
#include "compiler/tir/prim_expr.h"

namespace tether::compiler::codegen {

inline constexpr int64_t kMaxVectorLanes = 64;

// How one access reads or writes across the lanes of a vectorized loop.
enum class LaneAccess : uint8_t {
  kUniform,     // the same element for every lane
  kContiguous,  // consecutive elements, lane 0 first
  kGather,      // anything else (one address per lane)
};

// The vars whose value differs across lanes: the loop var and the let vars
// of the body computed from it.
using VaryingVars = absl::flat_hash_set<const PrimVarNode*>;

// Whether `e` reads a varying var.
bool IsVarying(const PrimExpr& e, const VaryingVars& varying);

// How buffer[indices] moves across the lanes of `loop_var`.
LaneAccess ClassifyAccess(const Buffer& buffer, const std::vector<PrimExpr>& indices,
                          const Var& loop_var, const VaryingVars& varying);

// The lane count when `loop` (a kVectorized loop) can be emitted as vector
// code: a constant extent in [2, kMaxVectorLanes]; a body of lets and stores
// only; every store contiguous; math calls only float32 ones with a
// single-precision version (math_f32.h); no float floor division, and no
// float16/bfloat16/bool in memory or casts. Otherwise nullopt.
std::optional<int64_t> VectorizableLanes(const ForNode& loop);

// A transpose tile (see the file comment): `outer` and `inner` the loops,
// `store` the inner loop's body and `load` its value under zero or more
// casts.
struct TransposeTile {
  int64_t lanes = 0;
  const ForNode* inner = nullptr;
  const StoreNode* store = nullptr;
  const LoadNode* load = nullptr;
  // The load is contiguous along the outer var and the store along the
  // inner one; false: the other way round.
  bool load_along_outer = false;
  // The element strides between the n loads (along the var they are not
  // contiguous in) and between the n stores, when constant.
  std::optional<int64_t> load_stride, store_stride;
};
inline constexpr int64_t kMaxTransposeLanes = 16;

// `outer` as a transpose tile, when it is one (both loops kVectorized with
// the same constant extent, a power of two in [2, kMaxTransposeLanes], int
// vars; plain dtypes; the accesses contiguous as above); otherwise nullopt.
std::optional<TransposeTile> AsTransposeTile(const ForNode& outer);

}  // namespace tether::compiler::codegen

#endif  // TETHER_COMPILER_BACKEND_LLVM_VECTORIZE_H_
