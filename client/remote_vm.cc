// RemoteVM: VM operations as CallRequests on the session's transport.
#include "client/remote_vm.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/codec/function_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"

namespace tether::client {

RemoteVM::RemoteVM(RemoteSession* session, RemoteVmOptions options)
    : session_(session),
      options_(options),
      values_(session, options.fetch_outputs, options.transport) {}

absl::StatusOr<std::unique_ptr<RemoteVM>> RemoteVM::Create(RemoteSession* session,
                                                           absl::string_view module_sha256,
                                                           std::vector<Device> devices,
                                                           absl::string_view memory_cfg,
                                                           RemoteVmOptions options) {
  if (session == nullptr) return absl::InvalidArgumentError("remote vm needs a session");
  std::unique_ptr<RemoteVM> vm(new RemoteVM(session, options));
  v1::CallRequest request;
  v1::CreateVm* create = request.mutable_create_vm();
  create->set_module_sha256(std::string(module_sha256));
  for (Device d : devices) rpc::EncodeDevice(d, create->add_devices());
  create->set_memory_cfg(std::string(memory_cfg));
  create->set_num_threads(options.num_threads);
  if (!options.params_sha256.empty()) {
    const v1::ProtocolVersion& daemon = session->handshake().protocol();
    if (daemon.major() == 1 && daemon.minor() < 6) {
      return absl::FailedPreconditionError(
          absl::StrCat("the daemon speaks protocol ", daemon.major(), ".", daemon.minor(),
                       ", and a VM with params on the device needs 1.6: upgrade tetherd"));
    }
    create->set_params_sha256(options.params_sha256);
  }
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, vm->Exec(request));
  vm->vm_id_ = response.create_vm().vm_id();
  return vm;
}

RemoteVM::~RemoteVM() {
  if (vm_id_ != 0) {
    v1::CallRequest request;
    request.mutable_destroy_vm()->set_vm_id(vm_id_);
    (void)Exec(request);
  }
}

absl::StatusOr<v1::CallResponse> RemoteVM::Exec(v1::CallRequest& request) {
  if (options_.call_timeout > absl::ZeroDuration()) {
    request.set_deadline_ms(
        static_cast<uint64_t>(absl::ToInt64Milliseconds(options_.call_timeout)));
  }
  return session_->Call(request, options_.transport);
}

v1::ReturnMode RemoteVM::return_mode() const { return values_.return_mode(); }

absl::StatusOr<v1::CallResponse> RemoteVM::ExecWithArgs(
    v1::CallRequest& request, ArgSpan args, google::protobuf::RepeatedPtrField<v1::Value>* out) {
  absl::Status encoded = EncodeArgs(args, out);
  absl::StatusOr<v1::CallResponse> response =
      encoded.ok() ? Exec(request) : absl::StatusOr<v1::CallResponse>(encoded);
  FreeTemps();
  return response;
}

absl::StatusOr<Value> RemoteVM::CallWithArgs(v1::CallRequest& request, ArgSpan args,
                                             google::protobuf::RepeatedPtrField<v1::Value>* out) {
  absl::Status encoded = EncodeArgs(args, out);
  if (!encoded.ok()) {
    FreeTemps();
    return encoded;
  }
  return FinishValueCall(request);
}

absl::StatusOr<Value> RemoteVM::FinishValueCall(v1::CallRequest& request) {
  absl::StatusOr<v1::CallResponse> response = Exec(request);
  absl::StatusOr<Value> out =
      response.ok() ? DecodeResult(response->value(), 0) : absl::StatusOr<Value>(response.status());
  FreeTemps();
  return out;
}

absl::StatusOr<Value> RemoteVM::DecodeKeeping(const v1::Value& value,
                                              std::span<const uint32_t> kept) {
  auto is_kept = [&](uint32_t i) { return std::find(kept.begin(), kept.end(), i) != kept.end(); };
  if (value.kind_case() != v1::Value::kTuple) return DecodeResult(value, 0, is_kept(0));
  std::vector<Value> fields;
  fields.reserve(static_cast<size_t>(value.tuple().fields_size()));
  for (int i = 0; i < value.tuple().fields_size(); ++i) {
    TETHER_ASSIGN_OR_RETURN(
        Value v, DecodeResult(value.tuple().fields(i), 1, is_kept(static_cast<uint32_t>(i))));
    fields.push_back(std::move(v));
  }
  return MakeTuple(std::move(fields));
}

absl::StatusOr<Value> RemoteVM::Invoke(absl::string_view func_name, ArgSpan args) {
  v1::CallRequest request;
  v1::Invoke* op = request.mutable_invoke();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  op->set_return_mode(return_mode());
  return CallWithArgs(request, args, op->mutable_args());
}

absl::StatusOr<Value> RemoteVM::InvokeKeeping(absl::string_view func_name, ArgSpan args,
                                              std::span<const uint32_t> handle_outputs,
                                              std::span<const uint64_t> free_on_success) {
  TETHER_RETURN_IF_ERROR(
      session_->RequireProtocol(5, "keeping a call's outputs on it (streaming)"));
  v1::CallRequest request;
  v1::Invoke* op = request.mutable_invoke();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  op->set_return_mode(return_mode());
  op->mutable_handle_outputs()->Assign(handle_outputs.begin(), handle_outputs.end());
  op->mutable_free_on_success()->Assign(free_on_success.begin(), free_on_success.end());
  absl::Status encoded = EncodeArgs(args, op->mutable_args());
  absl::StatusOr<v1::CallResponse> response =
      encoded.ok() ? Exec(request) : absl::StatusOr<v1::CallResponse>(encoded);
  absl::StatusOr<Value> out = response.ok() ? DecodeKeeping(response->value(), handle_outputs)
                                            : absl::StatusOr<Value>(response.status());
  FreeTemps();
  return out;
}

absl::StatusOr<Value> RemoteVM::InvokeClosure(const Value& closure, ArgSpan args) {
  RemoteHandleObj* handle = AsRemoteHandle(closure);
  if (handle == nullptr || handle->kind() != RemoteHandleObj::Kind::kObject) {
    return TypeError("invoke_closure needs a closure returned by this remote vm, got ",
                     closure.TypeName());
  }
  v1::CallRequest request;
  v1::InvokeClosure* op = request.mutable_invoke_closure();
  op->set_vm_id(vm_id_);
  op->set_return_mode(return_mode());
  absl::Status encoded = EncodeArg(closure, 0, op->mutable_closure());
  if (encoded.ok()) encoded = EncodeArgs(args, op->mutable_args());
  if (!encoded.ok()) {
    FreeTemps();
    return encoded;
  }
  return FinishValueCall(request);
}

absl::Status RemoteVM::SaveFunction(absl::string_view func_name, absl::string_view saved_name,
                                    ArgSpan args, bool include_return) {
  v1::CallRequest request;
  v1::SaveFunction* op = request.mutable_save_function();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  op->set_saved_name(std::string(saved_name));
  op->set_include_return(include_return);
  return ExecWithArgs(request, args, op->mutable_args()).status();
}

absl::Status RemoteVM::SetInput(absl::string_view func_name, ArgSpan args) {
  return SetInputNamed(func_name, args, {});
}

absl::Status RemoteVM::SetInputNamed(absl::string_view func_name, ArgSpan positional,
                                     const vm::NamedArgs& named) {
  v1::CallRequest request;
  v1::SetInput* op = request.mutable_set_input();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  absl::Status status = EncodeArgs(positional, op->mutable_args());
  for (const auto& [name, value] : named) {
    if (!status.ok()) break;
    v1::NamedValue* nv = op->add_named();
    nv->set_name(name);
    status = EncodeArg(value, 0, nv->mutable_value());
  }
  if (status.ok()) status = Exec(request).status();
  FreeTemps();
  return status;
}

absl::Status RemoteVM::InvokeStateful(absl::string_view func_name) {
  v1::CallRequest request;
  request.mutable_invoke_stateful()->set_vm_id(vm_id_);
  request.mutable_invoke_stateful()->set_function(std::string(func_name));
  return Exec(request).status();
}

absl::StatusOr<Value> RemoteVM::GetOutputs(absl::string_view func_name) {
  v1::CallRequest request;
  v1::GetOutputs* op = request.mutable_get_outputs();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  op->set_return_mode(return_mode());
  return FinishValueCall(request);
}

absl::StatusOr<v1::FunctionInfo> RemoteVM::FunctionInfo(absl::string_view func_name) {
  v1::CallRequest request;
  request.mutable_get_function_info()->set_vm_id(vm_id_);
  request.mutable_get_function_info()->set_function(std::string(func_name));
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, Exec(request));
  return std::move(*response.mutable_function_info());
}

absl::StatusOr<int64_t> RemoteVM::GetFunctionArity(absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(v1::FunctionInfo info, FunctionInfo(func_name));
  return info.num_args();
}

absl::StatusOr<std::vector<std::string>> RemoteVM::GetFunctionParamNames(
    absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(v1::FunctionInfo info, FunctionInfo(func_name));
  return std::vector<std::string>(info.param_names().begin(), info.param_names().end());
}

absl::StatusOr<std::vector<std::string>> RemoteVM::GetFunctionBoundParamNames(
    absl::string_view func_name) {
  TETHER_ASSIGN_OR_RETURN(v1::FunctionInfo info, FunctionInfo(func_name));
  return std::vector<std::string>(info.bound_param_names().begin(), info.bound_param_names().end());
}

absl::Status RemoteVM::SetInstrumentByName(absl::string_view factory_name, ArgSpan args) {
  v1::CallRequest request;
  v1::SetInstrument* op = request.mutable_set_instrument();
  op->set_vm_id(vm_id_);
  op->set_factory(std::string(factory_name));
  return ExecWithArgs(request, args, op->mutable_args()).status();
}

absl::StatusOr<profiling::BenchmarkResult> RemoteVM::TimeEvaluator(
    absl::string_view func_name, Device device, const profiling::TimeEvaluatorOptions& options,
    ArgSpan args) {
  v1::CallRequest request;
  v1::TimeEvaluator* op = request.mutable_time_evaluator();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  rpc::EncodeDevice(device, op->mutable_device());
  rpc::EncodeTimeEvaluatorOptions(options, op->mutable_options());
  op->set_concurrent(options_.concurrent_timing);
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response,
                          ExecWithArgs(request, args, op->mutable_args()));
  last_device_state_ = std::move(*response.mutable_device_state());
  return rpc::DecodeBenchmarkResult(response.benchmark());
}

absl::StatusOr<profiling::Report> RemoteVM::Profile(absl::string_view func_name, ArgSpan args) {
  v1::CallRequest request;
  v1::Profile* op = request.mutable_profile();
  op->set_vm_id(vm_id_);
  op->set_function(std::string(func_name));
  op->set_concurrent(options_.concurrent_timing);
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response,
                          ExecWithArgs(request, args, op->mutable_args()));
  last_device_state_ = std::move(*response.mutable_device_state());
  return rpc::DecodeReport(response.report());
}

absl::StatusOr<profiling::Report> RemoteVM::GetTrace(bool clear) {
  v1::CallRequest request;
  v1::GetTrace* op = request.mutable_get_trace();
  op->set_vm_id(vm_id_);
  op->set_clear(clear);
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, Exec(request));
  return rpc::DecodeReport(response.report());
}

absl::StatusOr<std::vector<vm::ModuleFunction>> RemoteVM::ListFunctions() {
  TETHER_RETURN_IF_ERROR(session_->RequireProtocol(6, "listing a module's functions"));
  v1::CallRequest request;
  request.mutable_list_functions()->set_vm_id(vm_id_);
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse response, Exec(request));
  std::vector<vm::ModuleFunction> out;
  for (const v1::ModuleFunction& f : response.functions().functions()) {
    TETHER_ASSIGN_OR_RETURN(vm::ModuleFunction function, rpc::DecodeModuleFunction(f));
    out.push_back(std::move(function));
  }
  return out;
}

absl::StatusOr<Value> RemoteVM::CallKernel(absl::string_view kernel_name, ArgSpan args) {
  TETHER_RETURN_IF_ERROR(session_->RequireProtocol(6, "calling one kernel"));
  v1::CallRequest request;
  v1::CallKernel* op = request.mutable_call_kernel();
  op->set_vm_id(vm_id_);
  op->set_kernel(std::string(kernel_name));
  op->set_return_mode(return_mode());
  return CallWithArgs(request, args, op->mutable_args());
}

}  // namespace tether::client
