// Fuzz target: bytes -> the ONNX importer (a model file as a user brings
// it). Every malformed model must be a clear error.
#include <cstdint>

#include "compiler/frontend/onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)tether::compiler::onnx_frontend::ImportOnnxBytes(bytes);
  return 0;
}
