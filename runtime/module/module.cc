// Module lookup through imports, the module-loader registry that maps a saved
// module's leading magic bytes to its loader.
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
#include "runtime/core/file.h"

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

}  // namespace tether
