// RemoteVM: the VirtualMachine interface over a RemoteSession, so code and
// tests written against the local interpreter run unchanged on a daemon.
//
// Calls travel on the session's transport (client/transport.h): the daemon's
// direct channel (a loopback socket, for a daemon on this host), the
// session's CallStream, or unary Calls, whichever comes first and works.
// Tensor arguments up to the daemon's max_inline_tensor_bytes travel inline;
// larger ones are uploaded first and passed as handles, then freed once the
// call has returned (the daemon's VM holds its own references to whatever it
// keeps, e.g. SetInput and SaveFunction arguments).
//
// Outputs: with fetch_outputs (the default) every tensor comes back as a local
// CPU tensor (large ones are downloaded in chunks and their handles freed).
// With fetch_outputs=false every output tensor stays on the daemon and is
// returned as a RemoteHandle value (client/remote_session.h): download it with
// RemoteSession::DownloadTensor, pass it back as an argument, free it with
// RemoteSession::FreeObjects (or let the session's close release it).
// Closures come back as RemoteHandle values (kind kObject) that InvokeClosure
// accepts; they live until the session closes.
#ifndef TETHER_CLIENT_REMOTE_VM_H_
#define TETHER_CLIENT_REMOTE_VM_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/call_values.h"
#include "client/remote_session.h"
#include "runtime/vm/virtual_machine.h"

namespace tether::client {

struct RemoteVmOptions {
  // Download output tensors eagerly (true) or leave them as remote handles.
  bool fetch_outputs = true;
  // Per-call deadline enforced by the daemon; zero: none.
  absl::Duration call_timeout = absl::ZeroDuration();
  // Threads the VM's kernels may use on the daemon; 0: the daemon's default
  // (TETHER_NUM_THREADS there, else its core count).
  int num_threads = 0;
  // The most preferred transport for this VM's calls; the session's own
  // choice (ConnectOptions::transport) when that comes later. kStream keeps
  // them on gRPC; kUnary sends each alone. All carry the same operations,
  // errors and kinds; the direct channel and the stream save a round trip's
  // setup per call.
  TransportKind transport = TransportKind::kDirect;
  // Let TimeEvaluator and Profile run beside other sessions' calls instead of
  // waiting for exclusive use of the daemon (docs/design/rpc-protocol.md,
  // "Exclusive timing"); BenchmarkResult::exclusive says which one ran.
  bool concurrent_timing = false;
  // A param file in the daemon's store (RemoteSession::UploadParams): its
  // tensors fill the module's parameters of their names, so calls pass the
  // other parameters only (docs/design/rpc-protocol.md, "Weights on the
  // device"). Empty: none. Needs a daemon of protocol 1.6.
  std::string params_sha256;
};

// Thread contract: thread-hostile, like the local VM: one caller at a time.
// The session must outlive the VM.
class RemoteVM final : public vm::VirtualMachine {
 public:
  // Creates a VM of the stored module `module_sha256` on `devices` (empty:
  // cpu:0) with `memory_cfg` ("naive", "pooled", ...; empty: the daemon's
  // default). NOT_FOUND if the daemon lacks the module (or the param file
  // of options.params_sha256); INVALID_ARGUMENT when the param file is
  // corrupt or does not fit the module (both named); FAILED_PRECONDITION
  // for params on a daemon older than protocol 1.6.
  static absl::StatusOr<std::unique_ptr<RemoteVM>> Create(RemoteSession* session,
                                                          absl::string_view module_sha256,
                                                          std::vector<Device> devices = {},
                                                          absl::string_view memory_cfg = "",
                                                          RemoteVmOptions options = {});
  ~RemoteVM() override;

  uint64_t vm_id() const { return vm_id_; }
  RemoteSession* session() const { return session_; }
  // What the next call travels on.
  TransportKind transport() const { return session_->transport(options_.transport); }

  absl::StatusOr<Value> Invoke(absl::string_view func_name, ArgSpan args) override;
  // Invoke, in one round trip, with some outputs kept on the daemon and some
  // handles freed (protocol 1.5; docs/design/rpc-protocol.md, "Streaming"):
  // the top-level outputs at the indices `handle_outputs` (the fields of a
  // tuple result; 0 for a result that is no tuple) come back as RemoteHandle
  // values whatever fetch_outputs says, the others as it says; the session's
  // handles `free_on_success` are freed once the call has succeeded (after a
  // failure they are still there). An index past the outputs fails with
  // kind IndexError (nothing kept); an unknown handle to free is NOT_FOUND
  // before the call runs; a daemon older than 1.5 is FAILED_PRECONDITION.
  // client/stateful_stream.h builds a model's chunk-by-chunk loop on it.
  absl::StatusOr<Value> InvokeKeeping(absl::string_view func_name, ArgSpan args,
                                      std::span<const uint32_t> handle_outputs,
                                      std::span<const uint64_t> free_on_success);
  absl::StatusOr<Value> InvokeClosure(const Value& closure, ArgSpan args) override;
  absl::Status SaveFunction(absl::string_view func_name, absl::string_view saved_name, ArgSpan args,
                            bool include_return = true) override;
  absl::Status SetInput(absl::string_view func_name, ArgSpan args) override;
  absl::Status SetInputNamed(absl::string_view func_name, ArgSpan positional,
                             const vm::NamedArgs& named) override;
  absl::Status InvokeStateful(absl::string_view func_name) override;
  absl::StatusOr<Value> GetOutputs(absl::string_view func_name) override;
  absl::StatusOr<int64_t> GetFunctionArity(absl::string_view func_name) override;
  absl::StatusOr<std::vector<std::string>> GetFunctionParamNames(
      absl::string_view func_name) override;
  absl::StatusOr<std::vector<std::string>> GetFunctionBoundParamNames(
      absl::string_view func_name) override;
  absl::Status SetInstrumentByName(absl::string_view factory_name, ArgSpan args) override;
  absl::StatusOr<profiling::BenchmarkResult> TimeEvaluator(
      absl::string_view func_name, Device device, const profiling::TimeEvaluatorOptions& options,
      ArgSpan args) override;
  absl::StatusOr<profiling::Report> Profile(absl::string_view func_name, ArgSpan args) override;
  absl::StatusOr<profiling::Report> GetTrace(bool clear) override;
  // The module's functions and one kernel's call (protocol 1.6; a daemon
  // older than 1.6 is FAILED_PRECONDITION). CallKernel's tensor arguments
  // that should see the kernel's outputs must be remote (RemoteHandle
  // values): an inline tensor is a copy on the daemon.
  absl::StatusOr<std::vector<vm::ModuleFunction>> ListFunctions() override;
  absl::StatusOr<Value> CallKernel(absl::string_view kernel_name, ArgSpan args) override;

  // The daemon machine's state right after the last successful
  // TimeEvaluator or Profile (clocks, governor, temperatures, GPUs; read by
  // the daemon, docs/design/rpc-protocol.md "Device state"); empty before
  // one, or from a daemon older than protocol 1.4.
  const v1::DeviceState& last_device_state() const { return last_device_state_; }

 private:
  RemoteVM(RemoteSession* session, RemoteVmOptions options);

  // Sends one operation on the session; returns the reply or its decoded
  // error.
  absl::StatusOr<v1::CallResponse> Exec(v1::CallRequest& request);
  // Argument encoding and result decoding (values_).
  absl::Status EncodeArg(const Value& value, int depth, v1::Value* out) {
    return values_.EncodeArg(value, depth, out);
  }
  absl::Status EncodeArgs(ArgSpan args, google::protobuf::RepeatedPtrField<v1::Value>* out) {
    return values_.EncodeArgs(args, out);
  }
  void FreeTemps() { values_.FreeTemps(); }
  // Encodes `args` into `out` (a field of `request`), sends the request when
  // that worked, and frees the temporaries either way.
  absl::StatusOr<v1::CallResponse> ExecWithArgs(v1::CallRequest& request, ArgSpan args,
                                                google::protobuf::RepeatedPtrField<v1::Value>* out);
  absl::StatusOr<Value> DecodeResult(const v1::Value& value, int depth, bool keep = false) {
    return values_.DecodeResult(value, depth, keep);
  }
  // Decodes an InvokeKeeping result: the top-level outputs `kept` stay remote.
  absl::StatusOr<Value> DecodeKeeping(const v1::Value& value, std::span<const uint32_t> kept);
  absl::StatusOr<Value> FinishValueCall(v1::CallRequest& request);
  // Encodes `args` into `out` (a field of `request`) and, when that worked,
  // sends it and decodes the value (FinishValueCall); temporaries freed.
  absl::StatusOr<Value> CallWithArgs(v1::CallRequest& request, ArgSpan args,
                                     google::protobuf::RepeatedPtrField<v1::Value>* out);
  absl::StatusOr<v1::FunctionInfo> FunctionInfo(absl::string_view func_name);
  v1::ReturnMode return_mode() const;

  RemoteSession* session_;
  RemoteVmOptions options_;
  uint64_t vm_id_ = 0;
  CallValues values_;
  v1::DeviceState last_device_state_;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_REMOTE_VM_H_
