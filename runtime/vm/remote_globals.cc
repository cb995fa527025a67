// The remote-callable runtime functions: small questions about the daemon's
// machine, answered without touching files or the process.
#include "runtime/vm/remote_globals.h"

#include <mutex>
#include <string>

#include "absl/strings/str_join.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/device/device_api.h"
#include "runtime/threading/thread_pool.h"

namespace tether::vm {
namespace {

void Check(absl::Status s) {
  if (!s.ok()) internal::DieOnRegistrationError(s);
}

absl::StatusOr<Value> DeviceAttrByName(Device device, const std::string& name) {
  for (const DeviceAttrName& attr : AllDeviceAttrs()) {
    if (attr.name != name) continue;
    TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(device.type));
    return api->GetAttr(device.id, attr.attr);
  }
  std::vector<std::string> names;
  for (const DeviceAttrName& attr : AllDeviceAttrs()) names.emplace_back(attr.name);
  return ValueError("tether.runtime.device_attr: unknown attribute \"", name,
                    "\"; known: ", absl::StrJoin(names, ", "));
}

void RegisterCallable(Function f) {
  const std::string name = f.name();
  Check(Registry::Register(std::move(f), /*override=*/true));
  Check(Registry::SetRemoteCallable(name));
}

}  // namespace

void RegisterRemoteGlobals() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterCallable(Function::FromTyped("tether.runtime.num_threads",
                                         [] { return static_cast<int64_t>(NumThreads()); }));
    RegisterCallable(Function::FromTyped("tether.runtime.device_exists",
                                         [](Device d) { return DeviceExists(d); }));
    RegisterCallable(Function::FromTyped("tether.runtime.device_attr", DeviceAttrByName));
  });
}

}  // namespace tether::vm
