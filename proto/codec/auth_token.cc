// Token files: the operator's, checked for privacy, and the per-user default
// created on first use.
#include "proto/codec/auth_token.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace tether::rpc {
namespace {

std::string Errno(int error) { return std::strerror(error); }

// Reads all of `fd`; false on a read error.
bool ReadAll(int fd, std::string* out) {
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out->append(buffer, static_cast<size_t>(n));
    if (out->size() > (1 << 16)) return false;  // no token is this long
  }
}

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, bool private_file) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read token file ", path, ": ", Errno(errno)));
  }
  struct stat st;
  std::string text;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const bool read_ok = stat_ok && S_ISREG(st.st_mode) && ReadAll(fd, &text);
  ::close(fd);
  if (!read_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read token file ", path, " (not a regular file under 64 KiB)"));
  }
  if (private_file && (st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "token file ", path, " has mode ", absl::StrFormat("%o", st.st_mode & 07777),
        ": other users may read or write it; chmod 600 (or 640 to share it with a group)"));
  }
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  }
  return token;
}

std::string DefaultTokenPath() {
  if (const char* explicit_path = std::getenv("TETHER_TOKEN_FILE");
      explicit_path != nullptr && explicit_path[0] != '\0') {
    return explicit_path;
  }
  if (const char* config = std::getenv("XDG_CONFIG_HOME"); config != nullptr && config[0] == '/') {
    return absl::StrCat(config, "/tether/token");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return absl::StrCat(home, "/.config/tether/token");
  }
  // No HOME (a service started with an empty environment): the user's home
  // from the password database.
  if (const passwd* user = ::getpwuid(::geteuid());
      user != nullptr && user->pw_dir != nullptr && user->pw_dir[0] == '/') {
    return absl::StrCat(user->pw_dir, "/.config/tether/token");
  }
  return "";
}

bool IsLocalAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) return true;
  absl::string_view host = address.substr(0, address.rfind(':'));
  absl::ConsumePrefix(&host, "ipv4:");
  absl::ConsumePrefix(&host, "ipv6:");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  const std::string literal(host);
  in_addr v4;
  if (::inet_pton(AF_INET, literal.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  return ::inet_pton(AF_INET6, literal.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(raw);
}

absl::StatusOr<std::string> LoadOrCreateToken(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "no default token file: set TETHER_TOKEN_FILE, XDG_CONFIG_HOME or HOME");
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    // Each directory we create is private; existing ones are left as they are.
    std::filesystem::path partial;
    for (const auto& part : parent) {
      partial /= part;
      if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
        return absl::UnavailableError(
            absl::StrCat("cannot create directory ", partial.string(), ": ", Errno(errno)));
      }
    }
  }
  if (::access(path.c_str(), F_OK) == 0) return ReadTokenFile(path, true);
  // Written whole under a temporary name, then linked into place: a process
  // racing us reads either no file or the whole token, never half of one.
  std::string temp = path + ".XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create token file ", path, ": ", Errno(errno)));
  }
  const std::string token = RandomToken();
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = ::close(fd) == 0;
  const int linked = written && closed ? ::link(temp.c_str(), path.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked != 0) {
    if (written && closed && link_errno == EEXIST) return ReadTokenFile(path, true);
    return absl::UnavailableError(absl::StrCat("cannot write token file ", path));
  }
  return token;
}

}  // namespace tether::rpc
