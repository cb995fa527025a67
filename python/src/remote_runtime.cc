// The daemon's runtime outside any VM, over client::RemoteRuntime (docs/
// design/python.md, "Remote functions"): TVM RPC's remote.get_function and
// list_global_func_names as Session methods, and Device.sync,
// create_raw_stream, set_raw_stream and free_raw_stream on the device's
// session (or the default session for a device made by tether.cpu()).
#include "client/remote_runtime.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"

namespace tether::python {
namespace {

// session.get_function(name): a global function of the daemon, called by
// name (the daemon says whether it may be: PermissionDenied, NotFound).
struct PyGlobalFunction {
  SessionPtr session;
  std::string name;
};

// Runs `op(runtime)` on `session` without the GIL; Ctrl-C stops it.
// RemoteRuntime is thread-hostile and cheap to make: one per call.
template <typename Op>
auto WithRuntime(const SessionPtr& session, Op op) {
  return Blocking(session, [&] {
    client::RemoteRuntime runtime(&session->get());
    return op(runtime);
  });
}

// The session a device's sync and streams go to: the one it came from,
// else the default session (where a VM on it runs).
SessionPtr SessionOf(const PyDevice& d) {
  if (d.session) return d.session;
  return py::module_::import("tether").attr("default_session")().cast<SessionPtr>();
}

// A stream of create_raw_stream (a RemoteObject of the device's session) or
// None, as the value RemoteRuntime::SetStream takes.
Value StreamValue(const SessionPtr& session, const py::object& stream) {
  if (stream.is_none()) return Value();
  std::string got = py::str(py::type::of(stream)).cast<std::string>();
  if (py::isinstance<PyRemoteObject>(stream)) {
    got = client::AsRemoteHandle(stream.cast<const PyRemoteObject&>().handle)->remote_type_key();
    if (got == "runtime.Stream") return ToValue(stream, session.get());
  }
  ThrowStatus(TypeError("expected a stream of create_raw_stream() or None, got ", got));
}

// WithRuntime for an operation that returns only a Status.
template <typename Op>
void RunOrThrow(const SessionPtr& session, Op op) {
  WithRuntime(session, [&](client::RemoteRuntime& r) {
    ThrowIfError(op(r));
    return 0;
  });
}

void Sync(const PyDevice& d, const py::object& stream) {
  SessionPtr session = SessionOf(d);
  if (stream.is_none()) {
    RunOrThrow(session, [&](client::RemoteRuntime& r) { return r.Sync(d.device); });
    return;
  }
  // The wire syncs the session's current stream of a device: make `stream`
  // current for the sync, then put back the one set_raw_stream set.
  Value s = StreamValue(session, stream);
  auto current = session->current_streams.find(d.device.ToString());
  Value previous = current == session->current_streams.end() ? Value() : current->second;
  RunOrThrow(session, [&](client::RemoteRuntime& r) {
    TETHER_RETURN_IF_ERROR(r.SetStream(d.device, s));
    absl::Status synced = r.Sync(d.device);
    absl::Status reset = r.SetStream(d.device, previous);
    return synced.ok() ? reset : synced;
  });
}

}  // namespace

void RegisterRemoteRuntime(py::module_& m) {
  py::class_<PyGlobalFunction>(m, "RemoteFunction",
                               "A global function of a session's daemon (session.get_function).")
      .def(
          "__call__",
          [](const PyGlobalFunction& f, const py::args& args) {
            std::vector<Value> values;
            for (py::handle a : args) values.push_back(ToValue(a, f.session.get()));
            Value out = WithRuntime(f.session, [&](client::RemoteRuntime& r) {
              return ValueOrThrow(r.CallGlobal(f.name, values));
            });
            return FromValue(out, f.session);
          },
          "Calls the function on the daemon with the arguments; returns its result. A function "
          "the daemon does not let clients call raises PermissionDenied, an unknown one "
          "NotFound, both with the daemon's message.")
      .def_readonly("name", &PyGlobalFunction::name, "The function's name in the registry.")
      .def("__repr__", [](const PyGlobalFunction& f) {
        return absl::StrCat("<tether.RemoteFunction ", f.name, ">");
      });

  auto session_class =
      py::reinterpret_borrow<py::class_<SessionState, SessionPtr>>(m.attr("Session"));
  session_class
      .def(
          "get_function",
          [](SessionPtr s, const std::string& name) {
            return PyGlobalFunction{s, name};
          },
          py::arg("name"),
          "TVM RPC's remote.get_function: the daemon's global function `name` as a callable. "
          "Only functions the daemon marks remote-callable run (list_global_func_names); the "
          "daemon checks at the call.")
      .def(
          "list_global_func_names",
          [](SessionPtr s) {
            return WithRuntime(
                s, [](client::RemoteRuntime& r) { return ValueOrThrow(r.ListGlobalFunctions()); });
          },
          "The names of the daemon's remote-callable global functions, sorted.");

  auto device_class = py::reinterpret_borrow<py::class_<PyDevice>>(m.attr("Device"));
  device_class
      .def("sync", &Sync, py::arg("stream") = py::none(),
           "Waits for the device's work on the daemon: on `stream` (of create_raw_stream) when "
           "given, else on this session's current stream there (set_raw_stream), else all of it. "
           "Returns at once on the CPU. A device from tether.cpu()/cuda() syncs on the default "
           "session.")
      .def(
          "create_raw_stream",
          [](const PyDevice& d) {
            SessionPtr session = SessionOf(d);
            Value stream = WithRuntime(session, [&](client::RemoteRuntime& r) {
              return ValueOrThrow(r.CreateStream(d.device));
            });
            return FromValue(stream, session);
          },
          "A new stream on the (CUDA) device, owned by the session: a RemoteObject, freed when "
          "the last reference to it goes (or by free_raw_stream). The CPU has no streams "
          "(TetherRuntimeError, code FAILED_PRECONDITION).")
      .def(
          "set_raw_stream",
          [](const PyDevice& d, const py::object& stream) {
            SessionPtr session = SessionOf(d);
            Value s = StreamValue(session, stream);
            RunOrThrow(session, [&](client::RemoteRuntime& r) { return r.SetStream(d.device, s); });
            session->current_streams[d.device.ToString()] = s;
          },
          py::arg("stream"),
          "Makes `stream` (of create_raw_stream; None: the legacy default stream) the stream "
          "this session's kernels on the device launch on, and sync waits for.")
      .def(
          "free_raw_stream",
          [](const PyDevice& d, const py::object& stream) {
            SessionPtr session = SessionOf(d);
            if (stream.is_none()) {
              ThrowStatus(TypeError("free_raw_stream needs a stream, got None"));
            }
            Value s = StreamValue(session, stream);
            const uint64_t id = client::AsRemoteHandle(s)->id();
            // The daemon keeps a current stream alive: freeing it makes the
            // legacy default stream current again.
            auto current = session->current_streams.find(d.device.ToString());
            const bool is_current = current != session->current_streams.end() &&
                                    !current->second.is_none() &&
                                    client::AsRemoteHandle(current->second)->id() == id;
            RunOrThrow(session, [&](client::RemoteRuntime& r) {
              if (is_current) TETHER_RETURN_IF_ERROR(r.SetStream(d.device, Value()));
              return session->get().FreeObjects({id});
            });
            if (is_current) session->current_streams.erase(d.device.ToString());
          },
          py::arg("stream"),
          "Frees a stream of create_raw_stream on the daemon now (it is freed anyway when the "
          "last reference to it goes, or the session closes); when it is the device's current "
          "stream, the legacy default stream becomes current.");
}

}  // namespace tether::python
