// Fuzz target: bytes -> the parameter-dict loader (weights files,
// docs/design/param-dict-format.md).
#include <cstdint>

#include "runtime/module/param_dict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)tether::LoadParamDict(bytes);
  return 0;
}
