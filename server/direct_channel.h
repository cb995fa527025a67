// DirectChannel: the daemon's low-latency call path for same-host clients
// (docs/design/rpc-protocol.md, "Direct channel"). A loopback TCP listener
// whose connections carry the CallStream's messages as length-prefixed frames
// on a plain socket. A client first obtains a one-use ticket for its session
// through the gRPC method OpenDirectChannel (which has already checked its
// token and that it is on this host), then connects and sends the ticket.
//
// Each connection has its own thread that reads a request, runs it on the
// calling thread through the session's SerialQueue (no hop to the executor
// when the session is idle), and writes the reply: one syscall each way and no
// thread switch, where gRPC's stream crosses its completion queue and our
// executor. Calls keep every rule of CallStream: serialized per session,
// deadline_ms honoured, errors in the reply, the session's lease renewed.
// A client that leaves without its goodbye frame is gone, as with a broken
// CallStream: its session is closed — at once, interrupting the running
// call, when it hangs up during a call (an epoll watcher thread sees that).
#ifndef TETHER_SERVER_DIRECT_CHANNEL_H_
#define TETHER_SERVER_DIRECT_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/codec/frame_io.h"
#include "tether/v1/tether.pb.h"

namespace tether::server {

class TetherService;

struct DirectChannelOptions {
  uint64_t max_frame_bytes = uint64_t{64} << 20;
  // Connections served at once; more are refused with RESOURCE_EXHAUSTED.
  int max_connections = 256;
  // How long an issued ticket may wait to be used.
  absl::Duration ticket_lifetime = absl::Seconds(30);
  // How long a new connection may take to send its hello.
  absl::Duration hello_timeout = absl::Seconds(10);
  // After a reply, how long a connection polls for the next request before
  // its thread sleeps. A request that comes within it skips the wake-up of a
  // sleeping thread (~40 us across cores on the reference machine); the cost
  // is at most this much CPU per call, yielding the core while polling.
  absl::Duration spin = absl::Microseconds(30);
  bool log_events = true;
};

// Whether a gRPC peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000",
// "ipv6:%5B::1%5D:5000", "unix:/path") is a client on this host.
bool IsSameHostPeer(absl::string_view peer);

// Thread contract: thread-safe. Borrows the service, which must outlive it.
class DirectChannel {
 public:
  // Binds 127.0.0.1:0 and starts accepting. UNAVAILABLE if it cannot bind.
  static absl::StatusOr<std::unique_ptr<DirectChannel>> Start(TetherService* service,
                                                              DirectChannelOptions options);
  ~DirectChannel();  // Shutdown() and Join()
  DirectChannel(const DirectChannel&) = delete;
  DirectChannel& operator=(const DirectChannel&) = delete;

  // "127.0.0.1:PORT".
  std::string address() const;
  uint64_t max_frame_bytes() const { return options_.max_frame_bytes; }
  // A ticket (rpc::kDirectTicketBytes bytes) that lets one connection call
  // into `session_id`. UNAVAILABLE once shutting down.
  absl::StatusOr<std::string> IssueTicket(absl::string_view session_id);

  // Stops accepting and ends every connection after the call it is running
  // (its reply is still written). Idempotent.
  void Shutdown();
  // Waits until every connection has ended; call after Shutdown. After
  // `grace`, connections still blocked writing a reply are cut.
  void Join(absl::Duration grace = absl::Seconds(5));

 private:
  DirectChannel(TetherService* service, DirectChannelOptions options)
      : service_(service), options_(options) {}
  struct Connection {
    int fd;
    std::string session_id;  // empty until the hello was accepted
    bool busy = false;       // running a call
    std::thread thread;      // serving it; moved to ended_ when done
  };
  // Joins the threads of connections that have ended.
  void ReapEnded();
  void AcceptLoop();
  void WatchLoop();
  void Serve(uint64_t serial, int fd);
  // Runs one request of `session_id`'s connection `serial`.
  void RunRequest(uint64_t serial, const std::string& session_id, const v1::CallRequest& request,
                  v1::CallResponse* reply);
  void SetBusy(uint64_t serial, bool busy);
  // put_tensor: reads the payload that follows the request into a new tensor
  // of the session (or skips it when refused). UNAVAILABLE only when the
  // connection broke; refusals go into `reply`.
  absl::Status PutTensor(const std::string& session_id, const v1::CallRequest& request,
                         rpc::FrameReader& reader, v1::CallResponse* reply);
  // get_tensor: writes the reply frame and, when it succeeded, the tensor's
  // bytes. UNAVAILABLE when the connection broke.
  absl::Status GetTensor(int fd, const std::string& session_id, const v1::CallRequest& request);
  // The session id of a valid unused ticket, which is consumed.
  absl::StatusOr<std::string> Redeem(absl::string_view ticket);
  void Log(absl::string_view event, absl::string_view session, absl::string_view detail) const;

  TetherService* const service_;
  const DirectChannelOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd that stops the watcher
  std::thread acceptor_;
  std::thread watcher_;

  struct Ticket {
    std::string secret;
    std::string session_id;
    absl::Time expiry;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Ticket> tickets_ ABSL_GUARDED_BY(mu_);  // by 8-byte id
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Connection> connections_ ABSL_GUARDED_BY(mu_);
  // Threads whose connection ended, joined by the acceptor and by Join: a
  // thread is never detached, so none can touch mu_ after the channel is gone.
  std::vector<std::thread> ended_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_DIRECT_CHANNEL_H_
