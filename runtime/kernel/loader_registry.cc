// The kernel library loader table (loader_registry.h).
#include "runtime/kernel/loader_registry.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tether {
namespace {

struct KernelLoaderTable {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, KernelLibraryLoader> loaders ABSL_GUARDED_BY(mu);
};

KernelLoaderTable& KernelLoaders() {
  static KernelLoaderTable* table = new KernelLoaderTable();
  return *table;
}

}  // namespace

absl::Status RegisterKernelLibraryLoader(const std::string& format, KernelLibraryLoader loader) {
  KernelLoaderTable& table = KernelLoaders();
  absl::MutexLock lock(&table.mu);
  if (!table.loaders.try_emplace(format, std::move(loader)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("a kernel library loader for format ", format, " is already registered"));
  }
  return absl::OkStatus();
}

KernelLibraryLoader FindKernelLibraryLoader(absl::string_view format) {
  KernelLoaderTable& table = KernelLoaders();
  absl::MutexLock lock(&table.mu);
  auto it = table.loaders.find(format);
  return it == table.loaders.end() ? KernelLibraryLoader() : it->second;
}

}  // namespace tether
