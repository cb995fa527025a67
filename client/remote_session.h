// RemoteSession: one client session on a tetherd daemon. Connecting performs
// the handshake (refusing a daemon of another protocol major) and opens a
// session whose idle lease a background thread renews. The session moves
// modules (skipping ones the daemon already has) and tensors, and carries
// every operation of its VMs, on the first of its transports that works
// (client/transport.h): the direct channel, one CallStream, unary calls. Remote
// handles (tensors left on the daemon, closures) are Values wrapping a
// RemoteHandleObj; they stay valid until freed or the session closes.
#ifndef TETHER_CLIENT_REMOTE_SESSION_H_
#define TETHER_CLIENT_REMOTE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/direct_connection.h"
#include "client/grpc_transport.h"
#include "client/transport.h"
#include "grpcpp/grpcpp.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/device.h"
#include "runtime/core/object.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::client {

struct ConnectOptions {
  // How long Connect may take (channel, handshake, session) in all.
  absl::Duration deadline = absl::Seconds(10);
  // Requested idle lease; zero: the daemon's default.
  absl::Duration idle_timeout = absl::ZeroDuration();
  std::string client_name = "tether-client";
  // Ask for the session to run in its own worker process on the daemon, so
  // a crash or a sticky GPU fault of this session leaves the others running
  // (docs/design/rpc-protocol.md, "Isolated sessions").
  bool isolate = false;
  // The fencing token of this client's hold on the daemon's device in a
  // farm (farm/acquisition.h; docs/design/farm.md); 0: none. A farm daemon
  // refuses a session or call whose token is not its current holder's.
  int64_t fencing_token = 0;
  // Largest gRPC message either way. Tensors above the daemon's inline limit
  // travel in chunks, so this only has to cover inline tensors plus slack.
  int max_message_bytes = 64 << 20;
  // Attempts of an idempotent call on UNAVAILABLE (with exponential backoff).
  int max_attempts = 4;
  // TLS (PEM file paths). tls_ca_file (the CA that signed the daemon's
  // certificate) enables TLS; tls_cert_file and tls_key_file add a client
  // certificate for mutual TLS. tls_server_name overrides the name checked
  // against the daemon's certificate (e.g. "localhost" for 127.0.0.1:PORT).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
  // When non-empty, sent as "authorization: Bearer <auth_token>" on every call.
  std::string auth_token;
  // The most preferred transport (client/transport.h) for VM calls and
  // tensor transfers. kDirect: the daemon's direct channel (a loopback
  // socket; docs/design/rpc-protocol.md) when the daemon offers it, i.e.
  // when it runs on this host, else the CallStream, else unary calls.
  // kStream keeps everything on gRPC; kUnary sends each operation alone.
  TransportKind transport = TransportKind::kDirect;
  // How long a direct-channel call polls for its reply before sleeping
  // (zero: it sleeps at once). Saves a cross-core wake-up per call.
  absl::Duration direct_spin = absl::Microseconds(30);
};

// A value that stays on the daemon: a tensor handle (with its header) or any
// other object (a closure). Wrapped in a Value so it can be passed back as an
// argument to RemoteVM calls.
class RemoteHandleObj final : public Object {
 public:
  enum class Kind { kTensor, kObject };
  RemoteHandleObj(Kind kind, uint64_t id, std::string type_key, rpc::TensorSpec spec)
      : kind_(kind), id_(id), remote_type_key_(std::move(type_key)), spec_(std::move(spec)) {}
  absl::string_view type_key() const override { return "tether.RemoteHandle"; }

  Kind kind() const { return kind_; }
  uint64_t id() const { return id_; }
  // The daemon-side type ("Tensor", "vm.Closure", ...).
  const std::string& remote_type_key() const { return remote_type_key_; }
  // The tensor's dtype, shape and daemon device (kind kTensor only).
  const rpc::TensorSpec& spec() const { return spec_; }

 private:
  Kind kind_;
  uint64_t id_;
  std::string remote_type_key_;
  rpc::TensorSpec spec_;
};

// The RemoteHandleObj inside `value`, or null when it holds something else.
RemoteHandleObj* AsRemoteHandle(const Value& value);
Value MakeRemoteTensorValue(uint64_t id, rpc::TensorSpec spec);

// Thread contract: thread-safe. Its operations run one at a time on its
// transport (the daemon serializes a session's calls anyway); Close()
// interrupts the one in flight (see Close).
class RemoteSession {
 public:
  // Connects to `target` ("127.0.0.1:9190", "unix:/path"). UNAVAILABLE or
  // DEADLINE_EXCEEDED when the daemon cannot be reached in time (including a
  // failed TLS handshake); UNAUTHENTICATED when the daemon refuses the token;
  // INVALID_ARGUMENT for an unreadable TLS file; FAILED_PRECONDITION for an
  // incompatible protocol major.
  static absl::StatusOr<std::unique_ptr<RemoteSession>> Connect(absl::string_view target,
                                                                ConnectOptions options = {});
  ~RemoteSession();
  RemoteSession(const RemoteSession&) = delete;
  RemoteSession& operator=(const RemoteSession&) = delete;

  // Closes the session on the daemon and stops the keep-alive. Idempotent;
  // the destructor calls it. Calls after Close fail with FAILED_PRECONDITION.
  // A call in flight on another thread ends with CANCELLED: the daemon stops
  // it, and the client cancels what still waits (shuts the direct
  // connection, cancels gRPC calls), so neither Close nor that caller waits
  // for a kernel the daemon cannot stop.
  absl::Status Close();
  // Whether Close() has been called (by anyone, e.g. on Ctrl-C).
  bool closed() const { return !CheckOpen().ok(); }

  const v1::HandshakeResponse& handshake() const { return handshake_; }
  const v1::Limits& limits() const { return handshake_.limits(); }
  // FAILED_PRECONDITION "the daemon speaks protocol 1.4, and WHAT needs
  // 1.MINOR: upgrade tetherd" when the daemon's minor is older.
  absl::Status RequireProtocol(uint32_t minor, absl::string_view what) const;
  // What a model for the daemon's CPU is compiled for: "llvm" (this machine,
  // with LLVM's own tuning for it) when the daemon's CPU is of this
  // machine's kind (the same triple and features) or the daemon is older
  // than protocol 1.3 and does not say; else the daemon's compile target
  // ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon,...").
  std::string CpuCompileTarget() const;
  const std::string& session_id() const { return session_id_; }
  absl::Duration granted_idle_timeout() const { return granted_idle_; }
  // Whether the session runs in its own worker process on the daemon.
  bool isolated() const { return isolated_; }

  // Uploads an executable (its bytes) unless the daemon has it; returns its
  // SHA-256. module_streams() counts the uploads that actually streamed.
  absl::StatusOr<std::string> UploadModule(absl::string_view bytes);
  absl::StatusOr<bool> HasModule(absl::string_view sha256);
  uint64_t module_streams() const { return module_streams_.load(); }
  // Uploads a param file (TVM's param dict bytes, runtime/module/param_dict.h)
  // into the same store unless the daemon has it; returns its SHA-256, for
  // RemoteVmOptions::params_sha256. The daemon parses it at CreateVm.
  // param_streams() counts the uploads that actually streamed.
  absl::StatusOr<std::string> UploadParams(absl::string_view bytes);
  uint64_t param_streams() const { return param_streams_.load(); }
  // The bytes of modules and param files that streamed to the daemon.
  uint64_t store_bytes_sent() const { return store_bytes_sent_.load(); }

  // Tensors owned by the session on the daemon. UploadTensor takes any
  // tensor (non-contiguous ones are compacted) and places it on `target`.
  absl::StatusOr<Value> UploadTensor(const Tensor& tensor, Device target = Device::Cpu());
  // Copies a remote tensor (a RemoteHandle value or its id) to a CPU tensor.
  absl::StatusOr<Tensor> DownloadTensor(uint64_t tensor_id);
  absl::StatusOr<Tensor> DownloadTensor(const Value& remote);
  absl::StatusOr<Value> AllocTensor(std::span<const int64_t> shape, DataType dtype, Device device);
  absl::Status FillRandom(const Value& remote, uint64_t seed, double low, double high);
  // Frees remote handles (tensors or objects) by id.
  absl::Status FreeObjects(std::vector<uint64_t> ids);
  // Copies remote tensor `src`'s data into remote tensor `dst` of the same
  // dtype and shape, on the daemon (protocol 1.5): NDArray.copyfrom.
  // INVALID_ARGUMENT (kind value) for a mismatch, NOT_FOUND for a handle the
  // session lacks.
  absl::Status CopyTensor(const Value& src, const Value& dst);

  // One operation (session_id filled in, and request_id when zero) on the
  // session's transport, starting at `most_preferred` or the session's own
  // ConnectOptions::transport, whichever comes later. The reply's error (if
  // any) is returned as the status.
  absl::StatusOr<v1::CallResponse> Call(v1::CallRequest request,
                                        TransportKind most_preferred = TransportKind::kDirect);
  // The transport the next Call(…, most_preferred) travels on, as far as is
  // known: the direct channel counts once it has been opened.
  TransportKind transport(TransportKind most_preferred = TransportKind::kDirect) const;

  // A ticket for the daemon's direct channel (docs/design/rpc-protocol.md):
  // FAILED_PRECONDITION when the daemon does not offer it to this client (not
  // on its host, or turned off), UNIMPLEMENTED from a daemon older than
  // protocol 1.1.
  absl::StatusOr<v1::OpenDirectChannelResponse> OpenDirectChannel();

 private:
  RemoteSession(std::shared_ptr<grpc::Channel> channel, ConnectOptions options);
  absl::Status CheckOpen() const;
  // Streams `bytes` into the daemon's store unless it has them, counting
  // the upload in `*streams`.
  absl::StatusOr<std::string> UploadToStore(absl::string_view bytes,
                                            std::atomic<uint64_t>* streams);
  // The first transport that works, from max(most_preferred, the session's
  // choice) on, opened at first use.
  Transport* TransportLocked(TransportKind most_preferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(transport_mu_);
  // Runs op(transport, &fate) on the session's transport, one operation at
  // a time, where Close() can interrupt it, and returns its result. A
  // transport that broke is dropped; a request it did not send goes to the
  // next one, one it lost fails (WhyBroke). The one place a transport is
  // chosen and the fallback decided.
  template <typename T, typename Op>
  absl::StatusOr<T> OnTransport(TransportKind most_preferred, Op op);
  // The status for an operation whose transport broke after the request
  // left: CANCELLED when Close() broke it, else what the daemon says of the
  // session (an isolated session's lost worker), else `broke`.
  absl::Status WhyBroke(absl::Status broke);
  // For an operation that failed: CANCELLED "remote session ab12cd34 was
  // closed while the call ran" once Close() has been called (which may have
  // ended it), else `failed` as it is.
  absl::Status FailedInFlight(absl::Status failed) const;
  void KeepAliveLoop();

  GrpcLink link_;
  ConnectOptions options_;
  std::string target_;  // as Connect was given it, for messages
  v1::HandshakeResponse handshake_;
  std::string session_id_;
  absl::Duration granted_idle_ = absl::ZeroDuration();
  bool isolated_ = false;
  std::atomic<uint64_t> module_streams_{0};
  std::atomic<uint64_t> param_streams_{0};
  std::atomic<uint64_t> store_bytes_sent_{0};
  std::atomic<uint64_t> next_request_id_{1};

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread keep_alive_;

  // The transports, opened at first use; one operation at a time (the
  // daemon serializes a session's calls anyway). One that broke is not
  // opened again.
  mutable absl::Mutex transport_mu_;
  std::unique_ptr<DirectConnection> direct_ ABSL_GUARDED_BY(transport_mu_);
  bool direct_tried_ ABSL_GUARDED_BY(transport_mu_) = false;
  std::unique_ptr<StreamTransport> stream_ ABSL_GUARDED_BY(transport_mu_);
  bool stream_broken_ ABSL_GUARDED_BY(transport_mu_) = false;
  std::unique_ptr<UnaryTransport> unary_ ABSL_GUARDED_BY(transport_mu_);
  // The transport an operation runs on (it holds transport_mu_ until it
  // ends), which Close() interrupts.
  absl::Mutex in_flight_mu_ ABSL_ACQUIRED_AFTER(transport_mu_);
  Transport* in_flight_ ABSL_GUARDED_BY(in_flight_mu_) = nullptr;
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_REMOTE_SESSION_H_
