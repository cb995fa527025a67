// InstallOperators (compiler/relax/op_registry.h): every family of op.h
// registers its operators, once, on the registry table's first lookup.
#include "compiler/op/op.h"

namespace tether::compiler {

void InstallOperators() {
  RegisterElementwiseOps();
  RegisterReductionOps();
  RegisterManipulationOps();
  RegisterSlicingOps();
  RegisterLinearAlgebraOps();
  RegisterEinsumOp();
  RegisterConv2dOp();
  RegisterConv3dOp();
  RegisterPoolingOps();
  RegisterPool3dOps();
  RegisterNormalizationOps();
  RegisterNNOps();
  RegisterImageOps();
  RegisterSortingOps();
  RegisterBuiltinOps();
}

}  // namespace tether::compiler
