// The process-wide function registry.
#include "runtime/core/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

struct RegistryState {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Function> functions ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<std::string> remote_callable ABSL_GUARDED_BY(mu);
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
    s.remote_callable.erase(it->first);
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
  s.remote_callable.erase(name);
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

absl::Status Registry::SetRemoteCallable(absl::string_view name, bool callable) {
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  if (!s.functions.contains(name)) {
    return NotFoundError("cannot mark global function ", name,
                         " remote-callable: it is not registered");
  }
  if (callable) {
    s.remote_callable.insert(std::string(name));
  } else {
    s.remote_callable.erase(name);
  }
  return absl::OkStatus();
}

std::vector<std::string> Registry::ListRemoteCallable() {
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  std::vector<std::string> names(s.remote_callable.begin(), s.remote_callable.end());
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<Function> Registry::GetRemoteCallable(absl::string_view name) {
  RegistryState& s = State();
  absl::MutexLock lock(&s.mu);
  auto it = s.functions.find(name);
  if (it == s.functions.end()) {
    return NotFoundError("global function ", name, " is not registered in this runtime");
  }
  if (!s.remote_callable.contains(name)) {
    return WithErrorKind(
        absl::PermissionDeniedError(absl::StrCat(
            "global function ", name,
            " is not remote-callable: a daemon's clients may call only the functions it marks "
            "remote-callable (list them with list_global_functions)")),
        ErrorKind::kValue);
  }
  return it->second;
}

namespace internal {
void DieOnRegistrationError(const absl::Status& status) {
  std::fprintf(stderr, "tether: function registration failed: %s\n", status.ToString().c_str());
  std::abort();
}
}  // namespace internal

}  // namespace tether
