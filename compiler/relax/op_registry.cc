// The operator registry table (op_registry.h): a name-keyed table filled once,
// on the first lookup, by InstallOperators.
#include "compiler/relax/op_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace tether::compiler {
namespace {

absl::flat_hash_map<std::string, OpInfo>& Table() {
  static auto* table = new absl::flat_hash_map<std::string, OpInfo>;
  return *table;
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] { InstallOperators(); });
}

}  // namespace

void RegisterOp(OpInfo info) {
  std::string name = info.name;
  if (!Table().emplace(name, std::move(info)).second) {
    std::fprintf(stderr, "tether: operator %s registered twice\n", name.c_str());
    std::abort();
  }
}

void RegisterComputeOp(std::string name, OpPattern pattern, int num_args, InferFn infer,
                       ComputeFn compute) {
  RegisterOp(OpInfo{std::move(name), pattern, num_args, std::move(infer), std::move(compute),
                    /*schedule=*/nullptr});
}

void RegisterScheduleOp(std::string name, OpPattern pattern, int num_args, InferFn infer,
                        ScheduleFn schedule) {
  RegisterOp(OpInfo{std::move(name), pattern, num_args, std::move(infer), /*compute=*/nullptr,
                    std::move(schedule)});
}

const OpInfo* FindOp(absl::string_view name) {
  InstallOnce();
  auto it = Table().find(name);
  return it == Table().end() ? nullptr : &it->second;
}

std::vector<std::string> ListOps() {
  InstallOnce();
  std::vector<std::string> names;
  for (const auto& [name, info] : Table()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tether::compiler
