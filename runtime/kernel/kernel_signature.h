// KernelSignature and KernelLibraryModule: what a loaded kernel library says
// of its kernels to a caller outside the VM's bytecode — a client calling or
// timing one kernel (docs/design/rpc-protocol.md, "Module functions"). A
// kernel may be called that way only when its arguments are checked in full
// (count, kinds, dtypes, ndim, device, strides and every dim) before it
// reads or writes memory, since a call with the wrong shapes would otherwise
// run off the end of a buffer.
#ifndef TETHER_RUNTIME_KERNEL_KERNEL_SIGNATURE_H_
#define TETHER_RUNTIME_KERNEL_KERNEL_SIGNATURE_H_

#include <string>
#include <vector>

#include "dlpack/dlpack.h"
#include "runtime/core/data_type.h"
#include "runtime/module/module.h"

namespace tether {

struct KernelParamSignature {
  bool is_tensor = false;
  DataType dtype;                 // tensors
  int ndim = 0;                   // tensors
  std::vector<std::string> dims;  // tensors, where the manifest has them (CUDA dim specs)
};

struct KernelSignature {
  std::string name;
  DLDeviceType device_type = kDLCPU;  // where its tensors must be
  std::vector<KernelParamSignature> params;
  // Empty when every argument is checked before the kernel touches memory;
  // otherwise why not ("parameter 1 dim 0 is an expression the host does
  // not check"): such a kernel runs only inside the VM's bytecode.
  std::string unchecked;
};

// A Module holding compiled kernels (formats "so", "static", "ptx").
// Thread contract: thread-safe once loaded.
class KernelLibraryModule : public Module {
 public:
  // Every kernel of the library, in manifest order.
  virtual std::vector<KernelSignature> Kernels() const = 0;
  // The address of an exported symbol other than a kernel (a compiled VM
  // function, runtime/vm/compiled_function.h), or nullptr.
  virtual void* FindSymbol(const std::string& name) const { return nullptr; }
};

}  // namespace tether

#endif  // TETHER_RUNTIME_KERNEL_KERNEL_SIGNATURE_H_
