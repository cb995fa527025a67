// Python objects <-> Values, NumPy arrays <-> tensors, and the Device,
// RemoteTensor and RemoteObject classes.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"
#include "runtime/device/device_api.h"

namespace tether::python {
namespace {

// The NumPy dtype name of a Tether dtype: the same name, except bfloat16,
// which NumPy lacks: its raw bits come back as uint16.
std::string NumpyDtypeName(DataType dtype) {
  if (dtype.lanes() != 1) {
    ThrowStatus(TypeError("a ", dtype.ToString(), " tensor has no NumPy dtype (vector lanes)"));
  }
  if (dtype.is_bfloat16()) return "uint16";
  if (dtype.is_bool()) return "bool";
  return dtype.ToString();
}

// The tensor dtype of a NumPy dtype, from its kind and size (the
// descriptor's fields: no Python call on every argument).
std::optional<DataType> DataTypeOfNumpy(char kind, py::ssize_t itemsize) {
  const int bits = static_cast<int>(itemsize) * 8;
  switch (kind) {
    case 'f':
      if (bits == 16 || bits == 32 || bits == 64) return DataType::Float(bits);
      break;
    case 'i':
      if (bits == 8 || bits == 16 || bits == 32 || bits == 64) return DataType::Int(bits);
      break;
    case 'u':
      if (bits == 8 || bits == 16 || bits == 32 || bits == 64) return DataType::UInt(bits);
      break;
    case 'b':
      if (bits == 8) return DataType::Bool();
      break;
  }
  return std::nullopt;
}

// The NumPy dtype of a tensor dtype; made once per dtype, then reused (with
// the GIL held; never destroyed: no reference is dropped at exit).
py::dtype NumpyDtype(DataType dtype) {
  static auto* cache = new absl::flat_hash_map<std::string, py::dtype>();
  const std::string name = NumpyDtypeName(dtype);
  auto it = cache->find(name);
  if (it == cache->end()) it = cache->emplace(name, py::dtype(name)).first;
  return it->second;
}

py::object AttributeFromRuntime(Device device, DeviceAttr attr) {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(device.type);
  if (!api.ok()) {
    if (attr == DeviceAttr::kExist) return py::bool_(false);
    ThrowStatus(api.status());
  }
  Value value;
  {
    py::gil_scoped_release release;
    value = ValueOrThrow((*api)->GetAttr(device.id, attr));
  }
  return FromValue(value, nullptr);
}

std::string DeviceRepr(Device d) {
  std::string s = d.ToString();  // "cuda:1"
  size_t colon = s.find(':');
  if (colon == std::string::npos) return s;
  return absl::StrCat(s.substr(0, colon), "(", s.substr(colon + 1), ")");
}

// What a borrowed array's tensor owns: a reference to the array, dropped
// with the GIL taken (the last owner of the tensor may be any thread).
struct NumpyBorrow {
  DLManagedTensor managed;
  std::vector<int64_t> shape;
  PyObject* array;
};

Tensor BorrowNumpy(py::array array, std::vector<int64_t> shape, DataType dtype) {
  auto* ctx = new NumpyBorrow{};
  ctx->shape = std::move(shape);
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = const_cast<void*>(array.data());  // never written: uploads read it
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(ctx->shape.size());
  dl.dtype = dtype;
  dl.shape = ctx->shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
  ctx->array = array.release().ptr();
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) {
    auto* c = static_cast<NumpyBorrow*>(self->manager_ctx);
    // Leaked on purpose once the interpreter is going away.
    if (Py_IsInitialized() && !_Py_IsFinalizing()) {
      PyGILState_STATE state = PyGILState_Ensure();
      Py_DECREF(c->array);
      PyGILState_Release(state);
    }
    delete c;
  };
  absl::StatusOr<Tensor> tensor = Tensor::FromDLPack(&ctx->managed);
  if (!tensor.ok()) {
    ctx->managed.deleter(&ctx->managed);
    ThrowStatus(tensor.status());
  }
  return *std::move(tensor);
}

}  // namespace

Tensor TensorFromNumpy(const py::array& in) {
  py::array array = py::array::ensure(in, py::array::c_style);
  if (!array) throw py::error_already_set();
  py::dtype dt = array.dtype();
  if (dt.byteorder() == '>') {
    ThrowStatus(TypeError("big-endian arrays are not supported: convert with astype('<",
                          std::string(1, dt.char_()), dt.itemsize(), "')"));
  }
  std::optional<DataType> dtype = DataTypeOfNumpy(dt.kind(), dt.itemsize());
  if (!dtype) {
    ThrowStatus(TypeError("numpy dtype ", py::str(dt).cast<std::string>(), " has no tensor dtype"));
  }
  std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
  // A large aligned array is borrowed, not copied: the tensor reads its
  // memory and keeps it alive (an upload of 64 MiB makes no copy here).
  constexpr py::ssize_t kBorrowBytes = 64 << 10;
  if (array.nbytes() >= kBorrowBytes && (array.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_)) {
    return BorrowNumpy(std::move(array), std::move(shape), *dtype);
  }
  return ValueOrThrow(Tensor::FromBytes(shape, *dtype, array.data(), array.nbytes()));
}

py::array NumpyFromTensor(const Tensor& tensor) {
  if (tensor->device().type != kDLCPU) {
    ThrowStatus(ValueError("tensor on ", tensor->device().ToString(),
                           " cannot become a numpy array; copy it to the cpu first"));
  }
  py::dtype dt = NumpyDtype(tensor->dtype());
  std::vector<py::ssize_t> shape(tensor->shape().begin(), tensor->shape().end());
  py::array out(dt, shape);
  ThrowIfError(tensor.CopyToBytes(out.mutable_data(), static_cast<size_t>(out.nbytes())));
  return out;
}

std::string FsPath(const py::object& path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

Device ToDevice(const py::handle& obj) {
  if (py::isinstance<PyDevice>(obj)) return obj.cast<const PyDevice&>().device;
  if (py::isinstance<py::str>(obj)) return ValueOrThrow(Device::Parse(obj.cast<std::string>()));
  if (py::isinstance<py::tuple>(obj) && py::len(obj) == 2) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(obj);
    return ValueOrThrow(
        Device::Parse(absl::StrCat(py::str(t[0]).cast<std::string>(), ":", t[1].cast<int>())));
  }
  ThrowStatus(TypeError("expected a tether.Device or a device name like \"cuda:0\", got ",
                        py::str(py::type::of(obj)).cast<std::string>()));
}

std::vector<int64_t> PyRemoteTensor::shape() const {
  const auto& dims = client::AsRemoteHandle(handle)->spec().shape;
  return {dims.begin(), dims.end()};
}
std::string PyRemoteTensor::dtype() const {
  return client::AsRemoteHandle(handle)->spec().dtype.ToString();
}
Device PyRemoteTensor::device() const { return client::AsRemoteHandle(handle)->spec().device; }

Value ToValue(const py::handle& obj, const SessionState* session) {
  auto check_session = [&](const SessionPtr& owner) {
    if (session != nullptr && owner.get() != session) {
      ThrowStatus(ValueError("a remote object of another session cannot be passed here"));
    }
  };
  if (obj.is_none()) return Value();
  if (py::isinstance<py::bool_>(obj)) return Value(obj.cast<bool>());
  if (py::isinstance<py::int_>(obj)) return Value(obj.cast<int64_t>());
  if (py::isinstance<py::float_>(obj)) return Value(obj.cast<double>());
  if (py::isinstance<py::str>(obj)) return Value(obj.cast<std::string>());
  if (py::isinstance<PyDevice>(obj)) return Value(obj.cast<const PyDevice&>().device);
  if (py::isinstance<PyRemoteTensor>(obj)) {
    const auto& t = obj.cast<const PyRemoteTensor&>();
    check_session(t.session);
    return t.handle;
  }
  if (py::isinstance<PyRemoteObject>(obj)) {
    const auto& o = obj.cast<const PyRemoteObject&>();
    check_session(o.session);
    return o.handle;
  }
  if (py::isinstance<py::array>(obj))
    return TensorFromNumpy(py::reinterpret_borrow<py::array>(obj));
  py::module_ np = py::module_::import("numpy");
  if (py::isinstance(obj, np.attr("generic"))) return TensorFromNumpy(np.attr("asarray")(obj));
  if (py::isinstance<py::tuple>(obj) || py::isinstance<py::list>(obj)) {
    std::vector<Value> fields;
    for (py::handle item : obj) fields.push_back(ToValue(item, session));
    return Value(MakeRef<TupleObj>(std::move(fields)));
  }
  if (py::hasattr(obj, "__dlpack__")) {
    // A local tensor of another framework, through NumPy's DLPack import
    // (CPU tensors only: NumPy refuses others).
    return TensorFromNumpy(np.attr("from_dlpack")(obj));
  }
  ThrowStatus(TypeError("cannot pass a ", py::str(py::type::of(obj)).cast<std::string>(),
                        " to the VM: expected a numpy array, a RemoteTensor, a number, a str, "
                        "a Device or a tuple of them"));
}

py::object FromValue(const Value& value, const SessionPtr& session) {
  if (value.is_none()) return py::none();
  if (value.is_bool()) return py::bool_(value.bool_value());
  if (value.is_int()) return py::int_(value.int_value());
  if (value.is_float()) return py::float_(value.float_value());
  if (value.is_string()) return py::str(value.string_value());
  if (value.is_dtype()) return py::str(value.dtype_value().ToString());
  if (value.is_device()) {
    return py::cast(session ? SessionDevice(session, value.device_value())
                            : PyDevice{value.device_value(), std::nullopt, nullptr});
  }
  if (value.is_shape()) {
    const auto& dims = value.AsRef<ShapeObj>()->dims;
    py::tuple t(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) t[i] = py::int_(dims[i]);
    return t;
  }
  if (value.is_tensor()) return NumpyFromTensor(Tensor(value.AsRef<TensorObj>()));
  if (value.is_tuple()) {
    py::list out;
    for (const Value& field : value.AsRef<TupleObj>()->fields)
      out.append(FromValue(field, session));
    return out;
  }
  if (client::RemoteHandleObj* h = client::AsRemoteHandle(value); h != nullptr) {
    if (h->kind() == client::RemoteHandleObj::Kind::kTensor) {
      return py::cast(PyRemoteTensor{session, value, OwnerOf(session, value)});
    }
    return py::cast(PyRemoteObject{session, value, OwnerOf(session, value)});
  }
  ThrowStatus(TypeError("a result of type ", value.TypeName(), " has no Python form"));
}

void RegisterValues(py::module_& m) {
  py::class_<PyDevice> device(m, "Device", "A device (cpu:0, cuda:1) and its attributes.");
  device
      .def(py::init([](const py::object& spec, std::optional<int> id) {
             Device d = ToDevice(spec);
             if (id) d.id = *id;
             return PyDevice{d, std::nullopt, nullptr};
           }),
           py::arg("device"), py::arg("index") = py::none(),
           "Device(\"cuda:1\"), Device(\"cuda\", 1) or Device(device).")
      .def_property_readonly(
          "device_type", [](const PyDevice& d) { return static_cast<int>(d.device.type); },
          "The DLPack device type code (1 cpu, 2 cuda).")
      .def_property_readonly(
          "device_id", [](const PyDevice& d) { return d.device.id; }, "The device's index.")
      .def("__str__", [](const PyDevice& d) { return d.device.ToString(); })
      .def("__repr__", [](const PyDevice& d) { return DeviceRepr(d.device); })
      .def("__eq__",
           [](const PyDevice& a, const py::object& b) {
             return py::isinstance<PyDevice>(b) && a.device == b.cast<const PyDevice&>().device;
           })
      .def("__hash__",
           [](const PyDevice& d) {
             return py::hash(py::make_tuple(static_cast<int>(d.device.type), d.device.id));
           })
      .def_property_readonly(
          "session", [](const PyDevice& d) { return d.session; },
          "The Session this device came from (session.cpu(), a RemoteTensor's device), "
          "or None for tether.cpu() and the like.");
  for (const DeviceAttrName& a : AllDeviceAttrs()) {
    DeviceAttr attr = a.attr;
    std::string name(a.name);
    device.def_property_readonly(
        name.c_str(),
        [attr, name](const PyDevice& d) -> py::object {
          if (d.attributes) {
            // The daemon's answer from the handshake; None where it means nothing.
            return d.attributes->contains(name) ? py::object((*d.attributes)[name.c_str()])
                                                : py::none();
          }
          return AttributeFromRuntime(d.device, attr);
        },
        absl::StrCat("The device's ", name,
                     " as the seed names it: from the daemon's handshake for a session's "
                     "device, else read on this machine; None where it means nothing.")
            .c_str());
  }
  m.def(
      "cpu",
      [](int id) {
        return PyDevice{Device::Cpu(id), std::nullopt, nullptr};
      },
      py::arg("dev_id") = 0, "The CPU device (attributes read on this machine).");
  m.def(
      "cuda",
      [](int id) {
        return PyDevice{Device::Cuda(id), std::nullopt, nullptr};
      },
      py::arg("dev_id") = 0, "A CUDA GPU (attributes read on this machine).");
  m.def(
      "device",
      [](const py::object& spec, std::optional<int> id) {
        Device d = ToDevice(spec);
        if (id) d.id = *id;
        return PyDevice{d, std::nullopt, nullptr};
      },
      py::arg("dev_type"), py::arg("dev_id") = py::none(),
      "A device by name: device(\"cuda:1\"), device(\"cuda\", 1).");

  py::class_<PyRemoteTensor>(m, "RemoteTensor",
                             "A tensor owned by a session on the daemon; numpy() copies it here.")
      .def_property_readonly(
          "shape", [](const PyRemoteTensor& t) { return py::tuple(py::cast(t.shape())); },
          "The shape, a tuple of ints.")
      .def_property_readonly("dtype", &PyRemoteTensor::dtype, "The dtype's name (\"float32\").")
      .def_property_readonly(
          "device", [](const PyRemoteTensor& t) { return SessionDevice(t.session, t.device()); },
          "The daemon's device the tensor is on.")
      .def(
          "numpy",
          [](const PyRemoteTensor& t) {
            Tensor local = Blocking(
                t.session, [&] { return ValueOrThrow(t.session->get().DownloadTensor(t.handle)); });
            return NumpyFromTensor(local);
          },
          "A copy of the tensor here, as a numpy array (bfloat16 as its uint16 bits).")
      .def(
          "copyfrom",
          [](py::object self, const py::object& source) {
            const auto& t = self.cast<const PyRemoteTensor&>();
            if (py::isinstance<PyRemoteTensor>(source)) {
              const auto& src = source.cast<const PyRemoteTensor&>();
              if (src.session != t.session) {
                ThrowStatus(ValueError("copyfrom: the source belongs to another session"));
              }
              Blocking(t.session,
                       [&] { ThrowIfError(t.session->get().CopyTensor(src.handle, t.handle)); });
              return self;
            }
            Tensor local = TensorFromNumpy(py::module_::import("numpy").attr("asarray")(source));
            const std::vector<int64_t> shape = t.shape();
            if (local->dtype().ToString() != t.dtype() ||
                !std::equal(local->shape().begin(), local->shape().end(), shape.begin(),
                            shape.end())) {
              ThrowStatus(ValueError("copyfrom: cannot copy a ", local.ToString(), " into a ",
                                     t.dtype(), " tensor of shape (", absl::StrJoin(shape, ", "),
                                     ")"));
            }
            Blocking(t.session, [&] {
              Value staged = ValueOrThrow(t.session->get().UploadTensor(local, t.device()));
              absl::Status copied = t.session->get().CopyTensor(staged, t.handle);
              absl::Status freed =
                  t.session->get().FreeObjects({client::AsRemoteHandle(staged)->id()});
              ThrowIfError(copied);
              ThrowIfError(freed);
            });
            return self;
          },
          py::arg("source"),
          "Copies `source` (a numpy array, anything numpy.asarray takes, or a RemoteTensor of "
          "the session) into this tensor in place, on the daemon: a tensor bound by "
          "save_function or set_input takes new values. Same dtype and shape; returns self.")
      .def("__repr__", [](const PyRemoteTensor& t) {
        std::string dims;
        for (int64_t d : t.shape()) absl::StrAppend(&dims, dims.empty() ? "" : ", ", d);
        return absl::StrCat("<tether.RemoteTensor shape=(", dims, ") dtype=", t.dtype(),
                            " device=", t.device().ToString(), ">");
      });

  py::class_<PyRemoteObject>(m, "RemoteObject",
                             "An object that stays on the daemon (a closure), passed back as is.")
      .def_property_readonly(
          "type_key",
          [](const PyRemoteObject& o) {
            return client::AsRemoteHandle(o.handle)->remote_type_key();
          },
          "The daemon's type of the object (\"vm.Closure\").")
      .def("__repr__", [](const PyRemoteObject& o) {
        return absl::StrCat("<tether.RemoteObject ",
                            client::AsRemoteHandle(o.handle)->remote_type_key(), ">");
      });
}

}  // namespace tether::python
