// The global function registry: name -> Function, shared by the whole process.
// The VM resolves packed functions here after its kernel library; builtins and
// test helpers register here.
//
// Remote callers (a daemon's clients) reach only the functions explicitly
// marked remote-callable (SetRemoteCallable): a registry function may touch
// files or the process, so none is exposed by default (docs/design/
// security.md, "Remote functions").
#ifndef TETHER_RUNTIME_CORE_REGISTRY_H_
#define TETHER_RUNTIME_CORE_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/function.h"

namespace tether {

// Thread contract: thread-safe.
class Registry {
 public:
  // Registers `f` under its name. Fails with ALREADY_EXISTS unless `override`.
  static absl::Status Register(Function f, bool override = false);
  // Typed convenience: Registry::RegisterTyped("test.add", [](int64_t a) {...}).
  template <typename F>
  static absl::Status RegisterTyped(std::string name, F f, bool override = false) {
    return Register(Function::FromTyped(std::move(name), std::move(f)), override);
  }
  template <typename F>
  static absl::Status RegisterPacked(std::string name, F f, bool override = false) {
    return Register(Function::FromPacked(std::move(name), std::move(f)), override);
  }
  // The function, or a null Function when none is registered.
  static Function Get(absl::string_view name);
  static bool Remove(absl::string_view name);
  static std::vector<std::string> ListNames();

  // Marks the registered function `name` callable (or no longer callable)
  // by a daemon's remote clients. NOT_FOUND when nothing is registered
  // under `name`. Registering again (override) clears the mark: a
  // replacement is not callable until marked itself.
  static absl::Status SetRemoteCallable(absl::string_view name, bool callable = true);
  // The remote-callable functions' names, sorted.
  static std::vector<std::string> ListRemoteCallable();
  // The function `name` for a remote caller: NOT_FOUND when none is
  // registered, PERMISSION_DENIED when it is not marked remote-callable.
  static absl::StatusOr<Function> GetRemoteCallable(absl::string_view name);
};

namespace internal {
[[noreturn]] void DieOnRegistrationError(const absl::Status& status);
}  // namespace internal

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_REGISTRY_H_
