// The small bytecode program the daemon and client tests run remotely,
// built once here instead of in every test file.
#ifndef TETHER_TESTS_TESTING_SESSION_PROGRAM_H_
#define TETHER_TESTS_TESTING_SESSION_PROGRAM_H_

#include <string>

namespace tether::testing {

// A serialized executable with:
//   main(a, b) = test.vm.add(a, b)       (tensors)
//   swap(a, b) = (b, a)
//   pair(a)    = (a, (a, a))
//   loop(n)    counts n down to 0 with test.vm.subtract_one (int; 2^40 never
//              ends in practice, for deadline and cancellation tests)
// The test.vm.* functions come from RegisterTestFunctions().
std::string SessionTestExecutable();

// A serialized executable of builtins only, for a stock tetherd (a session
// worker has no test functions):
//   swap(a, b) = (b, a)
//   spin(a)    never returns (two jumps back and forth; for interrupts)
std::string BuiltinsTestExecutable();

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_SESSION_PROGRAM_H_
