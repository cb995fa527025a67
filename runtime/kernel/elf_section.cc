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
  using Sym = Elf32_Sym;
  static constexpr uint64_t kMaxOffset = std::numeric_limits<uint32_t>::max();
};
struct Elf64 {
  using Ehdr = Elf64_Ehdr;
  using Shdr = Elf64_Shdr;
  using Sym = Elf64_Sym;
  static constexpr uint64_t kMaxOffset = std::numeric_limits<uint64_t>::max();
};

bool RangeInside(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

// A NUL-terminated name at `at` in a string table, or "" when it lies outside.
absl::string_view StringAt(absl::string_view table, uint64_t at) {
  if (at >= table.size()) return "";
  absl::string_view rest = table.substr(at);
  return rest.substr(0, strnlen(rest.data(), rest.size()));
}

// An image's header, its section headers and its section name table.
template <typename C>
struct Sections {
  typename C::Ehdr header;
  std::vector<typename C::Shdr> headers;
  absl::string_view names;  // the section name table's bytes

  // The name of section `i`, or "" when its name lies outside the table.
  absl::string_view NameOf(size_t i) const { return StringAt(names, headers[i].sh_name); }
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
absl::StatusOr<absl::string_view> FindSymbol(absl::string_view image, absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(Sections<C> s, ReadSections<C>(image));
  using Sym = typename C::Sym;
  size_t table = 0;
  for (size_t i = 1; i < s.headers.size() && table == 0; ++i) {
    if (s.headers[i].sh_type == SHT_SYMTAB) table = i;
  }
  if (table == 0) return NotFoundError("ELF image has no symbol table");
  const auto& symtab = s.headers[table];
  if (symtab.sh_entsize != sizeof(Sym) ||
      !RangeInside(symtab.sh_offset, symtab.sh_size, image.size())) {
    return ValueError("ELF symbol table (section ", table, ") lies outside the ", image.size(),
                      "-byte image or has entries of ", symtab.sh_entsize, " bytes");
  }
  if (symtab.sh_link == 0 || symtab.sh_link >= s.headers.size() ||
      s.headers[symtab.sh_link].sh_type != SHT_STRTAB ||
      !RangeInside(s.headers[symtab.sh_link].sh_offset, s.headers[symtab.sh_link].sh_size,
                   image.size())) {
    return ValueError("ELF symbol table (section ", table, ") has a corrupt string table");
  }
  const auto& strtab = s.headers[symtab.sh_link];
  const absl::string_view strings = image.substr(strtab.sh_offset, strtab.sh_size);
  const uint64_t count = symtab.sh_size / sizeof(Sym);
  bool found = false;
  Sym sym{};
  for (uint64_t i = 1; i < count; ++i) {
    Sym candidate;
    std::memcpy(&candidate, image.data() + symtab.sh_offset + i * sizeof(Sym), sizeof(Sym));
    if (candidate.st_shndx == SHN_UNDEF || candidate.st_shndx >= SHN_LORESERVE ||
        StringAt(strings, candidate.st_name) != name) {
      continue;
    }
    if (found) return ValueError("ELF image defines symbol ", name, " twice");
    found = true;
    sym = candidate;
  }
  if (!found) return NotFoundError("ELF image defines no symbol ", name);
  if (sym.st_shndx >= s.headers.size()) {
    return ValueError("ELF symbol ", name, " is in section ", sym.st_shndx, " of ",
                      s.headers.size());
  }
  const auto& section = s.headers[sym.st_shndx];
  // In a relocatable object a symbol's value is its offset in its section;
  // elsewhere it is an address.
  const bool relocatable = s.header.e_type == ET_REL;
  const uint64_t value = sym.st_value;
  if (section.sh_type == SHT_NOBITS ||
      !RangeInside(section.sh_offset, section.sh_size, image.size()) ||
      (!relocatable && value < section.sh_addr) ||
      !RangeInside(relocatable ? value : value - section.sh_addr, sym.st_size, section.sh_size)) {
    return ValueError("ELF symbol ", name, " (", sym.st_size, " bytes at ", value,
                      ") lies outside its section or the ", image.size(), "-byte image");
  }
  return image.substr(section.sh_offset + (relocatable ? value : value - section.sh_addr),
                      sym.st_size);
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

namespace {
// A 16-bit field at the same offset in both classes' headers.
absl::StatusOr<uint16_t> HeaderField(absl::string_view image, size_t offset) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  if (cls == ELFCLASS32 ? image.size() < sizeof(Elf32_Ehdr) : image.size() < sizeof(Elf64_Ehdr)) {
    return ValueError("ELF image is truncated in its header");
  }
  uint16_t value = 0;
  std::memcpy(&value, image.data() + offset, sizeof(value));
  return value;
}
}  // namespace

absl::StatusOr<uint16_t> ElfMachineOf(absl::string_view image) {
  static_assert(offsetof(Elf32_Ehdr, e_machine) == offsetof(Elf64_Ehdr, e_machine));
  return HeaderField(image, offsetof(Elf64_Ehdr, e_machine));
}

absl::StatusOr<uint16_t> ElfTypeOf(absl::string_view image) {
  static_assert(offsetof(Elf32_Ehdr, e_type) == offsetof(Elf64_Ehdr, e_type));
  return HeaderField(image, offsetof(Elf64_Ehdr, e_type));
}

uint16_t HostElfMachine() {
#if defined(__x86_64__)
  return EM_X86_64;
#elif defined(__aarch64__)
  return EM_AARCH64;
#elif defined(__arm__)
  return EM_ARM;
#elif defined(__riscv)
  return EM_RISCV;
#elif defined(__i386__)
  return EM_386;
#else
  return EM_NONE;
#endif
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

absl::StatusOr<absl::string_view> FindElfSymbolBytes(absl::string_view image,
                                                     absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  return cls == ELFCLASS32 ? FindSymbol<Elf32>(image, name) : FindSymbol<Elf64>(image, name);
}

absl::StatusOr<std::string> RemoveAppendedElfSection(absl::string_view image,
                                                     absl::string_view name) {
  TETHER_ASSIGN_OR_RETURN(unsigned char cls, ClassOf(image));
  return cls == ELFCLASS32 ? Remove<Elf32>(image, name) : Remove<Elf64>(image, name);
}

}  // namespace tether
