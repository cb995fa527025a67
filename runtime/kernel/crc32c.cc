// CRC-32C (Castagnoli), table-driven with slicing-by-8: eight bytes per step,
// so checksumming a large embedded kernel library costs little next to
// reading it. The tables are built at compile time.
#include "runtime/kernel/crc32c.h"

#include <cstddef>

namespace tether::vm {
namespace {

constexpr uint32_t kCrc32cPoly = 0x82F63B78u;  // reflected 0x1EDC6F41

struct Crc32cTables {
  uint32_t t[8][256];
};

constexpr Crc32cTables MakeCrc32cTables() {
  Crc32cTables tables{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
    tables.t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) {
      uint32_t prev = tables.t[s - 1][i];
      tables.t[s][i] = (prev >> 8) ^ tables.t[0][prev & 0xFF];
    }
  }
  return tables;
}

constexpr Crc32cTables kCrc32c = MakeCrc32cTables();

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint32_t crc = 0xFFFFFFFFu;
  while (n >= 8) {
    uint32_t lo =
        crc ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    crc = kCrc32c.t[7][lo & 0xFF] ^ kCrc32c.t[6][(lo >> 8) & 0xFF] ^
          kCrc32c.t[5][(lo >> 16) & 0xFF] ^ kCrc32c.t[4][lo >> 24] ^ kCrc32c.t[3][p[4]] ^
          kCrc32c.t[2][p[5]] ^ kCrc32c.t[1][p[6]] ^ kCrc32c.t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ kCrc32c.t[0][(crc ^ *p++) & 0xFF];
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace tether::vm
