// Module lookup through imports, the module-loader registry that maps a saved
// module's leading magic bytes to its loader, and whole-file read/atomic write.
#include "runtime/module/module.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

// Depth-first search of `m`'s imports (not `m` itself) for `name`; `visited`
// guards against import cycles. Returns NOT_FOUND when no import has it, or
// the first non-NOT_FOUND error an import returns.
absl::StatusOr<Function> FindInImports(const Module* m, absl::string_view name,
                                       absl::flat_hash_set<const Module*>* visited);

class LoaderRegistry {
 public:
  static LoaderRegistry& Global() {
    static LoaderRegistry* registry = new LoaderRegistry();
    return *registry;
  }

  absl::Status Add(ModuleLoader loader) {
    if (loader.magic.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("module loader ", loader.type_key, " has an empty magic"));
    }
    if (!loader.load) {
      return absl::InvalidArgumentError(
          absl::StrCat("module loader ", loader.type_key, " has no load function"));
    }
    absl::MutexLock lock(&mu_);
    for (const ModuleLoader& existing : loaders_) {
      if (existing.type_key == loader.type_key) {
        return absl::AlreadyExistsError(
            absl::StrCat("a module loader for ", loader.type_key, " is already registered"));
      }
    }
    loaders_.push_back(std::move(loader));
    return absl::OkStatus();
  }

  // The loader with the longest magic that prefixes `bytes`, if any.
  bool Find(absl::string_view bytes, ModuleLoader* out, std::vector<std::string>* known) const {
    absl::MutexLock lock(&mu_);
    const ModuleLoader* best = nullptr;
    for (const ModuleLoader& l : loaders_) {
      known->push_back(l.type_key);
      if (bytes.substr(0, l.magic.size()) == l.magic &&
          (best == nullptr || l.magic.size() > best->magic.size())) {
        best = &l;
      }
    }
    if (best == nullptr) return false;
    *out = *best;
    return true;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<ModuleLoader> loaders_ ABSL_GUARDED_BY(mu_);
};

std::string HexPrefix(absl::string_view bytes, size_t n) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < bytes.size() && i < n; ++i) {
    parts.push_back(absl::StrFormat("%02x", static_cast<unsigned char>(bytes[i])));
  }
  return absl::StrJoin(parts, " ");
}

absl::Status ErrnoError(int err, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(std::string(what), " ", path));
}

absl::StatusOr<Function> FindInImports(const Module* m, absl::string_view name,
                                       absl::flat_hash_set<const Module*>* visited) {
  for (const Ref<Module>& import : m->imported_modules()) {
    if (!import || !visited->insert(import.get()).second) continue;
    absl::StatusOr<Function> f = import->GetFunction(name, /*query_imports=*/false);
    if (f.ok() || !absl::IsNotFound(f.status())) return f;
    f = FindInImports(import.get(), name, visited);
    if (f.ok() || !absl::IsNotFound(f.status())) return f;
  }
  return absl::NotFoundError("");
}

bool ImplementsInImports(const Module* m, absl::string_view name,
                         absl::flat_hash_set<const Module*>* visited) {
  for (const Ref<Module>& import : m->imported_modules()) {
    if (!import || !visited->insert(import.get()).second) continue;
    if (import->ImplementsFunction(name, /*query_imports=*/false)) return true;
    if (ImplementsInImports(import.get(), name, visited)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Function> Module::GetFunction(absl::string_view name, bool query_imports) {
  absl::StatusOr<Function> own = GetOwnFunction(name);
  if (own.ok() || !absl::IsNotFound(own.status())) return own;
  if (query_imports && !imports_.empty()) {
    absl::flat_hash_set<const Module*> visited = {this};
    absl::StatusOr<Function> f = FindInImports(this, name, &visited);
    if (f.ok() || !absl::IsNotFound(f.status())) return f;
    return NotFoundError("function ", std::string(name), " not found in module ",
                         std::string(type_key()), " or its imports");
  }
  return NotFoundError("function ", std::string(name), " not found in module ",
                       std::string(type_key()));
}

bool Module::ImplementsFunction(absl::string_view name, bool query_imports) const {
  if (ImplementsOwnFunction(name)) return true;
  if (!query_imports) return false;
  absl::flat_hash_set<const Module*> visited = {this};
  return ImplementsInImports(this, name, &visited);
}

absl::StatusOr<std::string> Module::SaveToBinary() const {
  return absl::UnimplementedError(
      absl::StrCat("module ", std::string(type_key()), " cannot be saved"));
}

absl::Status Module::SaveToFile(const std::string& path) const {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, SaveToBinary());
  return WriteStringToFileAtomic(path, bytes);
}

absl::StatusOr<Ref<Module>> Module::LoadFromBinary(absl::string_view bytes) {
  ModuleLoader loader;
  std::vector<std::string> known;
  if (!LoaderRegistry::Global().Find(bytes, &loader, &known)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unrecognized module file: first bytes ", bytes.empty() ? "(none)" : HexPrefix(bytes, 8),
        " (", bytes.size(), " bytes) match no registered loader (",
        known.empty() ? "none registered" : absl::StrJoin(known, ", "), ")"));
  }
  return loader.load(bytes);
}

absl::StatusOr<Ref<Module>> Module::LoadFromFile(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<Ref<Module>> m = LoadFromBinary(bytes);
  if (!m.ok()) {
    return Annotate(m.status(), path, ": ");
  }
  return m;
}

absl::Status RegisterModuleLoader(ModuleLoader loader) {
  return LoaderRegistry::Global().Add(std::move(loader));
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError("cannot find file ", path);
    return ErrnoError(err, "cannot open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, "cannot stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, expected a file"));
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("file ", path, " has ", st.st_size,
                                                   " bytes, more than the limit of ", max_bytes));
  }
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError(err, "cannot read", path);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("file ", path, " is larger than the limit of ", max_bytes, " bytes"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::Status WriteStringToFileAtomic(const std::string& path, absl::string_view bytes) {
  if (path.empty()) return absl::InvalidArgumentError("cannot write a file with an empty path");
  // The temporary lives in the target's directory so the rename stays on one
  // file system and is atomic.
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot create a temporary file for", path);
  auto fail = [&](int err, absl::string_view what) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return ErrnoError(err, what, path);
  };
  (void)::fchmod(fd, 0644);  // mkostemp makes 0600; a saved module should be readable
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, "cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail(errno, "cannot sync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return ErrnoError(err, "cannot close", path);
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    return ErrnoError(err, "cannot rename a temporary file onto", path);
  }
  // Make the rename itself durable.
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace tether
