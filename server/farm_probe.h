// The health probe of a farm daemon (docs/design/farm.md, "Health"): the
// standard gRPC health check, then a canary model run the way a client runs
// one — a session, the module store, a VM, a call — over the daemon's own
// gRPC listener. tetherd runs it on a private unix socket while nobody
// holds the device; a daemon failing it N times in a row is quarantined.
#ifndef TETHER_SERVER_FARM_PROBE_H_
#define TETHER_SERVER_FARM_PROBE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tether::server {

// The built-in canary: an executable whose `main` takes no arguments and
// returns the float32 tensor kCanaryOutput through a VM builtin call.
absl::StatusOr<std::string> BuildCanaryExecutable();
inline constexpr float kCanaryOutput[4] = {1.0f, -2.5f, 3.25f, 42.0f};

struct ProbeOptions {
  std::string target;      // the daemon's gRPC address ("unix:/path", "127.0.0.1:PORT")
  std::string auth_token;  // sent as the bearer token when non-empty
  // TLS to the daemon (a prober from another machine): the CA of its
  // certificate (PEM text; empty: plaintext), and a client certificate.
  bool tls = false;
  std::string tls_ca_pem, tls_cert_pem, tls_key_pem;
  std::string client_name = "tetherd-farm-probe";  // the session's, as the daemon logs it
  std::string canary;  // executable bytes; `main` is called with no arguments
  // Check that main returned kCanaryOutput (the built-in canary).
  bool expect_builtin_output = false;
  absl::Duration deadline = absl::Seconds(20);  // the whole probe
};

// OK when the daemon reports SERVING and the canary ran; otherwise the
// failing step's status, with a message naming the step ("health check:
// ...", "canary invoke: ...").
absl::Status ProbeDaemon(const ProbeOptions& options);

}  // namespace tether::server

#endif  // TETHER_SERVER_FARM_PROBE_H_
