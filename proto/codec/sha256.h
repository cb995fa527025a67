// SHA-256 digests, the identity of a module in the store and on the wire.
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_PROTO_CODEC_SHA256_H_
#define TETHER_PROTO_CODEC_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tether::rpc {

// Lower-case hex SHA-256 of `bytes` (module identity in the store).
std::string Sha256Hex(absl::string_view bytes);
bool IsSha256Hex(absl::string_view text);

}  // namespace tether::rpc

#endif  // TETHER_PROTO_CODEC_SHA256_H_
