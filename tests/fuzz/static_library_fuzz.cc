// Fuzz target: bytes -> LoadStaticLibrary (a system library archive read
// without linking it: the ar archive, its symbol table, the ELF object's
// symbol table and the manifest; runtime/kernel/static_library.h).
#include <cstdint>

#include "runtime/kernel/static_library.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)tether::LoadStaticLibrary(bytes);
  return 0;
}
