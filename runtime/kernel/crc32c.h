// CRC-32C (Castagnoli polynomial, reflected 0x82F63B78), the checksum of the
// executable file format. Implemented here because the runtime depends only on
// Abseil and dlpack.
#ifndef TETHER_RUNTIME_KERNEL_CRC32C_H_
#define TETHER_RUNTIME_KERNEL_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tether::vm {

// The CRC-32C of `data` (initial value and final xor 0xFFFFFFFF), so
// Crc32c("123456789") == 0xE3069283. Thread-safe.
uint32_t Crc32c(absl::string_view data);

// The table-driven computation, which Crc32c uses where the CPU has no
// CRC-32C instruction (tests hold the two to the same values).
uint32_t SoftwareCrc32cForTesting(absl::string_view data);

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_KERNEL_CRC32C_H_
