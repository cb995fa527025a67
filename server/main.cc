// tetherd: the Tether daemon. Parses flags into DaemonOptions, refuses to
// serve a non-loopback TCP address without client authentication (a bearer
// token or client certificates) unless --insecure is given, writes
// --port-file once bound, and on SIGTERM or SIGINT drains in-flight calls,
// closes sessions and exits 0 (exits 1 when the drain outlives its limit).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/codec/auth_token.h"
#include "runtime/device/device_api.h"
#include "server/daemon.h"
#include "server/event_log.h"
#include "server/farm_member.h"
#include "server/scratch_dir.h"
#include "server/session_worker.h"

namespace {

constexpr char kUsage[] =
    "usage: tetherd [flags]\n"
    "  --listen ADDR                 address to serve (repeatable; default 127.0.0.1:9190;\n"
    "                                host:0 picks a free port; unix:PATH for a socket)\n"
    "  --port-file PATH              write the bound TCP port here once listening\n"
    "  --store-dir DIR               module store directory (default: a temporary one)\n"
    "  --store-quota BYTES           module store quota, suffixes K/M/G (default 4G)\n"
    "  --max-sessions N              concurrent sessions (default 64)\n"
    "  --session-idle-timeout SECS   close sessions idle this long (default 600)\n"
    "  --max-session-lease SECS      longest idle lease a client may ask for (default 86400)\n"
    "  --max-session-objects N       VMs, tensors and handles one session may hold (default "
    "65536)\n"
    "  --max-session-bytes BYTES     bytes of tensors one session may hold, suffixes K/M/G\n"
    "                                (default: no limit)\n"
    "  --tls-cert PEM                server certificate (chain); enables TLS on TCP addresses\n"
    "  --tls-key PEM                 the certificate's private key (with --tls-cert)\n"
    "  --tls-client-ca PEM           require client certificates signed by this CA (mutual TLS)\n"
    "  --auth-token-file PATH        require \"authorization: Bearer <token>\" on every call\n"
    "                                (the file's content, trimmed; health checks exempt;\n"
    "                                the file must not be readable by other users). Without\n"
    "                                it a loopback daemon uses its user's default token\n"
    "                                ($TETHER_TOKEN_FILE, else ~/.config/tether/token,\n"
    "                                created 0600 at first start)\n"
    "  --insecure                    serve without client authentication: no default token,\n"
    "                                and non-loopback addresses allowed (anyone reaching\n"
    "                                them runs code as this user)\n"
    "  --reflection                  serve gRPC server reflection (for grpcurl and friends)\n"
    "  --no-direct-channel           keep same-host VM calls on gRPC (no loopback direct channel)\n"
    "  --direct-spin-us N            direct channel: poll N us for the next request before\n"
    "                                sleeping (default 30; 0: never poll)\n"
    "  --isolate-sessions            run every session in its own worker process, so a crash\n"
    "                                or a sticky GPU fault ends only that session (clients\n"
    "                                may ask for it per session without this flag)\n"
    "  --concurrent-timing           let measurements (time_evaluator, profile) run beside\n"
    "                                other sessions' calls instead of exclusively\n"
    "  --timing-lock PATH            the exclusive-timing lock file, shared by every daemon\n"
    "                                that names it (default STORE-DIR/timing.lock)\n"
    "  --max-exclusive-seconds SECS  longest one measurement may hold exclusive timing;\n"
    "                                past it the measurement fails (default 600)\n"
    "  --max-inline-bytes BYTES      largest tensor sent inline in a message (default 1M)\n"
    "  --chunk-bytes BYTES           tensor and module stream chunk (default 1M)\n"
    "  --stream-idle-seconds SECS    cancel a module or tensor stream this long without\n"
    "                                progress (default 60)\n"
    "  --metrics-listen ADDR         serve Prometheus metrics over HTTP at ADDR/metrics\n"
    "                                (127.0.0.1:9464; port 0 picks a free one; no\n"
    "                                authentication: keep it on loopback or a management\n"
    "                                network)\n"
    "\n"
    "device farm (docs/design/farm.md):\n"
    "  --farm etcd://HOST:PORT[,...]  register in this etcd (etcds:// for TLS) and refuse\n"
    "                                work whose fencing token is not the current holder's\n"
    "  --farm-key KEY                the farm key (pool) to register under (with --farm)\n"
    "  --farm-id ID                  this device's id in the farm (default: its address)\n"
    "  --farm-address HOST:PORT      the address clients are given (default: the first TCP\n"
    "                                --listen address, with this host's name for 0.0.0.0)\n"
    "  --label KEY=VALUE             a label of the record, for `--where` (repeatable)\n"
    "  --farm-ttl SECS               the record's etcd lease TTL (default 10)\n"
    "  --farm-probe-interval SECS    health probe period while not held (default 30; 0: none)\n"
    "  --farm-quarantine-after N     quarantine after N failed probes in a row (default 3)\n"
    "  --farm-crash-quarantine N     quarantine after N runs that did not stop cleanly within\n"
    "                                --farm-crash-window (default 3; 0: crashes not counted)\n"
    "  --farm-crash-window SECS      the window crashes are counted in (default 600)\n"
    "  --farm-canary FILE            the probe's canary executable (its main takes no\n"
    "                                arguments; read at every probe; default: built in)\n"
    "  --farm-tls-ca PEM             the CA of etcd's certificate (enables TLS)\n"
    "  --farm-tls-cert PEM --farm-tls-key PEM  a client certificate for etcd (mutual TLS)\n"
    "  --farm-user NAME --farm-password-file PATH  etcd user authentication\n"
    "  --help                        show this help\n";

bool ParseBytes(std::string text, uint64_t* out) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K':
        scale = uint64_t{1} << 10;
        break;
      case 'M':
        scale = uint64_t{1} << 20;
        break;
      case 'G':
        scale = uint64_t{1} << 30;
        break;
      default:
        break;
    }
    if (scale != 1) text.pop_back();
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n > UINT64_MAX / scale) return false;
  *out = n * scale;
  return true;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "tetherd: %s\n", message.c_str());
  return 2;
}

bool ParseSeconds(const std::string& text, double low, double high, absl::Duration* out) {
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !(seconds >= low) || seconds > high) return false;
  *out = absl::Seconds(seconds);
  return true;
}

// The address a farm record gives clients: the first TCP listen address,
// its port the bound one, this host's name for a wildcard host.
std::string AdvertisedAddress(const std::vector<std::string>& listen, int port) {
  for (const std::string& address : listen) {
    if (absl::StartsWith(address, "unix:")) continue;
    std::string host = address.substr(0, address.rfind(':'));
    if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") {
      char name[256] = {};
      ::gethostname(name, sizeof(name) - 1);
      host = name;
    }
    return absl::StrCat(host, ":", port);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  tether::server::DaemonOptions options;
  options.listen.clear();
  // Workers of isolated sessions run this very binary.
  options.worker_program = "/proc/self/exe";
  int lifeline_fd = -1;
  std::string port_file;
  bool insecure = false;
  tether::server::FarmMemberOptions farm;
  bool farm_flags = false;  // any --farm-* or --label flag
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    if (size_t eq = flag.find('='); eq != std::string::npos && absl::StartsWith(flag, "--")) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag != "--help" && flag != "-h" && flag != "--insecure" && flag != "--reflection" &&
               flag != "--no-direct-channel" && flag != "--isolate-sessions" &&
               flag != "--concurrent-timing") {
      if (i + 1 >= argc) return Fail(absl::StrCat(flag, " needs a value\n", kUsage));
      value = argv[++i];
    }
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (flag == "--insecure") {
      insecure = true;
    } else if (flag == "--reflection") {
      options.enable_reflection = true;
    } else if (flag == "--no-direct-channel") {
      options.direct_channel = false;
    } else if (flag == "--isolate-sessions") {
      options.isolate_sessions = true;
    } else if (flag == "--concurrent-timing") {
      options.exclusive_timing = false;
    } else if (flag == "--timing-lock") {
      options.timing_lock = value;
    } else if (flag == "--worker-import-dir") {
      options.store_import_dir = value;  // internal, with --worker-lifeline-fd
    } else if (flag == "--worker-lifeline-fd") {
      // Internal: how a daemon starts the worker of an isolated session.
      if (!absl::SimpleAtoi(value, &lifeline_fd) || lifeline_fd < 3) {
        return Fail(absl::StrCat("bad ", flag));
      }
    } else if (flag == "--max-inline-bytes" || flag == "--chunk-bytes") {
      uint64_t* out =
          flag == "--chunk-bytes" ? &options.chunk_bytes : &options.max_inline_tensor_bytes;
      if (!ParseBytes(value, out) || *out == 0 || *out > (uint64_t{256} << 20)) {
        return Fail(absl::StrCat("bad ", flag, " \"", value, "\" (1 byte to 256M)"));
      }
    } else if (flag == "--direct-spin-us") {
      int64_t us = 0;
      if (!absl::SimpleAtoi(value, &us) || us < 0 || us > 1000000) {
        return Fail(absl::StrCat("--direct-spin-us wants microseconds from 0 to 1000000, got '",
                                 value, "'"));
      }
      options.direct_spin = absl::Microseconds(us);
    } else if (flag == "--metrics-listen") {
      if (value.empty()) return Fail("--metrics-listen needs an address");
      options.metrics_listen = value;
    } else if (flag == "--listen") {
      options.listen.push_back(value);
    } else if (flag == "--tls-cert") {
      options.tls_cert_file = value;
    } else if (flag == "--tls-key") {
      options.tls_key_file = value;
    } else if (flag == "--tls-client-ca") {
      options.tls_client_ca_file = value;
    } else if (flag == "--auth-token-file") {
      absl::StatusOr<std::string> token = tether::rpc::ReadTokenFile(value, true);
      if (!token.ok()) return Fail(absl::StrCat("--auth-token-file: ", token.status().message()));
      options.auth_token = std::move(*token);
    } else if (flag == "--port-file") {
      port_file = value;
    } else if (flag == "--store-dir") {
      options.store_dir = value;
    } else if (flag == "--store-quota") {
      if (!ParseBytes(value, &options.store_quota_bytes)) {
        return Fail(absl::StrCat("bad --store-quota \"", value, "\""));
      }
    } else if (flag == "--max-sessions") {
      if (!absl::SimpleAtoi(value, &options.max_sessions) || options.max_sessions == 0) {
        return Fail(absl::StrCat("bad --max-sessions \"", value, "\""));
      }
    } else if (flag == "--max-exclusive-seconds") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) || seconds > 86400) {
        return Fail(absl::StrCat("bad --max-exclusive-seconds \"", value,
                                 "\" (more than 0, at most 86400)"));
      }
      options.max_exclusive_hold = absl::Seconds(seconds);
    } else if (flag == "--stream-idle-seconds") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) || seconds > 86400) {
        return Fail(
            absl::StrCat("bad --stream-idle-seconds \"", value, "\" (more than 0, at most 86400)"));
      }
      options.stream_idle_timeout = absl::Seconds(seconds);
    } else if (flag == "--max-session-objects") {
      if (!absl::SimpleAtoi(value, &options.max_session_objects) ||
          options.max_session_objects == 0) {
        return Fail(absl::StrCat("bad --max-session-objects \"", value, "\""));
      }
    } else if (flag == "--max-session-bytes") {
      if (!ParseBytes(value, &options.max_session_bytes) || options.max_session_bytes == 0) {
        return Fail(absl::StrCat("bad --max-session-bytes \"", value, "\""));
      }
    } else if (flag == "--max-session-lease") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) || seconds > 30 * 86400) {
        return Fail(
            absl::StrCat("bad --max-session-lease \"", value, "\" (seconds, at most 30 days)"));
      }
      options.max_session_lease = absl::Seconds(seconds);
    } else if (flag == "--farm") {
      farm.url = value;
    } else if (absl::StartsWith(flag, "--farm-") || flag == "--label") {
      farm_flags = true;
      if (flag == "--farm-key") {
        farm.key = value;
      } else if (flag == "--farm-id") {
        farm.id = value;
      } else if (flag == "--farm-address") {
        farm.address = value;
      } else if (flag == "--label") {
        std::pair<std::string, std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
        if (kv.first.empty() || value.find('=') == std::string::npos) {
          return Fail(absl::StrCat("--label wants KEY=VALUE, got \"", value, "\""));
        }
        farm.labels[kv.first] = kv.second;
      } else if (flag == "--farm-ttl") {
        if (!ParseSeconds(value, 1, 3600, &farm.ttl)) {
          return Fail(absl::StrCat("bad --farm-ttl \"", value, "\" (seconds, 1 to 3600)"));
        }
      } else if (flag == "--farm-probe-interval") {
        if (!ParseSeconds(value, 0, 86400, &farm.probe_interval)) {
          return Fail(
              absl::StrCat("bad --farm-probe-interval \"", value, "\" (seconds, 0 to 86400)"));
        }
      } else if (flag == "--farm-quarantine-after") {
        if (!absl::SimpleAtoi(value, &farm.quarantine_after) || farm.quarantine_after < 1) {
          return Fail(absl::StrCat("bad --farm-quarantine-after \"", value, "\" (at least 1)"));
        }
      } else if (flag == "--farm-crash-quarantine") {
        if (!absl::SimpleAtoi(value, &farm.quarantine_after_crashes) ||
            farm.quarantine_after_crashes < 0) {
          return Fail(absl::StrCat("bad --farm-crash-quarantine \"", value, "\" (0 or more)"));
        }
      } else if (flag == "--farm-crash-window") {
        if (!ParseSeconds(value, 1, 7 * 86400, &farm.crash_window)) {
          return Fail(
              absl::StrCat("bad --farm-crash-window \"", value, "\" (seconds, 1 to 604800)"));
        }
      } else if (flag == "--farm-canary") {
        farm.canary_file = value;
      } else if (flag == "--farm-tls-ca") {
        farm.tls_ca = value;
      } else if (flag == "--farm-tls-cert") {
        farm.tls_cert = value;
      } else if (flag == "--farm-tls-key") {
        farm.tls_key = value;
      } else if (flag == "--farm-user") {
        farm.user = value;
      } else if (flag == "--farm-password-file") {
        farm.password_file = value;
      } else {
        return Fail(absl::StrCat("unknown flag ", flag, "\n", kUsage));
      }
    } else if (flag == "--session-idle-timeout") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0)) {
        return Fail(absl::StrCat("bad --session-idle-timeout \"", value, "\""));
      }
      options.session_idle_timeout = absl::Seconds(seconds);
    } else {
      return Fail(absl::StrCat("unknown flag ", flag, "\n", kUsage));
    }
  }
  if (lifeline_fd >= 0) {
    // A worker: one session, named in the environment; it exits when its
    // daemon closes the lifeline (or dies).
    const char* session = std::getenv("TETHER_WORKER_SESSION");
    if (session == nullptr || options.listen.size() != 1 ||
        !absl::StartsWith(options.listen[0], "unix:")) {
      return Fail("--worker-lifeline-fd is for tetherd's own session workers");
    }
    options.worker_session_id = session;
    unsetenv("TETHER_WORKER_SESSION");
    options.log_events = false;
    options.isolate_sessions = false;
    std::thread([lifeline_fd] {
      char byte;
      for (;;) {
        ssize_t n = ::read(lifeline_fd, &byte, 1);
        if (n == 0 || (n < 0 && errno != EINTR)) break;  // closed: the daemon is gone
      }
      ::_exit(0);
    }).detach();
  } else if (options.listen.empty()) {
    options.listen.push_back("127.0.0.1:9190");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Fail("--tls-cert and --tls-key must be given together");
  }
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty()) {
    return Fail("--tls-client-ca needs --tls-cert and --tls-key");
  }
  // Who may call is the only boundary (docs/design/security.md): a network
  // listener needs client authentication — a token or client certificates.
  // Server-only TLS protects the transport but admits anyone.
  const bool authenticated = !options.auth_token.empty() || !options.tls_client_ca_file.empty();
  for (const std::string& address : options.listen) {
    if (insecure || tether::rpc::IsLocalAddress(address)) continue;
    if (!authenticated) {
      return Fail(absl::StrCat(
          "refusing to serve ", address, " without client authentication",
          options.tls_cert_file.empty() ? ""
                                        : " (TLS alone protects the transport; it does not say "
                                          "who the client is)",
          "; pass --auth-token-file or --tls-client-ca, or --insecure to let anyone who reaches "
          "the address run code as this user"));
    }
    if (options.tls_cert_file.empty()) {
      tether::server::EventLine()
          .Add("event", "warning")
          .Quote("message", absl::StrCat(address,
                                         " takes the bearer token in plaintext; "
                                         "add --tls-cert/--tls-key"))
          .Write();
    }
  }

  // Local users (docs/design/security.md): a daemon on loopback or unix:
  // addresses, given no credential, requires its user's default token, which
  // the tether CLI of the same user sends by default and no other user can
  // read. --insecure opts out.
  std::string default_token_file;
  if (lifeline_fd < 0 && !insecure && options.auth_token.empty() &&
      options.tls_client_ca_file.empty()) {
    default_token_file = tether::rpc::DefaultTokenPath();
    absl::StatusOr<std::string> token = tether::rpc::LoadOrCreateToken(default_token_file);
    if (!token.ok()) {
      return Fail(absl::StrCat("default token: ", token.status().message(),
                               "; pass --auth-token-file, or --insecure to serve without one"));
    }
    options.auth_token = std::move(*token);
  }

  // The device farm: the membership is the daemon's fence from its first
  // call; the daemon describes itself to it over a private unix socket,
  // which the probes use too.
  std::unique_ptr<tether::server::FarmMember> farm_member;
  tether::server::ScratchDir farm_dir;
  if (farm.url.empty() && farm_flags) {
    return Fail("--farm-key, --farm-* and --label need --farm etcd://HOST:PORT");
  }
  if (!farm.url.empty()) {
    if (lifeline_fd >= 0) return Fail("a session worker does not join a farm");
    if (farm.key.empty()) return Fail("--farm needs --farm-key KEY (the pool to register in)");
    absl::StatusOr<std::unique_ptr<tether::server::FarmMember>> member =
        tether::server::FarmMember::Create(farm);
    if (!member.ok()) return Fail(std::string(member.status().message()));
    farm_member = std::move(*member);
    const std::string temp = std::filesystem::temp_directory_path().string();
    tether::server::SweepAbandonedScratchDirs(temp, "tetherd-farm-");
    absl::StatusOr<tether::server::ScratchDir> dir =
        tether::server::ScratchDir::Create(temp, "tetherd-farm-");
    if (!dir.ok()) return Fail(std::string(dir.status().message()));
    farm_dir = std::move(*dir);
    options.listen.push_back(absl::StrCat("unix:", farm_dir.path(), "/probe.sock"));
    options.fence = farm_member.get();
  }

  // Block the stop signals before any thread starts, then wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<tether::server::Daemon>> daemon =
      tether::server::Daemon::Start(options);
  if (!daemon.ok()) {
    std::fprintf(stderr, "tetherd: %s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  // The membership reports into the daemon's metrics: on every way out it
  // leaves the farm before the daemon goes.
  absl::Cleanup leave_farm = [&farm_member] {
    if (farm_member) farm_member->Leave();
  };
  if (lifeline_fd >= 0) {
    // A worker whose GPU context a kernel poisoned ends, as a stop signal
    // would end it: the call in flight is answered, then the process exits
    // with kWorkerExitStickyFault (its daemon tells the session so).
    std::thread([] {
      tether::AwaitStickyFault().IgnoreError();  // the worker ends whichever it was
      ::kill(::getpid(), SIGTERM);
    }).detach();
  }
  if (!default_token_file.empty()) {
    tether::server::EventLine()
        .Add("event", "auth")
        .Add("token-file", default_token_file)
        .Quote("note", "clients of this user send it")
        .Write();
  }
  if (farm_member) {
    tether::server::FarmDaemonFacts facts;
    facts.address =
        farm.address.empty() ? AdvertisedAddress(options.listen, (*daemon)->port()) : farm.address;
    facts.probe_target = absl::StrCat("unix:", farm_dir.path(), "/probe.sock");
    facts.auth_token = options.auth_token;
    facts.tls = !options.tls_cert_file.empty();
    facts.metrics = (*daemon)->metrics();
    if (facts.address.empty()) return Fail("--farm needs a TCP --listen address or --farm-address");
    if (absl::Status s = farm_member->Start(facts); !s.ok()) {
      std::fprintf(stderr, "tetherd: --farm: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  if (!port_file.empty()) {
    // Never through a link planted at the temporary name.
    std::string temp = port_file + ".tmp";
    const std::string text = absl::StrCat((*daemon)->port(), "\n");
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    bool written =
        fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (fd >= 0) written = ::close(fd) == 0 && written;
    if (!written || std::rename(temp.c_str(), port_file.c_str()) != 0) {
      return Fail(absl::StrCat("cannot write --port-file ", port_file));
    }
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  {
    tether::server::EventLine line;
    line.Add("event", "shutdown").Add("signal", signal_number);
    // A worker stopping itself after a GPU fault says which.
    if (absl::Status fault = tether::FirstStickyFault(); lifeline_fd >= 0 && !fault.ok()) {
      line.Quote("fault", fault.message());
    }
    line.Write();
  }
  // The drain has a hard stop: a kernel stuck in native code cannot be
  // interrupted, so past the grace period (or at a second signal) the
  // process exits without waiting for it.
  const absl::Duration grace = absl::Seconds(10);
  std::thread([signals, grace] {
    const absl::Time give_up = absl::Now() + grace + absl::Seconds(5);
    int again = -1;
    for (absl::Duration left = give_up - absl::Now(); left > absl::ZeroDuration();
         left = give_up - absl::Now()) {
      const struct timespec limit = absl::ToTimespec(left);
      again = sigtimedwait(&signals, nullptr, &limit);
      if (again > 0 || errno != EINTR) break;  // a signal, or the time is up (EAGAIN)
    }
    tether::server::EventLine()
        .Add("event", "forced-exit")
        .Add("reason", again > 0 ? "second-signal" : "drain-timeout")
        .Write();
    ::_exit(1);
  }).detach();
  // Out of the farm first, so nobody is handed a draining daemon.
  if (farm_member) farm_member->Leave();
  (*daemon)->Shutdown(grace);
  daemon->reset();
  farm_member.reset();
  if (lifeline_fd >= 0 && !tether::FirstStickyFault().ok()) {
    return tether::server::kWorkerExitStickyFault;
  }
  return 0;
}
