// Element readers per dtype and the allclose rule. Integers are compared as
// 64-bit integers (never through double, which would round int64 values past
// 2^53); floats are widened to double before the tolerance test.
#include "tests/conformance/compare.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/core/value.h"

namespace tether::conformance {
namespace {

double HalfToDouble(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else {
    value = std::ldexp(static_cast<double>(mantissa + 1024), exponent - 25);
  }
  return sign ? -value : value;
}

double BFloat16ToDouble(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

template <typename T>
T Load(const char* base, int64_t i) {
  T v;
  std::memcpy(&v, base + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

enum class Reader { kFloat, kSigned, kUnsigned };

// How to read an element of `dtype`, or an error for a dtype we cannot read.
absl::StatusOr<Reader> ReaderFor(DataType dtype) {
  if (dtype.lanes() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot compare vector dtype ", dtype.ToString()));
  }
  switch (dtype.code()) {
    case DataType::kFloat:
      if (dtype.bits() == 16 || dtype.bits() == 32 || dtype.bits() == 64) return Reader::kFloat;
      break;
    case DataType::kBFloat:
      if (dtype.bits() == 16) return Reader::kFloat;
      break;
    case DataType::kInt:
      if (dtype.bits() == 8 || dtype.bits() == 16 || dtype.bits() == 32 || dtype.bits() == 64)
        return Reader::kSigned;
      break;
    case DataType::kUInt:
    case DataType::kBool:
      if (dtype.bits() == 8 || dtype.bits() == 16 || dtype.bits() == 32 || dtype.bits() == 64)
        return Reader::kUnsigned;
      if (dtype.bits() == 1) return Reader::kUnsigned;
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot compare dtype ", dtype.ToString()));
}

double ReadFloat(DataType dtype, const char* base, int64_t i) {
  if (dtype.code() == DataType::kBFloat) return BFloat16ToDouble(Load<uint16_t>(base, i));
  switch (dtype.bits()) {
    case 16:
      return HalfToDouble(Load<uint16_t>(base, i));
    case 32:
      return Load<float>(base, i);
    default:
      return Load<double>(base, i);
  }
}

int64_t ReadSigned(DataType dtype, const char* base, int64_t i) {
  switch (dtype.bits()) {
    case 8:
      return Load<int8_t>(base, i);
    case 16:
      return Load<int16_t>(base, i);
    case 32:
      return Load<int32_t>(base, i);
    default:
      return Load<int64_t>(base, i);
  }
}

uint64_t ReadUnsigned(DataType dtype, const char* base, int64_t i) {
  switch (dtype.bits()) {
    case 1:
    case 8:
      return Load<uint8_t>(base, i);
    case 16:
      return Load<uint16_t>(base, i);
    case 32:
      return Load<uint32_t>(base, i);
    default:
      return Load<uint64_t>(base, i);
  }
}

// The multi-index of flat element `flat` in `shape`, as "[1, 2]".
std::string IndexString(std::span<const int64_t> shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      index[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return ShapeToString(index);
}

std::string FormatDouble(double v) { return absl::StrFormat("%.9g", v); }

absl::Status CheckReadable(const Tensor& t, absl::string_view which) {
  if (!t) return absl::InvalidArgumentError(absl::StrCat(which, " tensor is null"));
  if (t->device().type != kDLCPU) {
    return absl::InvalidArgumentError(absl::StrCat(which, " tensor is not on the cpu"));
  }
  if (!t->IsContiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(which, " tensor is not contiguous"));
  }
  return absl::OkStatus();
}

}  // namespace

Tolerance ToleranceFor(DataType dtype) {
  if (dtype.code() == DataType::kBFloat || (dtype.is_float() && dtype.bits() == 16)) {
    return {1e-2, 1e-3};
  }
  if (dtype.is_float()) return {1e-3, 1e-7};
  return {0, 0};
}

absl::Status CompareTensors(const Tensor& expected, const Tensor& actual,
                            const Tolerance& tolerance, Comparison* result) {
  *result = Comparison();
  if (absl::Status s = CheckReadable(expected, "expected"); !s.ok()) return s;
  if (absl::Status s = CheckReadable(actual, "actual"); !s.ok()) return s;
  if (expected->dtype() != actual->dtype()) {
    result->detail = absl::StrCat("dtype ", actual->dtype().ToString(), " expected ",
                                  expected->dtype().ToString());
    return absl::OkStatus();
  }
  std::span<const int64_t> shape = expected->shape();
  if (!std::equal(shape.begin(), shape.end(), actual->shape().begin(), actual->shape().end())) {
    result->detail =
        absl::StrCat("shape ", ShapeToString(actual->shape()), " expected ", ShapeToString(shape));
    return absl::OkStatus();
  }
  absl::StatusOr<Reader> reader = ReaderFor(expected->dtype());
  if (!reader.ok()) return reader.status();
  const DataType dtype = expected->dtype();
  const char* want = static_cast<const char*>(expected->element_data());
  const char* got = static_cast<const char*>(actual->element_data());
  const int64_t n = expected->NumElements();

  int64_t num_bad = 0;
  int64_t first_bad = -1;
  int64_t worst = -1;        // the element with the largest error (or first NaN mismatch)
  double worst_excess = -1;  // error - allowed at `worst`
  std::string worst_got, worst_want;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    double abs_err = 0, allowed = 0;
    std::string g, w;
    if (*reader == Reader::kFloat) {
      const double a = ReadFloat(dtype, got, i), e = ReadFloat(dtype, want, i);
      if (std::isnan(a) || std::isnan(e)) {
        ok = std::isnan(a) && std::isnan(e);
        abs_err = ok ? 0 : std::numeric_limits<double>::infinity();
      } else if (std::isinf(a) || std::isinf(e)) {
        ok = a == e;
        abs_err = ok ? 0 : std::numeric_limits<double>::infinity();
      } else {
        abs_err = std::fabs(a - e);
        allowed = tolerance.atol + tolerance.rtol * std::fabs(e);
        ok = abs_err <= allowed;
        result->max_abs_error = std::max(result->max_abs_error, abs_err);
      }
      g = FormatDouble(a);
      w = FormatDouble(e);
    } else if (*reader == Reader::kSigned) {
      const int64_t a = ReadSigned(dtype, got, i), e = ReadSigned(dtype, want, i);
      ok = a == e;
      abs_err = std::fabs(static_cast<double>(a) - static_cast<double>(e));
      if (!ok) result->max_abs_error = std::max(result->max_abs_error, abs_err);
      g = absl::StrCat(a);
      w = absl::StrCat(e);
    } else {
      const uint64_t a = ReadUnsigned(dtype, got, i), e = ReadUnsigned(dtype, want, i);
      ok = a == e;
      abs_err = std::fabs(static_cast<double>(a) - static_cast<double>(e));
      if (!ok) result->max_abs_error = std::max(result->max_abs_error, abs_err);
      g = absl::StrCat(a);
      w = absl::StrCat(e);
    }
    if (ok) continue;
    ++num_bad;
    if (first_bad < 0) first_bad = i;
    const double excess = abs_err - allowed;
    if (worst < 0 || excess > worst_excess) {
      worst = i;
      worst_excess = excess;
      worst_got = g;
      worst_want = w;
    }
  }
  if (num_bad == 0) {
    result->match = true;
    return absl::OkStatus();
  }
  result->detail = absl::StrCat(num_bad, " of ", n, " values differ");
  if (!tolerance.exact()) {
    absl::StrAppend(&result->detail, " (rtol ", FormatDouble(tolerance.rtol), ", atol ",
                    FormatDouble(tolerance.atol), ")");
  }
  absl::StrAppend(&result->detail, "; max abs err ", FormatDouble(result->max_abs_error),
                  "; worst at ", IndexString(shape, worst), ": got ", worst_got, " expected ",
                  worst_want);
  if (first_bad != worst) {
    absl::StrAppend(&result->detail, "; first at ", IndexString(shape, first_bad));
  }
  return absl::OkStatus();
}

}  // namespace tether::conformance
