// tether.load_static_library, TVM's tvm.runtime.load_static_library: a
// system library archive (what tether.compile(..., system_lib=PREFIX) and
// exe.export_library("m.a") write) read here without linking it, as a
// StaticLibrary saying its prefix, machine and kernels
// (runtime/kernel/static_library.h).
#include "runtime/kernel/static_library.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "python/src/bindings.h"

namespace tether::python {
namespace {

struct PyStaticLibrary {
  Ref<StaticLibraryModule> library;
};

std::vector<std::string> KernelNames(const PyStaticLibrary& s) {
  std::vector<std::string> names;
  for (const KernelInfo& k : s.library->kernels()) names.push_back(k.name);
  return names;
}

}  // namespace

void RegisterStaticLibrary(py::module_& m) {
  py::class_<PyStaticLibrary>(
      m, "StaticLibrary",
      "A system library archive read without linking it (tether.load_static_library): a "
      "static library is linked into the program that runs its kernels, not loaded.")
      .def_property_readonly(
          "prefix", [](const PyStaticLibrary& s) { return s.library->prefix(); },
          "The system library prefix (the archive registers tether_system_lib_register_PREFIX).")
      .def_property_readonly(
          "machine", [](const PyStaticLibrary& s) { return s.library->machine_name(); },
          "The machine its object is for: \"x86_64\", \"aarch64\", \"arm\", ...")
      .def_property_readonly(
          "format", [](const PyStaticLibrary& s) { return std::string(s.library->format()); },
          "\"a\": an ar archive.")
      .def_property_readonly("kernels", &KernelNames,
                             "The names of the kernels in its manifest, in order.")
      .def_property_readonly(
          "functions", [](const PyStaticLibrary& s) { return s.library->functions(); },
          "The functions it implements: the func_names it was loaded with, else every kernel.")
      .def(
          "implements_function",
          [](const PyStaticLibrary& s, const std::string& name) {
            return s.library->ImplementsFunction(name);
          },
          py::arg("name"), "Whether `name` is among its functions (linked here or not).")
      .def("__repr__", [](const PyStaticLibrary& s) {
        return "<tether.StaticLibrary prefix=" + s.library->prefix() +
               " machine=" + s.library->machine_name() + " kernels=[" +
               absl::StrJoin(KernelNames(s), ", ") + "]>";
      });

  m.def(
      "load_static_library",
      [](const py::object& path, std::optional<std::vector<std::string>> func_names) {
        const std::string p = FsPath(path);
        py::gil_scoped_release release;
        return PyStaticLibrary{ValueOrThrow(
            LoadStaticLibraryFile(p, func_names.value_or(std::vector<std::string>{})))};
      },
      py::arg("path"), py::arg("func_names") = py::none(),
      "TVM's tvm.runtime.load_static_library: the system library archive at `path` (what "
      "tether.compile(..., system_lib=PREFIX) and export_library(\"m.a\") write), read "
      "without linking it. With `func_names`, each must be one of its kernels (NotFound "
      "names the missing one). Its kernels run where the archive is linked in "
      "(tether_add_daemon in cmake/TetherSystemLib.cmake).");
}

}  // namespace tether::python
