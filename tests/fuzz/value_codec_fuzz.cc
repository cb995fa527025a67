// Fuzz target: bytes -> v1::Value (protobuf) -> rpc::DecodeValue, the path
// every argument a client sends takes into the daemon. Handles resolve to
// NOT_FOUND as in a session that holds nothing; what decodes must encode
// again.
#include <cstdint>
#include <cstdlib>

#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tether::v1::Value wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return 0;
  tether::rpc::DecodeOptions options;
  options.resolve_tensor_handle = [](uint64_t id) -> absl::StatusOr<tether::Value> {
    return tether::NotFoundError("tensor handle ", id);
  };
  options.resolve_object_handle = [](uint64_t id) -> absl::StatusOr<tether::Value> {
    return tether::NotFoundError("object handle ", id);
  };
  absl::StatusOr<tether::Value> value = tether::rpc::DecodeValue(wire, options);
  if (!value.ok()) return 0;
  tether::rpc::EncodeOptions encode;
  tether::v1::Value again;
  (void)tether::rpc::EncodeValue(*value, encode, &again);
  return 0;
}
