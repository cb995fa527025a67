// The repository's root directory, with a trailing '/': tests that read
// examples/ or testdata/ find them wherever the tree is checked out. CMake
// gives it to repo_root.cc alone (objects of every other file are the same
// in every checkout, so ccache shares them).
#ifndef TETHER_TESTS_TESTING_REPO_ROOT_H_
#define TETHER_TESTS_TESTING_REPO_ROOT_H_

#include <string>

namespace tether::testing {

std::string RepoRoot();

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_REPO_ROOT_H_
