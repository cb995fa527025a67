// Fuzz target: bytes arriving on a direct-channel connection -> the frame
// reader, as the daemon reads them: frames of CallRequest until the peer
// closes or a frame is refused, with raw payloads read after put_tensor
// frames the way the daemon does.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "proto/codec/frame_io.h"
#include "tether/v1/tether.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;  // stays within one socket buffer
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  int buffer = 1 << 18;
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  ::setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  if (size > 0 && ::write(fds[0], data, size) != static_cast<ssize_t>(size)) std::abort();
  ::close(fds[0]);
  tether::rpc::FrameReader reader(fds[1]);
  for (int frames = 0; frames < 1024; ++frames) {
    tether::v1::CallRequest request;
    if (!reader.Read(1 << 16, &request).ok()) break;
    if (request.has_put_tensor()) {
      // A raw payload follows a put_tensor frame; its length here comes from
      // the request id, so the fuzzer can steer ReadRaw across the reader's
      // buffer boundary.
      std::string payload(request.request_id() % 4096, '\0');
      if (!reader.ReadRaw(payload.data(), payload.size()).ok()) break;
    }
  }
  ::close(fds[1]);
  return 0;
}
