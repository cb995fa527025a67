// Executables on the Python side: tether.compile (.rx and .onnx through the
// compiler, when the package is built with it; system_lib= for a system
// library), Executable.load/save/as_text/stats/export_library (a shared
// library, or the static library of a system-library build), and
// session.upload.
#include "runtime/vm/executable.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"

#ifdef TETHER_PYTHON_WITH_COMPILER
#include "compiler/build.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/text/parser.h"
#endif

namespace tether::python {
namespace {

struct PyExecutable {
  Ref<vm::Executable> exec;
};

#ifdef TETHER_PYTHON_WITH_COMPILER
// Compiles a Relax text (.rx) or ONNX model. `source_name` names it in
// errors; `base_dir` resolves an ONNX model's external data.
absl::StatusOr<Ref<vm::Executable>> CompileModel(
    const std::string& bytes, bool onnx, const std::string& source_name,
    const std::string& base_dir, const std::string& target,
    const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& exec_mode,
    const std::optional<std::string>& system_lib, const std::string& kernel_cache_dir) {
  compiler::IRModule module;
  if (onnx) {
    compiler::onnx_frontend::OnnxImportOptions import;
    import.input_shapes = shapes;
    absl::StatusOr<compiler::onnx_frontend::ImportedModel> model =
        compiler::onnx_frontend::ImportOnnxBytes(bytes, import, base_dir);
    if (!model.ok()) return Annotate(model.status(), source_name, ": ");
    module = std::move(model->module);
  } else {
    TETHER_ASSIGN_OR_RETURN(module, compiler::ParseModule(bytes, source_name));
  }
  compiler::BuildOptions build;
  build.target = target;
  build.exec_mode = exec_mode;
  build.system_lib = system_lib.has_value();
  build.system_lib_prefix = system_lib.value_or("");
  build.kernel_cache_dir = kernel_cache_dir;
  return compiler::Build(std::move(module), build);
}
#endif

PyExecutable Compile(const py::object& source, std::optional<std::string> target,
                     std::optional<std::map<std::string, std::vector<int64_t>>> shapes,
                     std::optional<std::string> format, const std::string& exec_mode,
                     std::optional<std::string> system_lib, const py::object& kernel_cache_dir) {
  // A folder (str or os.PathLike) for the kernel object cache, or None.
  const std::string cache_dir = kernel_cache_dir.is_none() ? "" : FsPath(kernel_cache_dir);
  std::string bytes, name = "<bytes>", base_dir, kind = format.value_or("");
  if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source)) {
    bytes = py::bytes(source).cast<std::string>();
    if (kind.empty()) {
      // Relax text is text; an ONNX model is a binary protobuf.
      kind = absl::StrContains(bytes, "@R.function") || absl::StrContains(bytes, "@I.ir_module")
                 ? "rx"
                 : "onnx";
    }
  } else {
    name = FsPath(source);
    if (kind.empty()) {
      if (absl::EndsWith(name, ".onnx"))
        kind = "onnx";
      else if (absl::EndsWith(name, ".rx"))
        kind = "rx";
      else
        kind = "tx";
    }
    base_dir = std::filesystem::path(name).parent_path().string();
    if (base_dir.empty()) base_dir = ".";
    py::gil_scoped_release release;
    bytes = ValueOrThrow(ReadFileToString(name));
  }
  if (kind == "tx") {
    py::gil_scoped_release release;
    return PyExecutable{ValueOrThrow(vm::Executable::LoadFromBytes(bytes))};
  }
  if (kind != "rx" && kind != "onnx") {
    ThrowStatus(ValueError("format must be \"rx\", \"onnx\" or \"tx\", got \"", kind, "\""));
  }
#ifdef TETHER_PYTHON_WITH_COMPILER
  py::gil_scoped_release release;
  return PyExecutable{
      ValueOrThrow(CompileModel(bytes, kind == "onnx", name, base_dir, target.value_or("llvm"),
                                shapes.value_or(std::map<std::string, std::vector<int64_t>>{}),
                                exec_mode, system_lib, cache_dir))};
#else
  ThrowStatus(absl::FailedPreconditionError(
      "tether.compile needs the compiler: this package was built with TETHER_BUILD_COMPILER=OFF"));
#endif
}

// export_library("m.a"): the static library of an executable compiled with
// system_lib= (its kernels' archive, as `tether compile --system-lib` writes).
absl::Status ExportStaticLibrary(const vm::Executable& exec, const std::string& path) {
  for (const KernelLibraryBlob& lib : exec.kernel_libraries) {
    if (lib.format == "static") return WriteStringToFileAtomic(path, lib.data);
  }
  return PreconditionError(path,
                           ": only an executable compiled with system_lib=PREFIX has a static "
                           "library to export");
}

}  // namespace

void RegisterExecutable(py::module_& m) {
  py::class_<PyExecutable>(m, "Executable", "A compiled module: bytecode, constants and kernels.")
      .def_static(
          "load",
          [](const std::string& path) {
            py::gil_scoped_release release;
            return PyExecutable{ValueOrThrow(vm::Executable::LoadFromFile(path))};
          },
          py::arg("path"),
          "Reads an executable file (.tx, or a library written by export_library).")
      .def_static(
          "from_bytes",
          [](const py::bytes& data) {
            std::string bytes = data;
            py::gil_scoped_release release;
            return PyExecutable{ValueOrThrow(vm::Executable::LoadFromBytes(bytes))};
          },
          py::arg("data"), "An executable from the bytes of a .tx file.")
      .def(
          "save",
          [](const PyExecutable& e, const py::object& path) {
            std::string p = FsPath(path);
            py::gil_scoped_release release;
            ThrowIfError(e.exec->SaveToFile(p));
          },
          py::arg("path"), "Writes the executable file (.tx).")
      .def(
          "to_bytes",
          [](const PyExecutable& e) {
            std::string bytes;
            {
              py::gil_scoped_release release;
              bytes = e.exec->SaveToBytes();
            }
            return py::bytes(bytes);
          },
          "The bytes of the .tx file.")
      .def(
          "as_text", [](const PyExecutable& e) { return e.exec->AsText(); },
          "The bytecode, constants and kernels as text.")
      .def(
          "stats", [](const PyExecutable& e) { return e.exec->Stats(); },
          "Sizes: functions, instructions, constants, kernel bytes.")
      .def(
          "export_library",
          [](const PyExecutable& e, const py::object& path) {
            std::string p = FsPath(path);
            py::gil_scoped_release release;
            if (absl::EndsWith(p, ".a")) {
              ThrowIfError(ExportStaticLibrary(*e.exec, p));
              return;
            }
#ifdef TETHER_PYTHON_WITH_COMPILER
            // Without CPU kernels it gets an empty library to carry it (a
            // copy: this Executable stays as it is).
            Ref<vm::Executable> copy =
                ValueOrThrow(vm::Executable::LoadFromBytes(e.exec->SaveToBytes()));
            ThrowIfError(compiler::ExportLibrary(copy.get(), p));
#else
            ThrowIfError(e.exec->ExportLibrary(p));
#endif
          },
          py::arg("path"),
          "Writes the executable as a shared library (.so): its CPU kernels, loadable with "
          "dlopen, carrying the executable; tether.load_module and session.load_module read it. "
          "A path ending in .a writes the static library of an executable compiled with "
          "system_lib=PREFIX instead (tether.load_static_library reads it).");

  m.def(
      "load_module",
      [](const py::object& path) {
        std::string p = FsPath(path);
        Ref<Module> module;
        {
          py::gil_scoped_release release;
          vm::RegisterExecutableLoader();
          module = ValueOrThrow(Module::LoadFromFile(p));
        }
        if (module->type_key() != "vm.Executable") {
          ThrowStatus(ValueError(p,
                                 " holds kernels but no executable: load_module takes .tx files "
                                 "and libraries written by export_library"));
        }
        return PyExecutable{Ref<vm::Executable>(static_cast<vm::Executable*>(module.get()))};
      },
      py::arg("path"),
      "TVM's tvm.runtime.load_module: an executable from a .tx file or a library written by "
      "export_library, to run here; a library whose kernels cannot run on this machine is "
      "refused with both targets named.");

  m.def("compile", &Compile, py::arg("source"), py::arg("target") = py::none(),
        py::arg("shapes") = py::none(), py::kw_only(), py::arg("format") = py::none(),
        py::arg("exec_mode") = "bytecode", py::arg("system_lib") = py::none(),
        py::arg("kernel_cache_dir") = py::none(),
        "Compiles a .rx or .onnx model (a path, or the model's bytes) for `target` "
        "(default \"llvm\", this machine); a .tx path is loaded as it is. exec_mode "
        "\"compiled\" compiles the Relax functions to native code too (CPU targets). With "
        "system_lib=PREFIX the CPU kernels are a system library (export_library(\"m.a\") "
        "writes it) for a program that links them, as tether compile --system-lib. "
        "kernel_cache_dir=FOLDER keeps each CPU kernel's object there and reuses it when "
        "the same kernel is compiled again, in this model or another (the folder tether "
        "compile uses is ~/.cache/tether/kernels); None compiles every kernel.");

  py::class_<PyUploadedModule>(m, "UploadedModule", "An executable stored on a session's daemon.")
      .def_property_readonly(
          "sha256", [](const PyUploadedModule& u) { return u.sha256; },
          "The executable's SHA-256, its name in the daemon's store.")
      .def_property_readonly(
          "session", [](const PyUploadedModule& u) { return u.session; },
          "The Session it was uploaded in.");

  py::object session_class = m.attr("Session");
  session_class.attr("upload") = py::cpp_function(
      [](SessionPtr s, const PyExecutable& e) {
        std::string bytes = e.exec->SaveToBytes();
        std::string sha = Blocking(s, [&] { return ValueOrThrow(s->get().UploadModule(bytes)); });
        return PyUploadedModule{s, sha};
      },
      py::name("upload"), py::is_method(session_class), py::arg("exe"),
      "Stores the executable on the daemon (skipped when the daemon has it already).");
}

// The stored module of `exe` (an Executable or an UploadedModule) on `session`.
PyUploadedModule UploadedFor(const py::object& exe, const SessionPtr& session) {
  if (py::isinstance<PyUploadedModule>(exe)) {
    const auto& u = exe.cast<const PyUploadedModule&>();
    if (session && session != u.session) {
      ThrowStatus(ValueError("the module was uploaded to another session"));
    }
    return u;
  }
  if (!py::isinstance<PyExecutable>(exe)) {
    ThrowStatus(TypeError("expected a tether.Executable or an UploadedModule, got ",
                          py::str(py::type::of(exe)).cast<std::string>()));
  }
  if (!session) {
    ThrowStatus(
        ValueError("a VirtualMachine of an Executable needs session=: connect with "
                   "tether.connect(...) or tether.local()"));
  }
  std::string bytes = exe.cast<const PyExecutable&>().exec->SaveToBytes();
  std::string sha =
      Blocking(session, [&] { return ValueOrThrow(session->get().UploadModule(bytes)); });
  return PyUploadedModule{session, sha};
}

}  // namespace tether::python
