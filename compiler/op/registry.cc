// The operator registry: a name-keyed table filled once by the family
// functions of op.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "compiler/op/op.h"

namespace tether::compiler {

void RegisterImageOps();  // image.cc: resize2d

namespace {

absl::flat_hash_map<std::string, OpInfo>& Table() {
  static auto* table = new absl::flat_hash_map<std::string, OpInfo>;
  return *table;
}

void RegisterAll() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterElementwiseOps();
    RegisterReductionOps();
    RegisterManipulationOps();
    RegisterLinearAlgebraOps();
    RegisterNNOps();
    RegisterImageOps();
    RegisterBuiltinOps();
  });
}

}  // namespace

void RegisterOp(OpInfo info) {
  std::string name = info.name;
  if (!Table().emplace(name, std::move(info)).second) {
    std::fprintf(stderr, "tether: operator %s registered twice\n", name.c_str());
    std::abort();
  }
}

const OpInfo* FindOp(absl::string_view name) {
  RegisterAll();
  auto it = Table().find(name);
  return it == Table().end() ? nullptr : &it->second;
}

std::vector<std::string> ListOps() {
  RegisterAll();
  std::vector<std::string> names;
  for (const auto& [name, info] : Table()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tether::compiler
