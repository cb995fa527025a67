// SHA-256 of module bytes (sha256.h), through OpenSSL.
#include "proto/codec/sha256.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"

namespace tether::rpc {

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

bool IsSha256Hex(absl::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace tether::rpc
