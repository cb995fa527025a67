// Output comparison for the ONNX conformance runner: an output tensor against
// the suite's output_N.pb, with the tolerance rules of ONNX's own backend test
// runner (onnx/backend/test/runner: numpy.testing.assert_allclose with
// rtol 1e-3, atol 1e-7, NaN equal to NaN), looser for 16-bit floats and exact
// for integers and booleans.
//
// Thread contract: thread-safe (pure functions).
#ifndef TETHER_TESTS_CONFORMANCE_COMPARE_H_
#define TETHER_TESTS_CONFORMANCE_COMPARE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/core/data_type.h"
#include "runtime/core/tensor.h"

namespace tether::conformance {

// |actual - expected| <= atol + rtol * |expected| for every element.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
  bool exact() const { return rtol == 0 && atol == 0; }
};

// float32/float64: rtol 1e-3, atol 1e-7 (ONNX's defaults); float16 and
// bfloat16: rtol 1e-2, atol 1e-3; integers and bool: exact.
Tolerance ToleranceFor(DataType dtype);

// The outcome of comparing one output.
struct Comparison {
  bool match = false;
  // Empty when match; otherwise what differs, with values:
  // "shape [2, 3] expected [3, 2]", "dtype float64 expected float32",
  // "4 of 60 values differ (rtol 0.001, atol 1e-07); max abs err 0.25 at
  //  [1, 2]: got 1.25 expected 1".
  std::string detail;
  double max_abs_error = 0;  // over all elements (NaN mismatches excluded)
};

// Compares `actual` with `expected`: dtype and shape exactly, values with
// `tolerance` (NaN equals NaN, infinities must match in sign). INVALID_ARGUMENT
// when a tensor is not a contiguous CPU tensor or has a dtype the comparator
// cannot read (the comparison itself never fails with a status).
absl::Status CompareTensors(const Tensor& expected, const Tensor& actual,
                            const Tolerance& tolerance, Comparison* result);

}  // namespace tether::conformance

#endif  // TETHER_TESTS_CONFORMANCE_COMPARE_H_
