// GNU `ar` archives read from untrusted bytes: the container of a system
// library (format "static", docs/design/kernel-abi.md, "System libraries"),
// which `tether compile --system-lib` writes and a board's daemon links.
// The reader lists the members with their names and bytes and the archive's
// symbol table (which member defines each global symbol); it never copies a
// member and never reads past the end of the bytes.
//
// Thread-safe (no state).
#ifndef TETHER_RUNTIME_KERNEL_AR_ARCHIVE_H_
#define TETHER_RUNTIME_KERNEL_AR_ARCHIVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether {

// One file of an archive. `data` views the archive's bytes.
struct ArMember {
  std::string name;        // "kernels.o" (long names resolved)
  uint64_t header_offset;  // where its 60-byte header starts in the archive
  absl::string_view data;
};

// One entry of the archive's symbol table: a global symbol and the member
// that defines it (by that member's header offset).
struct ArSymbol {
  std::string name;
  uint64_t member_offset;
};

// An archive read by ReadArArchive. Views the bytes it was read from: they
// must outlive it.
struct ArArchive {
  std::vector<ArMember> members;  // in file order, without the symbol and name tables
  std::vector<ArSymbol> symbols;  // in table order; empty when the archive has no table

  // The member whose header starts at `header_offset`, or nullptr.
  const ArMember* MemberAt(uint64_t header_offset) const;
};

// Whether `bytes` begins with the archive magic "!<arch>\n".
bool IsArArchive(absl::string_view bytes);

// Reads a GNU archive ("!<arch>\n", members of a 60-byte header and their
// data padded to an even offset; "/" or "/SYM64/" is the symbol table, "//"
// the long name table). INVALID_ARGUMENT, naming the member or table and the
// offset, for anything malformed: a truncated header or member, a size that
// is not a decimal number or runs past the end, a bad header terminator, a
// long name outside the name table, a symbol table whose count does not fit
// or whose entries point at no member, or a BSD-style archive.
absl::StatusOr<ArArchive> ReadArArchive(absl::string_view bytes);

}  // namespace tether

#endif  // TETHER_RUNTIME_KERNEL_AR_ARCHIVE_H_
