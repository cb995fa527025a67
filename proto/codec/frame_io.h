// Framing of the direct channel (docs/design/rpc-protocol.md, "Direct
// channel"): protobuf messages on a plain stream socket, each as a 4-byte
// little-endian length followed by that many bytes, and the client's hello
// (magic and ticket) that opens a connection. Shared by the daemon and the
// client. Blocking I/O on a file descriptor; EINTR is retried.
#ifndef TETHER_PROTO_CODEC_FRAME_IO_H_
#define TETHER_PROTO_CODEC_FRAME_IO_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace tether::rpc {

// The first bytes a client sends on a direct connection, then the ticket.
inline constexpr char kDirectMagic[] = "TDC1";
inline constexpr size_t kDirectMagicBytes = 4;
inline constexpr size_t kDirectTicketBytes = 24;  // 8-byte id + 16-byte secret
// A frame's length prefix cannot exceed this, whatever the peer's limit.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 31;

// Writes all of `data`. UNAVAILABLE naming the OS error when the peer is gone.
absl::Status WriteAll(int fd, absl::string_view data);
// Reads exactly `size` bytes. UNAVAILABLE when the peer closed the
// connection first (`clean_eof` is set when it closed before the first byte,
// i.e. between frames) or on an OS error.
absl::Status ReadExactly(int fd, char* data, size_t size, bool* clean_eof = nullptr);

// Maps the pages of a large fresh buffer while a payload is received into
// it: a helper thread walks the buffer in 4 MiB steps with
// MADV_POPULATE_WRITE (one kernel pass per step instead of a fault per
// page), ahead of the receiving thread, so the zeroing of fresh pages
// overlaps the copy out of the socket. Advice only: nothing for buffers
// under 4 MiB or where the kernel lacks it. The destructor stops the walk
// and joins it, so the buffer must outlive the object.
// Thread contract: thread-hostile.
class PrefaultAhead {
 public:
  PrefaultAhead(char* data, uint64_t size);
  ~PrefaultAhead();
  PrefaultAhead(const PrefaultAhead&) = delete;
  PrefaultAhead& operator=(const PrefaultAhead&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread walker_;
};

// Writes `message` as one length-prefixed frame (one send).
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message);

// Reads length-prefixed frames through a receive buffer, so a small frame
// costs one recv and frames the peer pipelined are read together. One per
// connection, owning everything read from `fd` after it was made.
// Thread contract: thread-hostile.
class FrameReader {
 public:
  // `spin`: how long a read waiting for the next frame polls before it
  // blocks (zero: it blocks at once). See DirectChannelOptions::spin.
  explicit FrameReader(int fd, absl::Duration spin = absl::ZeroDuration()) : fd_(fd), spin_(spin) {}
  // Parses the next frame into `message`. RESOURCE_EXHAUSTED when its length
  // exceeds `max_bytes` (nothing more is read: the connection is out of step
  // and must be closed), INVALID_ARGUMENT when the bytes do not parse,
  // UNAVAILABLE as ReadExactly (`clean_eof`: closed between frames).
  absl::Status Read(uint64_t max_bytes, google::protobuf::MessageLite* message,
                    bool* clean_eof = nullptr);
  // The next `size` raw bytes (a bulk payload after a frame) into `data`:
  // what is buffered first, then straight from the socket. UNAVAILABLE when
  // the connection ends first.
  absl::Status ReadRaw(char* data, uint64_t size);
  // Reads and drops the next `size` raw bytes (a refused payload).
  absl::Status Skip(uint64_t size);

 private:
  // Until `size` bytes are buffered from begin_.
  absl::Status Fill(size_t size, bool* clean_eof);

  static constexpr size_t kInitialBytes = 64 << 10;
  int fd_;
  absl::Duration spin_;
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;
};

}  // namespace tether::rpc

#endif  // TETHER_PROTO_CODEC_FRAME_IO_H_
