// IRModule lookups and fresh names.
#include "compiler/relax/module.h"

#include "absl/strings/str_cat.h"

namespace tether::compiler {

Expr IRModule::Lookup(const std::string& name) const {
  auto it = functions.find(name);
  return it == functions.end() ? Expr() : it->second;
}

std::string IRModule::UniqueName(const std::string& hint) const {
  auto used = [&](const std::string& n) { return functions.count(n) || kernels.count(n); };
  if (!used(hint)) return hint;
  for (int i = 1;; ++i) {
    std::string n = absl::StrCat(hint, "_", i);
    if (!used(n)) return n;
  }
}

}  // namespace tether::compiler
