// FarmMember in a tetherd built without the device farm
// (TETHER_BUILD_FARM=OFF, or etcd's .proto files missing at configure time).
#include "server/farm_member.h"

namespace tether::server {

absl::StatusOr<std::unique_ptr<FarmMember>> FarmMember::Create(FarmMemberOptions) {
  return absl::FailedPreconditionError(
      "this tetherd was built without the device farm (TETHER_BUILD_FARM=OFF, or "
      "golang-etcd-server-dev was missing when it was configured)");
}

}  // namespace tether::server
