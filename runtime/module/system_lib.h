// The system library: kernels linked statically into the process register
// their symbols here at start-up (the reference's `--system-lib` modules), and
// SystemLib(prefix) exposes the symbols registered under one prefix as a Module.
// Two prefixes are two independent libraries (reference test_multi_systemlib).
//
// Raw C kernel symbols are stored as void* and reachable through
// SystemLibModule::GetSymbol; calling them as Functions needs the kernel ABI
// (docs/design/kernel-abi.md), so for now only symbols registered together with
// a Function are callable through GetFunction.
#ifndef TETHER_RUNTIME_MODULE_SYSTEM_LIB_H_
#define TETHER_RUNTIME_MODULE_SYSTEM_LIB_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/core/function.h"
#include "runtime/core/object.h"
#include "runtime/module/module.h"

namespace tether {

// Registers a raw symbol `name` under `prefix`. Re-registering a name replaces
// it. Thread-safe; callable from static initializers (the registry is built on
// first use).
void RegisterSystemLibSymbol(absl::string_view prefix, absl::string_view name, void* symbol);
// Registers a callable `name` under `prefix`; replaces an earlier one.
void RegisterSystemLibFunction(absl::string_view prefix, absl::string_view name, Function f);
// Removes a name (symbol and function); returns whether it was there.
bool UnregisterSystemLibSymbol(absl::string_view prefix, absl::string_view name);

// A module over the symbols registered under one prefix. Lookups read the
// process-wide registry, so symbols registered after the module was obtained
// are visible. Thread contract: thread-safe.
class SystemLibModule final : public Module {
 public:
  explicit SystemLibModule(std::string prefix) : prefix_(std::move(prefix)) {}
  absl::string_view type_key() const override { return "system_lib"; }
  const std::string& prefix() const { return prefix_; }

  // The raw symbol registered as `name`, or nullptr.
  void* GetSymbol(absl::string_view name) const;
  // The names registered under this prefix, sorted.
  std::vector<std::string> ListSymbols() const;

 protected:
  // NOT_FOUND for an unknown name; UNIMPLEMENTED for a raw symbol without a
  // Function (the kernel ABI is not wired yet).
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override;
  bool ImplementsOwnFunction(absl::string_view name) const override;

 private:
  std::string prefix_;
};

// The system library of `prefix` ("" is the default library). The same module
// is returned for the same prefix.
Ref<Module> SystemLib(absl::string_view prefix = "");

}  // namespace tether

// The C entry point a statically linked kernel library's registration code
// calls. Returns 0 on success, -1 when `name` is null. A null `prefix` is "".
extern "C" int TetherSystemLibRegister(const char* prefix, const char* name, void* ptr);

#endif  // TETHER_RUNTIME_MODULE_SYSTEM_LIB_H_
