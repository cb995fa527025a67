// The kernel object cache: compiled kernel objects on disk, so that a model
// (or another model with the same kernels) compiles again without running
// LLVM's optimizer and code generator on kernels it has compiled before.
// Entries are keyed by everything that decides an object's bytes (the
// compiler's build, LLVM's version, the target machine, the optimization
// level and the unit's unoptimized LLVM IR), each file carries a checksum of
// its object, and the folder is kept under a size bound by evicting the
// least recently used entries. Format: docs/design/compiler-pipeline.md
// "Kernel object cache".
#ifndef TETHER_COMPILER_BACKEND_LLVM_OBJECT_CACHE_H_
#define TETHER_COMPILER_BACKEND_LLVM_OBJECT_CACHE_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tether::compiler {

// Thread contract: thread-safe. Several processes may share a folder: an
// entry is written to a private temporary file and renamed into place, so a
// reader sees no entry or a whole one; one damaged anyway (a full disk, a
// crash in the middle of a copy) fails its checksum and is a miss. The cache
// is an optimization: a folder that cannot be created or written leaves
// compilation as it was, and no method fails.
class KernelObjectCache {
 public:
  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;

  // `dir` is created when first written; `max_bytes` bounds the size of
  // its entries (Trim).
  explicit KernelObjectCache(std::string dir, int64_t max_bytes = kDefaultMaxBytes);

  // The key of a unit: SHA-256 (hex) over the cache format, the compiler's
  // build (`compiler_build`: compiler/build_id.h's CompilerBuildId()), LLVM's
  // version, the target machine (`triple`, `cpu`, `features`), `opt_level`
  // and `ir`, the unit's LLVM IR before optimization as text.
  static std::string Key(absl::string_view compiler_build, absl::string_view triple,
                         absl::string_view cpu, absl::string_view features, int opt_level,
                         absl::string_view ir);

  // The object stored under `key`, or nullopt (none, unreadable, or failing
  // its checksum: that entry is removed). A hit marks the entry as used now.
  std::optional<std::string> Get(const std::string& key);
  // Stores `object` under `key` (best effort).
  void Put(const std::string& key, absl::string_view object);
  // Removes the least recently used entries (and temporary files older than
  // an hour, left by killed writers) until the entries take at most 3/4 of
  // max_bytes, when they take more than max_bytes.
  void Trim();

  const std::string& dir() const { return dir_; }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  std::string PathOf(const std::string& key) const;

  const std::string dir_;
  const int64_t max_bytes_;
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> misses_{0};
};

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_LLVM_OBJECT_CACHE_H_
