// Whole-file read and atomic write (file.h).
#include "runtime/core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

absl::Status ErrnoError(int err, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(std::string(what), " ", path));
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError("cannot find file ", path);
    return ErrnoError(err, "cannot open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, "cannot stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, expected a file"));
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("file ", path, " has ", st.st_size,
                                                   " bytes, more than the limit of ", max_bytes));
  }
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError(err, "cannot read", path);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("file ", path, " is larger than the limit of ", max_bytes, " bytes"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::Status WriteStringToFileAtomic(const std::string& path, absl::string_view bytes) {
  if (path.empty()) return absl::InvalidArgumentError("cannot write a file with an empty path");
  // The temporary lives in the target's directory so the rename stays on one
  // file system and is atomic.
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot create a temporary file for", path);
  auto fail = [&](int err, absl::string_view what) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return ErrnoError(err, what, path);
  };
  (void)::fchmod(fd, 0644);  // mkostemp makes 0600; a saved module should be readable
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, "cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail(errno, "cannot sync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return ErrnoError(err, "cannot close", path);
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return ErrnoError(err, "cannot rename a temporary file onto", path);
  }
  // Make the rename itself durable.
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace tether
