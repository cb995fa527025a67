// tether.connect / tether.local and the Session class: the handshake as a
// dict, devices with the daemon's attributes, remote tensors and uploads.
#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/codec/auth_token.h"
#include "proto/codec/value_codec.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"

namespace tether::python {
namespace {

py::dict DeviceAttributes(const v1::DeviceInfo& info) {
  py::dict attrs;
  for (const auto& [key, wire] : info.attributes()) {
    absl::StatusOr<Value> v = rpc::DecodeValue(wire, {});
    attrs[py::str(key)] = v.ok() ? FromValue(*v, nullptr) : py::none();
  }
  return attrs;
}

SessionPtr Connect(const std::string& target, client::ConnectOptions options,
                   std::unique_ptr<cli::EmbeddedDaemon> daemon) {
  auto state = std::make_shared<SessionState>();
  state->daemon = std::move(daemon);
  py::gil_scoped_release release;
  state->session = ValueOrThrow(client::RemoteSession::Connect(target, options));
  return state;
}

SessionPtr ConnectRemote(const std::string& target, std::optional<std::string> token,
                         std::optional<std::string> tls_ca, std::optional<std::string> tls_cert,
                         std::optional<std::string> tls_key,
                         std::optional<std::string> tls_server_name, bool isolate, double timeout) {
  client::ConnectOptions options;
  options.client_name = "tether-python";
  options.isolate = isolate;
  options.deadline = absl::Seconds(timeout);
  options.tls_ca_file = tls_ca.value_or("");
  options.tls_cert_file = tls_cert.value_or("");
  options.tls_key_file = tls_key.value_or("");
  options.tls_server_name = tls_server_name.value_or("");
  if (token) {
    options.auth_token = *token;
  } else if (rpc::IsLocalAddress(target)) {
    // As the CLI does: a daemon of this user on this host asks for the
    // user's default token; send it when there is one (never to another host).
    const std::string path = rpc::DefaultTokenPath();
    if (!path.empty() && ::access(path.c_str(), F_OK) == 0) {
      options.auth_token = ValueOrThrow(rpc::ReadTokenFile(path, true));
    }
  }
  return Connect(target, options, nullptr);
}

SessionPtr StartLocal() {
  std::unique_ptr<cli::EmbeddedDaemon> daemon;
  {
    py::gil_scoped_release release;
    daemon = ValueOrThrow(cli::EmbeddedDaemon::Start());
  }
  client::ConnectOptions options;
  options.client_name = "tether-python";
  options.auth_token = daemon->auth_token();
  std::string target = daemon->target();
  return Connect(target, options, std::move(daemon));
}

py::dict Info(SessionState& s) {
  const v1::HandshakeResponse& h = s.get().handshake();
  py::dict info;
  info["protocol"] = absl::StrCat(h.protocol().major(), ".", h.protocol().minor());
  info["runtime_version"] = h.runtime_version();
  py::dict devices;
  for (const v1::DeviceInfo& d : h.devices()) devices[py::str(d.name())] = DeviceAttributes(d);
  info["devices"] = devices;
  py::list dtypes;
  for (const std::string& t : h.dtypes()) dtypes.append(t);
  info["dtypes"] = dtypes;
  py::dict limits;
  limits["max_inline_tensor_bytes"] = h.limits().max_inline_tensor_bytes();
  limits["chunk_bytes"] = h.limits().chunk_bytes();
  limits["max_message_bytes"] = h.limits().max_message_bytes();
  limits["max_sessions"] = h.limits().max_sessions();
  limits["store_quota_bytes"] = h.limits().store_quota_bytes();
  info["limits"] = limits;
  py::dict target;
  if (h.has_target()) {
    target["triple"] = h.target().triple();
    target["cpu"] = h.target().cpu();
    py::list features;
    for (const std::string& f : h.target().features()) features.append(f);
    target["features"] = features;
    target["description"] = h.target().description();
    target["cores"] = h.target().cores();
    target["page_size"] = h.target().page_size();
    target["compile_target"] = h.target().compile_target();
  }
  target["cpu_compile_target"] = s.get().CpuCompileTarget();
  info["target"] = target;
  info["session_id"] = s.get().session_id();
  info["isolated"] = s.get().isolated();
  return info;
}

}  // namespace

// The device `d` with the daemon's attributes (None for the attributes of a
// device the daemon does not have but "exist", which is False).
PyDevice SessionDevice(const SessionPtr& s, Device d) {
  for (const v1::DeviceInfo& info : s->get().handshake().devices()) {
    if ((static_cast<int>(info.device().type()) == static_cast<int>(d.type) &&
         info.device().id() == d.id) ||
        info.name() == d.ToString()) {
      return PyDevice{d, DeviceAttributes(info), s};
    }
  }
  py::dict absent;
  absent["exist"] = false;
  return PyDevice{d, absent, s};
}

RemoteOwner::~RemoteOwner() {
  {
    absl::MutexLock lock(&session->owners_mu);
    auto it = session->owners.find(id);
    if (it != session->owners.end()) {
      // The handle came back meanwhile and has a new owner: it frees it.
      if (!it->second.expired()) return;
      session->owners.erase(it);
    }
  }
  if (!session->session || !Py_IsInitialized() || _Py_IsFinalizing()) return;
  // A handle the daemon no longer has (a closed session) is no error here.
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    session->get().FreeObjects({id}).IgnoreError();
  } else {
    session->get().FreeObjects({id}).IgnoreError();
  }
}

std::shared_ptr<RemoteOwner> OwnerOf(const SessionPtr& session, const Value& handle) {
  const uint64_t id = client::AsRemoteHandle(handle)->id();
  absl::MutexLock lock(&session->owners_mu);
  std::weak_ptr<RemoteOwner>& slot = session->owners[id];
  std::shared_ptr<RemoteOwner> owner = slot.lock();
  if (owner == nullptr) {
    owner = std::make_shared<RemoteOwner>();
    owner->session = session;
    owner->id = id;
    slot = owner;
  }
  return owner;
}

SessionState::~SessionState() {
  if (session) {
    // Closing talks to the daemon: let other Python threads run meanwhile
    // (when the interpreter is still there to hand the GIL to).
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release release;
      session.reset();
    } else {
      session.reset();
    }
  }
  daemon.reset();
}

void RegisterSession(py::module_& m) {
  py::class_<SessionState, SessionPtr>(
      m, "Session", "A session on a tetherd daemon; it owns every tensor, module and VM it makes.")
      .def("info", &Info,
           "The handshake: protocol, runtime version, devices and their "
           "attributes, dtypes, limits, the daemon's target.")
      .def(
          "close",
          [](SessionState& s) {
            py::gil_scoped_release release;
            ThrowIfError(s.get().Close());
          },
          "Closes the session; the daemon frees everything it owns. Idempotent.")
      .def(
          "__enter__", [](SessionPtr s) { return s; }, "The session itself.")
      .def(
          "__exit__",
          [](SessionState& s, const py::object&, const py::object&, const py::object&) {
            py::gil_scoped_release release;
            ThrowIfError(s.get().Close());
            return false;
          },
          "Closes the session.")
      .def_property_readonly(
          "closed", [](SessionState& s) { return s.get().closed(); },
          "Whether the session is closed (close(), the with block's end, or Ctrl-C during "
          "one of its calls).")
      .def_property_readonly(
          "session_id", [](SessionState& s) { return s.get().session_id(); },
          "The daemon's id of the session (32 hex digits).")
      .def_property_readonly(
          "is_local", [](SessionState& s) { return s.daemon != nullptr; },
          "Whether the daemon runs inside this process (tether.local()).")
      .def(
          "device",
          [](SessionPtr s, const py::object& spec, std::optional<int> id) {
            Device d = ToDevice(spec);
            if (id) d.id = *id;
            return SessionDevice(s, d);
          },
          py::arg("dev_type"), py::arg("dev_id") = py::none(),
          "The device with the daemon's attributes (exist, device_name, ...).")
      .def(
          "cpu", [](SessionPtr s, int id) { return SessionDevice(s, Device::Cpu(id)); },
          py::arg("dev_id") = 0, "The daemon's CPU, with its attributes.")
      .def(
          "cuda", [](SessionPtr s, int id) { return SessionDevice(s, Device::Cuda(id)); },
          py::arg("dev_id") = 0, "The daemon's CUDA GPU `dev_id`, with its attributes.")
      .def(
          "devices",
          [](SessionPtr s) {
            py::list out;
            for (const v1::DeviceInfo& info : s->get().handshake().devices()) {
              Device d = ValueOrThrow(Device::Parse(info.name()));
              out.append(PyDevice{d, DeviceAttributes(info), s});
            }
            return out;
          },
          "Every device of the daemon.")
      .def(
          "empty",
          [](SessionPtr s, const std::vector<int64_t>& shape, const std::string& dtype,
             const py::object& device) {
            DataType dt = ValueOrThrow(DataType::Parse(dtype));
            Device d = device.is_none() ? Device::Cpu() : ToDevice(device);
            Value handle =
                Blocking(s, [&] { return ValueOrThrow(s->get().AllocTensor(shape, dt, d)); });
            return PyRemoteTensor{s, handle, OwnerOf(s, handle)};
          },
          py::arg("shape"), py::arg("dtype") = "float32", py::arg("device") = py::none(),
          "A new uninitialized tensor on the daemon.")
      .def(
          "array",
          [](SessionPtr s, const py::object& data, const py::object& device) {
            Tensor local = TensorFromNumpy(py::module_::import("numpy").attr("asarray")(data));
            Device d = device.is_none() ? Device::Cpu() : ToDevice(device);
            Value handle =
                Blocking(s, [&] { return ValueOrThrow(s->get().UploadTensor(local, d)); });
            return PyRemoteTensor{s, handle, OwnerOf(s, handle)};
          },
          py::arg("data"), py::arg("device") = py::none(),
          "A copy of `data` (a numpy array or anything numpy.asarray takes) on the daemon.")
      .def(
          "_time_cpp_upload",
          [](SessionPtr s, const py::array& data, int n) {
            // bench/python/overhead.py: the C++ client's uploads of a tensor it
            // already has (made once, outside the timing); seconds in all.
            Tensor local = ValueOrThrow(Tensor::FromBytes(
                std::vector<int64_t>(data.shape(), data.shape() + data.ndim()),
                ValueOrThrow(DataType::Parse(py::str(data.dtype()).cast<std::string>())),
                data.data(), data.nbytes()));
            py::gil_scoped_release release;
            const absl::Time start = absl::Now();
            for (int i = 0; i < n; ++i) {
              Value handle = ValueOrThrow(s->get().UploadTensor(local));
              ThrowIfError(s->get().FreeObjects({client::AsRemoteHandle(handle)->id()}));
            }
            return absl::ToDoubleSeconds(absl::Now() - start);
          },
          py::arg("data"), py::arg("n"),
          "bench/python/overhead.py: n uploads (and frees) made from C++, seconds.");
  m.def("connect", &ConnectRemote, py::arg("target"), py::kw_only(), py::arg("token") = py::none(),
        py::arg("tls_ca") = py::none(), py::arg("tls_cert") = py::none(),
        py::arg("tls_key") = py::none(), py::arg("tls_server_name") = py::none(),
        py::arg("isolate") = false, py::arg("timeout") = 10.0,
        "Connects to a tetherd (\"HOST:PORT\" or \"unix:/path\") and opens a session.");
  m.def("local", &StartLocal,
        "Starts a daemon inside this process (a private unix socket and a random token, as "
        "the CLI does without --remote) and opens a session on it.");
}

}  // namespace tether::python
