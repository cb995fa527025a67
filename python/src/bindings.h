// Shared declarations of the native module _tether (python/src/*.cc): the
// C++ objects behind the Python classes, the conversions between Python
// objects and Values, and the one place a Status becomes a Python exception.
//
// GIL rule: every call into the client library (anything that may touch the
// network or wait on a device) runs inside py::gil_scoped_release; Python
// objects are converted to Values before and back after.
#ifndef TETHER_PYTHON_SRC_BINDINGS_H_
#define TETHER_PYTHON_SRC_BINDINGS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/embedded_daemon.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "runtime/core/device.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"
#include "runtime/module/param_dict.h"

namespace tether::python {

namespace py = pybind11;

// --- errors (errors.cc) ---------------------------------------------------

// Thrown by ThrowIfError; translated into the Python exception class that
// follows the status's error kind and code (docs/design/python.md, "Errors").
struct StatusError {
  absl::Status status;
};
[[noreturn]] void ThrowStatus(absl::Status status);
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}
template <typename T>
T ValueOrThrow(absl::StatusOr<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(*result);
}
// Creates the exception classes in `m` and registers the translator.
void RegisterErrors(py::module_& m);

// --- sessions (session.cc) ------------------------------------------------

// What a Python Session owns: the embedded daemon of tether.local() (if
// any) and the session on it. Remote tensors, uploaded modules and VMs hold
// a shared_ptr to it (co-owners: the Python objects made from the session),
// so the session outlives every object that uses it; the session closes
// before its daemon stops. Thread contract: thread-safe (RemoteSession is).
struct RemoteOwner;
struct SessionState {
  std::unique_ptr<cli::EmbeddedDaemon> daemon;  // tether.local() only
  std::unique_ptr<client::RemoteSession> session;
  ~SessionState();
  client::RemoteSession& get() { return *session; }
  // The owner of each remote handle id Python holds (RemoteOwner).
  absl::Mutex owners_mu;
  absl::flat_hash_map<uint64_t, std::weak_ptr<RemoteOwner>> owners ABSL_GUARDED_BY(owners_mu);
  // The stream set_raw_stream made current on each device ("cuda:0"; none:
  // the legacy default), so sync(stream) can put it back. Touched with the
  // GIL held.
  absl::flat_hash_map<std::string, Value> current_streams;
};
using SessionPtr = std::shared_ptr<SessionState>;

// The daemon-side object of a remote handle: freed on the daemon
// (RemoteSession::FreeObjects) when the last Python object holding it goes,
// with the GIL released; one owner per handle id of a session, so a handle
// that comes back twice (a tuple holding one tensor twice) is freed once.
// Nothing is sent while the interpreter shuts down (closing the session
// frees everything anyway). Thread contract: thread-safe.
struct RemoteOwner {
  SessionPtr session;
  uint64_t id = 0;
  ~RemoteOwner();
};
// The owner of `handle` (a RemoteHandle value) in `session`: the live one,
// or a new one.
std::shared_ptr<RemoteOwner> OwnerOf(const SessionPtr& session, const Value& handle);

// A device as Python sees it; `attributes` from the session's handshake
// when the device came from a session (session.device(...)), else the
// attributes are read from this process's runtime.
struct PyDevice {
  Device device;
  std::optional<py::dict> attributes;
  // The session the device came from (session.cpu(), a RemoteTensor's
  // device): a VirtualMachine on this device runs there.
  SessionPtr session;
};

// A tensor that stays on the daemon (a RemoteHandle value).
struct PyRemoteTensor {
  SessionPtr session;
  Value handle;
  std::shared_ptr<RemoteOwner> owner;
  std::vector<int64_t> shape() const;
  std::string dtype() const;
  Device device() const;
};

// Any other object that stays on the daemon (a closure).
struct PyRemoteObject {
  SessionPtr session;
  Value handle;
  std::shared_ptr<RemoteOwner> owner;
};

// An executable stored on a session's daemon (session.upload).
struct PyUploadedModule {
  SessionPtr session;
  std::string sha256;
};

// `d` with the attributes `session`'s daemon reported in its handshake
// (exist False for a device it lacks).
PyDevice SessionDevice(const SessionPtr& session, Device d);
void RegisterSession(py::module_& m);

// --- Ctrl-C (interrupt.cc) --------------------------------------------------

// Makes SIGINT stop `session`'s call in flight while the scope lives, on the
// main thread (elsewhere it does nothing): the session is closed from a
// watcher thread, which makes the waiting call return CANCELLED at once.
// Construct and destroy with the GIL held. Thread contract: thread-hostile.
class InterruptScope {
 public:
  explicit InterruptScope(const SessionPtr& session);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  // Whether SIGINT stopped the call; ends the scope's effect.
  bool Interrupted();

 private:
  void Disarm();
  SessionPtr session_;
  bool armed_ = false;
  bool fired_ = false;
};
// Called at import, on the thread that gets SIGINT.
void InitInterrupts();
// Raises Python's exception for the SIGINT (KeyboardInterrupt) when one
// stopped the scope's call.
void RaiseIfInterrupted(InterruptScope& scope);

// Whether this thread is running a Python instrument (vm.set_instrument with
// a callable, vm.cc): the VM call that runs it waits for it, so a call to the
// daemon from there would wait for that call, forever.
inline thread_local bool in_python_instrument = false;

// Runs `op` (a call into the client library for `session`) without the GIL,
// Ctrl-C stopping it: then KeyboardInterrupt instead of its CANCELLED.
// RuntimeError from inside a Python instrument.
template <typename Op>
auto Blocking(const SessionPtr& session, Op&& op) {
  if (in_python_instrument) {
    ThrowStatus(
        RuntimeError("an instrument cannot call the daemon (its VM call waits for it): "
                     "read the arguments it is given, as numpy arrays"));
  }
  InterruptScope scope(session);
  try {
    py::gil_scoped_release release;
    return op();
  } catch (const StatusError&) {
    RaiseIfInterrupted(scope);
    throw;
  }
}

// --- values (values.cc) ---------------------------------------------------

// A Python object as a VM argument: numpy arrays (and objects with
// __dlpack__, through numpy.from_dlpack) become CPU tensors; int, float,
// bool, str, None, Device, RemoteTensor, closures; tuples and lists become
// tuples. TypeError for anything else. When `session` is set, a remote
// object must belong to it.
Value ToValue(const py::handle& obj, const SessionState* session);
// A VM result as a Python object: CPU tensors become numpy arrays (copies),
// tuples nested lists, remote tensors RemoteTensor, closures RemoteObject.
py::object FromValue(const Value& value, const SessionPtr& session);
// A CPU tensor from a numpy array: a copy of a small one, the memory of a
// large aligned C-contiguous one (the tensor keeps the array alive; nothing
// writes it). TypeError for a dtype Tether has no name for.
Tensor TensorFromNumpy(const py::array& array);
py::array NumpyFromTensor(const Tensor& tensor);
// A device from a Device, "cuda:1" or ("cuda", 1).
Device ToDevice(const py::handle& obj);
// os.fspath(path) as a string: a str or any path-like object.
std::string FsPath(const py::object& path);
void RegisterValues(py::module_& m);

// --- executables and the VM (executable.cc, vm.cc) ------------------------

void RegisterExecutable(py::module_& m);
// The stored module of `exe` (an Executable, uploaded to `session` now, or an
// UploadedModule of `session`; `session` may be null for the latter).
PyUploadedModule UploadedFor(const py::object& exe, const SessionPtr& session);

// What a Python VirtualMachine holds: the RemoteVM of an uploaded module.
// Thread contract: thread-hostile like RemoteVM; the GIL serializes Python
// callers except while a call runs, so each call takes mu_.
class PyVM {
 public:
  PyVM(PyUploadedModule module, std::vector<Device> devices, std::unique_ptr<client::RemoteVM> vm)
      : module_(std::move(module)), devices_(std::move(devices)), vm_(std::move(vm)) {}
  ~PyVM() {
    // Freeing the VM talks to the daemon.
    py::gil_scoped_release release;
    vm_.reset();
  }

  const SessionPtr& session() const { return module_.session; }
  const PyUploadedModule& module() const { return module_; }

  std::vector<Value> Args(const py::args& args) const {
    std::vector<Value> out;
    for (py::handle a : args) out.push_back(ToValue(a, session().get()));
    return out;
  }

  // Runs `op(vm)` without the GIL, one call at a time; Ctrl-C stops it.
  template <typename Op>
  auto Run(Op op) {
    return Blocking(session(), [&] {
      absl::MutexLock lock(&mu_);
      return op(*vm_);
    });
  }

  // What vm[name] finds (python/src/module_functions.cc): a saved or
  // bytecode function (invoked), or a kernel of the executable (called
  // alone); nullopt for a name the module lacks.
  enum class FunctionKind { kInvoke, kKernel };
  std::optional<FunctionKind> Find(const std::string& name);
  // Find, raising the daemon's error for an unknown name (the VM's
  // "unknown function", a ValueError).
  FunctionKind Resolve(const std::string& name);
  // The executable's functions and kernels, asked once (they never change).
  const std::vector<vm::ModuleFunction>& Functions();
  // Names save_function gave (found first, as the seed's lookup does).
  void AddSaved(const std::string& name) { saved_.insert(name); }

  py::object Invoke(const std::string& name, const py::args& args);
  // Calls kernel `name`: NumPy arrays among `args` are uploaded to the
  // kernel's device and copied back afterwards, so they see its outputs as
  // a local call's arrays would; remote tensors are written on the daemon.
  py::object CallKernel(const std::string& name, const py::args& args);

  // bench/python/overhead.py: `n` calls of RemoteVM::Invoke from C++ with
  // arguments converted once, as a C++ client makes them; seconds in all.
  double TimeCppInvoke(const std::string& name, const py::tuple& args, int n);

 private:
  PyUploadedModule module_;
  std::vector<Device> devices_;  // as created; empty: cpu:0
  std::unique_ptr<client::RemoteVM> vm_;
  absl::Mutex mu_;
  // Touched with the GIL held.
  absl::flat_hash_set<std::string> saved_;
  std::optional<std::vector<vm::ModuleFunction>> functions_;
};

void RegisterVM(py::module_& m);
// VirtualMachine.list_functions, get_function, implements_function and
// the FunctionInfo class (module_functions.cc).
void RegisterModuleFunctions(py::module_& m);
// Session.get_function, list_global_func_names and Device.sync and streams
// (remote_runtime.cc).
void RegisterRemoteRuntime(py::module_& m);
// save_param_dict, load_param_dict, num_threads, DataType (runtime.cc).
void RegisterRuntime(py::module_& m);
// load_static_library and the StaticLibrary class (static_library.cc).
void RegisterStaticLibrary(py::module_& m);
// A {name: array} dict as a ParamList (TypeError for a key that is not a str).
ParamList ParamsFromDict(const py::dict& params);

}  // namespace tether::python

#endif  // TETHER_PYTHON_SRC_BINDINGS_H_
