// Daemon: tetherd as a library — a gRPC server hosting sessions, the module
// store, remote tensors and VMs. The `tetherd` binary parses flags into
// DaemonOptions and runs one; tests and the CLI's embedded mode start one on
// 127.0.0.1:0 in-process and talk to it over real gRPC.
#ifndef TETHER_SERVER_DAEMON_H_
#define TETHER_SERVER_DAEMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/metrics.h"
#include "server/session_fence.h"

namespace tether::server {

struct DaemonOptions {
  // Addresses to listen on: "127.0.0.1:9190", "127.0.0.1:0" (a free port),
  // "unix:/path/to.sock". At least one.
  std::vector<std::string> listen = {"127.0.0.1:9190"};
  // Where uploaded modules are kept (created if missing); empty: a fresh
  // temporary directory removed at shutdown.
  std::string store_dir;
  uint64_t store_quota_bytes = uint64_t{4} << 30;
  uint32_t max_sessions = 64;
  absl::Duration session_idle_timeout = absl::Minutes(10);
  // The longest idle lease a client may ask for (OpenSession's
  // idle_timeout_ms is clamped to it; never below session_idle_timeout).
  absl::Duration max_session_lease = absl::Hours(24);
  // The most VMs, tensors and object handles one session may hold at once.
  size_t max_session_objects = 65536;
  // The most bytes of tensors one session may hold (0: no limit).
  uint64_t max_session_bytes = 0;
  uint64_t max_inline_tensor_bytes = uint64_t{1} << 20;
  uint64_t chunk_bytes = uint64_t{1} << 20;
  // One structured line per event (listening, session open/close, eviction)
  // on stderr. The CLI's embedded daemon turns it off.
  bool log_events = true;
  // Transport security (PEM file paths). tls_cert_file and tls_key_file
  // together enable TLS on every TCP listen address; tls_client_ca_file
  // additionally requires and verifies client certificates (mutual TLS).
  // unix: addresses stay plaintext (same host) but still check the token.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // When non-empty, every call except the standard health service must carry
  // metadata "authorization: Bearer <auth_token>" (compared in constant time);
  // otherwise it fails with UNAUTHENTICATED.
  std::string auth_token;
  // Serve the gRPC server reflection service (grpc.reflection.v1alpha), so
  // generic tools can list and call Tether's methods. Off by default. It
  // answers without the token (it describes only the public schema); the
  // Tether methods it leads to still check it.
  bool enable_reflection = false;
  // Offer same-host clients the direct channel: VM calls as length-prefixed
  // frames on a loopback socket (docs/design/rpc-protocol.md), a fraction of
  // a gRPC stream's latency. Off: every call stays on gRPC.
  bool direct_channel = true;
  // How long a direct connection polls for the next request after a reply
  // before its thread sleeps (DirectChannelOptions::spin); zero: never polls.
  absl::Duration direct_spin = absl::Microseconds(30);
  // Session isolation (docs/design/rpc-protocol.md, "Isolated sessions"):
  // a session that asks for it — every session when isolate_sessions is set —
  // runs in its own worker process, started from worker_program (a tetherd;
  // the binary passes "/proc/self/exe"), so a crash or a sticky device fault
  // ends only that session. Without a worker_program sessions cannot be
  // isolated (isolate_sessions is then INVALID_ARGUMENT).
  bool isolate_sessions = false;
  std::string worker_program;
  // Worker mode (tetherd --worker-lifeline-fd): the daemon serves only the
  // session worker_session_id, opened at start and never expiring (its
  // parent daemon keeps the lease).
  std::string worker_session_id;
  // Modules missing from the store are imported from this directory on
  // first use (a session worker reads its daemon's store).
  std::string store_import_dir;
  // Exclusive timing (docs/design/rpc-protocol.md, "Exclusive timing"): a
  // measurement (time_evaluator, profile) waits for the calls of other
  // sessions to end and holds new ones off until it is done. The gate is the
  // lock file timing_lock (empty: "<store_dir>/timing.lock"); every process
  // using one file honours it together — a daemon and its session workers,
  // or several daemons on one host. Off: measurements run beside other work.
  bool exclusive_timing = true;
  std::string timing_lock;
  // The longest one measurement may hold exclusive timing; past it the
  // measurement ends with RESOURCE_EXHAUSTED and the others go on. The same
  // bound holds for a measurement's wait for the calls running before it
  // (while it waits, new calls are held off).
  absl::Duration max_exclusive_hold = absl::Minutes(10);
  // A module or tensor stream without progress this long is cancelled
  // (ServiceLimits::stream_idle_timeout).
  absl::Duration stream_idle_timeout = absl::Seconds(60);
  // Serve Prometheus metrics over HTTP at this address ("127.0.0.1:9464";
  // port 0 picks a free one), path /metrics (docs/design/metrics.md); empty:
  // none. UNIMPLEMENTED from Start in a build without prometheus-cpp.
  std::string metrics_listen;
  // Record into this instead (borrowed; must outlive the daemon): for an
  // embedder or a test that reads the counts itself. Not with
  // metrics_listen (INVALID_ARGUMENT).
  DaemonMetrics* metrics = nullptr;
  // Threads that run sessions' work (0: one per core, 2 to 16). A thread
  // that waits for an isolated session's worker or for the timing gate is
  // lent out and replaced meanwhile (Executor::BlockingScope).
  int executor_threads = 0;
  // A device farm's fence (server/session_fence.h; tetherd --farm): sessions
  // and calls whose fencing token is not current are refused. Borrowed; must
  // outlive the daemon. Null: no fencing.
  SessionFence* fence = nullptr;
};

// Thread contract: thread-safe.
class Daemon {
 public:
  // Binds every address and starts serving. UNAVAILABLE if an address cannot
  // be bound; INVALID_ARGUMENT for bad options, including a TLS file that is
  // unreadable or not PEM (the message names the file).
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonOptions options);
  virtual ~Daemon() = default;

  // The TCP port bound for the first TCP listen address (useful with port 0).
  virtual int port() const = 0;
  // "127.0.0.1:<port>" for clients of the first TCP address.
  virtual std::string target() const = 0;
  // Stops accepting calls, lets in-flight calls finish (up to `grace`),
  // closes every session. Idempotent.
  virtual void Shutdown(absl::Duration grace = absl::Seconds(5)) = 0;
  // Blocks until Shutdown completes.
  virtual void Wait() = 0;
  // Number of open sessions (for tests and logs).
  virtual size_t num_sessions() const = 0;
  // What the daemon counts; never null (without metrics_listen it counts
  // nothing). The farm reports its state here (DaemonMetrics::SetFarm*).
  virtual DaemonMetrics* metrics() = 0;
  // The metrics' bound address ("127.0.0.1:PORT"), "" without metrics_listen.
  virtual std::string metrics_address() const = 0;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_DAEMON_H_
