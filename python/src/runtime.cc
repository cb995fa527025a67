// The seed's runtime helpers on this machine: save_param_dict /
// load_param_dict (TVM's byte format, runtime/module/param_dict.h),
// num_threads, and the DataType class.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "python/src/bindings.h"
#include "runtime/core/data_type.h"
#include "runtime/core/error.h"
#include "runtime/module/param_dict.h"
#include "runtime/threading/thread_pool.h"

namespace tether::python {

ParamList ParamsFromDict(const py::dict& params) {
  py::module_ np = py::module_::import("numpy");
  ParamList out;
  for (auto [key, value] : params) {
    if (!py::isinstance<py::str>(key)) {
      ThrowStatus(TypeError("param dict keys must be str, got ",
                            py::str(py::type::of(key)).cast<std::string>()));
    }
    py::object array = py::reinterpret_borrow<py::object>(value);
    if (py::isinstance<PyRemoteTensor>(value)) array = value.attr("numpy")();
    out.emplace_back(key.cast<std::string>(), TensorFromNumpy(np.attr("asarray")(array)));
  }
  return out;
}

namespace {

py::dict DictFromParams(const ParamList& params) {
  py::dict out;
  for (const auto& [name, tensor] : params) out[py::str(name)] = NumpyFromTensor(tensor);
  return out;
}

DataType ParseDataType(const std::string& text) { return ValueOrThrow(DataType::Parse(text)); }

}  // namespace

void RegisterRuntime(py::module_& m) {
  m.def(
      "save_param_dict",
      [](const py::dict& params) {
        ParamList list = ParamsFromDict(params);
        std::string bytes;
        {
          py::gil_scoped_release release;
          bytes = ValueOrThrow(SaveParamDict(list));
        }
        return py::bytes(bytes);
      },
      py::arg("params"),
      "{name: array} as TVM's parameter-dict bytes (numpy arrays, or RemoteTensors, "
      "which are downloaded first).");
  m.def(
      "save_param_dict_to_file",
      [](const py::dict& params, const py::object& path) {
        ParamList list = ParamsFromDict(params);
        std::string p = FsPath(path);
        py::gil_scoped_release release;
        ThrowIfError(SaveParamDictToFile(p, list));
      },
      py::arg("params"), py::arg("path"), "save_param_dict, written to `path` atomically.");
  m.def(
      "load_param_dict",
      [](const py::bytes& data) {
        std::string bytes = data;
        ParamList list;
        {
          py::gil_scoped_release release;
          list = ValueOrThrow(LoadParamDict(bytes));
        }
        return DictFromParams(list);
      },
      py::arg("param_bytes"),
      "TVM's parameter-dict bytes as {name: numpy array}, in file order; a corrupt or "
      "truncated dict is a ValueError naming the offset.");
  m.def(
      "load_param_dict_from_file",
      [](const py::object& path) {
        std::string p = FsPath(path);
        ParamList list;
        {
          py::gil_scoped_release release;
          list = ValueOrThrow(LoadParamDictFromFile(p));
        }
        return DictFromParams(list);
      },
      py::arg("path"), "load_param_dict of the file at `path`.");
  m.def(
      "num_threads", [] { return NumThreads(); },
      "The threads this process's runtime uses (for a daemon's, see session.info()).");

  py::class_<DataType>(m, "DataType", "A tensor element type: \"float32\", \"int8\", \"bfloat16\".")
      .def(py::init(&ParseDataType), py::arg("type_str"),
           "Parses a dtype name; ValueError if unknown.")
      .def_property_readonly(
          "type_code", [](const DataType& t) { return int{t.code()}; },
          "The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat).")
      .def_property_readonly(
          "bits", [](const DataType& t) { return int{t.bits()}; }, "Bits per lane.")
      .def_property_readonly(
          "lanes", [](const DataType& t) { return int{t.lanes()}; },
          "Vector lanes (1 for scalars).")
      .def_property_readonly(
          "itemsize", [](const DataType& t) { return t.bytes(); }, "Bytes per element.")
      .def("__str__", &DataType::ToString)
      .def("__repr__",
           [](const DataType& t) { return absl::StrCat("DataType(\"", t.ToString(), "\")"); })
      .def("__eq__",
           [](const DataType& a, const py::object& b) {
             if (py::isinstance<DataType>(b)) return a == b.cast<const DataType&>();
             if (py::isinstance<py::str>(b)) {
               absl::StatusOr<DataType> parsed = DataType::Parse(b.cast<std::string>());
               return parsed.ok() && *parsed == a;
             }
             return false;
           })
      .def("__hash__", [](const DataType& t) { return py::hash(py::str(t.ToString())); });
}

}  // namespace tether::python
