// PackConstantWeights: for a CPU target, the constant weights of products
// are packed at compile time into the layout their kernel reads, so no call
// packs them again. relax.matmul(a, w) with w a constant [k, n] matrix
// becomes relax.matmul_packed(a, PackGemmPanels(w), n=n) (compiler/op/
// cpu_gemm.h): the GEMM's column panels, each k x NR contiguous, read in
// place by the micro-kernel. Without this, a weight is read in place only
// when the panels tile n exactly, with rows n floats apart (a stride the
// caches handle badly at k in the thousands), and is otherwise packed on
// every call. A convolution whose CPU schedule packs its weight into
// blocks of output channels on every call (the wide schedule) becomes
// relax.nn.conv2d_packed with the blocks packed once (compiler/op/conv2d.h).
// A 1x1 convolution of a constant weight on 1x1 images (the
// convolutions of a squeeze-excite block) becomes the same packed product
// of w^T between two reshapes (views: on 1x1 images [n, c, 1, 1] and
// [n, c] are the same bytes), instead of a convolution that repacks its
// weight on every call to compute a matrix-vector product.
//
// Runs after ConstantFolding (weights a transpose or a cast made constant
// are constants by then) and before FuseOps; the unpacked constant is left
// to DeadCodeElimination. See docs/design/compiler-pipeline.md.
//
// Thread contract: pure function of its arguments; thread-safe.
#ifndef TETHER_COMPILER_TRANSFORM_PACK_WEIGHTS_H_
#define TETHER_COMPILER_TRANSFORM_PACK_WEIGHTS_H_

#include "absl/status/statusor.h"
#include "compiler/relax/module.h"

namespace tether::compiler {

// INVALID_ARGUMENT when a function is not normalized.
[[nodiscard]] absl::StatusOr<IRModule> PackConstantWeights(IRModule module);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TRANSFORM_PACK_WEIGHTS_H_
