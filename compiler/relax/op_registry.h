// The operator registry table. Each Relax operator ("relax.add",
// "relax.nn.conv2d") has one OpInfo saying what the compiler needs to know
// about it:
//   - how to infer the struct info of a call (broadcasting, symbolic shapes),
//   - its fusion pattern (as TVM's OpPatternKind),
//   - how to lower it to the kernel IR: a per-element `compute` for
//     elementwise/broadcast/injective operators, or a `schedule` that writes
//     whole output buffers for reductions and complex operators (matmul,
//     conv2d, pooling, normalization, softmax).
// The operators themselves are defined in compiler/op/, one file per family;
// the block builder (inference) and the lowering (compiler/lower/) find them
// here by name.
//
// Fusion (compiler/transform/) composes these: injective producers are
// inlined through the TensorReaders of their consumer, and elementwise
// consumers of a schedule's output become its `epilogue`, applied at the
// final store. An operator never needs to know whether it is fused.
//
// Thread contract: the table is filled once, under a once-flag, by the first
// lookup (InstallOperators); lookups are thread-safe.
#ifndef TETHER_COMPILER_RELAX_OP_REGISTRY_H_
#define TETHER_COMPILER_RELAX_OP_REGISTRY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"
#include "compiler/tir/kernel_ir.h"
#include "compiler/tir/kernel_target.h"

namespace tether::compiler {

// As TVM's OpPatternKind; the order matters (fusion compares kinds).
enum class OpPattern : uint8_t {
  kElemWise = 0,    // out[i] = f(in0[i], in1[i], ...), same shapes
  kBroadcast = 1,   // elementwise with numpy broadcasting
  kInjective = 2,   // each output element reads a few input elements (reshape, transpose, take)
  kCommReduce = 3,  // reductions (sum, max, argmax, ...)
  kOutEWiseFusable =
      4,        // complex ops whose output can take an elementwise epilogue (matmul, conv2d)
  kOpaque = 8,  // never fused (ops that are not lowered to kernels, or multi-output)
};

// Reads the element of one operand at `indices` (one per dimension of the
// operand). For a plain kernel parameter it is a Load of the parameter
// buffer; for a fused producer it is the producer's expression, inlined.
using TensorReader = std::function<PrimExpr(const std::vector<PrimExpr>& indices)>;

// Maps the value computed for output 0 at `indices` to the value stored.
// Identity when nothing is fused after the operator.
using Epilogue =
    std::function<PrimExpr(const PrimExpr& value, const std::vector<PrimExpr>& indices)>;

// One call being lowered.
struct LowerContext {
  const CallNode* call = nullptr;  // args (with struct info) and attrs
  // Per argument of the call: a reader when the argument is a tensor, else
  // empty (shape, prim value and other non-tensor arguments are read from
  // call->args directly and must be known at compile time or symbolic).
  std::vector<TensorReader> inputs;
  // Per argument: the buffer behind it when it is a kernel parameter (not an
  // inlined producer), else null. Schedules that pack or tile read buffers;
  // they may require them (and return INVALID_ARGUMENT otherwise; fusion
  // never inlines into an OutEWiseFusable operator's inputs).
  std::vector<Buffer> input_buffers;
  // The struct info of the call (its output), with the shape known (maybe symbolic).
  StructInfo out_sinfo;
  // The machine the kernel will run on (threads, GPU and its architecture).
  KernelTarget target;
};

struct OpInfo {
  std::string name;  // "relax.nn.conv2d"
  OpPattern pattern = OpPattern::kOpaque;
  int num_args = -1;  // -1: variadic (checked by infer)

  // The struct info of `call` (its args are normalized and carry struct info).
  // INVALID_ARGUMENT naming the operator and what is wrong:
  // "relax.add: cannot broadcast R.Tensor((2, 3)) with R.Tensor((4,))".
  std::function<absl::StatusOr<StructInfo>(const CallNode& call)> infer;

  // kElemWise, kBroadcast, kInjective: the output element at `indices`
  // (one per output dimension), reading operands through ctx.inputs.
  std::function<PrimExpr(const LowerContext& ctx, const std::vector<PrimExpr>& indices)> compute;

  // kCommReduce, kOutEWiseFusable and multi-output kOpaque operators: a
  // statement that writes every element of `outputs` (one buffer per output
  // tensor of the call, in order), applying `epilogue` to output 0's values.
  std::function<absl::StatusOr<Stmt>(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                     const Epilogue& epilogue)>
      schedule;

  // Operators lowered to neither: handled by the VM code generator
  // (call_tir, call_dps_packed, shape_of, ...) or folded away.
  bool lowers_to_kernel() const { return compute != nullptr || schedule != nullptr; }
};

using InferFn = std::function<absl::StatusOr<StructInfo>(const CallNode& call)>;
using ComputeFn =
    std::function<PrimExpr(const LowerContext& ctx, const std::vector<PrimExpr>& indices)>;
using ScheduleFn = std::function<absl::StatusOr<Stmt>(
    const LowerContext& ctx, const std::vector<Buffer>& outputs, const Epilogue& epilogue)>;

// Registers `info` (its name must be new). Called by the operator families
// (compiler/op/op.h); aborts on a duplicate name (a build bug, caught by any test).
void RegisterOp(OpInfo info);
// RegisterOp of an operator lowered per element, or by a schedule.
void RegisterComputeOp(std::string name, OpPattern pattern, int num_args, InferFn infer,
                       ComputeFn compute);
void RegisterScheduleOp(std::string name, OpPattern pattern, int num_args, InferFn infer,
                        ScheduleFn schedule);
// The operator named `name`, or nullptr. Installs the operators on first use.
const OpInfo* FindOp(absl::string_view name);
// Every registered operator name, sorted.
std::vector<std::string> ListOps();

// Registers every operator, once: called by the first FindOp or ListOps.
// Defined by the operator library (compiler/op/registry.cc), which calls
// each family's registration function. This layer names the hook and never
// an operator, as TVM's ir/op.h registry is filled by relax/op/; every
// program that links tether_compiler has it.
void InstallOperators();

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_OP_REGISTRY_H_
