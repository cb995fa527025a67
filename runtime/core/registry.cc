// The process-wide function registry.
#include "runtime/core/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tether {
namespace {

struct RegistryState {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Function> functions ABSL_GUARDED_BY(mu);
};

RegistryState& State() {
  static RegistryState* state = new RegistryState();  // never destroyed: used at exit
  return *state;
}

}  // namespace

absl::Status Registry::Register(Function f, bool override) {
  if (!f) return absl::InvalidArgumentError("cannot register a null function");
  if (f.name().empty())
    return absl::InvalidArgumentError("cannot register a function with an empty name");
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  auto [it, inserted] = s.functions.try_emplace(f.name(), f);
  if (!inserted) {
    if (!override) {
      return absl::AlreadyExistsError(
          absl::StrCat("global function ", f.name(), " is already registered"));
    }
    it->second = std::move(f);
  }
  return absl::OkStatus();
}

Function Registry::Get(absl::string_view name) {
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  auto it = s.functions.find(name);
  return it == s.functions.end() ? Function() : it->second;
}

bool Registry::Remove(absl::string_view name) {
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  return s.functions.erase(name) > 0;
}

std::vector<std::string> Registry::ListNames() {
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  std::vector<std::string> names;
  names.reserve(s.functions.size());
  for (const auto& [name, f] : s.functions) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

namespace internal {
void DieOnRegistrationError(const absl::Status& status) {
  std::fprintf(stderr, "tether: function registration failed: %s\n", status.ToString().c_str());
  std::abort();
}
}  // namespace internal

}  // namespace tether
