// Placeholder until the family lands (being written this session).
#include "compiler/op/op.h"

namespace tether::compiler {
void RegisterReductionOps() {}
}  // namespace tether::compiler
