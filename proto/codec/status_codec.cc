// Errors on the wire (status_codec.h): v1.Error and gRPC statuses, both ways.
#include "proto/codec/status_codec.h"

#include <string>

#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "runtime/core/error.h"

namespace tether::rpc {
namespace {

// The ErrorKind of a name such as "ValueError"; kUnspecified when unknown.
ErrorKind ErrorKindFromName(absl::string_view name) {
  for (int k = 0; k <= static_cast<int>(ErrorKind::kCancelled); ++k) {
    if (ErrorKindName(static_cast<ErrorKind>(k)) == name) return static_cast<ErrorKind>(k);
  }
  return ErrorKind::kUnspecified;
}

absl::StatusCode CodeFromInt(int code) {
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::StatusCode::kUnknown;
  }
  return static_cast<absl::StatusCode>(code);
}

}  // namespace

void EncodeError(const absl::Status& status, v1::Error* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_kind(std::string(ErrorKindName(GetErrorKind(status))));
  out->set_message(std::string(status.message()));
}

absl::Status DecodeError(const v1::Error& error) {
  absl::StatusCode code = CodeFromInt(error.code());
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  absl::Status status(code, error.message());
  ErrorKind kind = ErrorKindFromName(error.kind());
  return kind == ErrorKind::kUnspecified ? status : WithErrorKind(status, kind);
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* context) {
  if (!status.ok() && context != nullptr) {
    context->AddTrailingMetadata(kErrorKindTrailer,
                                 std::string(ErrorKindName(GetErrorKind(status))));
  }
  return ToGrpcStatus(status);
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view kind) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(CodeFromInt(static_cast<int>(status.error_code())), status.error_message());
  ErrorKind k = ErrorKindFromName(kind);
  return k == ErrorKind::kUnspecified ? out : WithErrorKind(out, k);
}

absl::Status FromGrpcCall(const grpc::Status& status, const grpc::ClientContext& context) {
  if (status.ok()) return absl::OkStatus();
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kErrorKindTrailer);
  if (it == trailers.end()) return FromGrpcStatus(status);
  return FromGrpcStatus(status, absl::string_view(it->second.data(), it->second.size()));
}

}  // namespace tether::rpc
