// Errors on the wire, the one conversion point for the daemon and the
// client: absl::Status (code, message and ErrorKind payload) to and from a
// v1.Error, and to and from a gRPC status, whose ErrorKind travels in the
// trailing metadata "tether-error-kind".
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_PROTO_CODEC_STATUS_CODEC_H_
#define TETHER_PROTO_CODEC_STATUS_CODEC_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"
#include "tether/v1/values.pb.h"

namespace grpc {
class ClientContext;
class ServerContextBase;
}  // namespace grpc

namespace tether::rpc {

// Errors: canonical code + ErrorKind + message, both ways.
void EncodeError(const absl::Status& status, v1::Error* out);
absl::Status DecodeError(const v1::Error& error);

// gRPC <-> absl::Status, the one conversion point for both the daemon and the
// client: the code maps one to one; the ErrorKind travels in the trailing
// metadata "tether-error-kind" (kErrorKindTrailer).
inline constexpr char kErrorKindTrailer[] = "tether-error-kind";
grpc::Status ToGrpcStatus(const absl::Status& status);
// The same for a server call: also sets the trailer on `context`, so the
// client gets the kind back (FromGrpcCall).
grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* context);
// `kind` is the trailer's value when present ("" otherwise).
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view kind = "");
// FromGrpcStatus of a finished client call, its kind read from the call's
// trailers.
absl::Status FromGrpcCall(const grpc::Status& status, const grpc::ClientContext& context);

}  // namespace tether::rpc

#endif  // TETHER_PROTO_CODEC_STATUS_CODEC_H_
