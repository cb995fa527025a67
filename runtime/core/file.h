// Whole files: the one reader every part of the tree uses to read a file at
// once (models, executables, keys, tokens, test data), and an atomic writer.
// Errors name the path: NOT_FOUND for a missing file, INVALID_ARGUMENT for a
// directory or a file past the size limit, the errno's code otherwise.
//
// Thread contract: free functions; thread-safe.
#ifndef TETHER_RUNTIME_CORE_FILE_H_
#define TETHER_RUNTIME_CORE_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether {

// Reads a whole file; NOT_FOUND when missing, INVALID_ARGUMENT past `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = size_t{1} << 34);
// Writes `bytes` to `path` through a temporary file and a rename.
absl::Status WriteStringToFileAtomic(const std::string& path, absl::string_view bytes);

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_FILE_H_
