// Reading GNU ar archives (ar_archive.h). Headers and member data are taken
// through ByteReader, so every read is bounded by what is left; the symbol
// table's big-endian count is believed only when its entries fit the table.
#include "runtime/kernel/ar_archive.h"

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/core/byte_io.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

constexpr absl::string_view kMagic = "!<arch>\n";
constexpr uint64_t kHeaderSize = 60;

template <typename... Args>
absl::Status ArchiveError(const Args&... args) {
  return ValueError("ar archive: ", args...);
}

// A member as its header gives it, before long names are resolved.
struct RawMember {
  std::string name;  // the header's name field, trailing spaces removed
  uint64_t header_offset;
  absl::string_view data;
};

absl::StatusOr<uint64_t> DecimalField(absl::string_view field, uint64_t header_offset) {
  absl::string_view digits = absl::StripTrailingAsciiWhitespace(field);
  uint64_t value = 0;
  if (digits.empty() || !absl::c_all_of(digits, absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &value)) {
    return ArchiveError("member header at offset ", header_offset, " has size \"",
                        absl::CEscape(field), "\", not a decimal number");
  }
  return value;
}

absl::StatusOr<std::vector<RawMember>> ReadMembers(absl::string_view bytes) {
  ByteReader reader(bytes, "ar archive");
  TETHER_RETURN_IF_ERROR(reader.Bytes(kMagic.size(), "magic").status());
  std::vector<RawMember> members;
  while (!reader.done()) {
    RawMember m;
    m.header_offset = reader.pos();
    TETHER_ASSIGN_OR_RETURN(absl::string_view header, reader.Bytes(kHeaderSize, "member header"));
    if (header.substr(58, 2) != "`\n") {
      return ArchiveError("member header at offset ", m.header_offset,
                          " does not end in \"`\\n\" (a corrupt or non-GNU archive)");
    }
    m.name = std::string(absl::StripTrailingAsciiWhitespace(header.substr(0, 16)));
    if (absl::StartsWith(m.name, "#1/")) {
      return ArchiveError("member at offset ", m.header_offset,
                          " has a BSD long name; only GNU archives are read");
    }
    TETHER_ASSIGN_OR_RETURN(uint64_t size, DecimalField(header.substr(48, 10), m.header_offset));
    TETHER_ASSIGN_OR_RETURN(
        m.data, reader.Bytes(size, absl::StrCat("member ", m.name, " (header at offset ",
                                                m.header_offset, ")")));
    // Data is padded to an even offset; the last member may omit its pad.
    if (size % 2 == 1 && !reader.done()) {
      TETHER_RETURN_IF_ERROR(reader.Bytes(1, "member padding").status());
    }
    members.push_back(std::move(m));
  }
  return members;
}

uint64_t BigEndian(absl::string_view bytes) {
  uint64_t value = 0;
  for (char c : bytes) value = (value << 8) | static_cast<unsigned char>(c);
  return value;
}

// The GNU symbol table: a big-endian count of `width` bytes, that many
// big-endian member offsets, then that many NUL-terminated names.
absl::StatusOr<std::vector<ArSymbol>> ReadSymbolTable(const RawMember& table, size_t width) {
  absl::string_view data = table.data;
  if (data.size() < width) {
    return ArchiveError("symbol table at offset ", table.header_offset, " is ", data.size(),
                        " bytes, too short for its count");
  }
  const uint64_t count = BigEndian(data.substr(0, width));
  if (count > (data.size() - width) / width) {
    return ArchiveError("symbol table at offset ", table.header_offset, " claims ", count,
                        " symbols but has ", data.size(), " bytes");
  }
  absl::string_view names = data.substr(width + count * width);
  std::vector<ArSymbol> symbols;
  symbols.reserve(count);
  size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const size_t end = names.find('\0', at);
    if (end == absl::string_view::npos) {
      return ArchiveError("symbol table at offset ", table.header_offset,
                          " lacks the name of symbol ", i, " of ", count);
    }
    symbols.push_back(ArSymbol{std::string(names.substr(at, end - at)),
                               BigEndian(data.substr(width + i * width, width))});
    at = end + 1;
  }
  return symbols;
}

// A GNU long name: "/N" is the name at offset N of the "//" table, ended by "/\n".
absl::StatusOr<std::string> LongName(const RawMember& m, absl::string_view long_names) {
  uint64_t at = 0;
  if (!absl::SimpleAtoi(absl::string_view(m.name).substr(1), &at) || at >= long_names.size()) {
    return ArchiveError("member at offset ", m.header_offset, " has long name \"", m.name,
                        "\" outside the ", long_names.size(), "-byte name table");
  }
  const size_t end = long_names.find("/\n", at);
  if (end == absl::string_view::npos) {
    return ArchiveError("member at offset ", m.header_offset, " has an unterminated long name");
  }
  return std::string(long_names.substr(at, end - at));
}

}  // namespace

const ArMember* ArArchive::MemberAt(uint64_t header_offset) const {
  for (const ArMember& m : members) {
    if (m.header_offset == header_offset) return &m;
  }
  return nullptr;
}

bool IsArArchive(absl::string_view bytes) { return absl::StartsWith(bytes, kMagic); }

absl::StatusOr<ArArchive> ReadArArchive(absl::string_view bytes) {
  if (!IsArArchive(bytes)) {
    return ArchiveError("not an ar archive (", bytes.size(), " bytes, no \"!<arch>\" magic)");
  }
  TETHER_ASSIGN_OR_RETURN(std::vector<RawMember> raw, ReadMembers(bytes));
  ArArchive archive;
  const RawMember* long_names = nullptr;
  bool has_symbols = false;
  for (const RawMember& m : raw) {
    if (m.name == "/" || m.name == "/SYM64/") {
      if (has_symbols) return ArchiveError("second symbol table at offset ", m.header_offset);
      has_symbols = true;
      TETHER_ASSIGN_OR_RETURN(archive.symbols, ReadSymbolTable(m, m.name == "/" ? 4 : 8));
    } else if (m.name == "//") {
      if (long_names != nullptr) {
        return ArchiveError("second long name table at offset ", m.header_offset);
      }
      long_names = &m;
    }
  }
  for (const RawMember& m : raw) {
    if (m.name == "/" || m.name == "/SYM64/" || m.name == "//") continue;
    ArMember member{m.name, m.header_offset, m.data};
    if (absl::StartsWith(m.name, "/")) {
      TETHER_ASSIGN_OR_RETURN(member.name,
                              LongName(m, long_names != nullptr ? long_names->data : ""));
    } else if (absl::EndsWith(m.name, "/")) {
      member.name.pop_back();
    }
    archive.members.push_back(std::move(member));
  }
  absl::flat_hash_set<uint64_t> starts;
  for (const ArMember& m : archive.members) starts.insert(m.header_offset);
  for (const ArSymbol& s : archive.symbols) {
    if (!starts.contains(s.member_offset)) {
      return ArchiveError("symbol ", s.name, " points at offset ", s.member_offset,
                          ", where no member starts");
    }
  }
  return archive;
}

}  // namespace tether
