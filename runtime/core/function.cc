// Error messages of typed function wrappers.
#include "runtime/core/function.h"

namespace tether::internal {

absl::Status ArgTypeError(absl::string_view func, size_t index, const char* expected,
                          const Value& got) {
  return TypeError("argument ", index, " of ", func, ": expected ", expected, ", got ",
                   got.TypeName());
}

absl::Status ArityError(absl::string_view func, size_t expected, size_t got) {
  return ValueError(func, " expects ", expected, " argument", expected == 1 ? "" : "s", ", got ",
                    got);
}

}  // namespace tether::internal
