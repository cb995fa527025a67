// The calls into kernels, R.call_tir and R.call_tir_inplace, against the
// kernel they call: what the VM will pass (the arguments, then the outputs
// the call allocates, then the tir_vars) must be what the kernel's
// signature takes, or the kernel reads memory it was not given. Checked by
// the text parser (with the call's position) and by Build (for modules
// built in C++), so a mismatch is a compile error, never a crash on the
// device.
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_COMPILER_RELAX_KERNEL_CALL_H_
#define TETHER_COMPILER_RELAX_KERNEL_CALL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/module.h"
#include "compiler/tir/kernel_ir.h"

namespace tether::compiler {

// Whether `e` calls relax.call_tir or relax.call_tir_inplace.
bool IsKernelCall(const Expr& e);

// The outputs' struct info of a kernel call: the fields of a tuple
// out_sinfo, or the one tensor.
std::vector<StructInfo> KernelCallOutputs(const CallNode& call);

// call_tir_inplace's "inplace_indices": per output, the argument it
// overwrites, or -1 for an output the call allocates. Empty for call_tir.
// INVALID_ARGUMENT when the attribute is missing or malformed.
absl::StatusOr<std::vector<int64_t>> InplaceIndices(const CallNode& call);

// INVALID_ARGUMENT naming the kernel, the parameter and the argument when
// the call does not fit the kernel: the count of tensors and scalars, and
// each tensor's dtype, rank and constant dimensions where both are known.
absl::Status CheckKernelCall(const KernelFunc& kernel, const CallNode& call);

// CheckKernelCall for every kernel call of the module's functions whose
// callee is a kernel of the module; the message starts with the call's
// position when it has one.
absl::Status CheckKernelCalls(const IRModule& module);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_KERNEL_CALL_H_
