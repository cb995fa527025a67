// The farm's health probe over the daemon's own gRPC listener, with the
// generated Tether stub (the server does not link the client library).
#include "server/farm_probe.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/codec/sha256.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/tensor.h"
#include "runtime/vm/exec_builder.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {
namespace {

absl::Status Step(const char* what, const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// grpc.health.v1.Health/Check for the whole server, through the generic
// stub (Debian installs no generated health classes).
absl::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, absl::Time deadline) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (absl::Status s = Step("health check", status); !s.ok()) return s;
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  // HealthCheckResponse{status: SERVING (1)}.
  if (bytes != std::string("\x08\x01", 2)) {
    return absl::UnavailableError("health check: the daemon does not report SERVING");
  }
  return absl::OkStatus();
}

class ProbeSession {
 public:
  ProbeSession(const ProbeOptions& options, std::shared_ptr<grpc::Channel> channel,
               absl::Time deadline)
      : options_(options), stub_(v1::Tether::NewStub(std::move(channel))), deadline_(deadline) {}
  ~ProbeSession() {
    if (session_id_.empty()) return;
    grpc::ClientContext context;
    Prepare(&context);
    v1::CloseSessionRequest request;
    request.set_session_id(session_id_);
    v1::CloseSessionResponse response;
    (void)stub_->CloseSession(&context, request, &response);
  }

  absl::Status Run() {
    {
      grpc::ClientContext context;
      Prepare(&context);
      v1::OpenSessionRequest request;
      request.set_client_name(options_.client_name);
      request.set_idle_timeout_ms(60000);
      v1::OpenSessionResponse response;
      if (absl::Status s = Step("canary session", stub_->OpenSession(&context, request, &response));
          !s.ok()) {
        return s;
      }
      session_id_ = response.session_id();
    }
    const std::string sha = rpc::Sha256Hex(options_.canary);
    {
      grpc::ClientContext context;
      Prepare(&context);
      v1::UploadModuleResponse response;
      auto writer = stub_->UploadModule(&context, &response);
      v1::UploadModuleRequest header;
      header.mutable_header()->set_sha256(sha);
      header.mutable_header()->set_size_bytes(options_.canary.size());
      bool ok = writer->Write(header);
      constexpr size_t kChunk = size_t{1} << 20;
      for (size_t at = 0; ok && at < options_.canary.size(); at += kChunk) {
        v1::UploadModuleRequest data;
        data.set_data(options_.canary.substr(at, kChunk));
        ok = writer->Write(data);
      }
      writer->WritesDone();
      if (absl::Status s = Step("canary upload", writer->Finish()); !s.ok()) return s;
    }
    uint64_t vm_id = 0;
    {
      v1::CallRequest request;
      request.mutable_create_vm()->set_module_sha256(sha);
      v1::CallResponse response;
      if (absl::Status s = Call("canary vm", request, &response); !s.ok()) return s;
      vm_id = response.create_vm().vm_id();
    }
    v1::CallRequest request;
    request.mutable_invoke()->set_vm_id(vm_id);
    request.mutable_invoke()->set_function("main");
    request.mutable_invoke()->set_return_mode(v1::RETURN_MODE_INLINE);
    v1::CallResponse response;
    if (absl::Status s = Call("canary invoke", request, &response); !s.ok()) return s;
    if (!options_.expect_builtin_output) return absl::OkStatus();
    absl::StatusOr<Value> out = rpc::DecodeValue(response.value(), {});
    if (!out.ok())
      return absl::InternalError(absl::StrCat("canary output: ", out.status().message()));
    if (!out->is_tensor()) return absl::InternalError("canary output is not a tensor");
    Tensor t(out->AsRef<TensorObj>());
    if (t->dtype() != DataType::Float(32) || t->NumElements() != 4 ||
        std::memcmp(t->element_data(), kCanaryOutput, sizeof(kCanaryOutput)) != 0) {
      return absl::InternalError("canary output differs from what the canary returns");
    }
    return absl::OkStatus();
  }

 private:
  void Prepare(grpc::ClientContext* context) const {
    context->set_deadline(absl::ToChronoTime(deadline_));
    if (!options_.auth_token.empty()) {
      context->AddMetadata("authorization", absl::StrCat("Bearer ", options_.auth_token));
    }
  }
  absl::Status Call(const char* what, v1::CallRequest& request, v1::CallResponse* response) {
    grpc::ClientContext context;
    Prepare(&context);
    request.set_session_id(session_id_);
    return Step(what, stub_->Call(&context, request, response));
  }

  const ProbeOptions& options_;
  std::unique_ptr<v1::Tether::Stub> stub_;
  const absl::Time deadline_;
  std::string session_id_;
};

}  // namespace

absl::StatusOr<std::string> BuildCanaryExecutable() {
  const int64_t shape[] = {4};
  TETHER_ASSIGN_OR_RETURN(Tensor constant, Tensor::FromBytes(shape, DataType::Float(32),
                                                             kCanaryOutput, sizeof(kCanaryOutput)));
  vm::ExecBuilder builder;
  builder.EmitFunction("main", 0);
  builder.EmitCall("vm.builtin.copy", {builder.ConvertConstant(Value(constant))}, /*dst=*/0);
  builder.EmitRet(0);
  builder.EndFunction("main");
  builder.SetMetadata("producer", "tetherd farm canary");
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, builder.Get());
  return exec->SaveToBytes();
}

absl::Status ProbeDaemon(const ProbeOptions& options) {
  const absl::Time deadline = absl::Now() + options.deadline;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    ssl.pem_cert_chain = options.tls_cert_pem;
    ssl.pem_private_key = options.tls_key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, credentials, args);
  if (absl::Status s = CheckHealth(channel, deadline); !s.ok()) return s;
  ProbeSession session(options, channel, deadline);
  return session.Run();
}

}  // namespace tether::server
