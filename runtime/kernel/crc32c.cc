// CRC-32C (Castagnoli): the CPU's CRC-32C instruction where it has one
// (x86-64 with SSE4.2, AArch64 with the CRC extension; chosen at run time,
// eight bytes an instruction), else table-driven with slicing-by-8. A
// model's executable carries its weights (hundreds of MB), so the checksum
// is on the path of every compile, upload and load. The tables are built at
// compile time.
#include "runtime/kernel/crc32c.h"

#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

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

// The CRC register `crc` after `n` more bytes at `p`: table-driven
// (SoftwareUpdate) or with the CPU's instruction (HardwareUpdate, where
// HasHardwareCrc()).
uint32_t SoftwareUpdate(uint32_t crc, const unsigned char* p, size_t n);

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t HardwareUpdate(uint32_t crc, const unsigned char* p,
                                                          size_t n) {
  uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
bool HasHardwareCrc() { return __builtin_cpu_supports("sse4.2"); }
#elif defined(__aarch64__)
__attribute__((target("+crc"))) uint32_t HardwareUpdate(uint32_t crc, const unsigned char* p,
                                                        size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = __crc32cd(crc, word);
  }
  for (; n > 0; ++p, --n) crc = __crc32cb(crc, *p);
  return crc;
}
bool HasHardwareCrc() { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#else
uint32_t HardwareUpdate(uint32_t crc, const unsigned char* p, size_t n) {
  return SoftwareUpdate(crc, p, n);
}
bool HasHardwareCrc() { return false; }
#endif

uint32_t SoftwareUpdate(uint32_t crc, const unsigned char* p, size_t n) {
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
  return crc;
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  static const bool hardware = HasHardwareCrc();
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const uint32_t crc = hardware ? HardwareUpdate(0xFFFFFFFFu, p, data.size())
                                : SoftwareUpdate(0xFFFFFFFFu, p, data.size());
  return crc ^ 0xFFFFFFFFu;
}

uint32_t SoftwareCrc32cForTesting(absl::string_view data) {
  return SoftwareUpdate(0xFFFFFFFFu, reinterpret_cast<const unsigned char*>(data.data()),
                        data.size()) ^
         0xFFFFFFFFu;
}

}  // namespace tether::vm
