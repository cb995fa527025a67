// Test helpers registered in the global registry.
#include "tests/testing/test_functions.h"

#include <atomic>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"

namespace tether::testing {
namespace {

// out = lhs (op) rhs over float32 tensors of the same shape.
template <typename Op>
absl::StatusOr<Value> Elementwise(const Tensor& a, const Tensor& b, Op op) {
  if (a->dtype() != DataType::Float(32) || b->dtype() != DataType::Float(32) ||
      a->NumElements() != b->NumElements()) {
    return ValueError("test.vm elementwise: expected two float32 tensors of one shape, got ",
                      a.ToString(), " and ", b.ToString());
  }
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(a->shape(), a->dtype(), a->device()));
  const float* x = static_cast<const float*>(a->element_data());
  const float* y = static_cast<const float*>(b->element_data());
  float* z = static_cast<float*>(out->element_data());
  for (int64_t i = 0; i < a->NumElements(); ++i) z[i] = op(x[i], y[i]);
  return Value(out);
}

void Register(absl::Status s) { ASSERT_TRUE(s.ok()) << s; }

}  // namespace

namespace {
std::atomic<int64_t> subtract_one_calls{0};
}  // namespace

int64_t SubtractOneCalls() { return subtract_one_calls.load(std::memory_order_relaxed); }

void RegisterTestFunctions() {
  static std::once_flag once;
  std::call_once(once, [] {
    Register(Registry::RegisterTyped("test.vm.add", [](Tensor a, Tensor b) {
      return Elementwise(a, b, [](float x, float y) { return x + y; });
    }));
    Register(Registry::RegisterTyped("test.vm.mul", [](Tensor a, Tensor b) {
      return Elementwise(a, b, [](float x, float y) { return x * y; });
    }));
    Register(
        Registry::RegisterTyped("test.vm.add_scalar", [](int64_t a, int64_t b) { return a + b; }));
    Register(
        Registry::RegisterTyped("test.vm.mul_scalar", [](int64_t a, int64_t b) { return a * b; }));
    Register(Registry::RegisterTyped("test.vm.subtract_one", [](int64_t a) {
      subtract_one_calls.fetch_add(1, std::memory_order_relaxed);
      return a - 1;
    }));
    Register(Registry::RegisterTyped("test.vm.equal_zero", [](int64_t a) { return a == 0; }));
    Register(
        Registry::RegisterTyped("test.vm.get_device_id", [](Device d) { return int64_t{d.id}; }));
    Register(Registry::RegisterTyped("test.vm.identity", [](Tensor in, Tensor out) -> absl::Status {
      return out.CopyFrom(in);
    }));
    Register(Registry::RegisterPacked("test.vm.noop",
                                      [](ArgSpan) -> absl::StatusOr<Value> { return Value(); }));
    // test.vm.raise(kind): fails with that ErrorKind and the code its
    // helper gives it (TypeError, IndexError, ...).
    Register(Registry::RegisterTyped("test.vm.raise", [](int64_t kind) -> absl::StatusOr<int64_t> {
      const std::string what = absl::StrCat("test.vm.raise raised kind ", kind);
      switch (static_cast<ErrorKind>(kind)) {
        case ErrorKind::kType:
          return TypeError(what);
        case ErrorKind::kValue:
          return ValueError(what);
        case ErrorKind::kIndex:
          return IndexError(what);
        case ErrorKind::kRuntime:
          return RuntimeError(what);
        case ErrorKind::kOutOfMemory:
          return OutOfMemoryError(what);
        default:
          return absl::InternalError(what);
      }
    }));
    Register(Registry::RegisterPacked("test.vm.fail", [](ArgSpan args) -> absl::StatusOr<Value> {
      return RuntimeError("test.vm.fail called with ", args.size(), " arguments");
    }));
  });
}

Tensor MakeFloatTensor(std::vector<int64_t> shape, std::vector<float> values) {
  auto t =
      Tensor::FromBytes(shape, DataType::Float(32), values.data(), values.size() * sizeof(float));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

std::vector<float> ReadFloats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t->NumElements()));
  absl::Status s = t.CopyToBytes(out.data(), out.size() * sizeof(float));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

}  // namespace tether::testing
