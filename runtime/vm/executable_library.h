// Exported libraries, the VM's side (executable_library.cc): what
// Executable::LoadFromBytes and RegisterExecutableLoader call for ELF images.
// The public entry points are Executable::ExportLibrary and LoadFromBytes.
#ifndef TETHER_RUNTIME_VM_EXECUTABLE_LIBRARY_H_
#define TETHER_RUNTIME_VM_EXECUTABLE_LIBRARY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/object.h"
#include "runtime/vm/executable.h"

namespace tether::vm {

// The executable a library written by Executable::ExportLibrary carries,
// with its kernel library restored: byte for byte the executable that was
// exported (after strip or objcopy rewrote the file, the whole file is its
// kernel library instead). INVALID_ARGUMENT for a corrupt image and for a shared library
// that carries no executable. Does not check the target (an executable for
// another machine loads, as from a .tx file, and is refused when run).
absl::StatusOr<Ref<Executable>> LoadExportedLibrary(absl::string_view library);

// Executable::SaveToBytes, with kernel library `empty_library` written
// without its data (-1: none): the executable an exported library carries.
std::string SaveToBytesWithEmptyLibrary(const Executable& exec, int empty_library);

// Registers the "library.so" ModuleLoader (ELF magic); idempotent.
void RegisterSharedLibraryLoader();

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_EXECUTABLE_LIBRARY_H_
