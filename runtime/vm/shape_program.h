// The shape programs that vm.builtin.compute_shape_heap runs: the compiler
// (compiler/backend/vm/vm_codegen.cc) turns symbolic shape arithmetic such as
// n * 4 + 1 into one, and the VM evaluates it on the shape heap at run time.
// A program is a Shape of int64 words, each opcode followed by its operand
// where it has one, run on a stack of int64 with the semantics of the
// compiler's PrimExpr integer operators (floordiv/floormod round towards
// negative infinity; arithmetic wraps instead of overflowing).
#ifndef TETHER_RUNTIME_VM_SHAPE_PROGRAM_H_
#define TETHER_RUNTIME_VM_SHAPE_PROGRAM_H_

#include <cstdint>

namespace tether::vm {

enum class ShapeProgramOp : int64_t {
  kPushImm = 0,  // operand: the value
  kLoad = 1,     // operand: a heap slot
  kStore = 2,    // operand: a heap slot; pops the value
  kAdd = 3,
  kSub = 4,
  kMul = 5,
  kFloorDiv = 6,
  kFloorMod = 7,
  kMin = 8,
  kMax = 9,
  kTruncDiv = 10,
  kEQ = 11,
  kNE = 12,
  kLT = 13,
  kLE = 14,
  kGT = 15,
  kGE = 16,
  kAnd = 17,
  kOr = 18,
  kNot = 19,
  kSelect = 20,  // pops false value, true value, condition
};

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_SHAPE_PROGRAM_H_
