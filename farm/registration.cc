// Registration: the membership thread (lease, record, holder watch) and the
// probe thread (health, quarantine).
#include "farm/registration.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tether::farm {
namespace {

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

absl::StatusOr<std::unique_ptr<Registration>> Registration::Start(std::unique_ptr<EtcdClient> etcd,
                                                                  RegistrationOptions options) {
  if (absl::Status s = ValidateName("farm key", options.key); !s.ok()) return s;
  if (absl::Status s = ValidateName("farm id", options.record.id()); !s.ok()) return s;
  if (options.ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError("the farm lease TTL must be at least one second");
  }
  if (options.quarantine_after < 1) {
    return absl::InvalidArgumentError("quarantine_after must be at least 1");
  }
  std::unique_ptr<Registration> registration(new Registration(std::move(etcd), std::move(options)));
  registration->membership_ = std::thread([r = registration.get()] { r->RunMembership(); });
  if (registration->options_.probe) {
    registration->probes_ = std::thread([r = registration.get()] { r->RunProbes(); });
  }
  return registration;
}

Registration::~Registration() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (probes_.joinable()) probes_.join();
  membership_.join();
  for (std::unique_ptr<EtcdWatch>& watch : watches_) watch.reset();
  int64_t lease = 0;
  bool counted = false;
  v1::RunRecord stopped;  // a clean stop: the next run counts no crash
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
    lease_ = 0;
    counted = runs_counted_;
    for (int64_t at : crashes_) stopped.add_crash_unix_ms(at);
  }
  if (counted) {
    etcdserverpb::PutRequest put;
    put.set_key(RunsKey(options_.key, options_.record.id()));
    put.set_value(ToJson(stopped));
    if (absl::Status s = etcd_->Put(put).status(); !s.ok()) Log("farm-run-unrecorded", s.message());
  }
  if (lease != 0) {
    if (absl::Status s = etcd_->RevokeLease(lease); !s.ok()) {
      Log("farm-deregister-failed", s.message());  // the record goes with the TTL
    } else {
      Log("farm-deregistered", options_.record.id());
    }
  }
  ReportState();
}

void Registration::Log(absl::string_view event, absl::string_view detail) const {
  if (options_.log) options_.log(event, detail);
}

bool Registration::Stopping() const {
  absl::MutexLock lock(&mu_);
  return stop_;
}

bool Registration::registered() const {
  absl::MutexLock lock(&mu_);
  return lease_ != 0;
}

int64_t Registration::holder_token() const {
  absl::MutexLock lock(&mu_);
  return views_[kHolder].create_revision;
}

MembershipState Registration::state() const {
  absl::MutexLock lock(&mu_);
  return MembershipState{lease_ != 0, views_[kHolder].create_revision,
                         views_[kQuarantine].create_revision != 0};
}

void Registration::ReportState() {
  if (!options_.on_state) return;
  absl::MutexLock report(&report_mu_);
  const MembershipState now = state();
  if (reported_ == now) return;
  reported_ = now;
  options_.on_state(now);
}

absl::Status Registration::PutRecord() {
  v1::DeviceRecord record = options_.record;
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    *record.mutable_health() = health_;
    lease = lease_;
    record_dirty_ = false;
  }
  if (lease == 0) return absl::FailedPreconditionError("not registered");
  etcdserverpb::PutRequest put;
  put.set_key(DeviceKey(options_.key, record.id()));
  put.set_value(ToJson(record));
  put.set_lease(lease);
  absl::StatusOr<etcdserverpb::PutResponse> response = etcd_->Put(put);
  if (!response.ok()) {
    absl::MutexLock lock(&mu_);
    record_dirty_ = true;
    return response.status();
  }
  return absl::OkStatus();
}

absl::Status Registration::Quarantine(int64_t lease, absl::string_view by, std::string reason) {
  v1::QuarantineRecord record;
  record.set_by(std::string(by));
  record.set_reason(std::move(reason));
  record.set_since_unix_ms(NowUnixMs());
  // Bound to the daemon's lease: its own quarantine goes with it.
  absl::StatusOr<etcdserverpb::TxnResponse> done = etcd_->Txn(
      PutIfAbsent(QuarantineKey(options_.key, options_.record.id()), ToJson(record), lease));
  if (!done.ok()) return done.status();
  if (done->succeeded()) {
    absl::MutexLock lock(&mu_);
    quarantine_revision_ = done->header().revision();
  }
  Log("farm-quarantined", record.reason());
  return absl::OkStatus();
}

void Registration::CountCrashes() {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    if (runs_counted_) return;
    lease = lease_;
  }
  const std::string key = RunsKey(options_.key, options_.record.id());
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  absl::StatusOr<etcdserverpb::RangeResponse> found = etcd_->Range(range);
  if (!found.ok()) return;  // counted at the next registration
  v1::RunRecord last;
  if (found->kvs_size() > 0) {
    if (absl::Status parsed = FromJson(found->kvs(0).value(), key, &last); !parsed.ok()) {
      Log("farm-runs-unreadable", parsed.message());
      last.Clear();
    }
  }
  const int64_t now = NowUnixMs();
  const int64_t window_start = now - absl::ToInt64Milliseconds(options_.crash_window);
  v1::RunRecord run;
  run.set_running(true);
  run.set_started_unix_ms(now);
  for (int64_t at : last.crash_unix_ms()) {
    if (at >= window_start) run.add_crash_unix_ms(at);
  }
  // The last run registered and never stopped cleanly: it crashed (or was
  // killed) at some time after it started; count it now.
  if (last.running()) {
    run.add_crash_unix_ms(now);
    Log("farm-crash-counted",
        absl::StrCat("the last run (started ", last.started_unix_ms(), ") did not stop cleanly; ",
                     run.crash_unix_ms_size(), " in the crash window"));
  }
  etcdserverpb::PutRequest put;
  put.set_key(key);
  put.set_value(ToJson(run));
  if (!etcd_->Put(put).ok()) return;
  {
    absl::MutexLock lock(&mu_);
    runs_counted_ = true;
    crashes_.assign(run.crash_unix_ms().begin(), run.crash_unix_ms().end());
  }
  if (options_.quarantine_after_crashes > 0 &&
      run.crash_unix_ms_size() >= options_.quarantine_after_crashes && last.running()) {
    Quarantine(lease, "crashes",
               absl::StrCat("crashed ", run.crash_unix_ms_size(), " times in ",
                            absl::FormatDuration(options_.crash_window)))
        .IgnoreError();
  }
}

absl::Status Registration::Register() {
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(options_.ttl);
  if (!lease.ok()) return lease.status();
  {
    absl::MutexLock lock(&mu_);
    lease_ = *lease;
    quarantine_revision_ = 0;  // a probe quarantine went with the old lease
  }
  // Before the record: once the device shows up, this run is marked running.
  CountCrashes();
  if (absl::Status s = PutRecord(); !s.ok()) {
    {
      absl::MutexLock lock(&mu_);
      lease_ = 0;
    }
    ReportState();
    return s;
  }
  ReportState();
  if (absl::Status s = Follow(kHolder); !s.ok()) return s;
  if (absl::Status s = Follow(kQuarantine); !s.ok()) return s;
  return absl::OkStatus();
}

void Registration::RunMembership() {
  const absl::Duration period = std::max(options_.ttl / 3, absl::Milliseconds(200));
  bool outage = false;  // logged once per outage
  for (;;) {
    int64_t lease = 0;
    bool dirty = false;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      lease = lease_;
      dirty = record_dirty_;
    }
    absl::Status status;
    if (lease == 0) {
      status = Register();
      if (status.ok()) {
        Log("farm-registered", absl::StrCat(DeviceKey(options_.key, options_.record.id()),
                                            " ttl=", absl::FormatDuration(options_.ttl)));
      }
    } else {
      absl::StatusOr<int64_t> renewed = etcd_->KeepAliveOnce(lease);
      status = renewed.status();
      if (status.code() == absl::StatusCode::kNotFound) {
        // The record went with the lease: register again at once.
        Log("farm-lease-lost", status.message());
        {
          absl::MutexLock lock(&mu_);
          lease_ = 0;
        }
        ReportState();
        continue;
      }
      if (status.ok() && dirty) status = PutRecord();
    }
    if (!status.ok() && !outage) {
      Log("farm-unavailable", status.message());
    } else if (status.ok() && outage) {
      Log("farm-available", etcd_->endpoints());
    }
    outage = !status.ok();
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stop_),
                         status.ok() ? period : std::min(period, absl::Seconds(1)));
  }
}

std::string Registration::FollowedKey(Followed which) const {
  return which == kHolder ? HolderKey(options_.key, options_.record.id())
                          : QuarantineKey(options_.key, options_.record.id());
}

absl::Status Registration::Follow(Followed which) {
  if (absl::Status s = Refresh(which); !s.ok()) return s;
  if (watches_[which]) return absl::OkStatus();
  int64_t from = 0;
  {
    absl::MutexLock lock(&mu_);
    from = views_[which].revision + 1;
  }
  watches_[which] = etcd_->Watch(FollowedKey(which), "", from,
                                 [this, which](const WatchUpdate& u) { OnUpdate(which, u); });
  return absl::OkStatus();
}

absl::Status Registration::Refresh(Followed which) {
  etcdserverpb::RangeRequest range;
  range.set_key(FollowedKey(which));
  range.set_keys_only(true);
  absl::StatusOr<etcdserverpb::RangeResponse> response = etcd_->Range(range);
  if (!response.ok()) return response.status();
  Apply(which, response->kvs_size() > 0 ? response->kvs(0).create_revision() : 0,
        response->header().revision());
  return absl::OkStatus();
}

void Registration::Apply(Followed which, int64_t create_revision, int64_t revision) {
  {
    absl::MutexLock lock(&mu_);
    KeyView& view = views_[which];
    if (revision < view.revision) return;  // an older view than ours
    view.create_revision = create_revision;
    view.revision = revision;
  }
  ReportState();
}

void Registration::OnUpdate(Followed which, const WatchUpdate& update) {
  if (update.resync) {
    (void)Refresh(which);  // failing, the next check, registration or update refreshes it
    return;
  }
  for (const mvccpb::Event& event : update.events) {
    Apply(which, event.type() == mvccpb::Event::PUT ? event.kv().create_revision() : 0,
          event.kv().mod_revision());
  }
}

absl::Status Registration::CheckFencingToken(int64_t token, bool may_ask_etcd) {
  const std::string& id = options_.record.id();
  int64_t current = holder_token();
  if (token == current) return absl::OkStatus();
  if (token > current && may_ask_etcd) {
    // Acquired after the daemon's last view (the watch may lag by a few
    // milliseconds): ask etcd.
    if (absl::Status s = Refresh(kHolder); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot check fencing token ", token,
                                                 " of farm device ", id, ": ", s.message()));
    }
    current = holder_token();
    if (token == current) return absl::OkStatus();
  }
  if (token == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "farm device ", id, " is held by another client (fencing token ", current,
        "); acquire it through the farm (--farm URL --key ", options_.key, ") to use it"));
  }
  if (current == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("fencing token ", token, " is no longer valid: farm device ", id,
                     " is not held (the lease expired or was released); acquire it again"));
  }
  if (token < current) {
    return absl::FailedPreconditionError(
        absl::StrCat("fencing token ", token, " is stale: farm device ", id,
                     " was acquired again (fencing token ", current, ")"));
  }
  return absl::FailedPreconditionError(absl::StrCat("fencing token ", token,
                                                    " is not the holder's of farm device ", id,
                                                    " (current token ", current, ")"));
}

void Registration::RunProbes() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.probe_interval);
      if (stop_) return;
      // Never while someone holds the device: a probe would disturb their
      // measurements. An unregistered daemon has nowhere to report.
      if (views_[kHolder].create_revision != 0 || lease_ == 0) continue;
    }
    absl::Status result = options_.probe();
    if (Stopping()) return;
    if (holder_token() != 0) continue;  // acquired meanwhile: the probe may have been refused
    bool quarantine = false;
    bool lift = false;
    int64_t lease = 0;
    int64_t quarantine_revision = 0;
    uint32_t failures = 0;
    {
      absl::MutexLock lock(&mu_);
      const v1::FarmHealth before = health_;
      health_.set_probes(health_.probes() + 1);
      health_.set_last_probe_unix_ms(NowUnixMs());
      if (result.ok()) {
        health_.set_state(v1::FarmHealth::STATE_OK);
        health_.set_consecutive_failures(0);
        health_.clear_last_error();
      } else {
        health_.set_state(v1::FarmHealth::STATE_FAILING);
        health_.set_consecutive_failures(health_.consecutive_failures() + 1);
        health_.set_last_error(std::string(result.message()));
      }
      failures = health_.consecutive_failures();
      // The record is written again only when what it says changes, not
      // for every probe's time stamp.
      if (before.state() != health_.state() ||
          before.consecutive_failures() != health_.consecutive_failures() ||
          before.last_error() != health_.last_error()) {
        record_dirty_ = true;
      }
      lease = lease_;
      quarantine_revision = quarantine_revision_;
      quarantine = !result.ok() && failures >= static_cast<uint32_t>(options_.quarantine_after) &&
                   quarantine_revision_ == 0;
      lift = result.ok() && quarantine_revision_ != 0;
    }
    if (lease == 0) continue;
    if (!result.ok() && quarantine_revision != 0) {
      // An operator may have released the quarantine (`tether farm
      // release`): then the device gets quarantine_after more failures
      // before it is quarantined again.
      etcdserverpb::RangeRequest range;
      range.set_key(QuarantineKey(options_.key, options_.record.id()));
      absl::StatusOr<etcdserverpb::RangeResponse> found = etcd_->Range(range);
      if (found.ok() &&
          (found->kvs_size() == 0 || found->kvs(0).create_revision() != quarantine_revision)) {
        absl::MutexLock lock(&mu_);
        quarantine_revision_ = 0;
        health_.set_consecutive_failures(1);
        failures = 1;
        quarantine = options_.quarantine_after <= 1;
      }
    }
    if (!result.ok()) {
      Log("farm-probe-failed", absl::StrCat("failures=", failures, " ", result.message()));
    }
    if (quarantine) {
      Quarantine(lease, "probe", absl::StrCat(failures, " failed probes: ", result.message()))
          .IgnoreError();  // the next failure tries again
    } else if (lift) {
      const std::string key = QuarantineKey(options_.key, options_.record.id());
      etcdserverpb::TxnRequest txn;
      etcdserverpb::Compare* ours = txn.add_compare();
      ours->set_key(key);
      ours->set_target(etcdserverpb::Compare::CREATE);
      ours->set_result(etcdserverpb::Compare::EQUAL);
      ours->set_create_revision(quarantine_revision);
      txn.add_success()->mutable_request_delete_range()->set_key(key);
      absl::StatusOr<etcdserverpb::TxnResponse> done = etcd_->Txn(txn);
      if (done.ok()) {
        absl::MutexLock lock(&mu_);
        quarantine_revision_ = 0;
      }
      if (done.ok() && done->succeeded()) Log("farm-quarantine-lifted", "a probe passed");
    }
    bool dirty = false;
    {
      absl::MutexLock lock(&mu_);
      dirty = record_dirty_;
    }
    if (dirty) (void)PutRecord();  // failing, the membership thread retries
  }
}

}  // namespace tether::farm
