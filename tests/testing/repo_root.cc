// RepoRoot (repo_root.h): the source root CMake passes to this file.
#include "tests/testing/repo_root.h"

namespace tether::testing {

std::string RepoRoot() { return TETHER_SOURCE_ROOT "/"; }

}  // namespace tether::testing
