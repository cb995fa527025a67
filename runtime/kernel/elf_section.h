// Named sections added to, found in and removed from an ELF image, without a
// linker: how an executable rides inside its own kernel library when it is
// exported as a shared library (docs/design/executable-format.md, "Exported
// libraries"). The section is not allocated, so the dynamic loader never
// maps it; tools that read section headers (readelf, objcopy) see it. Also
// the bytes a symbol of the symbol table defines, which is how a system
// library's manifest is read from its object without linking it
// (static_library.h).
//
// Every function reads untrusted bytes: each offset and size is checked
// before use, and anything malformed is INVALID_ARGUMENT. 32- and 64-bit
// little-endian images are handled alike. Thread-safe (no state).
#ifndef TETHER_RUNTIME_KERNEL_ELF_SECTION_H_
#define TETHER_RUNTIME_KERNEL_ELF_SECTION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether {

// Whether `bytes` begins with the ELF magic.
bool IsElfImage(absl::string_view bytes);

// The ELF machine of an image (e_machine), e.g. 62 for x86-64;
// INVALID_ARGUMENT when `image` has no ELF header.
absl::StatusOr<uint16_t> ElfMachineOf(absl::string_view image);
// A readable name of an ELF machine: "x86_64", "aarch64", "arm", "riscv", or
// "ELF machine N".
std::string ElfMachineName(uint16_t machine);
// The ELF machine this process runs on (EM_NONE where it is none of the
// above).
uint16_t HostElfMachine();
// The ELF type of an image (e_type): ET_REL for a relocatable object, ET_DYN
// for a shared object; INVALID_ARGUMENT when `image` has no ELF header.
absl::StatusOr<uint16_t> ElfTypeOf(absl::string_view image);

// `image` with a non-allocated section `name` holding `payload` appended:
// the original bytes, then the payload, the section name table with `name`
// added, and the section header table with one more entry; only the
// header's e_shoff and e_shnum change. The image's section header table
// must end the file (as lld and ld write it): FAILED_PRECONDITION
// otherwise, and ALREADY_EXISTS when it has a section `name`.
absl::StatusOr<std::string> AppendElfSection(absl::string_view image, absl::string_view name,
                                             absl::string_view payload);

// The contents of section `name`; NOT_FOUND when the image has none.
absl::StatusOr<absl::string_view> FindElfSection(absl::string_view image, absl::string_view name);

// The bytes that the defined symbol `name` of the symbol table (.symtab)
// covers: st_size bytes at st_value in its section (an offset in a
// relocatable object, an address elsewhere). Local symbols count, so a
// static function or constant is found by its name. NOT_FOUND when the image
// has no symbol table or no defined symbol `name`; INVALID_ARGUMENT when two
// define it, or the table, its string table, or the symbol's bytes lie
// outside the image or its section.
absl::StatusOr<absl::string_view> FindElfSymbolBytes(absl::string_view image,
                                                     absl::string_view name);

// Undoes AppendElfSection: the image byte for byte as it was before `name`
// was appended. FAILED_PRECONDITION when `name` is not the last section and
// its payload does not follow the original image's end.
absl::StatusOr<std::string> RemoveAppendedElfSection(absl::string_view image,
                                                     absl::string_view name);

}  // namespace tether

#endif  // TETHER_RUNTIME_KERNEL_ELF_SECTION_H_
