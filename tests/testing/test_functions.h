// Global functions the VM tests call from hand-written bytecode, named as the
// reference's helpers (test.vm.add, test.vm.mul, ...). Registered once by
// RegisterTestFunctions(); safe to call from every test.
#ifndef TETHER_TESTS_TESTING_TEST_FUNCTIONS_H_
#define TETHER_TESTS_TESTING_TEST_FUNCTIONS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/tensor.h"

namespace tether::testing {

void RegisterTestFunctions();

// How many times test.vm.subtract_one has run in this process: a test sees
// from it that a loop() call is running (instead of sleeping on it).
int64_t SubtractOneCalls();

// A float32 CPU tensor with the given shape and values.
Tensor MakeFloatTensor(std::vector<int64_t> shape, std::vector<float> values);
// The float32 values of a CPU tensor.
std::vector<float> ReadFloats(const Tensor& t);
// n floats uniform in [-1, 1) from a seeded generator (the same on every run).
std::vector<float> RandomFloats(size_t n, uint32_t seed);

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_TEST_FUNCTIONS_H_
