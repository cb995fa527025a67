// Strict parsing of the decimal numbers inside names such as "float32x4" and
// "cuda:1": ASCII digits only — no sign, no whitespace, no empty string.
#ifndef TETHER_RUNTIME_CORE_NUMBER_PARSING_H_
#define TETHER_RUNTIME_CORE_NUMBER_PARSING_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tether {

// Parses `text` as a decimal in [0, max]; false on anything else.
inline bool ParseDecimal(absl::string_view text, int64_t max, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_NUMBER_PARSING_H_
