// SessionFence: what a daemon in a device farm (docs/design/farm.md) asks
// before it admits a session or runs a call: whether work carrying a
// fencing token may touch the device now. tetherd implements it over the
// farm's etcd registration (server/farm_member.h); without a fence every
// session is admitted.
#ifndef TETHER_SERVER_SESSION_FENCE_H_
#define TETHER_SERVER_SESSION_FENCE_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tether::server {

// Thread contract: implementations are thread-safe.
class SessionFence {
 public:
  virtual ~SessionFence() = default;
  // OK when work with fencing token `token` (0: none) may run now; else
  // FAILED_PRECONDITION saying why (a stale token, a device held by another
  // client), or UNAVAILABLE when that cannot be known. `may_block`: whether
  // the check may ask the coordinator (a token newer than the daemon's
  // view), which OpenSession allows and the per-call check does not.
  virtual absl::Status Admit(int64_t token, bool may_block) = 0;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_SESSION_FENCE_H_
