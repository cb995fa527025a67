// tether.VirtualMachine over client::RemoteVM, with the seed's method names
// and arguments, and the BenchmarkResult and Report classes it returns.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/remote_vm.h"
#include "client/stateful_stream.h"
#include "python/src/bindings.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/core/registry.h"
#include "runtime/profiling/benchmark_result.h"
#include "runtime/profiling/report.h"
#include "runtime/profiling/time_evaluator.h"
#include "runtime/vm/virtual_machine.h"

namespace tether::python {

double PyVM::TimeCppInvoke(const std::string& name, const py::tuple& args, int n) {
  std::vector<Value> values;
  for (py::handle a : args) values.push_back(ToValue(a, session().get()));
  return Run([&](client::RemoteVM& vm) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < n; ++i) ValueOrThrow(vm.Invoke(name, values));
    return absl::ToDoubleSeconds(absl::Now() - start);
  });
}

py::object PyVM::Invoke(const std::string& name, const py::args& args) {
  std::vector<Value> values = Args(args);
  Value out = Run([&](client::RemoteVM& vm) { return ValueOrThrow(vm.Invoke(name, values)); });
  return FromValue(out, session());
}

namespace {

// --- Python instruments (vm.set_instrument(callable)) -----------------------
//
// A tether.local() session's daemon runs in this process, so its VM can call
// a Python function: set_instrument registers a one-off factory for it in the
// process's registry (remote-callable, as SetInstrument requires), installs
// it by name and removes the factory again. The instrument runs on the
// daemon's thread with the GIL taken, while the caller waits without it.

// A Python object that may be dropped on a thread without the GIL.
std::shared_ptr<py::object> KeepWithGil(py::object obj) {
  return std::shared_ptr<py::object>(new py::object(std::move(obj)), [](py::object* p) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) {
      p->release();  // the interpreter is gone: nothing to drop
    } else {
      py::gil_scoped_acquire gil;
      p->release().dec_ref();
    }
    delete p;
  });
}

// One VM value as the instrument sees it: tensors as numpy arrays (copied to
// the CPU first where they live elsewhere), a function as a Python callable
// of numpy arrays, scalars, strings, shapes and devices as FromValue makes
// them, and what Python has no form for (closures, storage) as None.
py::object InstrumentArg(const Value& v) {
  if (v.is_tensor()) {
    Tensor t(v.AsRef<TensorObj>());
    if (t->device().type != kDLCPU) t = ValueOrThrow(t.CopyTo(Device::Cpu()));
    return NumpyFromTensor(t);
  }
  if (v.is_function()) {
    Function f(v.AsRef<FunctionObj>());
    return py::cpp_function(
        [f](const py::args& args) {
          std::vector<Value> values;
          for (py::handle a : args) values.push_back(ToValue(a, nullptr));
          absl::StatusOr<Value> out;
          {
            py::gil_scoped_release release;
            out = f(values);
          }
          return InstrumentArg(ValueOrThrow(std::move(out)));
        },
        py::name(f.name().c_str()));
  }
  if (v.is_tuple()) {
    py::list out;
    for (const Value& field : v.AsRef<TupleObj>()->fields) out.append(InstrumentArg(field));
    return out;
  }
  if (v.is_none() || v.is_bool() || v.is_int() || v.is_float() || v.is_string() || v.is_dtype() ||
      v.is_device() || v.is_shape()) {
    return FromValue(v, nullptr);
  }
  return py::none();  // closures, storage, pointers: nothing Python can use
}

// The status a Python exception from the instrument becomes: the error kind
// of its class, so the caller gets the same class back.
absl::Status InstrumentError(const py::error_already_set& e) {
  const std::string what = absl::StrCat("the instrument raised ", e.what());
  if (e.matches(PyExc_ValueError)) return ValueError(what);
  if (e.matches(PyExc_TypeError)) return TypeError(what);
  if (e.matches(PyExc_IndexError)) return IndexError(what);
  return RuntimeError(what);
}

Function PythonInstrument(std::shared_ptr<py::object> fn) {
  return Function::FromPacked("python_instrument", [fn](ArgSpan call) -> absl::StatusOr<Value> {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return Value();
    py::gil_scoped_acquire gil;
    in_python_instrument = true;
    absl::Cleanup leave = [] { in_python_instrument = false; };
    try {
      py::tuple args(call.size());
      for (size_t i = 0; i < call.size(); ++i) args[i] = InstrumentArg(call[i]);
      py::object action = (*fn)(*args);
      // VMInstrumentReturnKind.SKIP_RUN (1); anything else is NO_OP.
      if (py::isinstance<py::int_>(action) && !py::isinstance<py::bool_>(action) &&
          action.cast<int64_t>() == static_cast<int64_t>(vm::InstrumentReturnKind::kSkipRun)) {
        return Value(static_cast<int64_t>(vm::InstrumentReturnKind::kSkipRun));
      }
      return Value();
    } catch (py::error_already_set& e) {
      return InstrumentError(e);
    } catch (const StatusError& e) {
      return e.status;
    } catch (const std::exception& e) {
      return RuntimeError("the instrument failed: ", e.what());
    }
  });
}

void SetPythonInstrument(PyVM& vm, py::object fn) {
  if (!vm.session()->daemon) {
    ThrowStatus(TypeError(
        "a Python function runs as an instrument only in a tether.local() session, whose "
        "daemon is this process; a remote daemon takes the name of an instrument it has "
        "(\"trace\", \"skip\" with patterns, or a registered factory), as TVM's RPC does"));
  }
  static std::atomic<uint64_t> next{0};
  const std::string factory = absl::StrCat("tether.python.instrument.", next++);
  Function instrument = PythonInstrument(KeepWithGil(std::move(fn)));
  ThrowIfError(Registry::RegisterPacked(
      factory, [instrument](ArgSpan) -> absl::StatusOr<Value> { return Value(instrument); }));
  ThrowIfError(Registry::SetRemoteCallable(factory));
  absl::Cleanup remove = [&factory] { Registry::Remove(factory); };
  vm.Run([&](client::RemoteVM& v) {
    ThrowIfError(v.SetInstrumentByName(factory, {}));
    return 0;
  });
}

// The parameter index of a name or an index.
int ParamIndex(const std::vector<std::string>& params, const py::handle& key) {
  if (py::isinstance<py::int_>(key)) {
    const int i = key.cast<int>();
    if (i < 0 || i >= static_cast<int>(params.size())) {
      ThrowStatus(IndexError("input ", i, " is out of range: the function has ", params.size(),
                             " parameters"));
    }
    return i;
  }
  const std::string name = py::str(key).cast<std::string>();
  auto it = std::find(params.begin(), params.end(), name);
  if (it == params.end())
    ThrowStatus(TypeError("the function has no parameter named \"", name, "\""));
  return static_cast<int>(it - params.begin());
}

// vm.stream(...): client::StatefulStream over a PyVM. Keeps the Python VM
// alive (the stream borrows its RemoteVM) and runs each step under the VM's
// lock. Thread contract: thread-hostile, like the VM (calls take its lock).
class PyStream {
 public:
  PyStream(py::object vm_object, std::vector<std::string> params, std::vector<int> carried_outputs)
      : vm_object_(std::move(vm_object)),
        params_(std::move(params)),
        carried_outputs_(std::move(carried_outputs)) {}
  ~PyStream() {
    if (stream_) {
      py::gil_scoped_release release;
      stream_.reset();
    }
  }

  PyVM& vm() { return vm_object_.cast<PyVM&>(); }
  void set_stream(std::unique_ptr<client::StatefulStream> s) { stream_ = std::move(s); }

  int Param(const py::handle& key) const { return ParamIndex(params_, key); }

  py::object Step(const py::kwargs& kwargs) {
    client::StatefulStream& stream = Open();
    std::vector<std::pair<int, Value>> streamed;
    for (auto [key, value] : kwargs) {
      streamed.emplace_back(Param(key), ToValue(value, vm().session().get()));
    }
    std::vector<Value> outputs =
        vm().Run([&](client::RemoteVM&) { return ValueOrThrow(stream.Step(streamed)); });
    // Carried outputs are the stream's own handles (the next step's inputs):
    // they stay out of Python's hands.
    py::list out;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const bool carried = std::find(carried_outputs_.begin(), carried_outputs_.end(),
                                     static_cast<int>(i)) != carried_outputs_.end();
      out.append(carried ? py::none() : FromValue(outputs[i], vm().session()));
    }
    return out;
  }

  py::array State(const py::handle& input) {
    client::StatefulStream& stream = Open();
    const int index = Param(input);
    Tensor t =
        vm().Run([&](client::RemoteVM&) { return ValueOrThrow(stream.DownloadState(index)); });
    return NumpyFromTensor(t);
  }

  int64_t steps() const { return stream_ ? stream_->steps() : 0; }

  void Close() {
    if (!stream_) return;
    absl::Status closed = vm().Run([&](client::RemoteVM&) { return stream_->Close(); });
    stream_.reset();
    ThrowIfError(closed);
  }

 private:
  client::StatefulStream& Open() {
    if (!stream_) ThrowStatus(PreconditionError("the stream is closed"));
    return *stream_;
  }

  py::object vm_object_;
  std::vector<std::string> params_;
  std::vector<int> carried_outputs_;
  std::unique_ptr<client::StatefulStream> stream_;
};

std::unique_ptr<PyStream> MakeStream(py::object self, const std::string& func_name,
                                     const py::args& args, const py::dict& carry,
                                     const py::kwargs& kwargs) {
  PyVM& vm = self.cast<PyVM&>();
  std::vector<std::string> params =
      vm.Run([&](client::RemoteVM& v) { return ValueOrThrow(v.GetFunctionParamNames(func_name)); });
  std::vector<client::CarriedState> carries;
  std::vector<int> carried_outputs;
  for (auto [output, input] : carry) {
    if (!py::isinstance<py::int_>(output)) {
      ThrowStatus(TypeError("carry maps an output index to an input (name or index)"));
    }
    carries.push_back({output.cast<int>(), ParamIndex(params, input)});
    carried_outputs.push_back(output.cast<int>());
  }
  // The first call's inputs: positional, then by name; a streamed input may
  // be left out (None).
  std::vector<Value> inputs(params.size());
  if (args.size() > params.size()) {
    ThrowStatus(TypeError(func_name, "() takes ", params.size(), " inputs, got ", args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) inputs[i] = ToValue(args[i], vm.session().get());
  for (auto [key, value] : kwargs) {
    inputs[ParamIndex(params, key)] = ToValue(value, vm.session().get());
  }
  auto stream = std::make_unique<PyStream>(self, params, carried_outputs);
  stream->set_stream(vm.Run([&](client::RemoteVM& v) {
    return ValueOrThrow(client::StatefulStream::Create(&v, func_name, inputs, carries));
  }));
  return stream;
}

// vm[name]: a callable that keeps its VM alive (cheaper to make than a
// py::cpp_function, which matters when vm["main"](x) runs in a loop).
struct PyFunction {
  py::object vm;
  std::string name;
  PyVM::FunctionKind kind;
};

// "cpu:0=naive,cuda:0=pooled" from None, a str or {device: str}.
std::string MemoryConfig(const py::object& cfg) {
  if (cfg.is_none()) return "";
  if (py::isinstance<py::str>(cfg)) return cfg.cast<std::string>();
  if (!py::isinstance<py::dict>(cfg)) {
    ThrowStatus(TypeError("memory_cfg must be None, a str or a dict {device: str}"));
  }
  std::string out;
  for (auto [key, value] : cfg.cast<py::dict>()) {
    absl::StrAppend(&out, out.empty() ? "" : ",", ToDevice(key).ToString(), "=",
                    py::str(value).cast<std::string>());
  }
  return out;
}

// The bytes of a param file given as a {name: array} dict, the file's
// bytes, or its path.
std::string ParamFileBytes(const py::object& params) {
  if (py::isinstance<py::dict>(params)) {
    return ValueOrThrow(SaveParamDict(ParamsFromDict(params.cast<py::dict>())));
  }
  if (py::isinstance<py::bytes>(params)) return params.cast<std::string>();
  if (py::isinstance<py::str>(params) || py::hasattr(params, "__fspath__")) {
    return ValueOrThrow(ReadFileToString(FsPath(params)));
  }
  ThrowStatus(TypeError("params must be a {name: array} dict, a param file's bytes or its path"));
}

std::unique_ptr<PyVM> MakeVM(const py::object& exe, const py::object& device,
                             const py::object& memory_cfg, std::optional<SessionPtr> session,
                             bool fetch_outputs, double call_timeout, int num_threads,
                             bool concurrent_timing, const py::object& params) {
  PyUploadedModule module = UploadedFor(exe, session.value_or(nullptr));
  std::vector<Device> devices;
  if (py::isinstance<py::list>(device) || py::isinstance<py::tuple>(device)) {
    for (py::handle d : device) devices.push_back(ToDevice(d));
  } else if (!device.is_none()) {
    devices.push_back(ToDevice(device));
  }
  client::RemoteVmOptions options;
  options.fetch_outputs = fetch_outputs;
  options.call_timeout = absl::Seconds(call_timeout);
  options.num_threads = num_threads;
  options.concurrent_timing = concurrent_timing;
  std::string cfg = MemoryConfig(memory_cfg);
  if (!params.is_none()) {
    // Weights on the device (docs/design/rpc-protocol.md): the param file
    // travels once (skipped when the daemon has its hash) and the VM's
    // functions take the remaining parameters only.
    std::string bytes = ParamFileBytes(params);
    py::gil_scoped_release release;
    options.params_sha256 = ValueOrThrow(module.session->get().UploadParams(bytes));
  }
  std::unique_ptr<client::RemoteVM> vm;
  {
    py::gil_scoped_release release;
    vm = ValueOrThrow(
        client::RemoteVM::Create(&module.session->get(), module.sha256, devices, cfg, options));
  }
  return std::make_unique<PyVM>(std::move(module), std::move(devices), std::move(vm));
}

}  // namespace

void RegisterVM(py::module_& m) {
  py::class_<profiling::BenchmarkResult>(m, "BenchmarkResult",
                                         "Timing samples (seconds per call, one per repeat) and "
                                         "their statistics.")
      .def(py::init([](std::vector<double> results) {
             int64_t n = static_cast<int64_t>(results.size());
             return profiling::BenchmarkResult::FromSamples(std::move(results), n);
           }),
           py::arg("results"))
      .def_readonly("results", &profiling::BenchmarkResult::results,
                    "Seconds per call, one per repeat.")
      .def_readonly("mean", &profiling::BenchmarkResult::mean, "Mean of results (s).")
      .def_readonly("median", &profiling::BenchmarkResult::median, "Median of results (s).")
      .def_readonly("min", &profiling::BenchmarkResult::min, "Smallest of results (s).")
      .def_readonly("max", &profiling::BenchmarkResult::max, "Largest of results (s).")
      .def_readonly("std", &profiling::BenchmarkResult::std, "Standard deviation of results (s).")
      .def_readonly("total_calls", &profiling::BenchmarkResult::total_calls,
                    "Calls made, the warm-up and min_repeat_ms calibration included.")
      .def_readonly("number_per_repeat", &profiling::BenchmarkResult::number_per_repeat,
                    "Calls per repeat (number, grown to meet min_repeat_ms).")
      .def_readonly("exclusive", &profiling::BenchmarkResult::exclusive,
                    "Whether no other session's call ran during the measurement.")
      .def_readonly("wait_seconds", &profiling::BenchmarkResult::wait_seconds,
                    "Seconds spent waiting for exclusive use before measuring.")
      .def("percentile", &profiling::BenchmarkResult::Percentile, py::arg("p"),
           "The p-th percentile of results (p in [0, 100]), in seconds.")
      .def("__str__", &profiling::BenchmarkResult::ToString)
      .def("__repr__", [](const profiling::BenchmarkResult& r) {
        return absl::StrCat("BenchmarkResult(mean=", r.mean, ", median=", r.median,
                            ", repeats=", r.results.size(), ")");
      });

  py::class_<profiling::Report>(m, "Report", "A profile: one row per call, device totals.")
      .def("table", &profiling::Report::Table, py::arg("sort") = true, py::arg("aggregate") = true,
           py::arg("col_sums") = true,
           "A human-readable table: rows sorted by time, calls of one kernel aggregated, "
           "column sums.")
      .def("csv", &profiling::Report::Csv, "The rows as CSV.")
      .def("json", &profiling::Report::Json, "The report as JSON (Report.from_json reads it).")
      .def_static(
          "from_json",
          [](const std::string& json) { return ValueOrThrow(profiling::Report::FromJson(json)); },
          py::arg("json"), "A Report from the JSON of Report.json().")
      .def("__str__", [](const profiling::Report& r) { return r.Table(); })
      .def("__eq__", [](const profiling::Report& a, const profiling::Report& b) { return a == b; });

  py::class_<PyStream>(m, "Stream",
                       "A stateful model run chunk after chunk with its state kept on the "
                       "daemon (vm.stream).")
      .def("step", &PyStream::Step,
           "Runs one chunk: keywords (parameter name or index) give this chunk's streamed "
           "inputs; returns the outputs, None in place of each carried one (it stays on the "
           "daemon as the next chunk's input).")
      .def("state", &PyStream::State, py::arg("input"),
           "Downloads what carried input `input` (name or index) holds now: the one transfer "
           "of the state a stream needs, at its end.")
      .def_property_readonly("steps", &PyStream::steps, "Chunks run so far.")
      .def("close", &PyStream::Close,
           "Frees the stream's state and uploaded inputs on the daemon. Idempotent.")
      .def(
          "__enter__", [](py::object self) { return self; }, "The stream itself.")
      .def(
          "__exit__",
          [](PyStream& s, const py::object&, const py::object&, const py::object&) {
            s.Close();
            return false;
          },
          "Closes the stream.");

  py::class_<PyFunction>(m, "_Function", "A function of a VirtualMachine (vm[name]).")
      .def(
          "__call__",
          [](const PyFunction& f, const py::args& args) {
            PyVM& vm = f.vm.cast<PyVM&>();
            return f.kind == PyVM::FunctionKind::kKernel ? vm.CallKernel(f.name, args)
                                                         : vm.Invoke(f.name, args);
          },
          "Calls the function with the arguments; returns its result (None for a kernel, "
          "which writes its outputs into its tensor arguments).")
      .def("__repr__", [](const PyFunction& f) {
        return absl::StrCat(f.kind == PyVM::FunctionKind::kKernel ? "<kernel " : "<vm function ",
                            f.name, ">");
      });

  py::class_<PyVM>(m, "VirtualMachine", "The Relax VM of an executable, on a session's daemon.")
      .def(py::init(&MakeVM), py::arg("rt_mod"), py::arg("device") = py::none(),
           py::arg("memory_cfg") = py::none(), py::kw_only(), py::arg("session") = py::none(),
           py::arg("fetch_outputs") = true, py::arg("call_timeout") = 0.0,
           py::arg("num_threads") = 0, py::arg("concurrent_timing") = false,
           py::arg("params") = py::none(),
           "A VM of `rt_mod` (an Executable or UploadedModule) on `device` (a Device or a list) "
           "in `session`; `params` (a {name: array} dict, a param file's bytes or path) fills "
           "the parameters of those names on the daemon.")
      .def_property_readonly("session", &PyVM::session, "The Session the VM runs in.")
      .def_property_readonly("module", &PyVM::module,
                             "The UploadedModule the VM runs (another VirtualMachine of it "
                             "shares the daemon's stored executable).")
      .def("_time_cpp_invoke", &PyVM::TimeCppInvoke, py::arg("func_name"), py::arg("args"),
           py::arg("n"), "bench/python/overhead.py: n calls made from C++ (RemoteVM), seconds.")
      .def("stream", &MakeStream, py::arg("func_name"), py::arg("carry"),
           "A Stream of `func_name`: carry={output index: input name or index} names the "
           "state; the positional and keyword arguments are the first call's inputs (a "
           "streamed input may be left out). The state stays on the daemon between chunks "
           "(docs/design/rpc-protocol.md, \"Streaming\").")
      .def("invoke", &PyVM::Invoke, py::arg("func_name"),
           "Calls `func_name` with the arguments; returns its result.")
      .def(
          "__getitem__",
          [](py::object self, const std::string& name) {
            // Fails here for an unknown name, as the seed's __getitem__ does.
            return PyFunction{self, name, self.cast<PyVM&>().Resolve(name)};
          },
          "vm[name]: the function `name` (a saved one, a Relax function, or a kernel of the "
          "executable, as TVM's lookup with query_imports) as a callable.")
      .def(
          "get_function",
          [](py::object self, const std::string& name, bool) {
            return PyFunction{self, name, self.cast<PyVM&>().Resolve(name)};
          },
          py::arg("name"), py::arg("query_imports") = false,
          "TVM's Module.get_function: vm[name] (kernels are always found; query_imports is "
          "accepted and changes nothing).")
      .def(
          "invoke_closure",
          [](PyVM& vm, const py::object& closure, const py::args& args) {
            Value c = ToValue(closure, vm.session().get());
            std::vector<Value> values = vm.Args(args);
            Value out = vm.Run(
                [&](client::RemoteVM& v) { return ValueOrThrow(v.InvokeClosure(c, values)); });
            return FromValue(out, vm.session());
          },
          "Calls a closure (a RemoteObject a function returned) with the arguments.")
      .def(
          "save_function",
          [](PyVM& vm, const std::string& func_name, const std::string& saved_name,
             const py::args& args, bool include_return, const py::kwargs& kwargs) {
            std::vector<Value> values = vm.Args(args);
            if (kwargs.size() > 0) {
              // As the seed does: named arguments go to their parameter's
              // position, after the positional ones.
              std::vector<std::string> names = vm.Run([&](client::RemoteVM& v) {
                return ValueOrThrow(v.GetFunctionParamNames(func_name));
              });
              std::vector<std::optional<Value>> slots(names.size());
              for (size_t i = 0; i < values.size() && i < slots.size(); ++i) slots[i] = values[i];
              for (auto [key, value] : kwargs) {
                const std::string name = py::str(key).cast<std::string>();
                auto it = std::find(names.begin(), names.end(), name);
                if (it == names.end()) {
                  ThrowStatus(TypeError(func_name, "() has no parameter named \"", name, "\""));
                }
                std::optional<Value>& slot = slots[it - names.begin()];
                if (slot.has_value()) {
                  ThrowStatus(
                      TypeError(func_name, "() got two values for parameter \"", name, "\""));
                }
                slot = ToValue(value, vm.session().get());
              }
              values.clear();
              for (size_t i = 0; i < slots.size(); ++i) {
                if (!slots[i].has_value()) {
                  ThrowStatus(TypeError(func_name, "() is missing parameter \"", names[i], "\""));
                }
                values.push_back(std::move(*slots[i]));
              }
            }
            vm.Run([&](client::RemoteVM& v) {
              ThrowIfError(v.SaveFunction(func_name, saved_name, values, include_return));
              return 0;
            });
            vm.AddSaved(saved_name);
          },
          py::arg("func_name"), py::arg("saved_name"), py::kw_only(),
          py::arg("include_return") = true,
          "Saves a closure of `func_name` with these arguments under `saved_name` "
          "(for time_evaluator: no argument crosses the network per call).")
      .def(
          "set_input",
          [](PyVM& vm, const std::string& func_name, const py::args& args,
             const py::kwargs& kwargs) {
            std::vector<Value> positional = vm.Args(args);
            vm::NamedArgs named;
            for (auto [key, value] : kwargs) {
              named.emplace_back(py::str(key).cast<std::string>(),
                                 ToValue(value, vm.session().get()));
            }
            vm.Run([&](client::RemoteVM& v) {
              ThrowIfError(named.empty() ? v.SetInput(func_name, positional)
                                         : v.SetInputNamed(func_name, positional, named));
              return 0;
            });
          },
          py::arg("func_name"),
          "Sets the arguments of `func_name` for invoke_stateful (keywords by parameter name).")
      .def(
          "invoke_stateful",
          [](PyVM& vm, const std::string& func_name) {
            vm.Run([&](client::RemoteVM& v) {
              ThrowIfError(v.InvokeStateful(func_name));
              return 0;
            });
          },
          py::arg("func_name"), "Calls `func_name` with the arguments set_input gave.")
      .def(
          "get_outputs",
          [](PyVM& vm, const std::string& func_name) {
            Value out =
                vm.Run([&](client::RemoteVM& v) { return ValueOrThrow(v.GetOutputs(func_name)); });
            return FromValue(out, vm.session());
          },
          py::arg("func_name"),
          "The result of the last invoke_stateful of `func_name` (tuples as nested lists).")
      .def(
          "get_function_arity",
          [](PyVM& vm, const std::string& func_name) {
            return vm.Run(
                [&](client::RemoteVM& v) { return ValueOrThrow(v.GetFunctionArity(func_name)); });
          },
          py::arg("func_name"), "How many parameters `func_name` takes.")
      .def(
          "get_function_param_names",
          [](PyVM& vm, const std::string& func_name) {
            return vm.Run([&](client::RemoteVM& v) {
              return ValueOrThrow(v.GetFunctionParamNames(func_name));
            });
          },
          py::arg("func_name"), "The parameter names of `func_name`.")
      .def(
          "set_instrument",
          [](PyVM& vm, const py::object& instrument, const py::args& args) {
            if (!py::isinstance<py::str>(instrument) && PyCallable_Check(instrument.ptr())) {
              if (!args.empty()) {
                ThrowStatus(TypeError("a Python instrument takes no factory arguments"));
              }
              SetPythonInstrument(vm, instrument);
              return;
            }
            if (!py::isinstance<py::str>(instrument)) {
              ThrowStatus(
                  TypeError("set_instrument takes a function or an instrument's name, "
                            "not ",
                            py::str(py::type::of(instrument)).cast<std::string>()));
            }
            const std::string factory_name = instrument.cast<std::string>();
            std::vector<Value> values = vm.Args(args);
            vm.Run([&](client::RemoteVM& v) {
              ThrowIfError(v.SetInstrumentByName(factory_name, values));
              return 0;
            });
          },
          py::arg("instrument"),
          "Installs an instrument. A function `instrument(func, func_symbol, before_run, "
          "ret_value, *args)` is called before and after every call the VM makes (the seed's "
          "signature; tensors come as numpy arrays, `func` as a callable of numpy arrays); "
          "returning VMInstrumentReturnKind.SKIP_RUN before a call skips it. Functions run in "
          "tether.local() sessions only (the daemon is this process) and may not call the "
          "daemon. By name, on any daemon: \"trace\" (records every call; get_trace), "
          "\"skip\" with symbol patterns (SKIP_RUN for matching calls, the rest traced), "
          "\"\" to remove it, or a factory of the daemon's registry.")
      .def(
          "get_trace",
          [](PyVM& vm, bool clear) {
            return vm.Run([&](client::RemoteVM& v) { return ValueOrThrow(v.GetTrace(clear)); });
          },
          py::arg("clear") = false,
          "What the \"trace\" or \"skip\" instrument recorded: a Report with a row per call "
          "(Name, Start, Duration, Device, Argument Shapes); `clear` empties it.")
      .def(
          "time_evaluator",
          [](py::object self, const std::string& func_name, const py::object& dev, int number,
             int repeat, int min_repeat_ms, int cooldown_interval_ms, int repeats_to_cooldown,
             int64_t cache_flush_bytes, const std::string& f_preproc,
             int limit_zero_time_iterations) {
            profiling::TimeEvaluatorOptions options;
            options.number = number;
            options.repeat = repeat;
            options.min_repeat_ms = min_repeat_ms;
            options.limit_zero_time_iterations = limit_zero_time_iterations;
            options.cooldown_interval_ms = cooldown_interval_ms;
            options.repeats_to_cooldown = repeats_to_cooldown;
            options.cache_flush_bytes = cache_flush_bytes;
            options.f_preproc = f_preproc;
            Device device = ToDevice(dev);
            return py::cpp_function([self, func_name, device, options](const py::args& args) {
              PyVM& vm = self.cast<PyVM&>();
              std::vector<Value> values = vm.Args(args);
              return vm.Run([&](client::RemoteVM& v) {
                return ValueOrThrow(v.TimeEvaluator(func_name, device, options, values));
              });
            });
          },
          py::arg("func_name"), py::arg("dev"), py::arg("number") = 10, py::arg("repeat") = 1,
          py::arg("min_repeat_ms") = 0, py::arg("cooldown_interval_ms") = 0,
          py::arg("repeats_to_cooldown") = 1, py::arg("cache_flush_bytes") = 0,
          py::arg("f_preproc") = "", py::kw_only(), py::arg("limit_zero_time_iterations") = 100,
          "A function that runs `func_name` (a function, a saved function, \"invoke_stateful\" "
          "or a kernel of the executable) with its arguments in a timing loop on the daemon and "
          "returns a BenchmarkResult.")
      .def(
          "profile",
          [](PyVM& vm, const std::string& func_name, const py::args& args) {
            std::vector<Value> values = vm.Args(args);
            return vm.Run(
                [&](client::RemoteVM& v) { return ValueOrThrow(v.Profile(func_name, values)); });
          },
          py::arg("func_name"),
          "Runs `func_name` once with the arguments, timing each kernel call: a Report.");
}

}  // namespace tether::python
