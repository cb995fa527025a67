// Exported libraries (docs/design/executable-format.md, "Exported
// libraries"): an executable written as its own CPU kernel library, which
// carries the executable in the non-allocated section ".tether_executable".
// The carried executable's kernel library of format "so" is left empty (the
// library is its own kernels), so nothing is stored twice; loading cuts the
// section off again, which gives back the kernel library byte for byte and
// so the executable as it was exported. A library rewritten by strip or
// objcopy cannot be cut back; its whole image is then the kernel library.
#include "runtime/vm/executable_library.h"

#include <elf.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/device/host_target.h"
#include "runtime/kernel/elf_section.h"
#include "runtime/kernel/kernel_library.h"
#include "runtime/vm/executable.h"

namespace tether::vm {
namespace {

constexpr absl::string_view kSection = ".tether_executable";

// The kernel library an exported library is: the first of format "so".
int CarrierIndex(const Executable& exec) {
  for (size_t i = 0; i < exec.kernel_libraries.size(); ++i) {
    if (exec.kernel_libraries[i].format == "so") return static_cast<int>(i);
  }
  return -1;
}

// Module::LoadFromBinary for ELF images: an exported library is its
// executable, when its kernels run here; any other shared object is loaded
// as a kernel library.
absl::StatusOr<Ref<Module>> LoadSharedLibrary(absl::string_view bytes) {
  if (!FindElfSection(bytes, kSection).ok()) {
    TETHER_ASSIGN_OR_RETURN(uint16_t machine, ElfMachineOf(bytes));
    KernelLibraryBlob blob{"", "so", std::string(bytes)};
    absl::StatusOr<Ref<Module>> lib = LoadKernelLibrary(blob);
    if (!lib.ok()) {
      return Annotate(lib.status(), "shared library for ", ElfMachineName(machine), ": ");
    }
    return lib;
  }
  TETHER_ASSIGN_OR_RETURN(Ref<Executable> exec, Executable::LoadFromBytes(bytes));
  const KernelLibraryBlob& kernels = exec->kernel_libraries[CarrierIndex(*exec)];
  absl::Status runs = CheckRunsOn(kernels.target, ThisHostTarget());
  if (!runs.ok()) return Annotate(runs, "exported library: ");
  return Ref<Module>(std::move(exec));
}

}  // namespace

absl::StatusOr<std::string> Executable::ExportLibraryBytes() const {
  const int carrier = CarrierIndex(*this);
  if (carrier < 0) {
    return PreconditionError(
        "the executable has no CPU kernel library (format \"so\") to export it in; it has ",
        kernel_libraries.empty()
            ? "no kernel libraries"
            : absl::StrCat("only libraries of format \"", kernel_libraries.front().format, "\""));
  }
  TETHER_RETURN_IF_ERROR(Validate());
  // The carried copy leaves the library's bytes out: the library is them.
  absl::StatusOr<std::string> library = AppendElfSection(
      kernel_libraries[carrier].data, kSection, SaveToBytesWithEmptyLibrary(*this, carrier));
  if (!library.ok()) return Annotate(library.status(), "exporting the executable: ");
  return library;
}

absl::Status Executable::ExportLibrary(const std::string& path) const {
  TETHER_ASSIGN_OR_RETURN(std::string library, ExportLibraryBytes());
  return WriteStringToFileAtomic(path, library);
}

// Executable::LoadFromBytes for an ELF image.
absl::StatusOr<Ref<Executable>> LoadExportedLibrary(absl::string_view library) {
  absl::StatusOr<absl::string_view> carried = FindElfSection(library, kSection);
  if (absl::IsNotFound(carried.status())) {
    return ValueError("not a tether executable: a shared library without an executable (no ",
                      kSection, " section): a kernel library, or not written by export_library");
  }
  if (!carried.ok()) {
    return Annotate(carried.status(),
                    "not a tether executable, nor a library written by export_library: ");
  }
  // Exactly one level: a carried image is never another library.
  if (IsElfImage(*carried)) return ValueError("exported library carries another library");
  absl::StatusOr<Ref<Executable>> exec = Executable::LoadFromBytes(*carried);
  if (!exec.ok()) return Annotate(exec.status(), "exported library: ");
  const int carrier = CarrierIndex(**exec);
  if (carrier < 0 || !(*exec)->kernel_libraries[carrier].data.empty()) {
    return ValueError("exported library: its executable does not name the library as its kernels");
  }
  absl::StatusOr<std::string> kernels = RemoveAppendedElfSection(library, kSection);
  if (absl::IsFailedPrecondition(kernels.status())) {
    // Rewritten since (strip, objcopy): still a shared object with the
    // kernels, only not the original bytes. It is the kernel library as is.
    kernels = std::string(library);
  }
  if (!kernels.ok()) return Annotate(kernels.status(), "exported library: ");
  (*exec)->kernel_libraries[carrier].data = std::move(*kernels);
  return exec;
}

void RegisterSharedLibraryLoader() {
  static const bool registered = [] {
    ModuleLoader loader;
    loader.type_key = "library.so";
    loader.magic = std::string(ELFMAG, SELFMAG);
    loader.load = &LoadSharedLibrary;
    // ALREADY_EXISTS means someone registered it first; either way it is there.
    (void)RegisterModuleLoader(std::move(loader));
    return true;
  }();
  (void)registered;
}

}  // namespace tether::vm
