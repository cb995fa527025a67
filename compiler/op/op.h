// The operator families: one registration function per file of
// compiler/op/, each adding its operators' OpInfo (compiler/relax/op_registry.h:
// inference, fusion pattern, compute or schedule) to the registry table.
// InstallOperators (registry.cc) calls them all, once, on the first lookup.
#ifndef TETHER_COMPILER_OP_OP_H_
#define TETHER_COMPILER_OP_OP_H_

#include "compiler/relax/op_registry.h"

namespace tether::compiler {

// One function per file of compiler/op/, each called once by
// InstallOperators (explicit calls, because a static library drops
// unreferenced self-registering objects).
void RegisterElementwiseOps();    // elementwise.cc: arithmetic, math, activations, compare,
                                  // where, astype, clip
void RegisterReductionOps();      // reduction.cc: sum/mean/max/min/prod, argmax/argmin
void RegisterManipulationOps();   // manipulation.cc: reshape, permute_dims, ..., full/zeros/ones,
                                  // tril/triu, cumsum
void RegisterSlicingOps();        // slicing.cc: take, strided_slice, gather_elements,
                                  // scatter_elements
void RegisterLinearAlgebraOps();  // linear_algebra.cc: matmul
void RegisterEinsumOp();          // einsum.cc
void RegisterConv2dOp();          // conv2d.cc
void RegisterConv3dOp();          // conv3d.cc
void RegisterPoolingOps();        // pooling.cc: max_pool2d, avg_pool2d, adaptive_avg_pool2d
void RegisterPool3dOps();         // pool3d.cc: max_pool3d, avg_pool3d
void RegisterNormalizationOps();  // normalization.cc: batch_norm, layer_norm, softmax, log_softmax
void RegisterNNOps();             // nn.cc: pad
void RegisterImageOps();          // image.cc: resize2d, grid_sample, roi_align
void RegisterSortingOps();        // sorting.cc: topk
void RegisterBuiltinOps();        // builtin.cc: call_tir, call_dps_packed, call_pure_packed,
                                  // shape_of, ...

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_OP_OP_H_
