// Registration: a daemon's membership in the farm (docs/design/farm.md).
// It writes the daemon's record under <root>/<key>/devices/<id>, bound to an
// etcd lease it keeps alive, and writes it again whenever the lease is lost
// (etcd restarted without its data, a partition longer than the TTL) or its
// health changes; it follows the device's holder key with a watch, so the
// daemon can refuse sessions and calls that carry a stale fencing token, and
// its quarantine key with another, so it knows when an operator quarantined
// it; and it probes the daemon while nobody holds it, quarantining it after
// N failed probes in a row and lifting its own quarantine when a probe passes
// again. It also counts its own crashes (a run that did not stop cleanly,
// seen when the next one starts) and quarantines the device when they come
// too often. Each change of that standing is reported (on_state) for metrics.
#ifndef TETHER_FARM_REGISTRATION_H_
#define TETHER_FARM_REGISTRATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "farm/etcd_client.h"
#include "farm/records.h"

namespace tether::farm {

// The device's standing in the farm as the daemon last saw it.
struct MembershipState {
  bool registered = false;   // the record is in etcd (under a live lease of ours)
  int64_t holder_token = 0;  // the current holder's fencing token; 0: not held
  bool quarantined = false;  // a quarantine record names the device (probe or operator)
  bool operator==(const MembershipState&) const = default;
};

struct RegistrationOptions {
  std::string key;  // the farm key (--farm-key)
  // The record to publish; its id names the device (the key's last part)
  // and its health is kept up to date here.
  v1::DeviceRecord record;
  absl::Duration ttl = absl::Seconds(10);  // the record's lease
  // Health probes: `probe` runs every probe_interval while the device is not
  // held; after quarantine_after failures in a row the device is
  // quarantined. No probe: never probed.
  std::function<absl::Status()> probe;
  absl::Duration probe_interval = absl::Seconds(30);
  int quarantine_after = 3;
  // Crashes: after quarantine_after_crashes runs that ended without a clean
  // stop within crash_window, the starting run quarantines the device (until
  // a probe passes or an operator releases it). 0: crashes are not counted.
  int quarantine_after_crashes = 3;
  absl::Duration crash_window = absl::Minutes(10);
  // Where events go ("registered", "farm-unavailable", "quarantined", ...),
  // with a detail text. Called from the registration's threads.
  std::function<void(absl::string_view event, absl::string_view detail)> log;
  // Called with the new state whenever it changes (registered or not, held
  // or free, quarantined or not), and once more, unregistered, when the
  // registration stops. Calls are serialized and each reports the state at
  // that moment, so the last call is always the current state. Called from
  // the registration's threads and from its destructor.
  std::function<void(const MembershipState&)> on_state;
};

// Thread contract: thread-safe.
class Registration {
 public:
  // Validates the key and id and starts registering in the background: an
  // etcd that cannot be reached yet is retried (and logged), not an error.
  // INVALID_ARGUMENT for a bad key or id.
  static absl::StatusOr<std::unique_ptr<Registration>> Start(std::unique_ptr<EtcdClient> etcd,
                                                             RegistrationOptions options);
  // Stops, and revokes the lease: the record disappears at once.
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  // Whether work carrying fencing token `token` (0: none) may run on this
  // device now. OK when the token is the current holder's, or when there is
  // no token and nobody holds the device. Otherwise FAILED_PRECONDITION
  // saying why (stale token, device held by another, no holder). A token
  // newer than the daemon knows is checked with etcd (UNAVAILABLE when etcd
  // cannot be reached); with `may_ask_etcd` false it is refused instead.
  absl::Status CheckFencingToken(int64_t token, bool may_ask_etcd);

  // Whether the record is in etcd now (as far as this daemon knows).
  bool registered() const;
  // The current holder's fencing token (0: none known).
  int64_t holder_token() const;
  // All of it at once.
  MembershipState state() const;
  const std::string& id() const { return options_.record.id(); }

 private:
  Registration(std::unique_ptr<EtcdClient> etcd, RegistrationOptions options)
      : etcd_(std::move(etcd)), options_(std::move(options)) {}
  void RunMembership();
  void RunProbes();
  // Grants a lease and puts the record; starts the holder watch once.
  absl::Status Register();
  absl::Status PutRecord();
  // The run record at the first registration: counts a crash of the last
  // run, marks this one running, quarantines after too many crashes.
  void CountCrashes();
  // Puts a quarantine record bound to the lease (by the probe or for
  // crashes) unless the device has one; remembers its revision as ours.
  absl::Status Quarantine(int64_t lease, absl::string_view by, std::string reason);
  // The keys the registration follows with a watch: the device's holder
  // and its quarantine. Each one's view is the key's create revision (0:
  // absent; the holder's is its fencing token) and the store revision of
  // that view (an older view never replaces a newer one).
  enum Followed { kHolder, kQuarantine };
  struct KeyView {
    int64_t create_revision = 0;
    int64_t revision = 0;
  };
  std::string FollowedKey(Followed which) const;
  // Reads the key; updates the view.
  absl::Status Refresh(Followed which);
  void Apply(Followed which, int64_t create_revision, int64_t revision);
  void OnUpdate(Followed which, const WatchUpdate& update);
  // Reads the key and starts its watch (once).
  absl::Status Follow(Followed which);
  // Calls options_.on_state with the current state if it changed since the
  // last call.
  void ReportState();
  void Log(absl::string_view event, absl::string_view detail) const;
  bool Stopping() const;

  const std::unique_ptr<EtcdClient> etcd_;
  const RegistrationOptions options_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not registered
  v1::FarmHealth health_ ABSL_GUARDED_BY(mu_);
  bool record_dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool runs_counted_ ABSL_GUARDED_BY(mu_) = false;     // CountCrashes ran (once per process)
  std::vector<int64_t> crashes_ ABSL_GUARDED_BY(mu_);  // within the window, as recorded
  // The probe's quarantine key's create revision (0: none of ours).
  int64_t quarantine_revision_ ABSL_GUARDED_BY(mu_) = 0;
  KeyView views_[2] ABSL_GUARDED_BY(mu_);  // by Followed
  // Serializes ReportState; the state it last reported.
  absl::Mutex report_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::optional<MembershipState> reported_ ABSL_GUARDED_BY(report_mu_);
  std::unique_ptr<EtcdWatch> watches_[2];  // by Followed; the membership thread's
  std::thread membership_;
  std::thread probes_;
};

}  // namespace tether::farm

#endif  // TETHER_FARM_REGISTRATION_H_
