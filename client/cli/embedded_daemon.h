// The embedded daemon of `tether run/bench/profile/info` without --remote and
// of the Python package's tether.local(): a tetherd inside this process, on a
// unix socket in a private directory with a random token that never leaves
// the process (docs/design/security.md), reached through the very same gRPC
// path as a remote one. Its own library (tether_embedded_daemon), the one
// place besides the CLI that joins the client side and the daemon.
#ifndef TETHER_CLIENT_CLI_EMBEDDED_DAEMON_H_
#define TETHER_CLIENT_CLI_EMBEDDED_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/daemon.h"

namespace tether::cli {

// Thread contract: thread-compatible. Sessions on it must close before it is
// destroyed (declare the session after the daemon that serves it).
class EmbeddedDaemon {
 public:
  // Starts the daemon. UNAVAILABLE when no private directory can be made
  // under the temporary directory; otherwise what server::Daemon::Start says.
  static absl::StatusOr<std::unique_ptr<EmbeddedDaemon>> Start();
  // Stops the daemon and removes its directory.
  ~EmbeddedDaemon();
  EmbeddedDaemon(const EmbeddedDaemon&) = delete;
  EmbeddedDaemon& operator=(const EmbeddedDaemon&) = delete;

  // What RemoteSession::Connect takes: "unix:/tmp/tether-cli-XXXXXX/tetherd.sock".
  const std::string& target() const { return target_; }
  // The bearer token the daemon requires (ConnectOptions::auth_token).
  const std::string& auth_token() const { return auth_token_; }

 private:
  EmbeddedDaemon() = default;

  std::string dir_;
  std::string target_;
  std::string auth_token_;
  std::unique_ptr<server::Daemon> daemon_;
};

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_EMBEDDED_DAEMON_H_
