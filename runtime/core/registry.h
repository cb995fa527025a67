// The global function registry: name -> Function, shared by the whole process.
// The VM resolves packed functions here after its kernel library; builtins and
// test helpers register here.
#ifndef TETHER_RUNTIME_CORE_REGISTRY_H_
#define TETHER_RUNTIME_CORE_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
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
};

namespace internal {
[[noreturn]] void DieOnRegistrationError(const absl::Status& status);
}  // namespace internal

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_REGISTRY_H_
