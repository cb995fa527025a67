// Status -> Python exception: the class follows the code for what the
// transport or the daemon's gate says (deadline, unavailable, credentials,
// cancellation, unimplemented) and the error kind for what a call says
// (value, type, index, runtime, out of memory, not found), so the seed's
// `except ValueError` works against a remote VM. Every class derives from
// tether.TetherError and from the builtin a Python user would catch.
#include <Python.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"

namespace tether::python {
namespace {

struct ErrorClasses {
  py::object base, value, type, index, runtime, not_found, out_of_memory, internal, deadline,
      unavailable, unauthenticated, permission_denied, cancelled, unimplemented;
};
// Created once at import and kept for the process's life (module globals).
ErrorClasses* classes = nullptr;

py::object NewClass(py::module_& m, const char* name, const char* doc,
                    std::vector<py::handle> bases) {
  py::tuple tuple(bases.size());
  for (size_t i = 0; i < bases.size(); ++i) tuple[i] = py::reinterpret_borrow<py::object>(bases[i]);
  std::string qualified = absl::StrCat("tether.", name);
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, tuple.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  py::object obj = py::reinterpret_steal<py::object>(cls);
  m.attr(name) = obj;
  return obj;
}

const py::object& ClassFor(const absl::Status& status) {
  const ErrorClasses& c = *classes;
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return c.deadline;
    case absl::StatusCode::kUnavailable:
      return c.unavailable;
    case absl::StatusCode::kUnauthenticated:
      return c.unauthenticated;
    case absl::StatusCode::kPermissionDenied:
      return c.permission_denied;
    case absl::StatusCode::kCancelled:
      return c.cancelled;
    case absl::StatusCode::kUnimplemented:
      return c.unimplemented;
    default:
      break;
  }
  switch (GetErrorKind(status)) {
    case ErrorKind::kValue:
      return c.value;
    case ErrorKind::kType:
      return c.type;
    case ErrorKind::kIndex:
      return c.index;
    case ErrorKind::kNotFound:
      return c.not_found;
    case ErrorKind::kOutOfMemory:
      return c.out_of_memory;
    case ErrorKind::kInternal:
      return c.internal;
    case ErrorKind::kCancelled:
      return c.cancelled;
    case ErrorKind::kRuntime:
    case ErrorKind::kUnspecified:
      break;
  }
  return c.runtime;
}

}  // namespace

void ThrowStatus(absl::Status status) { throw StatusError{std::move(status)}; }

void RegisterErrors(py::module_& m) {
  classes = new ErrorClasses();
  ErrorClasses& c = *classes;
  py::handle builtins_exception = PyExc_Exception;
  c.base = NewClass(m, "TetherError",
                    "Base of every error Tether raises; .code is the status code name "
                    "(\"INVALID_ARGUMENT\"), .kind the error kind (\"ValueError\").",
                    {builtins_exception});
  auto sub = [&](const char* name, const char* doc, PyObject* builtin) {
    return NewClass(m, name, doc, {c.base, builtin});
  };
  c.value =
      sub("TetherValueError", "A value is wrong for the call (a ValueError).", PyExc_ValueError);
  c.type = sub("TetherTypeError", "A value has the wrong type (a TypeError).", PyExc_TypeError);
  c.index = sub("TetherIndexError", "An index is out of range (an IndexError).", PyExc_IndexError);
  c.runtime = sub("TetherRuntimeError", "Something failed while running (a RuntimeError).",
                  PyExc_RuntimeError);
  c.not_found =
      sub("NotFound", "An unknown function, module or handle (a LookupError).", PyExc_LookupError);
  c.out_of_memory =
      sub("OutOfMemory", "Out of device or host memory, or over a quota (a MemoryError).",
          PyExc_MemoryError);
  c.internal = sub("InternalError", "A bug in Tether (a RuntimeError).", PyExc_RuntimeError);
  c.deadline = sub("DeadlineExceeded", "A deadline passed (a TimeoutError).", PyExc_TimeoutError);
  c.unavailable =
      sub("Unavailable", "The daemon or the device cannot be reached (a ConnectionError).",
          PyExc_ConnectionError);
  c.unauthenticated =
      sub("Unauthenticated", "The daemon refused the credentials (a PermissionError).",
          PyExc_PermissionError);
  c.permission_denied = sub("PermissionDenied", "The daemon refused the call (a PermissionError).",
                            PyExc_PermissionError);
  c.cancelled =
      sub("Cancelled", "The call was stopped, e.g. by closing its session (a RuntimeError).",
          PyExc_RuntimeError);
  c.unimplemented = sub("Unimplemented", "Not supported here (a NotImplementedError).",
                        PyExc_NotImplementedError);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const py::object& cls = ClassFor(e.status);
      py::object error = cls(std::string(e.status.message()));
      error.attr("code") = absl::StatusCodeToString(e.status.code());
      error.attr("kind") = std::string(ErrorKindName(GetErrorKind(e.status)));
      PyErr_SetObject(cls.ptr(), error.ptr());
    }
  });
}

}  // namespace tether::python
