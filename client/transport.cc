// Names of the transports, for messages and benchmark tables.
#include "client/transport.h"

namespace tether::client {

absl::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kDirect:
      return "direct";
    case TransportKind::kStream:
      return "stream";
    case TransportKind::kUnary:
      return "unary";
  }
  return "unknown";
}

}  // namespace tether::client
