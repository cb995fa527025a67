// CallHandler: runs one CallRequest operation (VM or tensor) against a
// session — decoding arguments (inline tensors become CPU tensors, handles
// resolve to the session's objects), calling the VM, and encoding results by
// ReturnMode (large or HANDLE-mode tensors and closures become session
// handles). Shared by the unary Call and the CallStream paths.
#ifndef TETHER_SERVER_CALL_HANDLER_H_
#define TETHER_SERVER_CALL_HANDLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/module_store.h"
#include "server/session_table.h"
#include "tether/v1/tether.pb.h"

namespace tether::server {

// Thread contract: thread-safe (stateless apart from the store); the caller
// serializes calls per session (Session::queue()).
class CallHandler {
 public:
  CallHandler(ModuleStore* store, uint64_t max_inline_tensor_bytes)
      : store_(store), max_inline_tensor_bytes_(max_inline_tensor_bytes) {}

  // Runs `request`'s op, filling `response`'s result. Statuses: NOT_FOUND for
  // unknown VMs, functions or handles, INVALID_ARGUMENT for bad payloads,
  // FAILED_PRECONDITION for wrong call order, and whatever the VM returned.
  absl::Status Execute(Session& session, const v1::CallRequest& request,
                       v1::CallResponse* response);

 private:
  ModuleStore* store_;
  uint64_t max_inline_tensor_bytes_;
};

// Fills `tensor` (any device) with uniform random values in [low, high) from
// `seed`; integers are rounded, booleans are 0/1.
absl::Status FillRandom(const Tensor& tensor, uint64_t seed, double low, double high);

}  // namespace tether::server

#endif  // TETHER_SERVER_CALL_HANDLER_H_
