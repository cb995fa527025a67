// ModuleFunction on the wire.
#include "proto/codec/function_codec.h"

#include <string>
#include <utility>

#include "runtime/core/error.h"

namespace tether::rpc {

void EncodeModuleFunction(const vm::ModuleFunction& function, v1::ModuleFunction* out) {
  out->set_name(function.name);
  out->set_num_args(function.num_args);
  if (function.kind == vm::ModuleFunction::Kind::kVmFunction) {
    out->set_kind(v1::ModuleFunction::KIND_VM_FUNCTION);
    for (const std::string& p : function.param_names) out->add_param_names(p);
    return;
  }
  out->set_kind(v1::ModuleFunction::KIND_KERNEL);
  out->set_device_type(function.kernel.device_type == kDLCUDA ? "cuda" : "cpu");
  out->set_unchecked(function.kernel.unchecked);
  for (const KernelParamSignature& p : function.kernel.params) {
    v1::KernelParam* param = out->add_params();
    param->set_is_tensor(p.is_tensor);
    if (!p.is_tensor) continue;
    param->set_dtype(p.dtype.ToString());
    param->set_ndim(p.ndim);
    for (const std::string& d : p.dims) param->add_dims(d);
  }
}

absl::StatusOr<vm::ModuleFunction> DecodeModuleFunction(const v1::ModuleFunction& function) {
  vm::ModuleFunction out;
  out.name = function.name();
  out.num_args = function.num_args();
  switch (function.kind()) {
    case v1::ModuleFunction::KIND_VM_FUNCTION:
      out.kind = vm::ModuleFunction::Kind::kVmFunction;
      out.param_names.assign(function.param_names().begin(), function.param_names().end());
      return out;
    case v1::ModuleFunction::KIND_KERNEL:
      break;
    default:
      return ValueError("function ", function.name(), " has kind ",
                        static_cast<int>(function.kind()), ", not a vm function or kernel");
  }
  out.kind = vm::ModuleFunction::Kind::kKernel;
  out.kernel.name = function.name();
  if (function.device_type() == "cuda") {
    out.kernel.device_type = kDLCUDA;
  } else if (function.device_type() == "cpu") {
    out.kernel.device_type = kDLCPU;
  } else {
    return ValueError("kernel ", function.name(), " has unknown device type \"",
                      function.device_type(), "\"");
  }
  out.kernel.unchecked = function.unchecked();
  for (const v1::KernelParam& p : function.params()) {
    KernelParamSignature param;
    param.is_tensor = p.is_tensor();
    if (param.is_tensor) {
      TETHER_ASSIGN_OR_RETURN(param.dtype, DataType::Parse(p.dtype()));
      param.ndim = p.ndim();
      param.dims.assign(p.dims().begin(), p.dims().end());
    }
    out.kernel.params.push_back(std::move(param));
  }
  return out;
}

}  // namespace tether::rpc
