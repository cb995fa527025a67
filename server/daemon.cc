// Daemon: wires the module store, session table, executor, deadline timer and
// TetherService into a grpc::Server bound to every listen address.
#include "server/daemon.h"

#include <stdlib.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "openssl/bio.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"
#include "runtime/core/file.h"
#include "runtime/device/device_api.h"
#include "runtime/vm/remote_globals.h"
#include "server/deadline_timer.h"
#include "server/direct_channel.h"
#include "server/event_log.h"
#include "server/executor.h"
#include "server/metrics_interceptor.h"
#include "server/module_store.h"
#include "server/scratch_dir.h"
#include "server/session_table.h"
#include "server/tether_service.h"
#include "server/timing_gate.h"

namespace tether::server {
namespace {

// Turns gRPC server reflection on or off for one ServerBuilder. Loading
// libgrpc++_reflection registers its plugin for every builder in the process
// (a static initializer), so the option removes it unless this daemon asked
// for reflection, and adds it when missing.
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool enable) : enable_(enable) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string name = grpc::reflection::ProtoServerReflectionPlugin().name();
    std::erase_if(*plugins, [&](const auto& p) { return p->name() == name; });
    if (enable_)
      plugins->push_back(std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
  }

 private:
  bool enable_;
};

enum class PemKind { kCertificate, kPrivateKey };

// Reads a PEM file and checks that it parses as `kind` (the first block).
// INVALID_ARGUMENT naming the file otherwise.
absl::StatusOr<std::string> ReadPem(const std::string& path, PemKind kind, const char* what) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " file ", path, ": ", text.status().message()));
  }
  std::string pem = *std::move(text);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::InternalError("out of memory reading a PEM file");
  bool parsed = false;
  if (kind == PemKind::kCertificate) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    parsed = cert != nullptr;
    X509_free(cert);
  } else {
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    parsed = key != nullptr;
    EVP_PKEY_free(key);
  }
  BIO_free(bio);
  if (!parsed) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " file ", path, " is not a PEM ",
                     kind == PemKind::kCertificate ? "certificate" : "private key"));
  }
  return pem;
}

// Credentials for TCP addresses: TLS (mutual when a client CA is given) or
// plaintext when no certificate is configured.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const DaemonOptions& options) {
  const bool has_cert = !options.tls_cert_file.empty();
  const bool has_key = !options.tls_key_file.empty();
  if (has_cert != has_key) {
    return absl::InvalidArgumentError("tls_cert_file and tls_key_file must be given together");
  }
  if (!has_cert) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("tls_client_ca_file needs tls_cert_file and tls_key_file");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> cert =
      ReadPem(options.tls_cert_file, PemKind::kCertificate, "tls certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(options.tls_key_file, PemKind::kPrivateKey, "tls key");
  if (!key.ok()) return key.status();
  pair.cert_chain = std::move(*cert);
  pair.private_key = std::move(*key);
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca =
        ReadPem(options.tls_client_ca_file, PemKind::kCertificate, "tls client ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = std::move(*ca);
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

constexpr int kMaxStreamsPerConnection = 128;
// A temporary module store's name, before mkdtemp's six characters.
constexpr char kTempStorePrefix[] = "tetherd-store-";
// What gRPC may hold for all connections together (buffers, requests read
// before a handler has checked the token): past it gRPC shrinks its reads
// and refuses new streams and connections, so clients that never
// authenticate cost bounded memory (M1). Four largest messages at least.
constexpr uint64_t kMinGrpcMemoryBytes = uint64_t{1} << 30;
// A connection with no call for this long is closed (a client reconnects
// transparently); a peer that vanished without a FIN is found by keepalive
// pings, so its streams and descriptor do not stay forever.
constexpr int kMaxConnectionIdleMs = 30 * 60 * 1000;
constexpr int kKeepaliveTimeMs = 60 * 1000;
constexpr int kKeepaliveTimeoutMs = 20 * 1000;

class DaemonImpl final : public Daemon {
 public:
  ~DaemonImpl() override {
    Shutdown(absl::Seconds(5));
    temp_store_ = ScratchDir();  // removes it
  }

  absl::Status Init(DaemonOptions options) {
    if (options.listen.empty()) return absl::InvalidArgumentError("no listen address given");
    const bool worker = !options.worker_session_id.empty();
    if (options.isolate_sessions && options.worker_program.empty()) {
      return absl::InvalidArgumentError("isolate_sessions needs a worker_program");
    }
    if (options.chunk_bytes == 0 || options.max_sessions == 0) {
      return absl::InvalidArgumentError("chunk_bytes and max_sessions must be positive");
    }
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tcp_credentials =
        TcpCredentials(options);
    if (!tcp_credentials.ok()) return tcp_credentials.status();
    const std::string temp_dir = std::filesystem::temp_directory_path().string();
    if (!worker) {
      // What daemons of this user killed before they could clean up left
      // behind (security review L5).
      SweepAbandonedScratchDirs(temp_dir, kTempStorePrefix);
      SweepAbandonedScratchDirs(temp_dir, kWorkerDirPrefix);
    }
    if (options.store_dir.empty()) {
      absl::StatusOr<ScratchDir> dir = ScratchDir::Create(temp_dir, kTempStorePrefix);
      if (!dir.ok()) return dir.status();
      temp_store_ = std::move(*dir);
      options.store_dir = temp_store_.path();
    }
    if (options.metrics != nullptr && !options.metrics_listen.empty()) {
      return absl::InvalidArgumentError("give the daemon metrics or metrics_listen, not both");
    }
    if (options.metrics != nullptr) {
      metrics_ = options.metrics;
    } else if (!options.metrics_listen.empty()) {
      absl::StatusOr<std::unique_ptr<ServedMetrics>> served = ServeMetrics(options.metrics_listen);
      if (!served.ok()) return served.status();
      metrics_address_ = (*served)->address();
      owned_metrics_ = std::move(*served);
      metrics_ = owned_metrics_.get();
    } else {
      owned_metrics_ = std::make_unique<DaemonMetrics>();
      metrics_ = owned_metrics_.get();
    }
    absl::StatusOr<std::unique_ptr<ModuleStore>> store =
        ModuleStore::Open(options.store_dir, options.store_quota_bytes);
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    if (!options.store_import_dir.empty()) store_->set_import_dir(options.store_import_dir);
    int threads = options.executor_threads > 0
                      ? options.executor_threads
                      : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 16);
    executor_ = std::make_unique<Executor>(threads);
    timer_ = std::make_unique<DeadlineTimer>();
    SessionLimits session_limits;
    session_limits.max_sessions = options.max_sessions;
    session_limits.default_idle_timeout = options.session_idle_timeout;
    session_limits.max_idle_timeout =
        std::max(options.session_idle_timeout, options.max_session_lease);
    session_limits.max_objects_per_session = options.max_session_objects;
    session_limits.max_tensor_bytes_per_session = options.max_session_bytes;
    session_limits.log_events = options.log_events;
    if (worker) {
      // Its daemon keeps the lease; the worker's session lasts until killed.
      session_limits.max_sessions = 1;
      session_limits.max_idle_timeout = absl::InfiniteDuration();
    }
    sessions_ = std::make_unique<SessionTable>(session_limits, executor_.get(), store_.get());
    sessions_->set_metrics(metrics_);
    if (worker) {
      absl::StatusOr<std::shared_ptr<Session>> session =
          sessions_->Open("worker", absl::InfiniteDuration(), std::move(options.worker_session_id));
      if (!session.ok()) return session.status();
    }
    ServiceLimits limits;
    limits.max_inline_tensor_bytes = options.max_inline_tensor_bytes;
    limits.chunk_bytes = options.chunk_bytes;
    limits.max_message_bytes =
        std::max<uint64_t>({uint64_t{64} << 20, options.chunk_bytes + (uint64_t{1} << 20),
                            4 * options.max_inline_tensor_bytes + (uint64_t{1} << 20)});
    limits.max_message_bytes = std::min<uint64_t>(limits.max_message_bytes, INT32_MAX);
    limits.max_exclusive_hold = options.max_exclusive_hold;
    limits.stream_idle_timeout = options.stream_idle_timeout;
    service_ = std::make_unique<TetherService>(limits, store_.get(), sessions_.get(),
                                               executor_.get(), timer_.get(), options.auth_token);
    service_->set_metrics(metrics_);
    if (options.exclusive_timing) {
      if (options.timing_lock.empty()) options.timing_lock = options.store_dir + "/timing.lock";
      absl::StatusOr<std::unique_ptr<TimingGate>> gate = TimingGate::Open(options.timing_lock);
      if (!gate.ok()) return gate.status();
      gate_ = std::move(*gate);
      service_->set_timing_gate(gate_.get());
    }
    // A worker ends after a sticky GPU fault (server/main.cc); meanwhile it
    // runs no more calls.
    service_->set_refuse_after_device_fault(worker);
    service_->set_fence(options.fence);
    if (!worker && !options.worker_program.empty()) {
      WorkerOptions worker_options;
      worker_options.program = options.worker_program;
      worker_options.scratch_dir = temp_dir;
      worker_options.store_dir = options.store_dir;
      worker_options.max_message_bytes = limits.max_message_bytes;
      worker_options.max_inline_tensor_bytes = limits.max_inline_tensor_bytes;
      worker_options.chunk_bytes = limits.chunk_bytes;
      worker_options.direct_channel = options.direct_channel;
      worker_options.direct_spin = options.direct_spin;
      if (gate_) worker_options.timing_lock = gate_->path();
      worker_options.max_exclusive_hold = options.max_exclusive_hold;
      worker_options.max_session_objects = options.max_session_objects;
      worker_options.max_session_bytes = options.max_session_bytes;
      worker_options.metrics = metrics_;
      service_->set_isolation(std::move(worker_options), options.isolate_sessions);
    }

    if (options.direct_channel) {
      DirectChannelOptions direct_options;
      direct_options.max_frame_bytes = limits.max_message_bytes;
      direct_options.max_connections =
          static_cast<int>(std::min<uint32_t>(4 * options.max_sessions, 1024));
      direct_options.log_events = options.log_events;
      direct_options.spin = options.direct_spin;
      absl::StatusOr<std::unique_ptr<DirectChannel>> direct =
          DirectChannel::Start(service_.get(), direct_options);
      if (!direct.ok()) return direct.status();
      direct_ = std::move(*direct);
      service_->set_direct_channel(direct_.get());
    }

    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.SetOption(std::make_unique<ReflectionOption>(options.enable_reflection));
    std::deque<int> ports;  // stable addresses for AddListeningPort
    for (const std::string& address : options.listen) {
      ports.push_back(0);
      // unix: sockets are same-host; they keep plaintext (the token still
      // applies).
      builder.AddListeningPort(
          address,
          absl::StartsWith(address, "unix:") ? grpc::InsecureServerCredentials() : *tcp_credentials,
          &ports.back());
    }
    // One connection cannot open streams without end (health watches,
    // uploads never finished): HTTP/2 refuses streams past this many.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    grpc::ResourceQuota quota("tetherd");
    quota.Resize(
        static_cast<size_t>(std::max<uint64_t>(kMinGrpcMemoryBytes, 4 * limits.max_message_bytes)));
    builder.SetResourceQuota(quota);
    builder.SetMaxReceiveMessageSize(static_cast<int>(limits.max_message_bytes));
    builder.SetMaxSendMessageSize(static_cast<int>(limits.max_message_bytes));
    builder.RegisterService(service_.get());
    if (!metrics_address_.empty() || options.metrics != nullptr) {
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counters;
      counters.push_back(NewByteCounterFactory(metrics_));
      builder.experimental().SetInterceptorCreators(std::move(counters));
    }
    server_ = builder.BuildAndStart();
    if (!server_) {
      return absl::UnavailableError(
          absl::StrCat("cannot bind ", absl::StrJoin(options.listen, ", ")));
    }
    for (size_t i = 0; i < options.listen.size(); ++i) {
      bool is_unix = absl::StartsWith(options.listen[i], "unix:");
      if (!is_unix && ports[i] == 0) {
        return absl::UnavailableError(absl::StrCat("cannot bind ", options.listen[i]));
      }
      if (!is_unix && port_ == 0) port_ = ports[i];
    }
    if (options.log_events) {
      EventLine()
          .Add("event", "listening")
          .Quote("addresses", absl::StrJoin(options.listen, ","))
          .Add("port", port_)
          .Add("store", options.store_dir)
          .Add("tls", options.tls_cert_file.empty()        ? "off"
                      : options.tls_client_ca_file.empty() ? "on"
                                                           : "mutual")
          .Add("token", options.auth_token.empty() ? "off" : "on")
          .Add("direct", direct_ ? direct_->address() : "off")
          .Add("isolation", options.isolate_sessions         ? "every-session"
                            : options.worker_program.empty() ? "off"
                                                             : "on-request")
          .Add("timing", gate_ ? "exclusive" : "concurrent")
          .Add("metrics", metrics_address_.empty() ? "off" : metrics_address_)
          .Write();
    }
    metrics_->SetSampler([this] { return Sample(); });
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  std::string target() const override { return absl::StrCat("127.0.0.1:", port_); }

  void Shutdown(absl::Duration grace) override {
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) {
        mu_.Await(absl::Condition(&shut_down_));
        return;
      }
      shutting_down_ = true;
    }
    if (server_) {
      // Calls still running after the grace period are interrupted, so the
      // drain cannot hang on a long VM call.
      absl::Notification drained;
      std::thread interrupter([&] {
        if (!drained.WaitForNotificationWithTimeout(grace)) {
          sessions_->InterruptAll(absl::StatusCode::kUnavailable);
        }
      });
      absl::Time deadline = absl::Now() + grace;
      if (direct_) direct_->Shutdown();
      server_->Shutdown(absl::ToChronoTime(deadline));
      if (direct_) direct_->Join(std::max(deadline - absl::Now(), absl::ZeroDuration()));
      drained.Notify();
      interrupter.join();
      server_->Wait();
    }
    if (sessions_) sessions_->CloseAll("shutdown");
    // What the sampler reads goes with the daemon; a scrape from now on
    // sees the counters only.
    if (metrics_) metrics_->SetSampler(nullptr);
    // Killed workers are reaped in the background; their directories go
    // with them, before the process exits (what is left, the next start
    // sweeps).
    (void)AwaitKilledWorkersReaped(absl::Now() + absl::Seconds(2));
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
  }

  void Wait() override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&shut_down_));
  }

  size_t num_sessions() const override { return sessions_ ? sessions_->size() : 0; }
  DaemonMetrics* metrics() override { return metrics_; }
  std::string metrics_address() const override { return metrics_address_; }

 private:
  // What a metrics scrape reads: sessions, the store, device memory.
  MetricsSample Sample() const {
    MetricsSample s;
    s.sessions_open = sessions_->size();
    s.session_tensor_bytes = sessions_->tensor_bytes();
    s.session_objects = sessions_->num_objects();
    s.store_used_bytes = store_->used_bytes();
    s.store_quota_bytes = store_->quota_bytes();
    MetricsSample::DeviceMemory host{"cpu:0"};
    if (absl::StatusOr<std::string> meminfo = ReadFileToString("/proc/meminfo", 1 << 16);
        meminfo.ok()) {
      for (absl::string_view line : absl::StrSplit(*meminfo, '\n')) {
        uint64_t kib = 0;
        std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
        if (f.size() < 2 || !absl::SimpleAtoi(f[1], &kib)) continue;
        if (f[0] == "MemTotal:") host.total_bytes = kib << 10;
        if (f[0] == "MemAvailable:") host.available_bytes = kib << 10;
      }
    }
    s.devices.push_back(host);
    if (absl::StatusOr<DeviceAPI*> cuda = DeviceAPI::Get(kDLCUDA); cuda.ok()) {
      for (int id = 0; id < 64 && DeviceExists(Device::Cuda(id)); ++id) {
        absl::StatusOr<Value> total = (*cuda)->GetAttr(id, DeviceAttr::kTotalGlobalMemory);
        MetricsSample::DeviceMemory gpu{Device::Cuda(id).ToString()};
        if (total.ok() && total->is_int() && total->int_value() > 0) {
          gpu.total_bytes = static_cast<uint64_t>(total->int_value());
        }
        s.devices.push_back(gpu);
      }
    }
    return s;
  }

  ScratchDir temp_store_;  // the store when no store_dir was given
  // First: it outlives everything that counts into it (its HTTP server
  // stops when it goes, after the gRPC server has).
  std::unique_ptr<DaemonMetrics> owned_metrics_;
  DaemonMetrics* metrics_ = nullptr;  // owned_metrics_ or DaemonOptions::metrics
  std::string metrics_address_;
  // Destroyed in reverse: the server first, then the service and the rest.
  std::unique_ptr<ModuleStore> store_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<DeadlineTimer> timer_;
  std::unique_ptr<TimingGate> gate_;
  std::unique_ptr<SessionTable> sessions_;
  std::unique_ptr<TetherService> service_;
  std::unique_ptr<DirectChannel> direct_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonOptions options) {
  // What list_global_functions offers from the first call on.
  vm::RegisterRemoteGlobals();
  auto daemon = std::make_unique<DaemonImpl>();
  absl::Status status = daemon->Init(std::move(options));
  if (!status.ok()) return status;
  return std::unique_ptr<Daemon>(std::move(daemon));
}

}  // namespace tether::server
