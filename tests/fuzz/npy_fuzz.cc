// Fuzz target: bytes -> the .npy reader (`tether run --input x=@x.npy`);
// what it accepts must encode back to .npy and decode to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "client/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tether::Tensor> tensor = tether::client::DecodeNpy(bytes);
  if (!tensor.ok()) return 0;
  absl::StatusOr<std::string> again = tether::client::EncodeNpy(*tensor);
  if (!again.ok()) return 0;  // a dtype .npy can carry but the writer refuses
  absl::StatusOr<tether::Tensor> back = tether::client::DecodeNpy(*again);
  if (!back.ok() || (*back)->NumBytes() != (*tensor)->NumBytes()) std::abort();
  if (std::memcmp((*back)->element_data(), (*tensor)->element_data(),
                  static_cast<size_t>((*tensor)->NumBytes())) != 0) {
    std::abort();
  }
  return 0;
}
