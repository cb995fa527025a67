// DaemonProcess: a real tetherd binary started for --remote runs, listening
// on 127.0.0.1:0 and reporting its port through --port-file, as the CLI
// tests start it. Stopped with SIGTERM (it drains and exits 0) when the
// object goes away.
//
// Thread contract: thread-compatible.
#ifndef TETHER_TESTS_CONFORMANCE_DAEMON_PROCESS_H_
#define TETHER_TESTS_CONFORMANCE_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tether::conformance {

class DaemonProcess {
 public:
  // Starts `tetherd_path` with its port file and store in `work_dir` (created
  // if missing) and waits up to 30 s for the port. NOT_FOUND if the binary is
  // missing, UNAVAILABLE if it exits or never reports a port.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const std::string& tetherd_path,
                                                              const std::string& work_dir);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // "127.0.0.1:PORT".
  const std::string& target() const { return target_; }
  // The bearer token the daemon requires (random, per start; its file in
  // work_dir is 0600).
  const std::string& token() const { return token_; }

 private:
  DaemonProcess(pid_t pid, std::string target, std::string token)
      : pid_(pid), target_(std::move(target)), token_(std::move(token)) {}
  pid_t pid_;
  std::string target_;
  std::string token_;
};

}  // namespace tether::conformance

#endif  // TETHER_TESTS_CONFORMANCE_DAEMON_PROCESS_H_
