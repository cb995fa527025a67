// Length-prefixed protobuf frames on a blocking socket.
#include "proto/codec/frame_io.h"

#include <errno.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tether::rpc {

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    // MSG_NOSIGNAL: a vanished peer is an error here, not a SIGPIPE.
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("direct channel: write failed: ", std::strerror(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status ReadExactly(int fd, char* data, size_t size, bool* clean_eof) {
  if (clean_eof != nullptr) *clean_eof = false;
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::recv(fd, data + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("direct channel: read failed: ", std::strerror(errno)));
    }
    if (n == 0) {
      if (got == 0 && clean_eof != nullptr) *clean_eof = true;
      return absl::UnavailableError(absl::StrCat("direct channel: the peer closed the connection",
                                                 got == 0 ? "" : " inside a frame"));
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

PrefaultAhead::PrefaultAhead(char* data, uint64_t size) {
  constexpr uint64_t kPage = 4096, kStep = uint64_t{4} << 20;
  if (size < kStep) return;
  walker_ = std::thread([this, data, size] {
    for (uint64_t off = 0; off < size && !stop_.load(std::memory_order_relaxed); off += kStep) {
      uintptr_t begin = (reinterpret_cast<uintptr_t>(data + off) + kPage - 1) & ~(kPage - 1);
      uintptr_t end =
          reinterpret_cast<uintptr_t>(data + std::min(size, off + kStep)) & ~(kPage - 1);
      if (end <= begin) continue;
      if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0) return;
    }
  });
}

PrefaultAhead::~PrefaultAhead() {
  stop_.store(true, std::memory_order_relaxed);
  if (walker_.joinable()) walker_.join();
}

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  size_t size = message.ByteSizeLong();
  if (size > kMaxFrameBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("direct channel: a message of ", size, " bytes exceeds the frame limit"));
  }
  std::string buffer(4 + size, '\0');
  for (int i = 0; i < 4; ++i) buffer[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  if (!message.SerializeToArray(buffer.data() + 4, static_cast<int>(size))) {
    return absl::InternalError("direct channel: cannot serialize a message");
  }
  return WriteAll(fd, buffer);
}

absl::Status FrameReader::Fill(size_t size, bool* clean_eof) {
  if (clean_eof != nullptr) *clean_eof = false;
  if (end_ - begin_ >= size) return absl::OkStatus();
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() < size) buffer_.resize(std::max(size, kInitialBytes));
  if (spin_ > absl::ZeroDuration() && end_ == begin_) {
    // Poll without blocking for a moment, yielding the core between tries:
    // a reply that comes within `spin_` is seen without the wake-up of a
    // sleeping thread, which costs tens of microseconds across cores.
    const absl::Time until = absl::Now() + spin_;
    while (absl::Now() < until) {
      ssize_t n = ::recv(fd_, buffer_.data() + end_, buffer_.size() - end_, MSG_DONTWAIT);
      if (n > 0) {
        end_ += static_cast<size_t>(n);
        break;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
      ::sched_yield();
    }
  }
  while (end_ < size) {
    ssize_t n = ::recv(fd_, buffer_.data() + end_, buffer_.size() - end_, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("direct channel: read failed: ", std::strerror(errno)));
    }
    if (n == 0) {
      if (end_ == 0 && clean_eof != nullptr) *clean_eof = true;
      return absl::UnavailableError(absl::StrCat("direct channel: the peer closed the connection",
                                                 end_ == 0 ? "" : " inside a frame"));
    }
    end_ += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FrameReader::Read(uint64_t max_bytes, google::protobuf::MessageLite* message,
                               bool* clean_eof) {
  if (absl::Status s = Fill(4, clean_eof); !s.ok()) return s;
  const auto* prefix = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  uint64_t size = uint64_t{prefix[0]} | uint64_t{prefix[1]} << 8 | uint64_t{prefix[2]} << 16 |
                  uint64_t{prefix[3]} << 24;
  if (size > max_bytes || size > kMaxFrameBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("direct channel: a frame of ", size,
                                                     " bytes exceeds the limit of ", max_bytes));
  }
  if (absl::Status s = Fill(4 + size, nullptr); !s.ok()) return s;
  bool parsed = message->ParseFromArray(buffer_.data() + begin_ + 4, static_cast<int>(size));
  begin_ += 4 + size;
  if (begin_ == end_) {
    begin_ = end_ = 0;
    // Give back what one large frame made us hold.
    if (buffer_.size() > (kInitialBytes << 4)) {
      buffer_.resize(kInitialBytes);
      buffer_.shrink_to_fit();
    }
  }
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "direct channel: a frame of ", size, " bytes is not a valid ", message->GetTypeName()));
  }
  return absl::OkStatus();
}

absl::Status FrameReader::ReadRaw(char* data, uint64_t size) {
  uint64_t buffered = std::min<uint64_t>(size, end_ - begin_);
  if (buffered > 0) {
    std::memcpy(data, buffer_.data() + begin_, buffered);
    begin_ += buffered;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  if (buffered == size) return absl::OkStatus();
  absl::Status status = ReadExactly(fd_, data + buffered, size - buffered);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("direct channel: the connection ended inside a payload of ", size, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status FrameReader::Skip(uint64_t size) {
  std::string scratch(std::min<uint64_t>(size, uint64_t{1} << 20), '\0');
  while (size > 0) {
    uint64_t n = std::min<uint64_t>(size, scratch.size());
    if (absl::Status s = ReadRaw(scratch.data(), n); !s.ok()) return s;
    size -= n;
  }
  return absl::OkStatus();
}

}  // namespace tether::rpc
