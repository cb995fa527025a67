// ModuleStore: the daemon's content-addressed store of uploaded executables
// and param files (TVM's param dict bytes, runtime/module/param_dict.h),
// kept on disk under one directory as files named by their SHA-256. What a
// file is is decided by its use: CreateVm names a module and, optionally, a
// param file; each is parsed as that on first use and cached. An upload
// streams into a temporary file in the same directory while hashing; only when
// the declared size and hash match does an atomic rename make it visible, so a
// failed or cut upload leaves nothing behind. A byte quota evicts the least
// recently used modules that no VM is using. The index is rebuilt from the
// directory at startup (stale temporary files are removed), so modules survive
// a daemon restart. Parsed executables and param dicts are cached by hash.
#ifndef TETHER_SERVER_MODULE_STORE_H_
#define TETHER_SERVER_MODULE_STORE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/executable.h"

namespace tether::server {

// Thread contract: thread-safe.
class ModuleStore {
 public:
  // One upload in progress. Thread contract: thread-compatible (one stream
  // feeds it). Destroying it without a successful Finish removes the temp file.
  class Upload {
   public:
    ~Upload();
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;
    // INVALID_ARGUMENT when the data runs past the declared size.
    absl::Status Append(absl::string_view data);
    // Verifies size and hash, then publishes the module (evicting others to
    // make room). INVALID_ARGUMENT on a mismatch; RESOURCE_EXHAUSTED when the
    // quota cannot be met.
    absl::Status Finish();

   private:
    friend class ModuleStore;
    struct Hasher;
    Upload(ModuleStore* store, std::string sha256, uint64_t size, std::string temp_path, int fd);
    void Abort();

    ModuleStore* store_;
    std::string sha256_;
    uint64_t size_;
    uint64_t received_ = 0;
    std::string temp_path_;
    int fd_;
    std::unique_ptr<Hasher> hasher_;
    bool done_ = false;
  };

  // Opens (creating if needed, mode 0700) `dir`, removes stale temporary
  // files and indexes the modules found there (links are ignored).
  // PERMISSION_DENIED when the directory is not owned by this user or others
  // may write it; INTERNAL if it is otherwise unusable.
  static absl::StatusOr<std::unique_ptr<ModuleStore>> Open(std::string dir, uint64_t quota_bytes);

  // The module's size when present, nullopt otherwise; INVALID_ARGUMENT for a
  // malformed hash (anything but 64 lower-case hex digits).
  absl::StatusOr<std::optional<uint64_t>> Find(absl::string_view sha256);

  // The most uploads in progress at once (each holds a file descriptor and
  // a temporary file).
  static constexpr int kMaxUploads = 16;

  // Starts an upload. INVALID_ARGUMENT for a malformed hash; RESOURCE_EXHAUSTED
  // when `size_bytes` exceeds the quota, when the uploads in progress have
  // already reserved the quota, or when kMaxUploads are in progress.
  absl::StatusOr<std::unique_ptr<Upload>> BeginUpload(absl::string_view sha256,
                                                      uint64_t size_bytes);

  // Loads (or returns the cached) executable and pins the module against
  // eviction until Release(sha256). NOT_FOUND for an unknown module;
  // INVALID_ARGUMENT for a corrupt one; DATA_LOSS when the file's SHA-256 is
  // not its name (the directory was altered). A module missing here but
  // present in the import directory is first copied in (size and hash
  // checked).
  absl::StatusOr<Ref<vm::Executable>> Acquire(absl::string_view sha256);
  // The same for a param file: its tensors (CPU, file order), parsed once
  // and shared. INVALID_ARGUMENT for a file that is not a valid param dict,
  // naming the file and where it breaks; NOT_FOUND and DATA_LOSS as Acquire.
  absl::StatusOr<std::shared_ptr<const ParamList>> AcquireParams(absl::string_view sha256);

  // Another store's directory to import modules from on first use (a session
  // worker reads its daemon's store). Set before use.
  void set_import_dir(std::string dir) { import_dir_ = std::move(dir); }
  // Unpins what Acquire or AcquireParams pinned.
  void Release(absl::string_view sha256);

  // The file of module `sha256` (which may be evicted at any time).
  std::string PathOf(absl::string_view sha256) const;

  uint64_t used_bytes() const;
  uint64_t quota_bytes() const { return quota_; }
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    uint64_t size = 0;
    int pins = 0;
    Ref<vm::Executable> exec;                 // parsed on first use as a module...
    std::shared_ptr<const ParamList> params;  // ...or as a param file (shared by
                                              // the VMs created with it)
    std::list<std::string>::iterator lru;     // position in lru_ (front: most recent)
  };

  ModuleStore(std::string dir, uint64_t quota) : dir_(std::move(dir)), quota_(quota) {}
  // Reads the file (never through a link) and checks its SHA-256 against
  // `sha256`; the caller parses those same bytes.
  absl::StatusOr<std::string> ReadVerified(absl::string_view sha256) const;
  // Pins `sha256` (imported first when import_dir_ has it) and returns the
  // entry's parse in `cache`, parsing the file with `parse` on first use.
  template <typename T>
  absl::StatusOr<T> AcquireParsed(absl::string_view sha256, T Entry::*cache,
                                  absl::StatusOr<T> (*parse)(absl::string_view sha256,
                                                             const std::string& bytes));
  absl::Status Publish(Upload& upload);
  // Releases what BeginUpload reserved for an upload of `size_bytes`.
  void EndUpload(uint64_t size_bytes);
  void TouchLocked(Entry& entry, const std::string& sha256) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies `sha256` from import_dir_ through an Upload; NOT_FOUND when absent.
  absl::Status Import(absl::string_view sha256);

  const std::string dir_;
  const uint64_t quota_;
  std::string import_dir_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  // Uploads in progress and the bytes they declared: reserved at
  // BeginUpload, released when the Upload goes, so concurrent uploads can
  // never put more than the quota on disk beside the store.
  int uploads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_MODULE_STORE_H_
