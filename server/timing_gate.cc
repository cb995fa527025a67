#include "server/timing_gate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tether::server {
namespace {

constexpr off_t kTurnstile = 0;
constexpr off_t kRoom = 1;
constexpr size_t kMaxPooledFds = 64;

// One non-blocking lock operation on `length` bytes from `start`: true when
// it took effect, false when another holder conflicts.
absl::StatusOr<bool> SetLock(int fd, short type, off_t start, off_t length = 1) {
  struct flock lock;
  std::memset(&lock, 0, sizeof(lock));
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = length;
  if (::fcntl(fd, F_OFD_SETLK, &lock) == 0) return true;
  if (errno == EAGAIN || errno == EACCES) return false;
  return absl::InternalError(absl::StrCat("timing gate lock: ", std::strerror(errno)));
}

}  // namespace

TimingGate::Hold::Hold(Hold&& other) noexcept
    : gate_(std::exchange(other.gate_, nullptr)),
      fd_(std::exchange(other.fd_, -1)),
      waited_seconds_(other.waited_seconds_) {}

TimingGate::Hold& TimingGate::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) gate_->Release(fd_);
    gate_ = std::exchange(other.gate_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
    waited_seconds_ = other.waited_seconds_;
  }
  return *this;
}

TimingGate::Hold::~Hold() {
  if (fd_ >= 0) gate_->Release(fd_);
}

absl::StatusOr<std::unique_ptr<TimingGate>> TimingGate::Open(std::string path) {
  auto gate = std::unique_ptr<TimingGate>(new TimingGate(std::move(path)));
  absl::StatusOr<int> fd = gate->TakeFd();  // proves the file can be opened now
  if (!fd.ok()) return fd.status();
  gate->ReturnFd(*fd);
  return gate;
}

TimingGate::~TimingGate() {
  absl::MutexLock lock(&mu_);
  for (int fd : free_fds_) ::close(fd);
}

absl::StatusOr<int> TimingGate::TakeFd() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_fds_.empty()) {
      int fd = free_fds_.back();
      free_fds_.pop_back();
      return fd;
    }
  }
  // Never through a link, and only a file of this user that other users
  // cannot open: whoever can lock it can stall every call of every daemon
  // sharing it (a group may share it, for daemons of one team).
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open timing lock file ", path_, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 0007) != 0) {
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat(
        "timing lock file ", path_,
        " is not a regular file of this user closed to other users; remove it or keep it in a "
        "private directory"));
  }
  return fd;
}

void TimingGate::ReturnFd(int fd) {
  absl::MutexLock lock(&mu_);
  if (free_fds_.size() < kMaxPooledFds) {
    free_fds_.push_back(fd);
  } else {
    ::close(fd);
  }
}

void TimingGate::Release(int fd) {
  // Unlocking what the description does not hold is a no-op; if it fails the
  // description may still hold a lock, so it is closed, which drops them all.
  absl::StatusOr<bool> unlocked = SetLock(fd, F_UNLCK, kTurnstile, 2);
  if (unlocked.ok() && *unlocked) {
    ReturnFd(fd);
  } else {
    ::close(fd);
  }
}

absl::StatusOr<bool> TimingGate::Attempt(int fd, Mode mode, bool* turnstile_held) {
  if (mode == Mode::kShared) {
    // Looking at the turnstile (one F_OFD_GETLK) instead of passing it costs
    // two system calls less. A measurement that takes the turnstile right
    // after the look either finds this hold in the room and waits for it, as
    // for any call that came a moment earlier, or holds the room first and
    // this attempt fails.
    struct flock probe;
    std::memset(&probe, 0, sizeof(probe));
    probe.l_type = F_RDLCK;
    probe.l_whence = SEEK_SET;
    probe.l_start = kTurnstile;
    probe.l_len = 1;
    if (::fcntl(fd, F_OFD_GETLK, &probe) != 0) {
      return absl::InternalError(absl::StrCat("timing gate lock: ", std::strerror(errno)));
    }
    if (probe.l_type != F_UNLCK) return false;
    return SetLock(fd, F_RDLCK, kRoom);
  }
  if (!*turnstile_held) {
    absl::StatusOr<bool> in = SetLock(fd, F_WRLCK, kTurnstile);
    if (!in.ok() || !*in) return in;
    *turnstile_held = true;
  }
  return SetLock(fd, F_WRLCK, kRoom);
}

const char* TimingGate::WaitingFor(Mode mode) {
  return mode == Mode::kShared ? "waiting for another session's measurement to end (exclusive "
                                 "timing)"
                               : "waiting for other sessions' calls to end before measuring "
                                 "(exclusive timing)";
}

absl::StatusOr<TimingGate::Hold> TimingGate::TryAcquire(Mode mode) {
  absl::StatusOr<int> fd = TakeFd();
  if (!fd.ok()) return fd.status();
  bool turnstile_held = false;
  absl::StatusOr<bool> got = Attempt(*fd, mode, &turnstile_held);
  Hold hold;
  if (got.ok() && *got) {
    hold.gate_ = this;
    hold.fd_ = *fd;
    return hold;
  }
  Release(*fd);
  if (!got.ok()) return got.status();
  return hold;
}

absl::StatusOr<TimingGate::Hold> TimingGate::Acquire(Mode mode, absl::Time deadline,
                                                     absl::FunctionRef<absl::Status()> stop,
                                                     absl::Duration max_turnstile) {
  absl::StatusOr<int> fd = TakeFd();
  if (!fd.ok()) return fd.status();
  const absl::Time start = absl::Now();
  absl::Duration pause = absl::Microseconds(100);
  bool turnstile_held = false;
  absl::Time turnstile_since = absl::InfiniteFuture();
  while (true) {
    absl::StatusOr<bool> got = Attempt(*fd, mode, &turnstile_held);
    if (turnstile_held && turnstile_since == absl::InfiniteFuture()) turnstile_since = absl::Now();
    absl::Status why;
    if (!got.ok()) {
      why = got.status();
    } else if (*got) {
      Hold hold;
      hold.gate_ = this;
      hold.fd_ = *fd;
      hold.waited_seconds_ = absl::ToDoubleSeconds(absl::Now() - start);
      return hold;
    } else {
      why = stop();
      if (why.ok() && absl::Now() - turnstile_since >= max_turnstile) {
        why = absl::ResourceExhaustedError(absl::StrCat(
            "gave up after holding off every other call for ", absl::FormatDuration(max_turnstile),
            " ", WaitingFor(mode), ": a call in another session has not ended"));
      } else if (why.ok() && absl::Now() >= deadline) {
        why = absl::DeadlineExceededError(absl::StrCat("deadline exceeded after ",
                                                       absl::FormatDuration(absl::Now() - start),
                                                       " ", WaitingFor(mode)));
      }
    }
    if (!why.ok()) {
      Release(*fd);
      return why;
    }
    absl::SleepFor(std::min(pause, deadline - absl::Now()));
    pause = std::min(pause * 2, absl::Milliseconds(5));
  }
}

}  // namespace tether::server
