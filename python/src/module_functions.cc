// A VirtualMachine as TVM's Module (docs/design/python.md, "Module
// functions"): what its executable holds (list_functions, FunctionInfo),
// vm[name] / get_function finding kernels as well as Relax functions, and
// calling one kernel alone with NumPy arrays seeing its outputs.
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"

namespace tether::python {
namespace {

using Kind = vm::ModuleFunction::Kind;

bool IsKernel(const vm::ModuleFunction& f) { return f.kind == Kind::kKernel; }

std::string DeviceTypeName(DLDeviceType type) {
  return type == kDLCUDA ? "cuda" : type == kDLCPU ? "cpu" : absl::StrCat(static_cast<int>(type));
}

// "float32[2d]" for a tensor (with its dim specs where the manifest has
// them: "float32[n, 3]"), "int" for an int.
std::string ParamText(const KernelParamSignature& p) {
  if (!p.is_tensor) return "int";
  if (!p.dims.empty())
    return absl::StrCat(p.dtype.ToString(), "[", absl::StrJoin(p.dims, ", "), "]");
  return absl::StrCat(p.dtype.ToString(), "[", p.ndim, "d]");
}

py::list Params(const vm::ModuleFunction& f) {
  py::list out;
  for (const KernelParamSignature& p : f.kernel.params) {
    py::dict d;
    d["kind"] = p.is_tensor ? "tensor" : "int";
    if (p.is_tensor) {
      d["dtype"] = p.dtype.ToString();
      d["ndim"] = p.ndim;
      d["dims"] = p.dims;
    }
    out.append(d);
  }
  return out;
}

std::string Repr(const vm::ModuleFunction& f) {
  std::vector<std::string> params;
  if (IsKernel(f)) {
    for (const KernelParamSignature& p : f.kernel.params) params.push_back(ParamText(p));
  } else {
    params = f.param_names;
  }
  return absl::StrCat("<tether.FunctionInfo ", IsKernel(f) ? "kernel " : "function ", f.name, "(",
                      absl::StrJoin(params, ", "), ")",
                      IsKernel(f) ? absl::StrCat(" on ", DeviceTypeName(f.kernel.device_type)) : "",
                      f.kernel.unchecked.empty() ? "" : " unchecked", ">");
}

}  // namespace

const std::vector<vm::ModuleFunction>& PyVM::Functions() {
  if (!functions_) {
    functions_ = Run([](client::RemoteVM& vm) { return ValueOrThrow(vm.ListFunctions()); });
  }
  return *functions_;
}

std::optional<PyVM::FunctionKind> PyVM::Find(const std::string& name) {
  if (saved_.contains(name)) return FunctionKind::kInvoke;
  for (const vm::ModuleFunction& f : Functions()) {
    if (f.name == name) return IsKernel(f) ? FunctionKind::kKernel : FunctionKind::kInvoke;
  }
  return std::nullopt;
}

PyVM::FunctionKind PyVM::Resolve(const std::string& name) {
  // A daemon older than protocol 1.6 cannot list: its functions are what
  // it knows by name (no kernels), as before.
  if (session()->get().RequireProtocol(6, "").ok()) {
    if (std::optional<FunctionKind> kind = Find(name)) return *kind;
  }
  // The daemon's own answer for the name: an unknown function is its
  // ValueError, as the seed's lookup raises.
  Run([&](client::RemoteVM& vm) { return ValueOrThrow(vm.GetFunctionArity(name)); });
  return FunctionKind::kInvoke;
}

py::object PyVM::CallKernel(const std::string& name, const py::args& args) {
  std::vector<Value> values = Args(args);
  // Where the kernel's tensors live: the VM's first device of its kind.
  Device device = Device::Cpu();
  for (const vm::ModuleFunction& f : Functions()) {
    if (f.name != name || !IsKernel(f)) continue;
    for (const Device& d : devices_) {
      if (d.type == f.kernel.device_type) {
        device = d;
        break;
      }
    }
  }
  std::vector<size_t> arrays;  // writable NumPy arguments, copied back after the call
  for (size_t i = 0; i < args.size(); ++i) {
    if (py::isinstance<py::array>(args[i]) && args[i].cast<py::array>().writeable() &&
        values[i].is_tensor()) {
      arrays.push_back(i);
    }
  }
  std::vector<Tensor> written = Run([&](client::RemoteVM& vm) {
    client::RemoteSession& s = *vm.session();
    std::vector<uint64_t> uploaded;
    absl::Cleanup free_uploaded = [&] {
      if (!uploaded.empty()) s.FreeObjects(uploaded).IgnoreError();
    };
    for (size_t i : arrays) {
      values[i] = ValueOrThrow(s.UploadTensor(Tensor(values[i].AsRef<TensorObj>()), device));
      uploaded.push_back(client::AsRemoteHandle(values[i])->id());
    }
    ValueOrThrow(vm.CallKernel(name, values));
    std::vector<Tensor> out;
    for (size_t i : arrays) out.push_back(ValueOrThrow(s.DownloadTensor(values[i])));
    return out;
  });
  py::module_ np = py::module_::import("numpy");
  for (size_t k = 0; k < arrays.size(); ++k) {
    np.attr("copyto")(args[arrays[k]], NumpyFromTensor(written[k]));
  }
  return py::none();
}

void RegisterModuleFunctions(py::module_& m) {
  py::class_<vm::ModuleFunction>(m, "FunctionInfo",
                                 "A function of an executable (VirtualMachine.list_functions): "
                                 "a Relax function or a kernel.")
      .def_readonly("name", &vm::ModuleFunction::name, "The function's name.")
      .def_property_readonly(
          "kind", [](const vm::ModuleFunction& f) { return IsKernel(f) ? "kernel" : "function"; },
          "\"function\" (a Relax function: vm[name] invokes it) or \"kernel\" (one compiled "
          "kernel: vm[name] calls it alone).")
      .def_readonly("num_args", &vm::ModuleFunction::num_args, "How many arguments it takes.")
      .def_readonly("param_names", &vm::ModuleFunction::param_names,
                    "A Relax function's parameter names (empty for a kernel).")
      .def_property_readonly("params", &Params,
                             "A kernel's parameters in order: {\"kind\": \"tensor\", \"dtype\", "
                             "\"ndim\", \"dims\"} or {\"kind\": \"int\"} (empty for a function).")
      .def_property_readonly(
          "device_type",
          [](const vm::ModuleFunction& f) -> py::object {
            if (!IsKernel(f)) return py::none();
            return py::str(DeviceTypeName(f.kernel.device_type));
          },
          "Where a kernel's tensors must be: \"cpu\" or \"cuda\" (None for a function).")
      .def_property_readonly(
          "unchecked",
          [](const vm::ModuleFunction& f) -> py::object {
            if (f.kernel.unchecked.empty()) return py::none();
            return py::str(f.kernel.unchecked);
          },
          "Why a kernel cannot be called alone (its arguments cannot all be checked before it "
          "runs), or None when it can.")
      .def("__repr__", &Repr);

  auto vm_class = py::reinterpret_borrow<py::class_<PyVM>>(m.attr("VirtualMachine"));
  vm_class
      .def(
          "list_functions", [](PyVM& vm) { return vm.Functions(); },
          "The executable's Relax functions (in its function table's order), then the kernels "
          "of its kernel libraries, as FunctionInfo; asked of the daemon once.")
      .def(
          "implements_function",
          [](PyVM& vm, const std::string& name, bool) { return vm.Find(name).has_value(); },
          py::arg("name"), py::arg("query_imports") = false,
          "Whether vm[name] finds `name`: a saved or Relax function or a kernel (TVM's "
          "Module.implements_function).");
}

}  // namespace tether::python
