// ScratchDir: private temporary directories marked in use by a flock, and
// the sweep that removes those whose owner died.
#include "server/scratch_dir.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tether::server {
namespace {

constexpr char kOwnerLock[] = "owner.lock";
constexpr char kFreshLock[] = "owner.lock.new";
constexpr time_t kCreateGraceSeconds = 60;

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

// Whether `path` is empty or holds only the lock under its first name.
bool NothingButAFreshLock(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.path().filename() != kFreshLock) return false;
  }
  return !ec;
}

}  // namespace

absl::StatusOr<ScratchDir> ScratchDir::Create(const std::string& parent,
                                              const std::string& prefix) {
  std::string path = absl::StrCat(parent, "/", prefix, "XXXXXX");
  if (::mkdtemp(path.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot create a private directory under ", parent,
                                               ": ", std::strerror(errno)));
  }
  ScratchDir dir;
  dir.path_ = path;
  // Locked under a name a sweep ignores, then renamed: owner.lock is never
  // there unlocked while its owner lives.
  const std::string lock = absl::StrCat(path, "/", kOwnerLock);
  const std::string fresh = absl::StrCat(path, "/", kFreshLock);
  dir.lock_fd_ = ::open(fresh.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (dir.lock_fd_ < 0 || ::flock(dir.lock_fd_, LOCK_EX | LOCK_NB) != 0 ||
      ::rename(fresh.c_str(), lock.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot lock ", lock, ": ", std::strerror(errno)));  // ~dir removes it
  }
  return dir;
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept
    : path_(std::exchange(other.path_, {})), lock_fd_(std::exchange(other.lock_fd_, -1)) {}

ScratchDir& ScratchDir::operator=(ScratchDir&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::exchange(other.path_, {});
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

ScratchDir::~ScratchDir() { Reset(); }

void ScratchDir::Reset() {
  // Removed while still locked, so a sweep never sees it half gone.
  if (!path_.empty()) RemoveTree(path_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  path_.clear();
  lock_fd_ = -1;
}

int SweepAbandonedScratchDirs(const std::string& parent, const std::string& prefix) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    const std::string path = entry.path().string();
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      continue;
    }
    const std::string lock = absl::StrCat(path, "/", kOwnerLock);
    int fd = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      // No lock yet: an owner killed inside Create (the directory holds at
      // most the lock under its first name) — or one creating it right now,
      // which takes microseconds, not a minute.
      if (errno == ENOENT && NothingButAFreshLock(path) &&
          ::time(nullptr) - st.st_mtime > kCreateGraceSeconds) {
        RemoveTree(path);
        ++removed;
      }
      continue;
    }
    // Holding the lock while removing: an owner cannot come back to it.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      RemoveTree(path);
      ++removed;
    }
    ::close(fd);
  }
  return removed;
}

}  // namespace tether::server
