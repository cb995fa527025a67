// The bytecode interpreter, the stateful API, and the timing and profiling
// entry points of a local VM.
#include "runtime/vm/local_vm.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/registry.h"
#include "runtime/cuda/cuda_kernel_library.h"
#include "runtime/device/device_api.h"
#include "runtime/kernel/kernel_library.h"
#include "runtime/threading/thread_pool.h"
#include "runtime/vm/closure.h"
#include "runtime/vm/profile_recorder.h"
#include "runtime/vm/remote_globals.h"

namespace tether::vm {
namespace {

absl::Status UnknownFunction(absl::string_view name) {
  // The name may come from a client: escaped and cut, as messages are logged.
  return WithErrorKind(
      absl::NotFoundError(absl::StrCat("unknown function \"", absl::CEscape(name.substr(0, 120)),
                                       name.size() > 120 ? "..." : "", "\"")),
      ErrorKind::kValue);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalVirtualMachine>> LocalVirtualMachine::Create(
    Ref<Executable> exec, std::vector<Device> devices, const memory::MemoryConfig& memory_cfg) {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterBuiltins();
    RegisterRemoteGlobals();
    profiling::RegisterProfilingFunctions();
    RegisterKernelLibraryLoaders();     // format "so"
    RegisterCudaKernelLibraryLoader();  // format "ptx"
  });
  std::unique_ptr<LocalVirtualMachine> vm(new LocalVirtualMachine());
  TETHER_RETURN_IF_ERROR(vm->Init(std::move(exec), std::move(devices), memory_cfg));
  return vm;
}

LocalVirtualMachine::~LocalVirtualMachine() = default;

absl::Status LocalVirtualMachine::Init(Ref<Executable> exec, std::vector<Device> devices,
                                       const memory::MemoryConfig& memory_cfg) {
  if (!exec) return ValueError("cannot create a VM from a null executable");
  exec_ = std::move(exec);
  if (devices.empty()) devices.push_back(Device::Cpu());
  if (devices.back().type != kDLCPU) devices.push_back(Device::Cpu());
  for (const Device& d : devices) {
    if (!DeviceExists(d))
      return UnavailableError("device ", d.ToString(), " does not exist on this machine");
  }
  devices_ = std::move(devices);
  for (const Device& d : devices_) {
    allocators_.push_back(memory::CreateAllocator(d, memory_cfg.TypeFor(d)));
  }

  // GPU kernels need a GPU among the VM's devices: say so before a kernel
  // call fails on a cpu tensor.
  const bool has_cuda_device = std::any_of(devices_.begin(), devices_.end(),
                                           [](const Device& d) { return d.type == kDLCUDA; });
  for (const KernelLibraryBlob& blob : exec_->kernel_libraries) {
    const bool for_cuda = blob.format == "ptx" || absl::StartsWith(blob.target, "cuda");
    if (for_cuda && !has_cuda_device) {
      return PreconditionError("the executable's kernels were compiled for ", blob.target,
                               "; create the VM on a cuda device (e.g. cuda:0)");
    }
  }

  // Kernel libraries first: packed functions resolve there before the registry.
  for (const KernelLibraryBlob& blob : exec_->kernel_libraries) {
    KernelLibraryLoader loader = FindKernelLibraryLoader(blob.format);
    if (!loader) {
      return absl::FailedPreconditionError(absl::StrCat("no loader for kernel library format \"",
                                                        blob.format, "\" (target ", blob.target,
                                                        ") is registered in this runtime"));
    }
    TETHER_ASSIGN_OR_RETURN(Ref<Module> lib, loader(blob));
    kernel_libraries_.push_back(std::move(lib));
  }

  // Constants live on the default device.
  constants_.reserve(exec_->constants.size());
  for (const Value& c : exec_->constants) {
    if (c.is_tensor() && c.AsRef<TensorObj>()->device() != devices_[0]) {
      TETHER_ASSIGN_OR_RETURN(
          Tensor moved, Tensor(c.AsRef<TensorObj>()).CopyTo(devices_[0], allocators_[0].get()));
      constants_.push_back(moved);
    } else {
      constants_.push_back(c);
    }
  }

  func_pool_.reserve(exec_->functions.size());
  compiled_.assign(exec_->functions.size(), CompiledFunction{});
  for (size_t i = 0; i < exec_->functions.size(); ++i) {
    const FunctionInfo& info = exec_->functions[i];
    switch (info.kind) {
      case FunctionKind::kPackedFunc: {
        Function f;
        for (const Ref<Module>& lib : kernel_libraries_) {
          auto found = lib->GetFunction(info.name, /*query_imports=*/true);
          if (found.ok()) {
            f = *found;
            break;
          }
        }
        if (!f) f = Registry::Get(info.name);
        if (!f) {
          return NotFoundError("cannot find function ", info.name,
                               " in the kernel libraries of the executable or the global registry");
        }
        func_pool_.push_back(f);
        break;
      }
      case FunctionKind::kVMTIRFunc:
        TETHER_RETURN_IF_ERROR(FindCompiledFunction(static_cast<Index>(i)));
        [[fallthrough]];
      case FunctionKind::kVMFunc:
        func_pool_.push_back(Value(
            MakeRef<ClosureObj>(info.name, static_cast<Index>(i), Value(), std::vector<Value>{})));
        break;
    }
  }
  return Decode();
}

// --- Public API -----------------------------------------------------------------

absl::StatusOr<Index> LocalVirtualMachine::FindVMFunction(absl::string_view name) const {
  auto it = exec_->function_map.find(name);
  if (it == exec_->function_map.end() || !IsVMFunction(exec_->functions[it->second].kind)) {
    return UnknownFunction(name);
  }
  return it->second;
}

absl::StatusOr<Value> LocalVirtualMachine::Invoke(absl::string_view func_name, ArgSpan args) {
  if (auto saved = saved_functions_.find(func_name); saved != saved_functions_.end()) {
    return CallValue(saved->second, args);
  }
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  if (inputs_.contains(func_name)) {
    return PreconditionError("function ", func_name,
                             " has inputs set by set_input; call it with invoke_stateful");
  }
  if (binding_.Find(index) == nullptr) return RunFunction(index, args);
  TETHER_ASSIGN_OR_RETURN(std::vector<Value> all, WithBoundParams(index, args));
  return RunFunction(index, all);
}

absl::Status LocalVirtualMachine::BindParams(const ParamList& params, absl::string_view params_name,
                                             absl::string_view module_name) {
  if (params_bound_) return PreconditionError("this VM has params bound already");
  TETHER_ASSIGN_OR_RETURN(ParamBinding binding,
                          ParamBinding::Create(*exec_, params, params_name, module_name));
  // Each weight moves to the device once, however many functions take it.
  absl::flat_hash_map<const TensorObj*, Value> on_device;
  for (auto& [index, f] : binding.functions()) {
    for (Value& v : f.values) {
      if (v.is_none()) continue;
      const TensorObj* key = v.AsRef<TensorObj>().get();
      auto it = on_device.find(key);
      if (it == on_device.end()) {
        TETHER_ASSIGN_OR_RETURN(Value moved, ConvertArgToDevice(v));
        it = on_device.emplace(key, std::move(moved)).first;
      }
      v = it->second;
    }
  }
  binding_ = std::move(binding);
  params_bound_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> LocalVirtualMachine::WithBoundParams(Index func_index,
                                                                        ArgSpan args) const {
  const ParamBinding::Function* f = binding_.Find(func_index);
  if (f == nullptr) return std::vector<Value>(args.begin(), args.end());
  if (args.size() != f->open.size()) {
    const FunctionInfo& info = exec_->functions[func_index];
    return ValueError("function ", info.name, " expects ", f->open.size(), " argument",
                      f->open.size() == 1 ? "" : "s", " (", absl::StrJoin(f->open_names, ", "),
                      "), got ", args.size(), "; ", absl::StrJoin(f->bound_names, ", "),
                      f->bound_names.size() == 1 ? " is" : " are", " bound from the VM's params");
  }
  std::vector<Value> all = f->values;
  for (size_t i = 0; i < args.size(); ++i) all[f->open[i]] = args[i];
  return all;
}

absl::StatusOr<Value> LocalVirtualMachine::InvokeClosure(const Value& closure, ArgSpan args) {
  return CallValue(closure, args);
}

absl::StatusOr<Value> LocalVirtualMachine::ConvertArgToDevice(const Value& arg) {
  if (arg.is_tensor()) {
    Tensor t(arg.AsRef<TensorObj>());
    if (t->device() == devices_[0]) return arg;
    TETHER_ASSIGN_OR_RETURN(Tensor moved, t.CopyTo(devices_[0], allocators_[0].get()));
    return Value(moved);
  }
  if (arg.is_tuple()) {
    const auto& fields = arg.AsRef<TupleObj>()->fields;
    std::vector<Value> converted;
    converted.reserve(fields.size());
    for (const Value& f : fields) {
      TETHER_ASSIGN_OR_RETURN(Value c, ConvertArgToDevice(f));
      converted.push_back(std::move(c));
    }
    return MakeTuple(std::move(converted));
  }
  return arg;
}

absl::Status LocalVirtualMachine::SaveFunction(absl::string_view func_name,
                                               absl::string_view saved_name, ArgSpan args,
                                               bool include_return) {
  if (exec_->function_map.contains(saved_name)) {
    return ValueError("cannot save a function as ", saved_name,
                      ": the executable has a function of that name");
  }
  Value target;
  Index index = -1;
  std::vector<Value> all_args;  // with the bound weights
  if (auto saved = saved_functions_.find(func_name); saved != saved_functions_.end()) {
    target = saved->second;
  } else {
    TETHER_ASSIGN_OR_RETURN(index, FindVMFunction(func_name));
    TETHER_ASSIGN_OR_RETURN(all_args, WithBoundParams(index, args));
    TETHER_RETURN_IF_ERROR(CheckArity(index, all_args.size()));
    args = all_args;
    target = func_pool_[static_cast<size_t>(index)];
  }
  std::vector<Value> bound;
  bound.reserve(args.size());
  for (const Value& a : args) {
    TETHER_ASSIGN_OR_RETURN(Value c, ConvertArgToDevice(a));
    bound.push_back(std::move(c));
  }
  Value closure;
  if (include_return && index >= 0) {
    closure = Value(MakeRef<ClosureObj>(std::string(func_name), index, Value(), std::move(bound)));
  } else {
    // Call the target with the bound arguments; optionally drop its result.
    Function call = Function::FromPacked(std::string(saved_name),
                                         [this, target, bound = std::move(bound),
                                          include_return](ArgSpan extra) -> absl::StatusOr<Value> {
                                           std::vector<Value> all(extra.begin(), extra.end());
                                           all.insert(all.end(), bound.begin(), bound.end());
                                           TETHER_ASSIGN_OR_RETURN(Value r, CallValue(target, all));
                                           return include_return ? r : Value();
                                         });
    closure =
        Value(MakeRef<ClosureObj>(std::string(saved_name), -1, Value(call), std::vector<Value>{}));
  }
  saved_functions_[std::string(saved_name)] = std::move(closure);
  return absl::OkStatus();
}

absl::Status LocalVirtualMachine::SetInput(absl::string_view func_name, ArgSpan args) {
  return SetInputNamed(func_name, args, {});
}

absl::Status LocalVirtualMachine::SetInputNamed(absl::string_view func_name, ArgSpan positional,
                                                const NamedArgs& named) {
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  const FunctionInfo& info = exec_->functions[index];
  const ParamBinding::Function* bound = binding_.Find(index);
  size_t n = static_cast<size_t>(info.num_args);
  // The caller's parameters: all of them, or those no bound weight fills.
  std::vector<size_t> open;
  for (size_t i = 0; i < n; ++i) {
    if (bound == nullptr || bound->values[i].is_none()) open.push_back(i);
  }
  if (positional.size() > open.size()) {
    if (bound != nullptr) return WithBoundParams(index, positional).status();
    return CheckArity(index, positional.size() + named.size());
  }
  std::vector<Value> args(n);
  std::vector<bool> set(n, false);
  if (bound != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      if (bound->values[i].is_none()) continue;
      args[i] = bound->values[i];
      set[i] = true;
    }
  }
  for (size_t i = 0; i < positional.size(); ++i) {
    TETHER_ASSIGN_OR_RETURN(args[open[i]], ConvertArgToDevice(positional[i]));
    set[open[i]] = true;
  }
  for (const auto& [name, value] : named) {
    auto it = std::find(info.param_names.begin(), info.param_names.end(), name);
    if (it != info.param_names.end() && bound != nullptr &&
        !bound->values[it - info.param_names.begin()].is_none()) {
      return ValueError("parameter ", name, " of ", info.name,
                        " is bound from the VM's params; it cannot be set");
    }
    if (it == info.param_names.end()) {
      return ValueError(
          "function ", info.name, " has no parameter named ", name,
          info.param_names.empty()
              ? "; it has unnamed parameters only"
              : absl::StrCat("; parameters are ", absl::StrJoin(info.param_names, ", ")));
    }
    size_t i = static_cast<size_t>(it - info.param_names.begin());
    if (set[i]) return ValueError("argument ", name, " of ", info.name, " is given twice");
    TETHER_ASSIGN_OR_RETURN(args[i], ConvertArgToDevice(value));
    set[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!set[i]) {
      return ValueError("missing argument ",
                        info.param_names.empty() ? absl::StrCat(i) : info.param_names[i], " of ",
                        info.name, ": ", open.size(), " expected");
    }
  }
  inputs_[std::string(func_name)] = std::move(args);
  return absl::OkStatus();
}

absl::Status LocalVirtualMachine::InvokeStateful(absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  auto it = inputs_.find(func_name);
  if (it == inputs_.end()) {
    return PreconditionError("no inputs set for stateful call of ", func_name,
                             "; use set_input first");
  }
  // Release the previous output first so its memory can be reused by this call.
  outputs_.erase(std::string(func_name));
  TETHER_ASSIGN_OR_RETURN(Value out, RunFunction(index, it->second));
  outputs_[std::string(func_name)] = std::move(out);
  return absl::OkStatus();
}

absl::StatusOr<Value> LocalVirtualMachine::GetOutputs(absl::string_view func_name) {
  TETHER_RETURN_IF_ERROR(FindVMFunction(func_name).status());
  auto it = outputs_.find(func_name);
  if (it == outputs_.end()) {
    return PreconditionError("no output saved for call of \"", func_name,
                             "\"; use invoke_stateful to call it first");
  }
  return it->second;
}

absl::StatusOr<int64_t> LocalVirtualMachine::GetFunctionArity(absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  if (const ParamBinding::Function* f = binding_.Find(index)) {
    return static_cast<int64_t>(f->open.size());
  }
  return exec_->functions[index].num_args;
}

absl::StatusOr<std::vector<std::string>> LocalVirtualMachine::GetFunctionParamNames(
    absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  if (const ParamBinding::Function* f = binding_.Find(index)) return f->open_names;
  return exec_->functions[index].param_names;
}

absl::StatusOr<std::vector<std::string>> LocalVirtualMachine::GetFunctionBoundParamNames(
    absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  if (const ParamBinding::Function* f = binding_.Find(index)) return f->bound_names;
  return std::vector<std::string>();
}

absl::Status LocalVirtualMachine::SetInstrumentByName(absl::string_view factory_name,
                                                      ArgSpan args) {
  if (factory_name.empty()) {
    instrument_ = Function();
    return absl::OkStatus();
  }
  if (factory_name == "trace") {
    int64_t max_records = TraceLogObj::kDefaultMaxRecords;
    if (args.size() > 1 || (args.size() == 1 && (!args[0].is_int() || args[0].int_value() < 0))) {
      return ValueError(
          "the trace instrument takes at most one argument, a non-negative "
          "record limit");
    }
    if (args.size() == 1) max_records = args[0].int_value();
    if (max_records > TraceLogObj::kMaxRecords) {
      return ValueError("the trace instrument keeps at most ", TraceLogObj::kMaxRecords,
                        " records, asked for ", max_records);
    }
    trace_ = MakeRef<TraceLogObj>(max_records);
    instrument_ = MakeTraceInstrument(trace_);
    return absl::OkStatus();
  }
  if (factory_name == "skip") {
    // The seed's SKIP_RUN, for instruments that live on a daemon: calls whose
    // symbol contains one of the patterns do not run (their result is None);
    // every call that runs is traced, so GetTrace says what ran.
    std::vector<std::string> patterns;
    for (const Value& a : args) {
      if (!a.is_string() || a.string_value().empty()) {
        return ValueError("the skip instrument takes symbol patterns (non-empty strings)");
      }
      patterns.push_back(a.string_value());
    }
    if (patterns.empty())
      return ValueError("the skip instrument needs at least one symbol pattern");
    trace_ = MakeRef<TraceLogObj>(TraceLogObj::kDefaultMaxRecords);
    instrument_ = Function::FromPacked(
        "skip",
        [patterns = std::move(patterns), log = trace_](ArgSpan call) -> absl::StatusOr<Value> {
          if (call.size() >= 3 && call[1].is_string() && call[2].is_bool() &&
              call[2].bool_value()) {
            for (const std::string& p : patterns) {
              if (absl::StrContains(call[1].string_value(), p)) {
                return Value(static_cast<int64_t>(InstrumentReturnKind::kSkipRun));
              }
            }
          }
          return log->OnCall(call);
        });
    return absl::OkStatus();
  }
  Function factory = Registry::Get(factory_name);
  if (!factory)
    return NotFoundError("no instrument factory named ", factory_name, " is registered");
  TETHER_ASSIGN_OR_RETURN(Value made, factory(args));
  if (!made.is_function()) {
    return TypeError("instrument factory ", factory_name, " returned ", made.TypeName(),
                     ", expected a function");
  }
  instrument_ = Function(made.AsRef<FunctionObj>());
  return absl::OkStatus();
}

absl::StatusOr<profiling::Report> LocalVirtualMachine::GetTrace(bool clear) {
  if (!trace_) {
    return PreconditionError(
        "no trace was recorded on this VM; install the \"trace\" "
        "instrument first");
  }
  return trace_->ToReport(clear);
}

absl::StatusOr<Function> LocalVirtualMachine::TimedFunction(absl::string_view func_name) {
  if (func_name == kInvokeStatefulName) {
    return Function::FromPacked("invoke_stateful", [this](ArgSpan args) -> absl::StatusOr<Value> {
      if (args.size() != 1 || !args[0].is_string()) {
        return ValueError("timing invoke_stateful takes one argument, the function name");
      }
      TETHER_RETURN_IF_ERROR(InvokeStateful(args[0].string_value()));
      return Value();
    });
  }
  if (auto saved = saved_functions_.find(func_name); saved != saved_functions_.end()) {
    Value closure = saved->second;
    return Function::FromPacked(std::string(func_name),
                                [this, closure](ArgSpan args) { return CallValue(closure, args); });
  }
  absl::StatusOr<Index> found = FindVMFunction(func_name);
  if (!found.ok()) {
    // A kernel of the module times on its own, as TVM's
    // Module.time_evaluator(name) times any function of the module.
    absl::StatusOr<Function> kernel = CheckedKernel(func_name);
    if (kernel.ok() || kernel.status().code() != absl::StatusCode::kNotFound) return kernel;
    return found.status();
  }
  const Index index = *found;
  if (inputs_.contains(func_name)) {
    return PreconditionError(
        "function ", func_name,
        " has inputs set by set_input; time \"invoke_stateful\" with its name instead");
  }
  if (binding_.Find(index) != nullptr) {
    return Function::FromPacked(
        std::string(func_name), [this, index](ArgSpan args) -> absl::StatusOr<Value> {
          TETHER_ASSIGN_OR_RETURN(std::vector<Value> all, WithBoundParams(index, args));
          return RunFunction(index, all);
        });
  }
  return Function::FromPacked(std::string(func_name),
                              [this, index](ArgSpan args) { return RunFunction(index, args); });
}

absl::StatusOr<profiling::BenchmarkResult> LocalVirtualMachine::TimeEvaluator(
    absl::string_view func_name, Device device, const profiling::TimeEvaluatorOptions& options,
    ArgSpan args) {
  TETHER_ASSIGN_OR_RETURN(Function f, TimedFunction(func_name));
  profiling::TimeEvaluatorOptions interruptible = options;
  if (interruptible.interrupt == nullptr) interruptible.interrupt = interrupt_;
  return profiling::RunTimeEvaluator(f, args, device, interruptible);
}

absl::StatusOr<profiling::Report> LocalVirtualMachine::Profile(absl::string_view func_name,
                                                               ArgSpan args) {
  TETHER_ASSIGN_OR_RETURN(Index index, FindVMFunction(func_name));
  std::vector<Value> call_args(args.begin(), args.end());
  if (auto it = inputs_.find(func_name); it != inputs_.end()) {
    if (!args.empty()) {
      return ValueError("inputs of ", func_name,
                        " are already set by set_input; profile it with no arguments");
    }
    call_args = it->second;
  } else {
    TETHER_ASSIGN_OR_RETURN(call_args, WithBoundParams(index, args));
  }
  // Warm-up: lazy initialization and allocator pools settle before measuring.
  TETHER_RETURN_IF_ERROR(RunFunction(index, call_args).status());

  ProfileRecorder recorder;
  profiler_ = &recorder;
  auto start = std::chrono::steady_clock::now();
  recorder.origin = start;
  absl::StatusOr<Value> out = RunFunction(index, call_args);
  for (const Device& d : devices_) {
    if (auto api = DeviceAPI::Get(d.type); api.ok()) (void)(*api)->Sync(d, nullptr);
  }
  auto stop = std::chrono::steady_clock::now();
  profiler_ = nullptr;
  TETHER_RETURN_IF_ERROR(out.status());

  profiling::ReportBuilder builder;
  for (ProfileRecorder::Row& row : recorder.rows) {
    builder.AddCall(std::move(row.name), row.duration_us, row.device, std::move(row.shapes), 1,
                    {{std::string(profiling::kStartColumn), profiling::Duration{row.start_us}}});
  }
  double total_us = std::chrono::duration<double, std::micro>(stop - start).count();
  for (const Device& d : devices_) {
    bool used = d == devices_[0];
    for (const ProfileRecorder::Row& row : recorder.rows) used |= row.device == d;
    if (used) builder.SetDeviceTotal(d, total_us);
  }
  builder.SetConfiguration("Executor", std::string("VM"));
  builder.SetConfiguration("Number of threads", profiling::Count{NumThreads()});
  builder.SetConfiguration("Function", std::string(func_name));
  return builder.Build();
}

std::vector<memory::AllocatorStats> LocalVirtualMachine::MemoryStats() const {
  std::vector<memory::AllocatorStats> stats;
  for (const auto& a : allocators_) stats.push_back(a->Stats());
  return stats;
}

void LocalVirtualMachine::ClearMemory() {
  for (const auto& a : allocators_) a->Clear();
}

}  // namespace tether::vm
