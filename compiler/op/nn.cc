// The neural-network operator family (relax.nn.*). Each group lives in its
// own file — conv2d.cc, pooling.cc, normalization.cc — and registers here.
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"

namespace tether::compiler {

void RegisterNNOps() {
  RegisterConv2dOp();
  RegisterPoolingOps();
  RegisterNormalizationOps();
}

}  // namespace tether::compiler
