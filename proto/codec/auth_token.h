// Bearer tokens on disk: reading an operator's token file, and the per-user
// default token that tetherd and the tether CLI share, so that a daemon on a
// multi-user host is open to its own user only without any configuration
// (docs/design/security.md, "Local users").
#ifndef TETHER_PROTO_CODEC_AUTH_TOKEN_H_
#define TETHER_PROTO_CODEC_AUTH_TOKEN_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether::rpc {

// The token in the file at `path`, with surrounding white space trimmed.
// INVALID_ARGUMENT naming the file when it cannot be read or is blank.
// With `private_file`, also FAILED_PRECONDITION when the file is readable by
// other users or writable by anyone but its owner (a secret others can read
// is no secret; a group may read it, so an operator can share it with one).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, bool private_file);

// Where the default token lives: $TETHER_TOKEN_FILE when set, else
// $XDG_CONFIG_HOME/tether/token, else $HOME/.config/tether/token, else
// .config/tether/token in the user's home from the password database. Empty
// when none of those is known.
std::string DefaultTokenPath();

// The token at `path`, created when missing: 32 random bytes as 64 hex
// characters in a new 0600 file, its directory created 0700. A file that
// exists is read as ReadTokenFile(path, true) reads it. UNAVAILABLE when the
// file cannot be created.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& path);

// Whether `address` ("host:port", "ipv4:...", "[::1]:port", "unix:PATH")
// reaches only this host: a unix: socket, "localhost", or an IP literal in
// 127.0.0.0/8 or ::1 (a host name that merely starts with "127." does not).
// Where a daemon may use the default token, and where a client sends it.
bool IsLocalAddress(absl::string_view address);

// `bytes` random bytes from getrandom, as 2 * bytes lower-case hex digits.
std::string RandomHex(size_t bytes);

// A fresh random token: RandomHex(32).
inline std::string RandomToken() { return RandomHex(32); }

}  // namespace tether::rpc

#endif  // TETHER_PROTO_CODEC_AUTH_TOKEN_H_
