// Fuzz target: bytes -> vm::Executable::LoadFromBytes. The loader validates
// everything before a VM may run it; no input may crash it, and what it
// accepts must save back to bytes that load again.
#include <cstdint>
#include <cstdlib>

#include "runtime/vm/executable.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tether::Ref<tether::vm::Executable>> exec =
      tether::vm::Executable::LoadFromBytes(bytes);
  if (!exec.ok()) return 0;
  if (!tether::vm::Executable::LoadFromBytes((*exec)->SaveToBytes()).ok()) std::abort();
  return 0;
}
