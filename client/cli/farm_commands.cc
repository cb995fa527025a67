// `tether farm list|acquire|quarantine|release|probe` and the acquisition behind
// `tether run|bench|profile --farm` (docs/design/farm.md): the client side
// of the device farm over farm/ (etcd).
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "farm/acquisition.h"
#include "farm/etcd_client.h"
#include "farm/records.h"
#include "farm/snapshot.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "server/farm_probe.h"

extern char** environ;

namespace tether::cli {
namespace {

namespace fv1 = tether::farm::v1;

absl::StatusOr<std::unique_ptr<farm::EtcdClient>> OpenEtcd(const FarmFlags& flags) {
  if (flags.url.empty()) {
    return absl::InvalidArgumentError("--farm etcd://HOST:PORT[,HOST:PORT...] is required");
  }
  farm::EtcdOptions options;
  TETHER_RETURN_IF_ERROR(farm::ParseFarmUrl(flags.url, &options));
  options.ca_file = flags.tls_ca;
  options.cert_file = flags.tls_cert;
  options.key_file = flags.tls_key;
  options.user = flags.user;
  options.password_file = flags.password_file;
  return farm::EtcdClient::Create(std::move(options));
}

absl::StatusOr<farm::AcquireOptions> AcquireOptionsOf(const FarmFlags& flags) {
  if (flags.key.empty()) return absl::InvalidArgumentError("--key KEY (the farm key) is required");
  farm::AcquireOptions options;
  options.key = flags.key;
  TETHER_ASSIGN_OR_RETURN(options.where, farm::ParseWhere(flags.where));
  options.priority = flags.priority;
  options.wait = flags.wait.value_or(absl::InfiniteDuration());
  options.ttl = flags.ttl;
  return options;
}

class Claim final : public FarmClaim {
 public:
  Claim(std::unique_ptr<farm::EtcdClient> etcd, std::unique_ptr<farm::DeviceLease> lease)
      : etcd_(std::move(etcd)), lease_(std::move(lease)) {}
  const std::string& device_id() const override { return lease_->device_id(); }
  const std::string& address() const override { return lease_->device().address(); }
  int64_t fencing_token() const override { return lease_->fencing_token(); }
  farm::DeviceLease& lease() { return *lease_; }

 private:
  std::unique_ptr<farm::EtcdClient> etcd_;  // outlives the lease (declared first)
  std::unique_ptr<farm::DeviceLease> lease_;
};

absl::StatusOr<std::unique_ptr<Claim>> Acquire(const FarmFlags& flags) {
  TETHER_ASSIGN_OR_RETURN(farm::AcquireOptions options, AcquireOptionsOf(flags));
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<farm::EtcdClient> etcd, OpenEtcd(flags));
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<farm::DeviceLease> lease,
                          farm::DeviceLease::Acquire(etcd.get(), std::move(options)));
  return std::make_unique<Claim>(std::move(etcd), std::move(lease));
}

// --- list --------------------------------------------------------------------

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string StateOf(const farm::DeviceState& d, int64_t seconds_left) {
  std::string state;
  if (d.holder) {
    state = absl::StrCat("held by ", d.holder->client(), " (token ", d.fencing_token,
                         seconds_left >= 0 ? absl::StrCat(", lease ", seconds_left, "s left") : "",
                         ")");
  } else if (!d.quarantine) {
    state = d.registered() ? "free" : "";
  }
  if (d.quarantine) {
    absl::StrAppend(&state, state.empty() ? "" : "; ", "quarantined by ", d.quarantine->by(), ": ",
                    d.quarantine->reason());
  }
  if (!d.registered()) absl::StrAppend(&state, state.empty() ? "" : "; ", "offline");
  return state;
}

std::string HealthOf(const fv1::DeviceRecord& r) {
  switch (r.health().state()) {
    case fv1::FarmHealth::STATE_OK:
      return absl::StrCat("ok (", r.health().probes(), " probes)");
    case fv1::FarmHealth::STATE_FAILING:
      return absl::StrCat("failing ", r.health().consecutive_failures(),
                          "x: ", r.health().last_error());
    default:
      return "not probed";
  }
}

int RunList(const std::vector<std::string>& args) {
  FarmFlags flags;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json") {
      json = true;
      continue;
    }
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf("usage: tether farm list --farm URL [--key KEY] [--json]\n%s", kFarmFlagsHelp);
      return 0;
    }
    int parsed = ParseFarmFlag("farm list", args, &i, &flags);
    if (parsed < 0) return 2;
    if (parsed == 0) {
      std::fprintf(stderr, "tether farm list: unexpected argument %s\n", args[i].c_str());
      return 2;
    }
  }
  auto etcd = OpenEtcd(flags);
  if (!etcd.ok()) return Fail("farm list", etcd.status());
  std::vector<std::string> keys;
  if (!flags.key.empty()) {
    if (absl::Status s = farm::ValidateName("--key", flags.key); !s.ok()) {
      return Fail("farm list", s);
    }
    keys.push_back(flags.key);
  } else {
    etcdserverpb::RangeRequest range;
    range.set_key(farm::kKeyRoot);
    range.set_range_end(farm::PrefixEnd(farm::kKeyRoot));
    range.set_keys_only(true);
    auto all = (*etcd)->Range(range);
    if (!all.ok()) return Fail("farm list", all.status());
    std::set<std::string> found;
    for (const mvccpb::KeyValue& kv : all->kvs()) {
      absl::string_view rest = absl::string_view(kv.key()).substr(std::strlen(farm::kKeyRoot));
      found.insert(std::string(rest.substr(0, rest.find('/'))));
    }
    keys.assign(found.begin(), found.end());
  }
  std::vector<std::string> json_keys;
  for (const std::string& key : keys) {
    auto snapshot = farm::ReadFarm(**etcd, key);
    if (!snapshot.ok()) return Fail("farm list", snapshot.status());
    std::vector<std::string> json_devices;
    if (!json) {
      std::printf("farm key %s (etcd revision %lld): %zu device(s), %zu waiter(s)\n", key.c_str(),
                  static_cast<long long>(snapshot->revision), snapshot->devices.size(),
                  snapshot->waiters.size());
      if (!snapshot->devices.empty()) {
        std::printf("  %-24s %-22s %-18s %s\n", "DEVICE", "ADDRESS", "HEALTH", "STATE / LABELS");
      }
    }
    for (const auto& [id, d] : snapshot->devices) {
      int64_t seconds_left = -1;
      if (d.holder && d.holder_lease != 0) {
        auto ttl = (*etcd)->LeaseTimeToLive(d.holder_lease);
        if (ttl.ok()) seconds_left = *ttl;
      }
      const std::string state = StateOf(d, seconds_left);
      std::vector<std::string> labels;
      if (d.record) {
        for (const auto& [k, v] : d.record->labels()) labels.push_back(absl::StrCat(k, "=", v));
        std::sort(labels.begin(), labels.end());
      }
      if (json) {
        std::string entry = absl::StrCat("{\"id\": ", JsonString(id), ", \"state\": ",
                                         JsonString(d.quarantine ? "quarantined"
                                                    : d.holder   ? "held"
                                                    : d.record   ? "free"
                                                                 : "offline"),
                                         ", \"registered\": ", d.registered() ? "true" : "false",
                                         ", \"summary\": ", JsonString(state));
        if (d.record) absl::StrAppend(&entry, ", \"record\": ", farm::ToJson(*d.record));
        if (d.holder) {
          absl::StrAppend(&entry, ", \"holder\": ", farm::ToJson(*d.holder),
                          ", \"fencing_token\": ", d.fencing_token,
                          ", \"lease_seconds_left\": ", seconds_left);
        }
        if (d.quarantine)
          absl::StrAppend(&entry, ", \"quarantine\": ", farm::ToJson(*d.quarantine));
        json_devices.push_back(entry + "}");
        continue;
      }
      std::printf("  %-24s %-22s %-18s %s\n", id.c_str(),
                  d.record ? d.record->address().c_str() : "-",
                  d.record ? HealthOf(*d.record).c_str() : "-", state.c_str());
      if (d.record) {
        std::vector<std::string> devices;
        for (const fv1::FarmDevice& device : d.record->devices()) devices.push_back(device.name());
        std::printf("  %-24s %s %s, %s; devices %s%s%s\n", "", d.record->target().triple().c_str(),
                    d.record->target().cpu().c_str(),
                    absl::StrCat("tetherd ", d.record->daemon_version()).c_str(),
                    absl::StrJoin(devices, " ").c_str(), labels.empty() ? "" : "; labels ",
                    absl::StrJoin(labels, " ").c_str());
      }
    }
    std::vector<std::string> json_waiters;
    for (const farm::Waiter& w : snapshot->waiters) {
      if (json) {
        json_waiters.push_back(farm::ToJson(w.record));
      } else {
        std::printf("  waiting: %s (priority %d%s%s)\n", w.record.client().c_str(),
                    w.record.priority(), w.where.empty() ? "" : ", where ",
                    absl::StrJoin(w.record.where(), ",").c_str());
      }
    }
    if (json) {
      json_keys.push_back(absl::StrCat("{\"key\": ", JsonString(key),
                                       ", \"revision\": ", snapshot->revision, ", \"devices\": [",
                                       absl::StrJoin(json_devices, ", "), "], \"waiters\": [",
                                       absl::StrJoin(json_waiters, ", "), "]}"));
    }
  }
  if (json) {
    std::printf("{\"keys\": [%s]}\n", absl::StrJoin(json_keys, ", ").c_str());
  } else if (keys.empty()) {
    std::printf("no farm key has devices at %s\n", (*etcd)->endpoints().c_str());
  }
  return 0;
}

// --- acquire -----------------------------------------------------------------

// Holds `claim` until a stop signal, or runs `command` with the device in
// its environment and returns its exit code. The stop signals are blocked
// (by the caller, before any thread started) and waited for here.
int Hold(Claim& claim, const std::vector<std::string>& command, const sigset_t& signals) {
  pid_t child = -1;
  if (!command.empty()) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (absl::StartsWith(*e, "TETHER_REMOTE=") || absl::StartsWith(*e, "TETHER_FARM_DEVICE=") ||
          absl::StartsWith(*e, "TETHER_FENCING_TOKEN=")) {
        continue;
      }
      env_strings.push_back(*e);
    }
    env_strings.push_back(absl::StrCat("TETHER_FARM_DEVICE=", claim.device_id()));
    env_strings.push_back(absl::StrCat("TETHER_REMOTE=", claim.address()));
    env_strings.push_back(absl::StrCat("TETHER_FENCING_TOKEN=", claim.fencing_token()));
    std::vector<char*> env;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::vector<std::string> argv_strings = command;
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawnp(&child, argv[0], nullptr, &attr, argv.data(), env.data());
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      std::fprintf(stderr, "tether farm acquire: cannot run %s: %s\n", command[0].c_str(),
                   std::strerror(rc));
      return 127;
    }
  }
  bool warned = false;
  for (;;) {
    const struct timespec tick = {0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig > 0) {
      if (child < 0) return 0;  // released by the caller
      ::kill(child, sig);       // the command decides; its end releases the device
    }
    if (child > 0) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      }
    }
    if (absl::Status held = claim.lease().status(); !held.ok() && !warned) {
      warned = true;
      std::fprintf(stderr,
                   "tether farm acquire: lost farm device %s: %s (the daemon now refuses "
                   "fencing token %lld)\n",
                   claim.device_id().c_str(), std::string(held.message()).c_str(),
                   static_cast<long long>(claim.fencing_token()));
      if (child < 0) return 1;
    }
  }
}

int RunAcquire(const std::vector<std::string>& args) {
  FarmFlags flags;
  std::vector<std::string> command;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      if (command.empty()) {
        std::fprintf(stderr, "tether farm acquire: nothing to run after --\n");
        return 2;
      }
      break;
    }
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf(
          "usage: tether farm acquire --farm URL --key KEY [--where A=V ...] [--priority N]\n"
          "           [--wait DURATION] [-- COMMAND ARGS...]\n"
          "Takes a free device (waiting in the key's priority queue), prints\n"
          "TETHER_FARM_DEVICE=, TETHER_REMOTE= and TETHER_FENCING_TOKEN= lines, and holds it\n"
          "(renewing its lease) until SIGINT/SIGTERM/SIGHUP, or runs COMMAND with those in\n"
          "its environment and releases the device when it ends (exiting with its code).\n"
          "Pass the token to run/bench/profile: --remote $TETHER_REMOTE --fencing-token\n"
          "$TETHER_FENCING_TOKEN.\n%s",
          kFarmFlagsHelp);
      return 0;
    }
    int parsed = ParseFarmFlag("farm acquire", args, &i, &flags);
    if (parsed < 0) return 2;
    if (parsed == 0) {
      std::fprintf(stderr, "tether farm acquire: unexpected argument %s\n", args[i].c_str());
      return 2;
    }
  }
  // Blocked before any thread starts, so only the wait below takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto claim = Acquire(flags);
  if (!claim.ok()) return Fail("farm acquire", claim.status());
  std::printf("TETHER_FARM_DEVICE=%s\nTETHER_REMOTE=%s\nTETHER_FENCING_TOKEN=%lld\n",
              (*claim)->device_id().c_str(), (*claim)->address().c_str(),
              static_cast<long long>((*claim)->fencing_token()));
  std::fflush(stdout);
  const int rc = Hold(**claim, command, signals);
  if (absl::Status released = (*claim)->lease().Release(); !released.ok()) {
    std::fprintf(stderr,
                 "tether farm acquire: releasing %s: %s (it is freed when the lease expires)\n",
                 (*claim)->device_id().c_str(), std::string(released.message()).c_str());
  }
  return rc;
}

// --- quarantine / release ----------------------------------------------------

int RunQuarantine(const std::vector<std::string>& args, bool quarantine) {
  const char* name = quarantine ? "farm quarantine" : "farm release";
  FarmFlags flags;
  std::string device;
  std::string reason = "quarantined by an operator";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf("usage: tether %s --farm URL --key KEY DEVICE%s\n%s", name,
                  quarantine ? " [--reason TEXT]" : "", kFarmFlagsHelp);
      return 0;
    }
    if (quarantine && args[i] == "--reason" && i + 1 < args.size()) {
      reason = args[++i];
      continue;
    }
    int parsed = ParseFarmFlag(name, args, &i, &flags);
    if (parsed < 0) return 2;
    if (parsed == 0 && device.empty() && !absl::StartsWith(args[i], "-")) {
      device = args[i];
    } else if (parsed == 0) {
      std::fprintf(stderr, "tether %s: unexpected argument %s\n", name, args[i].c_str());
      return 2;
    }
  }
  if (device.empty() || flags.key.empty()) {
    std::fprintf(stderr, "usage: tether %s --farm URL --key KEY DEVICE\n", name);
    return 2;
  }
  for (const auto& [what, value] :
       {std::pair<const char*, const std::string&>{"--key", flags.key}, {"device", device}}) {
    if (absl::Status s = farm::ValidateName(what, value); !s.ok()) return Fail(name, s);
  }
  auto etcd = OpenEtcd(flags);
  if (!etcd.ok()) return Fail(name, etcd.status());
  const std::string key = farm::QuarantineKey(flags.key, device);
  if (quarantine) {
    fv1::QuarantineRecord record;
    record.set_by("operator");
    record.set_reason(reason);
    record.set_since_unix_ms(absl::ToUnixMillis(absl::Now()));
    etcdserverpb::PutRequest put;
    put.set_key(key);
    put.set_value(farm::ToJson(record));  // no lease: it stays until released
    auto done = (*etcd)->Put(put);
    if (!done.ok()) return Fail(name, done.status());
    std::printf("quarantined %s of farm key %s: not handed out until `tether farm release`\n",
                device.c_str(), flags.key.c_str());
    return 0;
  }
  etcdserverpb::DeleteRangeRequest del;
  del.set_key(key);
  auto done = (*etcd)->Delete(del);
  if (!done.ok()) return Fail(name, done.status());
  std::printf(done->deleted() > 0 ? "released %s of farm key %s from quarantine\n"
                                  : "%s of farm key %s was not quarantined\n",
              device.c_str(), flags.key.c_str());
  return 0;
}

// --- probe --------------------------------------------------------------------

// `tether farm probe`: the farm's prober, from outside the daemons. Each
// round reads the key and probes every registered device nobody holds at the
// address its record advertises (server::ProbeDaemon: gRPC health, then the
// built-in canary run through a session, as a client runs it) -- what a
// daemon's probe of itself over its private socket cannot see: an address
// that does not reach it, a listener others cannot use. A device failing
// --failures probes in a row is quarantined `by: prober` (no lease: it
// stays if the prober stops); a device that passes again has the prober's
// quarantine lifted, never another's.
int RunProbe(const std::vector<std::string>& args) {
  constexpr char kName[] = "farm probe";
  FarmFlags flags;
  int rounds = 1, failures_to_quarantine = 3;
  double interval_s = 30;
  std::string token_file, tls_ca, tls_cert, tls_key;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: tether farm probe --farm URL --key KEY [--rounds N] [--interval SECS]\n"
          "           [--failures N] [--token-file FILE] [--tls-ca PEM [--tls-cert PEM "
          "--tls-key PEM]]\n"
          "Probes every registered device of KEY that nobody holds, at its advertised address:\n"
          "gRPC health, then a canary model run through a session. A device that fails\n"
          "--failures probes in a row (default 3) is quarantined by the prober; one that\n"
          "passes again is released from the prober's quarantine. --rounds N (default 1; 0:\n"
          "until stopped) rounds, --interval SECS apart (default 30). Exit code: 0 when the\n"
          "last round's probes all passed, 1 when one failed.\n"
          "  --token-file FILE      the daemons' bearer token\n"
          "  --tls-ca PEM           the CA of the daemons' certificates (for daemons serving "
          "TLS)\n%s",
          kFarmFlagsHelp);
      return 0;
    }
    auto value = [&]() -> const std::string* {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tether %s: %s needs a value\n", kName, a.c_str());
        return nullptr;
      }
      return &args[++i];
    };
    if (a == "--rounds" || a == "--failures" || a == "--interval") {
      const std::string* v = value();
      if (v == nullptr) return 2;
      int n = 0;
      double d = 0;
      const bool ok = a == "--interval"
                          ? absl::SimpleAtod(*v, &d) && d >= 0
                          : absl::SimpleAtoi(*v, &n) && n >= (a == "--rounds" ? 0 : 1);
      if (!ok) {
        std::fprintf(stderr, "tether %s: bad %s %s\n", kName, a.c_str(), v->c_str());
        return 2;
      }
      if (a == "--rounds") rounds = n;
      if (a == "--failures") failures_to_quarantine = n;
      if (a == "--interval") interval_s = d;
      continue;
    }
    if (a == "--token-file" || a == "--tls-ca" || a == "--tls-cert" || a == "--tls-key") {
      const std::string* v = value();
      if (v == nullptr) return 2;
      (a == "--token-file" ? token_file
       : a == "--tls-ca"   ? tls_ca
       : a == "--tls-cert" ? tls_cert
                           : tls_key) = *v;
      continue;
    }
    int parsed = ParseFarmFlag(kName, args, &i, &flags);
    if (parsed < 0) return 2;
    if (parsed == 0) {
      std::fprintf(stderr, "tether %s: unexpected argument %s\n", kName, a.c_str());
      return 2;
    }
  }
  if (flags.key.empty()) {
    std::fprintf(stderr, "tether %s: --key KEY (the farm key) is required\n", kName);
    return 2;
  }
  server::ProbeOptions base;
  base.client_name = "tether-farm-prober";
  base.expect_builtin_output = true;
  base.deadline = absl::Seconds(10);
  auto read = [&](const std::string& path, const char* what, std::string* out) -> absl::Status {
    if (path.empty()) return absl::OkStatus();
    absl::StatusOr<std::string> text = ReadFileToString(path);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat(what, " ", path, ": ", text.status().message()));
    }
    *out = *text;
    return absl::OkStatus();
  };
  std::string token;
  for (absl::Status s :
       {read(token_file, "token file", &token), read(tls_ca, "CA file", &base.tls_ca_pem),
        read(tls_cert, "client certificate", &base.tls_cert_pem),
        read(tls_key, "client key", &base.tls_key_pem)}) {
    if (!s.ok()) return Fail(kName, s);
  }
  base.auth_token = std::string(absl::StripAsciiWhitespace(token));
  absl::StatusOr<std::string> canary = server::BuildCanaryExecutable();
  if (!canary.ok()) return Fail(kName, canary.status());
  base.canary = *canary;
  auto etcd = OpenEtcd(flags);
  if (!etcd.ok()) return Fail(kName, etcd.status());

  std::map<std::string, int> failed;  // consecutive failures, by device
  int rc = 0;
  for (int round = 0; rounds == 0 || round < rounds; ++round) {
    if (round > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
    }
    auto snapshot = farm::ReadFarm(**etcd, flags.key);
    if (!snapshot.ok()) return Fail(kName, snapshot.status());
    rc = 0;
    for (const auto& [id, device] : snapshot->devices) {
      if (!device.registered() || !device.record.has_value()) continue;
      if (device.held()) {
        std::printf("%s %s: held, not probed\n", id.c_str(), device.record->address().c_str());
        continue;
      }
      server::ProbeOptions probe = base;
      probe.target = device.record->address();
      probe.tls = device.record->tls();
      if (probe.tls && probe.tls_ca_pem.empty()) {
        std::printf("%s %s: serves TLS; give --tls-ca to probe it\n", id.c_str(),
                    probe.target.c_str());
        rc = 1;
        continue;
      }
      const absl::Time start = absl::Now();
      const absl::Status result = server::ProbeDaemon(probe);
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      const std::string qkey = farm::QuarantineKey(flags.key, id);
      if (result.ok()) {
        failed.erase(id);
        std::printf("%s %s: ok (%.0f ms)\n", id.c_str(), probe.target.c_str(), ms);
        if (device.quarantine.has_value() && device.quarantine->by() == "prober") {
          // Lifted only if it is still the prober's (an operator may have
          // replaced it since the snapshot).
          etcdserverpb::RangeRequest get;
          get.set_key(qkey);
          auto found = (*etcd)->Range(get);
          if (found.ok() && found->kvs_size() == 1) {
            fv1::QuarantineRecord current;
            if (farm::FromJson(found->kvs(0).value(), qkey, &current).ok() &&
                current.by() == "prober") {
              etcdserverpb::TxnRequest txn;
              etcdserverpb::Compare* same = txn.add_compare();
              same->set_key(qkey);
              same->set_target(etcdserverpb::Compare::MOD);
              same->set_result(etcdserverpb::Compare::EQUAL);
              same->set_mod_revision(found->kvs(0).mod_revision());
              txn.add_success()->mutable_request_delete_range()->set_key(qkey);
              auto done = (*etcd)->Txn(txn);
              if (done.ok() && done->succeeded()) {
                std::printf("%s: released from the prober's quarantine\n", id.c_str());
              }
            }
          }
        }
        continue;
      }
      rc = 1;
      const int n = ++failed[id];
      std::printf("%s %s: FAILED (%d of %d): %s\n", id.c_str(), probe.target.c_str(), n,
                  failures_to_quarantine, std::string(result.message()).c_str());
      if (n < failures_to_quarantine || device.quarantine.has_value()) continue;
      fv1::QuarantineRecord record;
      record.set_by("prober");
      record.set_reason(absl::StrCat(n, " failed probes from the prober at ", probe.target, ": ",
                                     result.message()));
      record.set_since_unix_ms(absl::ToUnixMillis(absl::Now()));
      // Only where no quarantine exists; no lease: it stays if the prober stops.
      auto done = (*etcd)->Txn(farm::PutIfAbsent(qkey, farm::ToJson(record)));
      if (!done.ok()) return Fail(kName, done.status());
      if (done->succeeded()) {
        std::printf("%s: quarantined by the prober\n", id.c_str());
      }
    }
    std::fflush(stdout);
  }
  return rc;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FarmClaim>> ClaimFarmDevice(const FarmFlags& flags) {
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Claim> claim, Acquire(flags));
  return std::unique_ptr<FarmClaim>(std::move(claim));
}

int RunFarm(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (sub == "list") return RunList(rest);
  if (sub == "acquire") return RunAcquire(rest);
  if (sub == "quarantine") return RunQuarantine(rest, true);
  if (sub == "release") return RunQuarantine(rest, false);
  if (sub == "probe") return RunProbe(rest);
  std::fprintf(sub == "--help" || sub == "-h" ? stdout : stderr,
               "usage: tether farm list|acquire|quarantine|release|probe --farm URL [--key KEY] "
               "...\n"
               "  list        devices, their state (free, held by whom and how long, "
               "quarantined),\n"
               "              health, labels and the waiting queue ([--json])\n"
               "  acquire     take a device (fair priority queue), print its fencing token\n"
               "  quarantine  keep a device from being handed out (DEVICE [--reason TEXT])\n"
               "  release     lift a device's quarantine (DEVICE)\n"
               "  probe       probe the free devices at their addresses; quarantine those that\n"
               "              keep failing, release those that pass again\n"
               "Run `tether farm <command> --help` for the options of one command.\n");
  return sub == "--help" || sub == "-h" ? 0 : 2;
}

}  // namespace tether::cli
