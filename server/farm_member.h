// FarmMember: tetherd's membership in a device farm (`tetherd --farm`,
// docs/design/farm.md). It registers the daemon in etcd (farm/registration.h)
// with the record its own handshake describes, probes it over a private
// unix socket while nobody holds it, and is the daemon's SessionFence: a
// session or call whose fencing token is not the device's current holder's
// is refused with FAILED_PRECONDITION. Built from farm_member.cc with the
// farm library, or from without_farm.cc (TETHER_BUILD_FARM=OFF), which
// says the daemon was built without it.
#ifndef TETHER_SERVER_FARM_MEMBER_H_
#define TETHER_SERVER_FARM_MEMBER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/metrics.h"
#include "server/session_fence.h"

namespace tether::server {

struct FarmMemberOptions {
  std::string url;      // --farm etcd://HOST:PORT[,HOST:PORT...] (etcds:// for TLS)
  std::string key;      // --farm-key: the pool clients acquire from
  std::string id;       // --farm-id; empty: the advertised address
  std::string address;  // --farm-address HOST:PORT; empty: the first TCP listen address
  std::map<std::string, std::string> labels;          // --label k=v
  absl::Duration ttl = absl::Seconds(10);             // --farm-ttl
  absl::Duration probe_interval = absl::Seconds(30);  // --farm-probe-interval; zero: no probes
  int quarantine_after = 3;                           // --farm-quarantine-after
  int quarantine_after_crashes = 3;                   // --farm-crash-quarantine; 0: not counted
  absl::Duration crash_window = absl::Minutes(10);    // --farm-crash-window
  std::string canary_file;  // --farm-canary: read at every probe; empty: the built-in canary
  // etcd credentials: --farm-tls-ca, --farm-tls-cert, --farm-tls-key,
  // --farm-user, --farm-password-file.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string user;
  std::string password_file;
};

// What the running daemon tells its membership.
struct FarmDaemonFacts {
  std::string address;       // HOST:PORT clients connect to
  std::string probe_target;  // "unix:/path": the daemon's private probe listener
  std::string auth_token;    // the daemon's bearer token ("" when none)
  bool tls = false;          // whether `address` serves TLS
  // Where the membership reports its state (DaemonMetrics::SetFarmRegistered
  // and SetFarmDeviceState, the device named by the farm id); null: nowhere.
  // Borrowed: it must outlive the membership's Leave (or its destruction).
  DaemonMetrics* metrics = nullptr;
};

// Thread contract: thread-safe.
class FarmMember : public SessionFence {
 public:
  // Checks the options (URL, key, credential files). INVALID_ARGUMENT naming
  // the bad one; FAILED_PRECONDITION in a tetherd built without the farm.
  static absl::StatusOr<std::unique_ptr<FarmMember>> Create(FarmMemberOptions options);
  // Describes the daemon (its handshake, read over `facts.probe_target`) and
  // starts registering it. UNAVAILABLE when the daemon cannot describe
  // itself; an unreachable etcd is retried in the background, not an error.
  virtual absl::Status Start(const FarmDaemonFacts& facts) = 0;
  // The id the daemon registers under (after Start).
  virtual std::string id() const = 0;
  // Leaves the farm: revokes the lease, so the record goes at once (a
  // daemon about to drain is handed to nobody), and reports it unregistered
  // to the metrics, which it no longer uses afterwards. Afterwards only
  // sessions without a token are admitted. Idempotent.
  virtual void Leave() = 0;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_FARM_MEMBER_H_
