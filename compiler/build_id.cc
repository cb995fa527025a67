// CompilerBuildId: the PT_NOTE segments of the loaded object that holds this
// function, found with dl_iterate_phdr; the object's file as a fallback.
#include "compiler/build_id.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::compiler {
namespace {

struct Search {
  uintptr_t address = 0;  // of a function in the object wanted
  std::string build_id;
  bool found_object = false;
};

// The GNU build ID note in a segment of `size` bytes at `p`, or "".
std::string BuildIdNote(const char* p, size_t size) {
  size_t offset = 0;
  while (offset + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) note;
    std::memcpy(&note, p + offset, sizeof(note));
    const size_t name_at = offset + sizeof(note);
    const size_t desc_at = name_at + ((note.n_namesz + 3) & ~size_t{3});
    const size_t next = desc_at + ((note.n_descsz + 3) & ~size_t{3});
    if (next > size) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(p + name_at, "GNU", 4) == 0) {
      std::string hex;
      for (size_t i = 0; i < note.n_descsz; ++i) {
        absl::StrAppendFormat(&hex, "%02x", static_cast<unsigned char>(p[desc_at + i]));
      }
      return hex;
    }
    offset = next;
  }
  return "";
}

int Visit(struct dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds =
        ph.p_type == PT_LOAD && search->address >= start && search->address < start + ph.p_memsz;
  }
  if (!holds) return 0;
  search->found_object = true;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    search->build_id =
        BuildIdNote(reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
    if (!search->build_id.empty()) break;
  }
  return 1;
}

std::string Compute() {
  Search search;
  search.address = reinterpret_cast<uintptr_t>(&Compute);
  dl_iterate_phdr(&Visit, &search);
  if (!search.build_id.empty()) return search.build_id;
  // No build ID: the file the object was loaded from, by size and time.
  Dl_info info;
  std::string path = "/proc/self/exe";
  if (dladdr(reinterpret_cast<void*>(&Compute), &info) != 0 && info.dli_fname != nullptr &&
      info.dli_fname[0] == '/') {
    path = info.dli_fname;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "unknown-build";
  return absl::StrCat(path, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

}  // namespace

const std::string& CompilerBuildId() {
  static const std::string* const id = new std::string(Compute());
  return *id;
}

}  // namespace tether::compiler
