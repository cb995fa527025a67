// EtcdClient: the few etcd v3 calls the farm needs (ranges, transactions,
// leases, watches) over etcd's own gRPC API, with the C++ classes generated
// from Debian's etcd .proto files (farm/CMakeLists.txt). One client talks to
// one etcd cluster given as a list of endpoints; a call that finds its
// endpoint unreachable moves on to the next one. Credentials: TLS (a CA,
// and a client certificate for mutual TLS) and etcd's user/password
// authentication (a token sent on every call, renewed when etcd says it
// expired).
#ifndef TETHER_FARM_ETCD_CLIENT_H_
#define TETHER_FARM_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace tether::farm {

// How to reach an etcd cluster.
struct EtcdOptions {
  // "HOST:PORT" of each member, tried in order.
  std::vector<std::string> endpoints;
  // TLS: on when `tls` (an etcds:// URL) or any file is given. ca_file
  // verifies etcd's certificate (empty: the system's roots); cert_file and
  // key_file present a client certificate (mutual TLS).
  bool tls = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // etcd authentication: a user and the file holding its password.
  std::string user;
  std::string password_file;
  // The longest one call may take.
  absl::Duration call_timeout = absl::Seconds(5);
};

// Parses a farm URL, "etcd://HOST:PORT[,HOST:PORT...]" (plaintext) or
// "etcds://..." (TLS), into options->endpoints and options->tls.
// INVALID_ARGUMENT naming the URL when it is malformed.
absl::Status ParseFarmUrl(absl::string_view url, EtcdOptions* options);

// The key just past every key with `prefix` (etcd's range_end for a prefix).
std::string PrefixEnd(absl::string_view prefix);

// A transaction that writes `value` at `key` (bound to `lease`, 0 for none)
// only where the key does not exist: it succeeds when it wrote.
etcdserverpb::TxnRequest PutIfAbsent(std::string key, std::string value, int64_t lease = 0);

// What a watch reports: the events of one response and the store revision
// they bring it to. `resync` is set (with no events) when the watch could not
// resume where it stopped (etcd compacted that history, or the watch was
// re-established after an outage): the reader should read the current state.
struct WatchUpdate {
  std::vector<mvccpb::Event> events;
  int64_t revision = 0;
  bool resync = false;
};

class EtcdWatch;

// Thread contract: thread-safe.
class EtcdClient {
 public:
  // Reads the credential files and makes a channel per endpoint; connects
  // lazily. INVALID_ARGUMENT for no endpoint or an unreadable file.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdOptions options);
  ~EtcdClient();

  // The calls. Each fails with etcd's status (UNAVAILABLE when no endpoint
  // answers, naming each endpoint and what failed there).
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  absl::StatusOr<etcdserverpb::PutResponse> Put(const etcdserverpb::PutRequest& request);
  absl::StatusOr<etcdserverpb::DeleteRangeResponse> Delete(
      const etcdserverpb::DeleteRangeRequest& request);
  // A lease of `ttl` (whole seconds, at least 1); returns its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews lease `id` once; returns the TTL granted. NOT_FOUND when the
  // lease has expired or was revoked (its keys are gone).
  absl::StatusOr<int64_t> KeepAliveOnce(int64_t id);
  // Revokes lease `id`, deleting its keys. OK when it was already gone.
  absl::Status RevokeLease(int64_t id);
  // The seconds lease `id` has left; NOT_FOUND when it is gone.
  absl::StatusOr<int64_t> LeaseTimeToLive(int64_t id);

  // Watches [key, range_end) from `start_revision` (0: now), calling
  // `on_update` on the watch's own thread for every response, until the
  // returned watch is destroyed. When the stream breaks (etcd restarted, an
  // endpoint down) the watch reconnects from the revision after the last it
  // saw, or with `resync` when that history is gone.
  std::unique_ptr<EtcdWatch> Watch(std::string key, std::string range_end, int64_t start_revision,
                                   std::function<void(const WatchUpdate&)> on_update);

  // "127.0.0.1:2379,127.0.0.1:22379", for messages.
  std::string endpoints() const;

 private:
  friend class EtcdWatch;
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    std::unique_ptr<etcdserverpb::Auth::Stub> auth;
  };
  explicit EtcdClient(EtcdOptions options) : options_(std::move(options)) {}
  absl::Status Init();
  // Runs `call(endpoint, context)` on the preferred endpoint and, when it is
  // unreachable, on the others in turn; attaches the auth token.
  absl::Status Invoke(absl::string_view what,
                      const std::function<grpc::Status(Endpoint&, grpc::ClientContext&)>& call);
  // Prepares `context` for a call: deadline (unless `streaming`), auth token.
  absl::Status PrepareContext(Endpoint& endpoint, grpc::ClientContext& context, bool streaming);
  // Asks `endpoint` for a new auth token.
  absl::Status Authenticate(Endpoint& endpoint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(auth_mu_);
  size_t preferred() const { return preferred_.load(); }

  const EtcdOptions options_;
  std::string password_;
  std::vector<Endpoint> endpoints_;
  std::atomic<size_t> preferred_{0};
  absl::Mutex auth_mu_;
  std::string auth_token_ ABSL_GUARDED_BY(auth_mu_);
};

// A running watch (EtcdClient::Watch). Destroying it cancels the stream and
// joins its thread; the callback is not called after the destructor returns.
// Thread contract: thread-compatible (destroy it from one thread, never
// from its own callback).
class EtcdWatch {
 public:
  EtcdWatch(EtcdClient* client, std::string key, std::string range_end, int64_t start_revision,
            std::function<void(const WatchUpdate&)> on_update);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

 private:
  void Run();
  // One stream until it breaks or the watch is stopped.
  void RunStream(size_t endpoint_index);

  EtcdClient* const client_;
  const std::string key_;
  const std::string range_end_;
  const std::function<void(const WatchUpdate&)> on_update_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the stream's, while open
  int64_t next_revision_ = 0;                                    // the watch thread's own
  bool resync_next_ = false;                                     // the watch thread's own
  std::thread thread_;
};

}  // namespace tether::farm

#endif  // TETHER_FARM_ETCD_CLIENT_H_
