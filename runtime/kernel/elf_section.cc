// ELF section surgery for exported libraries (elf_section.h). The section
// header table and the section name table are rewritten at the end of the
// file; the original table stays where it was, so removing the section is
// cutting the file and restoring two header fields.
#include "runtime/kernel/elf_section.h"

#include <elf.h>

#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

struct Elf32 {
  using Ehdr = Elf32_Ehdr;
  using Shdr = Elf32_Shdr;
  static constexpr uint64_t kMaxOffset = std::numeric_limits<uint32_t>::max();
};
struct Elf64 {
  using Ehdr = Elf64_Ehdr;
  using Shdr = Elf64_Shdr;
  static constexpr uint64_t kMaxOffset = std::numeric_limits<uint64_t>::max();
};

bool RangeInside(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

// An image's header, its section headers and its section name table.
template <typename C>
struct Sections {
  typename C::Ehdr header;
  std::vector<typename C::Shdr> headers;
  absl::string_view names;  // the section name table's bytes

  // The name of section `i`, or "" when its name lies outside the table.
  absl::string_view NameOf(size_t i) const {
    const uint64_t at = headers[i].sh_name;
    if (at >= names.size()) return "";
    absl::string_view rest = names.substr(at);
    return rest.substr(0, strnlen(rest.data(), rest.size()));
  }
  // The index of section `name`, or -1.
  int Find(absl::string_view name) const {
    for (size_t i = 1; i < headers.size(); ++i) {
      if (NameOf(i) == name) return static_cast<int>(i);
    }
    return -1;
  }
};

template <typename C>
absl::StatusOr<Sections<C>> ReadSections(absl::string_view image) {
  Sections<C> s;
  if (image.size() < sizeof(s.header)) return ValueError("ELF image is truncated in its header");
  std::memcpy(&s.header, image.data(), sizeof(s.header));
  const auto& eh = s.header;
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return ValueError("ELF image is not little-endian");
  if (eh.e_shnum == 0 || eh.e_shnum >= SHN_LORESERVE) {
    return ValueError("ELF image has ", eh.e_shnum == 0 ? "no" : "too many", " section headers");
  }
  if (eh.e_shentsize != sizeof(typename C::Shdr) ||
      !RangeInside(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(typename C::Shdr), image.size())) {
    return ValueError("ELF image has a corrupt section header table");
  }
  s.headers.resize(eh.e_shnum);
  std::memcpy(s.headers.data(), image.data() + eh.e_shoff,
              s.headers.size() * sizeof(typename C::Shdr));
  if (eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum) {
    return ValueError("ELF image has no section name table");
  }
  const auto& strtab = s.headers[eh.e_shstrndx];
  if (strtab.sh_type != SHT_STRTAB ||
      !RangeInside(strtab.sh_offset, strtab.sh_size, image.size())) {
    return ValueError("ELF image has a corrupt section name table");
  }
  s.names = image.substr(strtab.sh_offset, strtab.sh_size);
  return s;
}

absl::StatusOr<unsigned char> ClassOf(absl::string_view image) {
  if (!IsElfImage(image) || image.size() <= EI_CLASS) {
    return ValueError("not an ELF image (", image.size(), " bytes)");
  }
  const auto cls = static_cast<unsigned char>(image[EI_CLASS]);
  if (cls != ELFCLASS32 && cls != ELFCLASS64) return ValueError("ELF image has class ", int{cls});
  return cls;
}

template <typename T>
void Put(std::string* out, size_t at, const T& value) {
  std::memcpy(out->data() + at, &value, sizeof(T));
}

template <typename C>
absl::StatusOr<std::string> Append(absl::string_view image, absl::string_view name,
                                   absl::string_view payload) {
  TETHER_ASSIGN_OR_RETURN(Sections<C> s, ReadSections<C>(image));
  if (s.Find(name) >= 0) {
    return absl::AlreadyExistsError(absl::StrCat("ELF image already has a section ", name));
  }
  using Shdr = typename C::Shdr;
  if (uint64_t{s.header.e_shoff} + s.headers.size() * sizeof(Shdr) != image.size()) {
    return PreconditionError("the ELF image's section header table does not end the file");
  }
  if (s.names.empty() || s.names.back() != '\0') {
    return ValueError("ELF image's section name table is not terminated");
  }
  std::string out(image);
  const uint64_t payload_at = out.size();
  out.append(payload.data(), payload.size());
  const uint64_t names_at = out.size();
  out.append(s.names.data(), s.names.size());
  out.append(name.data(), name.size());
  out.push_back('\0');
  const uint64_t names_size = out.size() - names_at;
  out.resize((out.size() + alignof(Shdr) - 1) / alignof(Shdr) * alignof(Shdr), '\0');
  const uint64_t headers_at = out.size();
  if (headers_at + (s.headers.size() + 1) * sizeof(Shdr) > C::kMaxOffset) {
    return ValueError("the section does not fit a 32-bit ELF image");
  }
  Shdr added{};
  added.sh_name = static_cast<decltype(added.sh_name)>(s.names.size());
  added.sh_type = SHT_PROGBITS;
  added.sh_offset = static_cast<decltype(added.sh_offset)>(payload_at);
  added.sh_size = static_cast<decltype(added.sh_size)>(payload.size());
  added.sh_addralign = 1;
  s.headers[s.header.e_shstrndx].sh_offset = static_cast<decltype(added.sh_offset)>(names_at);
  s.headers[s.header.e_shstrndx].sh_size = static_cast<decltype(added.sh_size)>(names_size);
  s.headers.push_back(added);
  out.append(reinterpret_cast<const char*>(s.headers.data()), s.headers.size() * sizeof(Shdr));
  s.header.e_shoff = static_cast<decltype(s.header.e_shoff)>(headers_at);
  s.header.e_shnum = static_cast<decltype(s.header.e_shnum)>(s.headers.size());
  Put(&out, 0, s.header);
  return out;
}

template <typename C>
absl::StatusOr<absl::string_view> Find(absl::string_view image, absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(Sections<C> s, ReadSections<C>(image));
  const int i = s.Find(name);
  if (i < 0) return NotFoundError("ELF image has no section ", name);
  const auto& h = s.headers[i];
  if (h.sh_type == SHT_NOBITS || !RangeInside(h.sh_offset, h.sh_size, image.size())) {
    return ValueError("ELF section ", name, " lies outside the ", image.size(), "-byte image");
  }
  return image.substr(h.sh_offset, h.sh_size);
}

template <typename C>
absl::StatusOr<std::string> Remove(absl::string_view image, absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(Sections<C> s, ReadSections<C>(image));
  using Shdr = typename C::Shdr;
  const size_t last = s.headers.size() - 1;
  if (s.Find(name) != static_cast<int>(last) || last < 2) {
    return PreconditionError("ELF section ", name, " was not appended last");
  }
  // The original image ended with its section header table, right before
  // the appended payload.
  const uint64_t end = s.headers[last].sh_offset;
  const uint64_t table = uint64_t{last} * sizeof(Shdr);
  if (end > image.size() || end < table + sizeof(s.header)) {
    return PreconditionError("ELF section ", name, " does not follow the original image");
  }
  std::string out(image.substr(0, end));
  auto header = s.header;
  header.e_shoff = static_cast<decltype(header.e_shoff)>(end - table);
  header.e_shnum = static_cast<decltype(header.e_shnum)>(last);
  Put(&out, 0, header);
  // The original table must be the new one less the name table's move.
  TETHER_ASSIGN_OR_RETURN(Sections<C> original, ReadSections<C>(out));
  for (size_t i = 0; i < last; ++i) {
    if (i == s.header.e_shstrndx) continue;
    if (std::memcmp(&original.headers[i], &s.headers[i], sizeof(Shdr)) != 0) {
      return PreconditionError("ELF section ", name, " does not follow the original image");
    }
  }
  return out;
}

}  // namespace

bool IsElfImage(absl::string_view bytes) {
  return bytes.size() >= SELFMAG && std::memcmp(bytes.data(), ELFMAG, SELFMAG) == 0;
}

absl::StatusOr<uint16_t> ElfMachineOf(absl::string_view image) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  if (cls == ELFCLASS32 ? image.size() < sizeof(Elf32_Ehdr) : image.size() < sizeof(Elf64_Ehdr)) {
    return ValueError("ELF image is truncated in its header");
  }
  uint16_t machine = 0;  // at the same offset in both classes
  std::memcpy(&machine, image.data() + offsetof(Elf64_Ehdr, e_machine), sizeof(machine));
  return machine;
}

std::string ElfMachineName(uint16_t machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_ARM:
      return "arm";
    case EM_RISCV:
      return "riscv";
    case EM_386:
      return "i386";
    default:
      return absl::StrCat("ELF machine ", machine);
  }
}

absl::StatusOr<std::string> AppendElfSection(absl::string_view image, absl::string_view name,
                                             absl::string_view payload) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  return cls == ELFCLASS32 ? Append<Elf32>(image, name, payload)
                           : Append<Elf64>(image, name, payload);
}

absl::StatusOr<absl::string_view> FindElfSection(absl::string_view image, absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  return cls == ELFCLASS32 ? Find<Elf32>(image, name) : Find<Elf64>(image, name);
}

absl::StatusOr<std::string> RemoveAppendedElfSection(absl::string_view image,
                                                     absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  return cls == ELFCLASS32 ? Remove<Elf32>(image, name) : Remove<Elf64>(image, name);
}

}  // namespace tether
