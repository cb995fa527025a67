// Module: a unit of loaded code that supplies functions by name, and imports
// other modules (an executable imports its kernel libraries). Modules of each
// kind register a loader, so a saved module can be loaded back by its bytes.
#ifndef TETHER_RUNTIME_MODULE_MODULE_H_
#define TETHER_RUNTIME_MODULE_MODULE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/function.h"
#include "runtime/core/object.h"

namespace tether {

// Thread contract: GetFunction/ImplementsFunction are thread-safe once the
// module is set up; ImportModule is thread-hostile (call it before sharing).
class Module : public Object {
 public:
  // Looks in this module, then, with `query_imports`, its imports depth-first.
  // NOT_FOUND naming the function when absent.
  absl::StatusOr<Function> GetFunction(absl::string_view name, bool query_imports = false);
  bool ImplementsFunction(absl::string_view name, bool query_imports = false) const;

  void ImportModule(Ref<Module> module) { imports_.push_back(std::move(module)); }
  const std::vector<Ref<Module>>& imported_modules() const { return imports_; }

  // The kind of module, e.g. "vm.Executable", "library.so", "system_lib".
  absl::string_view type_key() const override = 0;

  // Serializes this module alone (not its imports). UNIMPLEMENTED for kinds
  // that cannot be saved.
  virtual absl::StatusOr<std::string> SaveToBinary() const;
  // Writes SaveToBinary() to `path` (atomically: a temporary file, then rename).
  absl::Status SaveToFile(const std::string& path) const;

  // Loads a module from bytes/file, picking the loader whose magic matches.
  static absl::StatusOr<Ref<Module>> LoadFromBinary(absl::string_view bytes);
  static absl::StatusOr<Ref<Module>> LoadFromFile(const std::string& path);

 protected:
  Module() : Object(TypeIndex::kModule) {}
  // This module's own function; NOT_FOUND when it has none of that name.
  virtual absl::StatusOr<Function> GetOwnFunction(absl::string_view name) = 0;
  virtual bool ImplementsOwnFunction(absl::string_view name) const = 0;

 private:
  std::vector<Ref<Module>> imports_;
};

// A loader for one kind of saved module: `magic` is the prefix its bytes start with.
struct ModuleLoader {
  std::string type_key;
  std::string magic;
  std::function<absl::StatusOr<Ref<Module>>(absl::string_view bytes)> load;
};
// Registers a loader; thread-safe. ALREADY_EXISTS for a duplicate type key.
absl::Status RegisterModuleLoader(ModuleLoader loader);

}  // namespace tether

#endif  // TETHER_RUNTIME_MODULE_MODULE_H_
