// The direct channel: a loopback listener, tickets, and one thread per
// connection running calls inline.
#include "server/direct_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "openssl/crypto.h"
#include "proto/codec/frame_io.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "server/event_log.h"
#include "server/tether_service.h"

namespace tether::server {
namespace {

constexpr size_t kTicketIdBytes = 8;

absl::Status RandomBytes(char* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(out + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom failed: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads exactly `size` bytes before `deadline`: an absolute bound, not one
// per recv, so a peer that dribbles a byte at a time is cut off all the same.
absl::Status ReadBefore(int fd, char* data, size_t size, absl::Time deadline) {
  size_t got = 0;
  while (got < size) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("direct channel: the hello took longer than allowed (", got, " of ", size,
                       " bytes came)"));
    }
    pollfd ready{fd, POLLIN, 0};
    const int waited =
        ::poll(&ready, 1, static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(left))));
    if (waited < 0 && errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat("direct channel: poll failed: ", std::strerror(errno)));
    }
    if (waited <= 0) continue;
    const ssize_t n = ::recv(fd, data + got, size - got, MSG_DONTWAIT);
    if (n == 0) return absl::UnavailableError("direct channel: the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return absl::UnavailableError(
          absl::StrCat("direct channel: read failed: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// A reply that carries only an error (the hello's refusal, a bad frame).
absl::Status WriteError(int fd, uint64_t request_id, const absl::Status& error) {
  v1::CallResponse reply;
  reply.set_request_id(request_id);
  rpc::EncodeError(error, reply.mutable_error());
  return rpc::WriteFrame(fd, reply);
}

}  // namespace

bool IsSameHostPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  if (absl::StartsWith(peer, "ipv4:127.")) return true;
  for (absl::string_view loopback :
       {"ipv6:[::1]:", "ipv6:%5B::1%5D:", "ipv6:[::ffff:127.", "ipv6:%5B::ffff:127."}) {
    if (absl::StartsWith(peer, loopback)) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<DirectChannel>> DirectChannel::Start(TetherService* service,
                                                                    DirectChannelOptions options) {
  std::unique_ptr<DirectChannel> channel(new DirectChannel(service, options));
  channel->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  channel->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || channel->epoll_fd_ < 0 || channel->wake_fd_ < 0) {
    int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("direct channel: cannot create its sockets: ", std::strerror(error)));
  }
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.u64 = 0;  // connection serials start at 1
  ::epoll_ctl(channel->epoll_fd_, EPOLL_CTL_ADD, channel->wake_fd_, &wake);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int error = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("direct channel: cannot listen on 127.0.0.1: ", std::strerror(error)));
  }
  channel->listen_fd_ = fd;
  channel->port_ = ntohs(addr.sin_port);
  channel->acceptor_ = std::thread([c = channel.get()] { c->AcceptLoop(); });
  channel->watcher_ = std::thread([c = channel.get()] { c->WatchLoop(); });
  return channel;
}

DirectChannel::~DirectChannel() {
  Shutdown();
  Join(absl::ZeroDuration());
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

std::string DirectChannel::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::StatusOr<std::string> DirectChannel::IssueTicket(absl::string_view session_id) {
  std::string ticket(rpc::kDirectTicketBytes, '\0');
  if (absl::Status s = RandomBytes(ticket.data(), ticket.size()); !s.ok()) return s;
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the daemon is shutting down");
  absl::erase_if(tickets_, [now](const auto& entry) { return entry.second.expiry < now; });
  tickets_[ticket.substr(0, kTicketIdBytes)] = Ticket{
      ticket.substr(kTicketIdBytes), std::string(session_id), now + options_.ticket_lifetime};
  return ticket;
}

absl::StatusOr<std::string> DirectChannel::Redeem(absl::string_view ticket) {
  absl::MutexLock lock(&mu_);
  auto it = tickets_.find(ticket.substr(0, kTicketIdBytes));
  if (it == tickets_.end()) {
    return absl::PermissionDeniedError("direct channel: unknown or already used ticket");
  }
  absl::string_view secret = ticket.substr(kTicketIdBytes);
  bool valid = secret.size() == it->second.secret.size() &&
               CRYPTO_memcmp(secret.data(), it->second.secret.data(), secret.size()) == 0;
  if (!valid) return absl::PermissionDeniedError("direct channel: invalid ticket");
  Ticket found = std::move(it->second);
  tickets_.erase(it);
  if (found.expiry < absl::Now())
    return absl::PermissionDeniedError("direct channel: expired ticket");
  return found.session_id;
}

void DirectChannel::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  stopping_ = true;
  tickets_.clear();
  // accept() returns once the listening socket is shut down; each connection
  // reads end-of-file at its next request, after the running call replied.
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  for (const auto& [serial, connection] : connections_) ::shutdown(connection.fd, SHUT_RD);
}

void DirectChannel::Join(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (joined_) return;
    joined_ = true;
  }
  if (acceptor_.joinable()) acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    auto all_ended = absl::Condition(
        +[](absl::flat_hash_map<uint64_t, Connection>* c) { return c->empty(); }, &connections_);
    if (!mu_.AwaitWithTimeout(all_ended, grace)) {
      // A reply stuck on a client that does not read: fail its write.
      for (const auto& [serial, connection] : connections_) ::shutdown(connection.fd, SHUT_RDWR);
      mu_.Await(all_ended);
    }
  }
  ReapEnded();
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
  if (watcher_.joinable()) watcher_.join();
}

void DirectChannel::AcceptLoop() {
  while (true) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      // Out of descriptors or memory: back off instead of spinning.
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint64_t serial = 0;
    bool refuse = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      refuse = static_cast<int>(connections_.size()) >= options_.max_connections;
      if (!refuse) {
        // Started under the lock: its end (which takes the lock) finds its
        // thread object stored.
        serial = next_serial_++;
        Connection& connection = connections_[serial];
        connection.fd = fd;
        connection.thread = std::thread([this, serial, fd] { Serve(serial, fd); });
      }
    }
    ReapEnded();
    if (refuse) {
      (void)WriteError(fd, 0,
                       absl::ResourceExhaustedError(
                           absl::StrCat("direct channel: ", options_.max_connections,
                                        " connections already open; use the CallStream")));
      ::close(fd);
      continue;
    }
  }
}

void DirectChannel::ReapEnded() {
  std::vector<std::thread> ended;
  {
    absl::MutexLock lock(&mu_);
    ended.swap(ended_);
  }
  for (std::thread& t : ended) t.join();
}

void DirectChannel::WatchLoop() {
  epoll_event events[16];
  while (true) {
    int n = ::epoll_wait(epoll_fd_, events, 16, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    std::vector<std::string> gone;
    {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        // A copy: epoll_event is packed, its u64 misaligned for a reference.
        const uint64_t serial = events[i].data.u64;
        if (serial == 0) return;  // the wake eventfd: shutting down
        auto it = connections_.find(serial);
        // An idle connection finds the end itself, at its next read.
        if (it != connections_.end() && it->second.busy) gone.push_back(it->second.session_id);
      }
    }
    for (const std::string& id : gone) (void)service_->sessions()->Close(id, "client-gone");
  }
}

void DirectChannel::SetBusy(uint64_t serial, bool busy) {
  absl::MutexLock lock(&mu_);
  if (auto it = connections_.find(serial); it != connections_.end()) it->second.busy = busy;
}

void DirectChannel::RunRequest(uint64_t serial, const std::string& session_id,
                               const v1::CallRequest& request, v1::CallResponse* reply) {
  absl::Status status;
  if (request.session_id() != session_id) {
    status = absl::PermissionDeniedError(
        "direct channel: the request names another session than its ticket");
  } else if (absl::StatusOr<std::shared_ptr<Session>> session =
                 service_->sessions()->Get(session_id);
             !session.ok()) {
    status = session.status();
  } else {
    Session& s = **session;
    s.BeginCall();
    SetBusy(serial, true);
    s.queue().RunHere(
        [&] {
          absl::Time deadline = request.deadline_ms() == 0
                                    ? absl::InfiniteFuture()
                                    : absl::Now() + absl::Milliseconds(request.deadline_ms());
          status = service_->RunCall(s, request, reply, deadline);
        },
        *session);
    SetBusy(serial, false);
    s.EndCall();
  }
  if (!status.ok()) {
    reply->Clear();
    rpc::EncodeError(status, reply->mutable_error());
  }
  reply->set_request_id(request.request_id());
}

absl::Status DirectChannel::PutTensor(const std::string& session_id, const v1::CallRequest& request,
                                      rpc::FrameReader& reader, v1::CallResponse* reply) {
  const uint64_t size = request.put_tensor().size_bytes();
  absl::StatusOr<rpc::TensorSpec> spec = rpc::DecodeTensorHeader(request.put_tensor().tensor());
  absl::StatusOr<std::shared_ptr<Session>> session = absl::PermissionDeniedError(
      "direct channel: the request names another session than its ticket");
  if (request.session_id() == session_id) session = service_->sessions()->Get(session_id);
  absl::StatusOr<Tensor> tensor = absl::UnknownError("");
  if (!session.ok()) {
    tensor = session.status();
  } else if (!spec.ok()) {
    tensor = spec.status();
  } else if (static_cast<uint64_t>(spec->num_bytes) != size) {
    tensor =
        ValueError("put_tensor announces ", size, " bytes, dtype x shape needs ", spec->num_bytes);
  } else {
    tensor = Tensor::Empty(spec->shape, spec->dtype, spec->device);
  }
  if (!tensor.ok()) {
    // Stay in step: the payload follows whatever we think of it.
    TETHER_RETURN_IF_ERROR(reader.Skip(size));
    rpc::EncodeError(tensor.status(), reply->mutable_error());
    return absl::OkStatus();
  }
  Session& s = **session;
  s.BeginCall();
  absl::Status status;
  if (spec->device.type == kDLCPU) {
    char* dest = static_cast<char*>((*tensor)->element_data());
    rpc::PrefaultAhead prefault(dest, size);
    status = reader.ReadRaw(dest, size);
  } else {
    std::string staging(size, '\0');
    status = reader.ReadRaw(staging.data(), size);
    if (status.ok()) {
      absl::Status copied = tensor->CopyFromBytes(staging.data(), staging.size());
      if (!copied.ok()) rpc::EncodeError(copied, reply->mutable_error());
    }
  }
  if (status.ok() && !reply->has_error()) {
    absl::StatusOr<uint64_t> id = s.AddTensor(*tensor);
    if (id.ok()) {
      v1::TensorHandle* handle = reply->mutable_tensor();
      handle->set_id(*id);
      *handle->mutable_header() = request.put_tensor().tensor();
    } else {
      rpc::EncodeError(id.status(), reply->mutable_error());
    }
  }
  s.EndCall();
  return status;
}

absl::Status DirectChannel::GetTensor(int fd, const std::string& session_id,
                                      const v1::CallRequest& request) {
  v1::CallResponse reply;
  reply.set_request_id(request.request_id());
  absl::StatusOr<Tensor> tensor = absl::PermissionDeniedError(
      "direct channel: the request names another session than its ticket");
  std::shared_ptr<Session> session;
  if (request.session_id() == session_id) {
    absl::StatusOr<std::shared_ptr<Session>> found = service_->sessions()->Get(session_id);
    if (found.ok()) session = std::move(*found);
    tensor = found.ok() ? session->FindTensor(request.get_tensor().tensor_id()) : found.status();
  }
  // Streamed from the tensor itself when it is compact host memory, else from
  // one compact host copy.
  v1::InlineTensor compact;
  const char* data = nullptr;
  uint64_t size = 0;
  if (tensor.ok()) {
    if ((*tensor)->device().type == kDLCPU && (*tensor)->IsContiguous()) {
      data = static_cast<const char*>((*tensor)->element_data());
      size = static_cast<uint64_t>((*tensor)->NumBytes());
    } else if (absl::Status s = rpc::EncodeInlineTensor(*tensor, &compact); s.ok()) {
      data = compact.data().data();
      size = compact.data().size();
    } else {
      tensor = s;
    }
  }
  if (!tensor.ok()) {
    rpc::EncodeError(tensor.status(), reply.mutable_error());
    return rpc::WriteFrame(fd, reply);
  }
  if (session) session->BeginCall();
  v1::TensorHandle* handle = reply.mutable_tensor();
  handle->set_id(request.get_tensor().tensor_id());
  rpc::EncodeTensorHeader((*tensor)->dtype(), (*tensor)->shape(), (*tensor)->device(),
                          handle->mutable_header());
  absl::Status status = rpc::WriteFrame(fd, reply);
  if (status.ok()) status = rpc::WriteAll(fd, absl::string_view(data, size));
  if (status.ok()) service_->metrics()->BytesSent("direct", 4 + reply.ByteSizeLong() + size);
  if (session) session->EndCall();
  return status;
}

void DirectChannel::Serve(uint64_t serial, int fd) {
  // The hello: magic and ticket, within hello_timeout.
  std::string hello(rpc::kDirectMagicBytes + rpc::kDirectTicketBytes, '\0');
  absl::StatusOr<std::string> session_id;
  if (absl::Status read =
          ReadBefore(fd, hello.data(), hello.size(), absl::Now() + options_.hello_timeout);
      !read.ok()) {
    session_id = read;  // gone or silent: nothing to answer
  } else {
    if (absl::string_view(hello).substr(0, rpc::kDirectMagicBytes) !=
        absl::string_view(rpc::kDirectMagic, rpc::kDirectMagicBytes)) {
      session_id = absl::InvalidArgumentError(
          "direct channel: the connection did not start with the direct-channel hello");
    } else {
      session_id = Redeem(absl::string_view(hello).substr(rpc::kDirectMagicBytes));
    }
    if (!session_id.ok()) (void)WriteError(fd, 0, session_id.status());
  }
  if (session_id.ok() && rpc::WriteFrame(fd, v1::CallResponse()).ok()) {
    {
      absl::MutexLock lock(&mu_);
      connections_[serial].session_id = *session_id;
    }
    epoll_event hangup{};
    hangup.events = EPOLLRDHUP | EPOLLET;
    hangup.data.u64 = serial;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &hangup);
    Log("direct-open", *session_id, "");
    // "client": said goodbye; "client-gone": left without it (the session
    // closes); "bad-frame": out of step; "shutdown": the daemon is stopping.
    std::string end = "client";
    rpc::FrameReader reader(fd, options_.spin);
    v1::CallRequest request;
    v1::CallResponse reply;
    while (true) {
      request.Clear();
      bool clean_eof = false;
      absl::Status read = reader.Read(options_.max_frame_bytes, &request, &clean_eof);
      if (!read.ok()) {
        if (read.code() == absl::StatusCode::kUnavailable) {
          absl::MutexLock lock(&mu_);
          end = stopping_ ? "shutdown" : "client-gone";
        } else {
          // Out of step after an oversized or unparsable frame: say why, close.
          end = "bad-frame";
          (void)WriteError(fd, 0, read);
        }
        break;
      }
      if (request.op_case() == v1::CallRequest::OP_NOT_SET && request.request_id() == 0) break;
      // A frame is its 4-byte length and the message; put_tensor's bytes follow it.
      service_->metrics()->BytesReceived(
          "direct", 4 + request.ByteSizeLong() +
                        (request.has_put_tensor() ? request.put_tensor().size_bytes() : 0));
      reply.Clear();
      absl::Status sent;
      if (request.op_case() == v1::CallRequest::kGetTensor) {
        sent = GetTensor(fd, *session_id, request);
      } else {
        if (request.op_case() == v1::CallRequest::kPutTensor) {
          sent = PutTensor(*session_id, request, reader, &reply);
          reply.set_request_id(request.request_id());
        } else {
          RunRequest(serial, *session_id, request, &reply);
        }
        if (sent.ok()) sent = rpc::WriteFrame(fd, reply);
        if (sent.ok()) service_->metrics()->BytesSent("direct", 4 + reply.ByteSizeLong());
      }
      if (!sent.ok()) {
        end = "client-gone";
        break;
      }
    }
    if (end == "client-gone") (void)service_->sessions()->Close(*session_id, "client-gone");
    Log("direct-close", *session_id, end);
  }
  absl::MutexLock lock(&mu_);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  auto it = connections_.find(serial);
  ended_.push_back(std::move(it->second.thread));
  connections_.erase(it);
  ::close(fd);
}

void DirectChannel::Log(absl::string_view event, absl::string_view session,
                        absl::string_view detail) const {
  if (!options_.log_events) return;
  EventLine line;
  line.Add("session", session.substr(0, 8)).Add("event", event);
  if (!detail.empty()) line.Add("reason", detail);
  line.Write();
}

}  // namespace tether::server
