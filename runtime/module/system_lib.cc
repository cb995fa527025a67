// The process-wide system-library symbol table and its Module view.
#include "runtime/module/system_lib.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

struct Symbol {
  void* address = nullptr;
  Function function;
};

class SymbolTable {
 public:
  // Never destroyed: registrations may run from other static initializers and
  // lookups from static destructors.
  static SymbolTable& Global() {
    static SymbolTable* table = new SymbolTable();
    return *table;
  }

  void SetAddress(absl::string_view prefix, absl::string_view name, void* address) {
    absl::MutexLock lock(&mu_);
    libs_[std::string(prefix)][std::string(name)].address = address;
  }
  void SetFunction(absl::string_view prefix, absl::string_view name, Function f) {
    absl::MutexLock lock(&mu_);
    libs_[std::string(prefix)][std::string(name)].function = std::move(f);
  }
  bool Remove(absl::string_view prefix, absl::string_view name) {
    absl::MutexLock lock(&mu_);
    auto lib = libs_.find(std::string(prefix));
    if (lib == libs_.end()) return false;
    return lib->second.erase(std::string(name)) > 0;
  }
  bool Find(absl::string_view prefix, absl::string_view name, Symbol* out) const {
    absl::MutexLock lock(&mu_);
    auto lib = libs_.find(std::string(prefix));
    if (lib == libs_.end()) return false;
    auto it = lib->second.find(std::string(name));
    if (it == lib->second.end()) return false;
    *out = it->second;
    return true;
  }
  std::vector<std::string> List(absl::string_view prefix) const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    auto lib = libs_.find(std::string(prefix));
    if (lib == libs_.end()) return names;
    for (const auto& [name, unused] : lib->second) names.push_back(name);
    return names;
  }
  Ref<Module> GetModule(absl::string_view prefix) {
    absl::MutexLock lock(&mu_);
    Ref<Module>& m = modules_[std::string(prefix)];
    if (!m) m = MakeRef<SystemLibModule>(std::string(prefix));
    return m;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, Symbol>> libs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Ref<Module>> modules_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void RegisterSystemLibSymbol(absl::string_view prefix, absl::string_view name, void* symbol) {
  SymbolTable::Global().SetAddress(prefix, name, symbol);
}

void RegisterSystemLibFunction(absl::string_view prefix, absl::string_view name, Function f) {
  SymbolTable::Global().SetFunction(prefix, name, std::move(f));
}

bool UnregisterSystemLibSymbol(absl::string_view prefix, absl::string_view name) {
  return SymbolTable::Global().Remove(prefix, name);
}

void* SystemLibModule::GetSymbol(absl::string_view name) const {
  Symbol s;
  return SymbolTable::Global().Find(prefix_, name, &s) ? s.address : nullptr;
}

std::vector<std::string> SystemLibModule::ListSymbols() const {
  return SymbolTable::Global().List(prefix_);
}

absl::StatusOr<Function> SystemLibModule::GetOwnFunction(absl::string_view name) {
  Symbol s;
  if (!SymbolTable::Global().Find(prefix_, name, &s)) {
    return NotFoundError("function ", std::string(name), " not found in system_lib with prefix \"",
                         prefix_, "\"");
  }
  if (!s.function) {
    return absl::UnimplementedError(absl::StrCat(
        "system_lib symbol ", std::string(name), " (prefix \"", prefix_,
        "\") is a raw kernel symbol; calling it needs the kernel abi, which is not wired yet"));
  }
  return s.function;
}

bool SystemLibModule::ImplementsOwnFunction(absl::string_view name) const {
  Symbol s;
  return SymbolTable::Global().Find(prefix_, name, &s);
}

Ref<Module> SystemLib(absl::string_view prefix) { return SymbolTable::Global().GetModule(prefix); }

}  // namespace tether

extern "C" int TetherSystemLibRegister(const char* prefix, const char* name, void* ptr) {
  if (name == nullptr) return -1;
  tether::RegisterSystemLibSymbol(prefix == nullptr ? "" : prefix, name, ptr);
  return 0;
}
