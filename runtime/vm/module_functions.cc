// The module's functions seen from outside its bytecode (TVM's
// Module.get_function): listing the bytecode functions and kernels, and
// calling or timing one kernel on its own. Only kernels whose arguments are
// checked in full before they touch memory are callable (KernelSignature).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/threading/thread_pool.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {

absl::StatusOr<std::vector<ModuleFunction>> LocalVirtualMachine::ListFunctions() {
  std::vector<ModuleFunction> out;
  for (const FunctionInfo& f : exec_->functions) {
    if (!IsVMFunction(f.kind)) continue;
    ModuleFunction mf;
    mf.name = f.name;
    mf.kind = ModuleFunction::Kind::kVmFunction;
    absl::StatusOr<int64_t> arity = GetFunctionArity(f.name);
    mf.num_args = arity.ok() ? *arity : f.num_args;
    mf.param_names = f.param_names;
    out.push_back(std::move(mf));
  }
  for (const Ref<Module>& lib : kernel_libraries_) {
    const auto* kernels = dynamic_cast<const KernelLibraryModule*>(lib.get());
    if (kernels == nullptr) continue;
    for (KernelSignature& sig : kernels->Kernels()) {
      ModuleFunction mf;
      mf.name = sig.name;
      mf.kind = ModuleFunction::Kind::kKernel;
      mf.num_args = static_cast<int64_t>(sig.params.size());
      mf.kernel = std::move(sig);
      out.push_back(std::move(mf));
    }
  }
  return out;
}

absl::StatusOr<Function> LocalVirtualMachine::CheckedKernel(absl::string_view name) {
  for (const Ref<Module>& lib : kernel_libraries_) {
    const auto* kernels = dynamic_cast<const KernelLibraryModule*>(lib.get());
    if (kernels == nullptr) continue;
    for (const KernelSignature& sig : kernels->Kernels()) {
      if (sig.name != name) continue;
      if (!sig.unchecked.empty()) {
        return PreconditionError("kernel ", sig.name,
                                 " cannot be called on its own: its arguments cannot all be "
                                 "checked before it runs (",
                                 sig.unchecked, "); it runs only inside the model's functions");
      }
      TETHER_ASSIGN_OR_RETURN(Function kernel, lib->GetFunction(name));
      const int threads = num_threads_;
      return Function::FromPacked(sig.name, [kernel, threads](ArgSpan args) {
        ScopedThreadLimit limit(threads);
        return kernel(args);
      });
    }
  }
  // The name may come from a client: escaped and cut, as messages are logged.
  return NotFoundError("no kernel named \"", absl::CEscape(name.substr(0, 120)),
                       name.size() > 120 ? "..." : "", "\" in the executable's kernel libraries");
}

absl::StatusOr<Value> LocalVirtualMachine::CallKernel(absl::string_view kernel_name, ArgSpan args) {
  TETHER_ASSIGN_OR_RETURN(Function kernel, CheckedKernel(kernel_name));
  return kernel(args);
}

}  // namespace tether::vm
