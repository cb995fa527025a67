// The client end of the direct channel: connect, hello, one frame each way
// per call.
#include "client/direct_connection.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "proto/codec/frame_io.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"

namespace tether::client {
namespace {

void SetReceiveTimeout(int fd, absl::Duration timeout) {
  timeval tv{};
  if (timeout != absl::InfiniteDuration()) tv = absl::ToTimeval(timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// Connects a blocking socket to `address` within `timeout`.
absl::StatusOr<int> Dial(absl::string_view address, absl::Duration timeout) {
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("direct channel: address '", address, "' has no port"));
  }
  std::string host(address.substr(0, colon));
  std::string port(address.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("direct channel: address '", address,
                                                   "' is not numeric: ", ::gai_strerror(rc)));
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ::freeaddrinfo(found);
    return absl::UnavailableError(
        absl::StrCat("direct channel: cannot create a socket: ", std::strerror(errno)));
  }
  int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  int error = rc == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    socklen_t len = sizeof(error);
    if (ready <= 0) {
      error = ready == 0 ? ETIMEDOUT : errno;
    } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
      error = errno;
    }
  }
  if (error != 0) {
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("direct channel: cannot connect to ", address, ": ", std::strerror(error)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirectConnection>> DirectConnection::Connect(
    absl::string_view address, absl::string_view ticket, uint64_t max_frame_bytes,
    absl::Duration timeout, absl::Duration spin) {
  if (ticket.size() != rpc::kDirectTicketBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "direct channel: a ticket has ", rpc::kDirectTicketBytes, " bytes, got ", ticket.size()));
  }
  absl::StatusOr<int> fd = Dial(address, timeout);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<DirectConnection> connection(new DirectConnection(*fd, max_frame_bytes, spin));
  SetReceiveTimeout(*fd, timeout);
  std::string hello =
      absl::StrCat(absl::string_view(rpc::kDirectMagic, rpc::kDirectMagicBytes), ticket);
  if (absl::Status s = rpc::WriteAll(*fd, hello); !s.ok()) return s;
  v1::CallResponse accepted;
  if (absl::Status s = connection->reader_.Read(max_frame_bytes, &accepted); !s.ok()) return s;
  if (accepted.has_error() && accepted.error().code() != 0) {
    return rpc::DecodeError(accepted.error());
  }
  SetReceiveTimeout(*fd, absl::InfiniteDuration());
  return connection;
}

DirectConnection::~DirectConnection() {
  // The goodbye (an empty frame): without it the daemon takes the client
  // for gone and closes its session.
  if (!broken_) (void)rpc::WriteFrame(fd_, v1::CallRequest());
  ::close(fd_);
}

void DirectConnection::Interrupt() { ::shutdown(fd_, SHUT_RDWR); }

absl::Status DirectConnection::Break(absl::Status status) {
  ::shutdown(fd_, SHUT_RDWR);
  broken_ = true;
  if (status.code() != absl::StatusCode::kUnavailable) {
    status = absl::UnavailableError(absl::StrCat("direct channel broke: ", status.message()));
  }
  return status;
}

absl::StatusOr<v1::CallResponse> DirectConnection::Call(const v1::CallRequest& request,
                                                        Fate* fate) {
  return PutTensor(request, nullptr, fate);
}

absl::StatusOr<v1::CallResponse> DirectConnection::PutTensor(const v1::CallRequest& request,
                                                             const char* data, Fate* fate) {
  *fate = Fate::kUnsent;
  if (broken_) return absl::UnavailableError("direct channel: the connection is closed");
  if (absl::Status s = rpc::WriteFrame(fd_, request); !s.ok()) return Break(s);
  *fate = Fate::kLost;
  if (request.op_case() == v1::CallRequest::kPutTensor) {
    absl::string_view payload(data, request.put_tensor().size_bytes());
    if (absl::Status s = rpc::WriteAll(fd_, payload); !s.ok()) return Break(s);
  }
  v1::CallResponse response;
  if (absl::Status s = reader_.Read(max_frame_bytes_, &response); !s.ok()) return Break(s);
  *fate = Fate::kAnswered;
  return response;
}

absl::StatusOr<Tensor> DirectConnection::GetTensor(const v1::CallRequest& request, Fate* fate) {
  TETHER_ASSIGN_OR_RETURN(v1::CallResponse reply, Call(request, fate));
  if (reply.has_error() && reply.error().code() != 0) return rpc::DecodeError(reply.error());
  // From here on a failure to read leaves the connection out of step.
  *fate = Fate::kLost;
  absl::StatusOr<rpc::TensorSpec> spec = rpc::DecodeTensorHeader(reply.tensor().header());
  // The daemon sends the bytes of a header it made itself; one we cannot
  // read leaves us out of step.
  if (!spec.ok()) return Break(spec.status());
  absl::StatusOr<Tensor> out = Tensor::Empty(spec->shape, spec->dtype, Device::Cpu());
  const uint64_t size = static_cast<uint64_t>(spec->num_bytes);
  if (!out.ok()) {
    if (absl::Status s = reader_.Skip(size); !s.ok()) return Break(s);
    *fate = Fate::kAnswered;
    return out.status();
  }
  char* dest = static_cast<char*>((*out)->element_data());
  absl::Status received;
  {
    rpc::PrefaultAhead prefault(dest, size);
    received = reader_.ReadRaw(dest, size);
  }
  if (!received.ok()) return Break(received);
  *fate = Fate::kAnswered;
  return out;
}

}  // namespace tether::client
