// The CLI of a tether built without the device farm (TETHER_BUILD_FARM=OFF,
// or etcd's .proto files missing at configure time): `tether farm` and
// --farm say so. CMake builds this file instead of farm_commands.cc.
#include <string>
#include <vector>

#include "client/cli/commands.h"

namespace tether::cli {
namespace {

absl::Status NoFarm() {
  return absl::FailedPreconditionError(
      "this tether was built without the device farm (TETHER_BUILD_FARM=OFF, or "
      "golang-etcd-server-dev was missing when it was configured)");
}

}  // namespace

int RunFarm(const std::vector<std::string>&) { return Fail("farm", NoFarm()); }

absl::StatusOr<std::unique_ptr<FarmClaim>> ClaimFarmDevice(const FarmFlags&) { return NoFarm(); }

}  // namespace tether::cli
