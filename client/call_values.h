// CallValues: the values of calls on a session, shared by RemoteVM and
// RemoteRuntime — arguments encoded (tensors past the daemon's inline limit
// uploaded first as temporaries, RemoteHandle values passed by id), results
// decoded (with fetch_outputs, tensor handles downloaded and then freed), and
// the temporaries freed once a call has returned.
#ifndef TETHER_CLIENT_CALL_VALUES_H_
#define TETHER_CLIENT_CALL_VALUES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/remote_session.h"
#include "runtime/core/value.h"
#include "tether/v1/tether.pb.h"

namespace tether::client {

// Thread contract: thread-hostile (one caller at a time, like its owner).
// The session must outlive it.
class CallValues {
 public:
  CallValues(RemoteSession* session, bool fetch_outputs, TransportKind transport)
      : session_(session), fetch_outputs_(fetch_outputs), transport_(transport) {}

  // Encodes an argument; large tensors are uploaded, their ids kept as
  // temporaries until FreeTemps.
  absl::Status EncodeArg(const Value& value, int depth, v1::Value* out);
  absl::Status EncodeArgs(ArgSpan args, google::protobuf::RepeatedPtrField<v1::Value>* out);
  // Decodes a result; fetched handles are freed by FreeTemps. `keep`: tensor
  // handles stay remote whatever fetch_outputs says.
  absl::StatusOr<Value> DecodeResult(const v1::Value& value, int depth, bool keep = false);
  // Frees the temporaries of the last call (one FreeObjects call).
  void FreeTemps();
  // The ReturnMode that matches fetch_outputs.
  v1::ReturnMode return_mode() const {
    return fetch_outputs_ ? v1::RETURN_MODE_UNSPECIFIED : v1::RETURN_MODE_HANDLE;
  }

 private:
  RemoteSession* session_;
  bool fetch_outputs_;
  TransportKind transport_;
  std::vector<uint64_t> temps_;
  std::vector<uint64_t> fetched_;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_CALL_VALUES_H_
