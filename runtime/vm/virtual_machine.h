// VirtualMachine: the one interface of a VM session, implemented by the local
// interpreter (LocalVirtualMachine) and by the RPC client's remote VM, so the
// same conformance tests run both ways.
//
// Semantics follow the reference Relax VM (seed-relax-vm-api.txt) with these
// deliberate differences: a stateless call of a function that has inputs set by
// SetInput is refused (the reference only fails by accident); a saved function
// cannot shadow a function of the executable; GetOutputs returns any nesting of
// tuples as one Value; errors carry codes and kinds (runtime/core/error.h).
#ifndef TETHER_RUNTIME_VM_VIRTUAL_MACHINE_H_
#define TETHER_RUNTIME_VM_VIRTUAL_MACHINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"
#include "runtime/core/function.h"
#include "runtime/core/value.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/profiling/benchmark_result.h"
#include "runtime/profiling/report.h"
#include "runtime/profiling/time_evaluator.h"

namespace tether::vm {

// What an instrument returns before a call (reference VMInstrumentReturnKind).
enum class InstrumentReturnKind : int64_t { kNoOp = 0, kSkipRun = 1 };

// The function name that times the stateful call: TimeEvaluator("invoke_stateful",
// ..., {"main"}) runs InvokeStateful("main") per iteration, as in the reference.
inline constexpr absl::string_view kInvokeStatefulName = "invoke_stateful";

using NamedArgs = std::vector<std::pair<std::string, Value>>;

// One function of the loaded module, as TVM's Module.get_function finds it:
// a bytecode function of the executable, or a kernel of its kernel
// libraries (docs/design/vm.md, "Module functions").
struct ModuleFunction {
  enum class Kind { kVmFunction, kKernel };
  std::string name;
  Kind kind = Kind::kVmFunction;
  int64_t num_args = 0;
  std::vector<std::string> param_names;  // VM functions
  KernelSignature kernel;                // kernels: parameters, device, whether checked
};

// Thread contract: thread-hostile. One caller at a time (the daemon serializes
// calls per session); use one VM per concurrent caller.
class VirtualMachine {
 public:
  virtual ~VirtualMachine() = default;

  // Calls `func_name` (a function of the executable or a saved function).
  // NOT_FOUND for an unknown name; INVALID_ARGUMENT for a wrong argument count;
  // FAILED_PRECONDITION if SetInput was used for this function.
  virtual absl::StatusOr<Value> Invoke(absl::string_view func_name, ArgSpan args) = 0;
  // Calls a closure returned by an earlier call, with extra arguments.
  virtual absl::StatusOr<Value> InvokeClosure(const Value& closure, ArgSpan args) = 0;
  // Binds `args` (converted to the VM's first device once, now) to `func_name`
  // and saves the result under `saved_name`, callable with no arguments.
  virtual absl::Status SaveFunction(absl::string_view func_name, absl::string_view saved_name,
                                    ArgSpan args, bool include_return = true) = 0;

  // The stateful API.
  virtual absl::Status SetInput(absl::string_view func_name, ArgSpan args) = 0;
  // Positional arguments first, then named ones by parameter name.
  virtual absl::Status SetInputNamed(absl::string_view func_name, ArgSpan positional,
                                     const NamedArgs& named) = 0;
  virtual absl::Status InvokeStateful(absl::string_view func_name) = 0;
  virtual absl::StatusOr<Value> GetOutputs(absl::string_view func_name) = 0;

  virtual absl::StatusOr<int64_t> GetFunctionArity(absl::string_view func_name) = 0;
  virtual absl::StatusOr<std::vector<std::string>> GetFunctionParamNames(
      absl::string_view func_name) = 0;
  // The parameters of `func_name` that weights bound to the VM fill (a VM
  // created with a param dict), which callers do not pass; Arity and
  // ParamNames above count only the others. Empty without bound weights.
  virtual absl::StatusOr<std::vector<std::string>> GetFunctionBoundParamNames(
      absl::string_view func_name) = 0;

  // Installs the instrument made by the global factory `factory_name` called
  // with `args` (the RPC-usable form); an empty name removes it.
  // The name "trace" installs the built-in trace instrument (runtime/vm/trace.h;
  // optional argument: the most records to keep, default 1,000,000).
  virtual absl::Status SetInstrumentByName(absl::string_view factory_name, ArgSpan args) = 0;
  // The records of the trace instrument as a report (a row per call, in
  // completion order, with Start (us)); with `clear` they are removed.
  // FAILED_PRECONDITION when "trace" was never installed on this VM. Removing
  // or replacing the instrument stops recording; the records stay.
  virtual absl::StatusOr<profiling::Report> GetTrace(bool clear) = 0;

  // The module's functions: its bytecode functions in function-table order,
  // then each kernel library's kernels in manifest order.
  virtual absl::StatusOr<std::vector<ModuleFunction>> ListFunctions() = 0;
  // Calls kernel `kernel_name` of the executable's kernel libraries with
  // `args` in its parameter order (tensors on its device, ints), as the
  // bytecode would: it writes its outputs into its tensor arguments and
  // returns None. The arguments are checked against the kernel's signature
  // before it touches memory: INVALID_ARGUMENT (kind TypeError or
  // ValueError) for a wrong count, kind, dtype, ndim, device or dim. NOT_FOUND
  // when no kernel has that name; FAILED_PRECONDITION for a kernel whose
  // arguments cannot all be checked (KernelSignature::unchecked).
  virtual absl::StatusOr<Value> CallKernel(absl::string_view kernel_name, ArgSpan args) = 0;

  // Times `func_name` on the device that runs it (see profiling/time_evaluator.h):
  // a function, a saved function, "invoke_stateful", or else a kernel
  // (called as CallKernel calls it).
  virtual absl::StatusOr<profiling::BenchmarkResult> TimeEvaluator(
      absl::string_view func_name, Device device, const profiling::TimeEvaluatorOptions& options,
      ArgSpan args) = 0;
  // One warm-up call, then one profiled call; a row per packed-function call.
  // With no `args`, uses the inputs set by SetInput.
  virtual absl::StatusOr<profiling::Report> Profile(absl::string_view func_name, ArgSpan args) = 0;
};

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_VIRTUAL_MACHINE_H_
