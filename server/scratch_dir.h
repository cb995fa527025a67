// ScratchDir: a private temporary directory (mkdtemp, mode 0700) that its
// process marks as in use for as long as it lives, and a sweep that removes
// the ones whose process is gone — a daemon's temporary module store, a
// session worker's socket and module copies — so a daemon killed with
// SIGKILL (or a crashed host process) leaves nothing behind for long: the
// next daemon of the same user removes it at start (security review L5).
//
// The mark is an exclusive flock on "<dir>/owner.lock", held through a
// close-on-exec descriptor: the kernel drops it when the process dies, and a
// sweep that can take the lock knows the owner is gone.
#ifndef TETHER_SERVER_SCRATCH_DIR_H_
#define TETHER_SERVER_SCRATCH_DIR_H_

#include <string>

#include "absl/status/statusor.h"

namespace tether::server {

// Thread contract: not thread-safe; movable, one owner.
class ScratchDir {
 public:
  ScratchDir() = default;
  // Creates "<parent>/<prefix>XXXXXX" and marks it in use. UNAVAILABLE
  // naming the path and the OS error when it cannot.
  static absl::StatusOr<ScratchDir> Create(const std::string& parent, const std::string& prefix);
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&& other) noexcept;
  ~ScratchDir();  // removes the directory and everything in it

  const std::string& path() const { return path_; }
  bool empty() const { return path_.empty(); }

 private:
  void Reset();
  std::string path_;
  int lock_fd_ = -1;
};

// Removes every "<parent>/<prefix>*" directory of this user whose owner is
// gone: its owner.lock can be locked, or it has none and nothing else a
// minute after its creation (an owner killed inside Create). Directories of
// live processes, of other users, with other contents and no owner.lock
// (made before owner locks existed), and links are left alone. Returns how
// many it removed.
int SweepAbandonedScratchDirs(const std::string& parent, const std::string& prefix);

}  // namespace tether::server

#endif  // TETHER_SERVER_SCRATCH_DIR_H_
