// What compile-time weight packing (compiler/transform/pack_weights.h)
// needs from conv2d's CPU schedules: whether a call runs the wide schedule,
// whose packed weight blocks a constant weight can be packed into once, and
// the packing itself. relax.nn.conv2d_packed(x, wp, out_channels=O, ...)
// with wp = PackConv2dWeights(w, groups) computes conv2d(x, w, ...).
//
// Thread contract: free functions; thread-safe.
#ifndef TETHER_COMPILER_OP_CONV2D_H_
#define TETHER_COMPILER_OP_CONV2D_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"
#include "runtime/core/tensor.h"

namespace tether::compiler {

// Whether the normalized relax.nn.conv2d `call` (static weight shape), its
// weight a constant, should run the CPU wide schedule on a weight packed at
// compile time into blocks of output channels (relax.nn.conv2d_packed): not
// a 1x1 product, no out_dtype, and either at least 32 output channels per
// group (a whole block) or at least 8 where the call would not run the rows
// schedule.
bool Conv2dPacksWeights(const CallNode& call);

// Whether conv2d's attributes make it a plain product per pixel: unit
// strides, no padding, one group, the default layouts, no out_dtype (with
// a 1x1 kernel, W[o][c] times the image as a [c][pixel] matrix).
bool Conv2dIsPlainProduct(const Attrs& attrs);

// The OIHW weight `w` as the wide schedule's blocks
// [groups * ceil(Og / BO), Cg, KH, KW, BO], BO = min(32, Og) output
// channels each, zero past a group's channels. INVALID_ARGUMENT for a
// tensor that is not a 4-d weight on the CPU whose channels divide into
// `groups`.
absl::StatusOr<Tensor> PackConv2dWeights(const Tensor& w, int64_t groups);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_OP_CONV2D_H_
