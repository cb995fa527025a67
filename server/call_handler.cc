// CallHandler: one function per op of CallRequest, all thin: decode, call the
// VM, encode.
#include "server/call_handler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/codec/function_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/device/stream.h"
#include "runtime/memory/allocator.h"
#include "runtime/vm/local_vm.h"

namespace tether::server {
namespace {

// A registry function a remote client names for the daemon to run on its
// behalf (an instrument factory, a time evaluator's f_preproc): only the
// remote-callable ones, as call_global (docs/design/security.md, "Remote
// functions"). NOT_FOUND or PERMISSION_DENIED, prefixed with `what`.
absl::Status CheckRemoteCallable(absl::string_view what, const std::string& name) {
  absl::StatusOr<Function> f = Registry::GetRemoteCallable(name);
  if (f.ok()) return absl::OkStatus();
  return absl::Status(f.status().code(), absl::StrCat(what, ": ", f.status().message()));
}

class Ops {
 public:
  Ops(Session& session, ModuleStore* store, uint64_t max_inline)
      : session_(session), store_(store), max_inline_(max_inline) {}

  absl::StatusOr<std::vector<Value>> DecodeArgs(
      const google::protobuf::RepeatedPtrField<v1::Value>& args) {
    rpc::DecodeOptions options;
    options.resolve_tensor_handle = [this](uint64_t id) -> absl::StatusOr<Value> {
      TETHER_ASSIGN_OR_RETURN(Tensor t, session_.FindTensor(id));
      return Value(t);
    };
    options.resolve_object_handle = [this](uint64_t id) { return session_.FindObject(id); };
    std::vector<Value> out;
    out.reserve(args.size());
    for (const v1::Value& arg : args) {
      TETHER_ASSIGN_OR_RETURN(Value v, rpc::DecodeValue(arg, options));
      out.push_back(std::move(v));
    }
    return out;
  }

  absl::Status EncodeResult(const Value& value, v1::ReturnMode mode, v1::Value* out) {
    rpc::EncodeOptions options;
    options.max_inline_bytes =
        mode == v1::RETURN_MODE_INLINE ? std::numeric_limits<uint64_t>::max() : max_inline_;
    options.always_handle = mode == v1::RETURN_MODE_HANDLE;
    options.make_tensor_handle = [this](const Tensor& t) -> absl::StatusOr<uint64_t> {
      return session_.AddTensor(t);
    };
    options.make_object_handle = [this](const Value& v) -> absl::StatusOr<uint64_t> {
      return session_.AddObject(v);
    };
    return rpc::EncodeValue(value, options, out);
  }

  // An invoke result with op.handle_outputs() kept as handles and the rest
  // by op.return_mode(). The indices are checked before any handle is made.
  absl::Status EncodeStreamResult(const Value& value, const v1::Invoke& op, v1::Value* out) {
    const size_t count = value.is_tuple() ? value.AsRef<TupleObj>()->fields.size() : 1;
    std::vector<bool> keep(count, false);
    for (uint32_t index : op.handle_outputs()) {
      if (index >= count) {
        return IndexError("invoke: handle_outputs names output ", index, " of ", op.function(),
                          ", which returned ", count, count == 1 ? " output" : " outputs");
      }
      keep[index] = true;
    }
    if (!value.is_tuple()) return EncodeResult(value, v1::RETURN_MODE_HANDLE, out);
    const std::vector<Value>& fields = value.AsRef<TupleObj>()->fields;
    v1::Tuple* tuple = out->mutable_tuple();
    for (size_t i = 0; i < count; ++i) {
      TETHER_RETURN_IF_ERROR(EncodeResult(
          fields[i], keep[i] ? v1::RETURN_MODE_HANDLE : op.return_mode(), tuple->add_fields()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<vm::LocalVirtualMachine*> Vm(uint64_t id) { return session_.FindVm(id); }

  // The device an op names; it must be given.
  template <typename Op>
  static absl::StatusOr<Device> DecodeDeviceOf(const Op& op) {
    if (!op.has_device()) return ValueError(Op::descriptor()->name(), " names no device");
    return rpc::DecodeDevice(op.device());
  }

  absl::Status SetStream(const v1::SetStream& op) {
    TETHER_ASSIGN_OR_RETURN(Device device, DecodeDeviceOf(op));
    if (op.stream_id() == 0) {
      session_.streams().erase(device);
      return absl::OkStatus();
    }
    TETHER_ASSIGN_OR_RETURN(Value object, session_.FindObject(op.stream_id()));
    auto* stream = dynamic_cast<StreamObj*>(object.object());
    if (stream == nullptr) {
      return TypeError("set_stream: handle ", op.stream_id(), " is a ", object.TypeName(),
                       ", not a stream of create_stream");
    }
    if (stream->device() != device) {
      return ValueError("set_stream: stream ", op.stream_id(), " belongs to ",
                        stream->device().ToString(), ", not ", device.ToString());
    }
    session_.streams()[device] = Ref<StreamObj>(stream);
    return absl::OkStatus();
  }

  absl::Status CreateVm(const v1::CreateVm& op, v1::CreateVmResult* out) {
    if (op.num_threads() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("create_vm: num_threads must be >= 0, got ", op.num_threads()));
    }
    std::vector<Device> devices;
    for (const v1::Device& d : op.devices()) {
      TETHER_ASSIGN_OR_RETURN(Device device, rpc::DecodeDevice(d));
      devices.push_back(device);
    }
    if (devices.empty()) devices.push_back(Device::Cpu());
    memory::MemoryConfig cfg;
    if (!op.memory_cfg().empty()) {
      TETHER_ASSIGN_OR_RETURN(cfg, memory::MemoryConfig::Parse(op.memory_cfg()));
    }
    TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, store_->Acquire(op.module_sha256()));
    std::shared_ptr<const ParamList> params;
    if (!op.params_sha256().empty()) {
      absl::StatusOr<std::shared_ptr<const ParamList>> acquired =
          store_->AcquireParams(op.params_sha256());
      if (!acquired.ok()) {
        store_->Release(op.module_sha256());
        return acquired.status();
      }
      params = std::move(*acquired);
    }
    // The store's pins are the VM's from here: AddVm releases them, as
    // does this on a failure before it.
    auto release = [&] {
      store_->Release(op.module_sha256());
      if (params) store_->Release(op.params_sha256());
    };
    absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> vm =
        vm::LocalVirtualMachine::Create(exec, std::move(devices), cfg);
    if (!vm.ok()) {
      release();
      return vm.status();
    }
    if (params) {
      absl::Status bound =
          (*vm)->BindParams(*params, absl::StrCat("param file ", op.params_sha256().substr(0, 12)),
                            absl::StrCat("module ", op.module_sha256().substr(0, 12)));
      if (!bound.ok()) {
        vm->reset();
        release();
        return Annotate(bound, "create_vm: ");
      }
    }
    vm::LocalVirtualMachine* raw = vm->get();
    raw->SetNumThreads(op.num_threads());
    TETHER_ASSIGN_OR_RETURN(uint64_t id, session_.AddVm(std::move(*vm), op.module_sha256(),
                                                        params ? op.params_sha256() : ""));
    out->set_vm_id(id);
    for (const vm::FunctionInfo& f : exec->functions) {
      if (!vm::IsVMFunction(f.kind)) continue;
      TETHER_RETURN_IF_ERROR(DescribeFunction(*raw, f.name, out->add_functions()));
    }
    return absl::OkStatus();
  }

  // What a caller passes to `name` of `vm`, and what its params fill.
  static absl::Status DescribeFunction(vm::LocalVirtualMachine& vm, const std::string& name,
                                       v1::FunctionInfo* info) {
    TETHER_ASSIGN_OR_RETURN(int64_t arity, vm.GetFunctionArity(name));
    TETHER_ASSIGN_OR_RETURN(std::vector<std::string> names, vm.GetFunctionParamNames(name));
    TETHER_ASSIGN_OR_RETURN(std::vector<std::string> bound, vm.GetFunctionBoundParamNames(name));
    info->set_name(name);
    info->set_num_args(arity);
    for (const std::string& n : names) info->add_param_names(n);
    for (const std::string& n : bound) info->add_bound_param_names(n);
    return absl::OkStatus();
  }

  absl::Status Run(const v1::CallRequest& request, v1::CallResponse* response) {
    switch (request.op_case()) {
      case v1::CallRequest::kCreateVm:
        return CreateVm(request.create_vm(), response->mutable_create_vm());
      case v1::CallRequest::kDestroyVm:
        return session_.DestroyVm(request.destroy_vm().vm_id());
      case v1::CallRequest::kInvoke: {
        const v1::Invoke& op = request.invoke();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        // A freed id must exist before the call runs: after it, a failure
        // would leave the new outputs' handles unanswered.
        for (uint64_t id : op.free_on_success()) {
          if (!session_.FindTensor(id).ok() && !session_.FindObject(id).ok()) {
            return NotFoundError("invoke: free_on_success names handle ", id,
                                 ", which is not in session ", session_.short_id());
          }
        }
        TETHER_ASSIGN_OR_RETURN(Value out, vm->Invoke(op.function(), args));
        if (op.handle_outputs().empty()) {
          TETHER_RETURN_IF_ERROR(EncodeResult(out, op.return_mode(), response->mutable_value()));
        } else {
          TETHER_RETURN_IF_ERROR(EncodeStreamResult(out, op, response->mutable_value()));
        }
        for (uint64_t id : op.free_on_success()) TETHER_RETURN_IF_ERROR(session_.Free(id));
        return absl::OkStatus();
      }
      case v1::CallRequest::kInvokeClosure: {
        const v1::InvokeClosure& op = request.invoke_closure();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        rpc::DecodeOptions options;
        options.resolve_object_handle = [this](uint64_t id) { return session_.FindObject(id); };
        TETHER_ASSIGN_OR_RETURN(Value closure, rpc::DecodeValue(op.closure(), options));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        TETHER_ASSIGN_OR_RETURN(Value out, vm->InvokeClosure(closure, args));
        return EncodeResult(out, op.return_mode(), response->mutable_value());
      }
      case v1::CallRequest::kSaveFunction: {
        const v1::SaveFunction& op = request.save_function();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        return vm->SaveFunction(op.function(), op.saved_name(), args, op.include_return());
      }
      case v1::CallRequest::kSetInput: {
        const v1::SetInput& op = request.set_input();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        if (op.named().empty()) return vm->SetInput(op.function(), args);
        vm::NamedArgs named;
        for (const v1::NamedValue& nv : op.named()) {
          google::protobuf::RepeatedPtrField<v1::Value> one;
          *one.Add() = nv.value();
          TETHER_ASSIGN_OR_RETURN(std::vector<Value> v, DecodeArgs(one));
          named.emplace_back(nv.name(), std::move(v[0]));
        }
        return vm->SetInputNamed(op.function(), args, named);
      }
      case v1::CallRequest::kInvokeStateful: {
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm,
                                Vm(request.invoke_stateful().vm_id()));
        return vm->InvokeStateful(request.invoke_stateful().function());
      }
      case v1::CallRequest::kGetOutputs: {
        const v1::GetOutputs& op = request.get_outputs();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(Value out, vm->GetOutputs(op.function()));
        return EncodeResult(out, op.return_mode(), response->mutable_value());
      }
      case v1::CallRequest::kGetFunctionInfo: {
        const v1::GetFunctionInfo& op = request.get_function_info();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        return DescribeFunction(*vm, op.function(), response->mutable_function_info());
      }
      case v1::CallRequest::kSetInstrument: {
        const v1::SetInstrument& op = request.set_instrument();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        if (op.factory() != "" && op.factory() != "trace" && op.factory() != "skip") {
          TETHER_RETURN_IF_ERROR(CheckRemoteCallable("set_instrument", op.factory()));
        }
        return vm->SetInstrumentByName(op.factory(), args);
      }
      case v1::CallRequest::kTimeEvaluator: {
        const v1::TimeEvaluator& op = request.time_evaluator();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        Device device = Device::Cpu();
        if (op.has_device()) {
          TETHER_ASSIGN_OR_RETURN(device, rpc::DecodeDevice(op.device()));
        }
        if (!op.options().f_preproc().empty()) {
          TETHER_RETURN_IF_ERROR(CheckRemoteCallable("f_preproc", op.options().f_preproc()));
        }
        TETHER_ASSIGN_OR_RETURN(
            profiling::BenchmarkResult result,
            vm->TimeEvaluator(op.function(), device, rpc::DecodeTimeEvaluatorOptions(op.options()),
                              args));
        rpc::EncodeBenchmarkResult(result, response->mutable_benchmark());
        return absl::OkStatus();
      }
      case v1::CallRequest::kProfile: {
        const v1::Profile& op = request.profile();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        TETHER_ASSIGN_OR_RETURN(profiling::Report report, vm->Profile(op.function(), args));
        rpc::EncodeReport(report, response->mutable_report());
        return absl::OkStatus();
      }
      case v1::CallRequest::kGetTrace: {
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(request.get_trace().vm_id()));
        TETHER_ASSIGN_OR_RETURN(profiling::Report report,
                                vm->GetTrace(request.get_trace().clear()));
        rpc::EncodeReport(report, response->mutable_report());
        return absl::OkStatus();
      }
      case v1::CallRequest::kAllocTensor: {
        TETHER_ASSIGN_OR_RETURN(rpc::TensorSpec spec,
                                rpc::DecodeTensorHeader(request.alloc_tensor().tensor()));
        TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(spec.shape, spec.dtype, spec.device));
        TETHER_ASSIGN_OR_RETURN(uint64_t id, session_.AddTensor(t));
        v1::TensorHandle* handle = response->mutable_tensor();
        handle->set_id(id);
        rpc::EncodeTensorHeader(spec.dtype, spec.shape, spec.device, handle->mutable_header());
        return absl::OkStatus();
      }
      case v1::CallRequest::kFillRandom: {
        const v1::FillRandom& op = request.fill_random();
        TETHER_ASSIGN_OR_RETURN(Tensor t, session_.FindTensor(op.tensor_id()));
        return FillRandom(t, op.seed(), op.low(), op.high());
      }
      case v1::CallRequest::kCopyTensor: {
        const v1::CopyTensor& op = request.copy_tensor();
        TETHER_ASSIGN_OR_RETURN(Tensor src, session_.FindTensor(op.src_id()));
        TETHER_ASSIGN_OR_RETURN(Tensor dst, session_.FindTensor(op.dst_id()));
        if (src->dtype() != dst->dtype() || !std::equal(src->shape().begin(), src->shape().end(),
                                                        dst->shape().begin(), dst->shape().end())) {
          return ValueError("copy_tensor: cannot copy a ", src.ToString(), " into a ",
                            dst.ToString());
        }
        if (op.src_id() == op.dst_id()) return absl::OkStatus();
        return dst.CopyFrom(src);
      }
      case v1::CallRequest::kFreeObjects: {
        absl::Status first;
        for (uint64_t id : request.free_objects().ids()) first.Update(session_.Free(id));
        return first;
      }
      case v1::CallRequest::kListFunctions: {
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(request.list_functions().vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<vm::ModuleFunction> functions, vm->ListFunctions());
        v1::FunctionList* out = response->mutable_functions();
        for (const vm::ModuleFunction& f : functions) {
          rpc::EncodeModuleFunction(f, out->add_functions());
        }
        return absl::OkStatus();
      }
      case v1::CallRequest::kCallKernel: {
        const v1::CallKernel& op = request.call_kernel();
        TETHER_ASSIGN_OR_RETURN(vm::LocalVirtualMachine * vm, Vm(op.vm_id()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        TETHER_ASSIGN_OR_RETURN(Value out, vm->CallKernel(op.kernel(), args));
        return EncodeResult(out, op.return_mode(), response->mutable_value());
      }
      case v1::CallRequest::kListGlobalFunctions: {
        v1::FunctionList* out = response->mutable_functions();
        for (const std::string& name : Registry::ListRemoteCallable()) {
          v1::ModuleFunction* f = out->add_functions();
          f->set_name(name);
          f->set_kind(v1::ModuleFunction::KIND_GLOBAL);
          f->set_num_args(-1);
        }
        return absl::OkStatus();
      }
      case v1::CallRequest::kCallGlobal: {
        const v1::CallGlobal& op = request.call_global();
        TETHER_ASSIGN_OR_RETURN(Function f, Registry::GetRemoteCallable(op.name()));
        TETHER_ASSIGN_OR_RETURN(std::vector<Value> args, DecodeArgs(op.args()));
        TETHER_ASSIGN_OR_RETURN(Value out, f(args));
        return EncodeResult(out, op.return_mode(), response->mutable_value());
      }
      case v1::CallRequest::kSyncDevice: {
        TETHER_ASSIGN_OR_RETURN(Device device, DecodeDeviceOf(request.sync_device()));
        return SyncDevice(device);
      }
      case v1::CallRequest::kCreateStream: {
        TETHER_ASSIGN_OR_RETURN(Device device, DecodeDeviceOf(request.create_stream()));
        TETHER_ASSIGN_OR_RETURN(Ref<StreamObj> stream, StreamObj::Create(device));
        return EncodeResult(Value(stream), v1::RETURN_MODE_HANDLE, response->mutable_value());
      }
      case v1::CallRequest::kSetStream:
        return SetStream(request.set_stream());
      case v1::CallRequest::kPutTensor:
      case v1::CallRequest::kGetTensor:
        return absl::FailedPreconditionError(
            "put_tensor and get_tensor travel only on the direct channel; use UploadTensor and "
            "DownloadTensor on gRPC");
      case v1::CallRequest::OP_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError("call request names no operation");
  }

 private:
  Session& session_;
  ModuleStore* store_;
  uint64_t max_inline_;
};

// Toward zero, not to nearest (runtime/core/scalar.h's FloatToHalf): a value
// drawn below `high` stays below it, and tiny values flush to zero.
uint16_t TruncateToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // flush tiny values to zero
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (exp << 10) | (mant >> 13));
}

}  // namespace

absl::Status CallHandler::Execute(Session& session, const v1::CallRequest& request,
                                  v1::CallResponse* response) {
  Ops ops(session, store_, max_inline_tensor_bytes_);
  // Kernels of this call launch on the session's streams (set_stream).
  ScopedCurrentStreams streams(&session.streams());
  return ops.Run(request, response);
}

absl::Status FillRandom(const Tensor& tensor, uint64_t seed, double low, double high) {
  if (!(low <= high) || !std::isfinite(low) || !std::isfinite(high)) {
    return ValueError("fill_random range [", low, ", ", high, ") is not a finite range");
  }
  if (!tensor->IsContiguous()) return ValueError("fill_random needs a contiguous tensor");
  DataType dtype = tensor->dtype();
  // One value per lane, each `elem` bytes: the loop writes exactly
  // numel * elem bytes, so it must be the tensor's size (a packed sub-byte
  // type would not be; DataType refuses those, and this keeps it so).
  const int64_t numel = tensor->NumElements() * dtype.lanes();
  const size_t elem = static_cast<size_t>((dtype.bits() + 7) / 8);
  if (static_cast<uint64_t>(numel) * elem != static_cast<uint64_t>(tensor->NumBytes())) {
    return ValueError("fill_random does not support ", dtype.ToString());
  }
  std::vector<unsigned char> host(static_cast<size_t>(tensor->NumBytes()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  for (int64_t i = 0; i < numel; ++i) {
    double v = low == high ? low : dist(rng);
    unsigned char* p = host.data() + static_cast<size_t>(i) * elem;
    switch (dtype.code()) {
      case DataType::kFloat:
        if (dtype.bits() == 64) {
          std::memcpy(p, &v, 8);
        } else if (dtype.bits() == 32) {
          float f = static_cast<float>(v);
          std::memcpy(p, &f, 4);
        } else if (dtype.bits() == 16) {
          uint16_t h = TruncateToHalf(static_cast<float>(v));
          std::memcpy(p, &h, 2);
        } else {
          return ValueError("fill_random does not support ", dtype.ToString());
        }
        break;
      case DataType::kBFloat: {
        float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t b = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p, &b, 2);
        break;
      }
      case DataType::kInt:
      case DataType::kUInt:
      case DataType::kBool: {
        int64_t n = static_cast<int64_t>(std::llround(v));
        if (dtype.is_bool()) n = n != 0;  // bool and uint1 hold 0 or 1
        std::memcpy(p, &n, elem);         // little-endian: the low bytes
        break;
      }
      default:
        return ValueError("fill_random does not support ", dtype.ToString());
    }
  }
  return const_cast<Tensor&>(tensor).CopyFromBytes(host.data(), host.size());
}

}  // namespace tether::server
