// The repository's root directory (with a trailing '/'), from this header's
// own path as the compiler saw it: tests that read examples/ or testdata/
// find them wherever the tree is checked out.
#ifndef TETHER_TESTS_TESTING_REPO_ROOT_H_
#define TETHER_TESTS_TESTING_REPO_ROOT_H_

#include <string>

namespace tether::testing {

inline std::string RepoRoot() {
  const std::string path = __FILE__;
  return path.substr(0, path.rfind("tests/testing/"));
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_REPO_ROOT_H_
