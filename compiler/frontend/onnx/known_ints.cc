// Small tensors <-> int64/double lists for the ONNX converters. Elements are
// read and written through DispatchScalarType (runtime/core/scalar.h);
// float16 and bfloat16 round to nearest even on the way down.
#include "compiler/frontend/onnx/known_ints.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/core/scalar.h"

namespace tether::compiler::onnx_frontend {

std::optional<std::vector<int64_t>> IntsFromTensor(const Tensor& t) {
  if (!t || t->device().type != kDLCPU || !t->IsContiguous()) return std::nullopt;
  const DataType d = t->dtype();
  if (!d.is_int() && !d.is_uint() && !d.is_bool()) return std::nullopt;
  const int64_t n = t->NumElements();
  std::vector<int64_t> out(static_cast<size_t>(n));
  const bool known = DispatchScalarType(d, [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(t->element_data());
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, Bool>) {
        out[static_cast<size_t>(i)] = p[i].bits != 0;
      } else if constexpr (std::is_integral_v<T>) {
        out[static_cast<size_t>(i)] = static_cast<int64_t>(p[i]);
      }
    }
  });
  if (!known) return std::nullopt;
  return out;
}

std::optional<std::vector<double>> DoublesFromTensor(const Tensor& t) {
  if (!t || t->device().type != kDLCPU || !t->IsContiguous()) return std::nullopt;
  const int64_t n = t->NumElements();
  std::vector<double> out(static_cast<size_t>(n));
  const bool known = DispatchScalarType(t->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(t->element_data());
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = ScalarToDouble(p[i]);
  });
  if (!known) return std::nullopt;
  return out;
}

namespace {

// A CPU tensor of `shape` for `count` values (which must be its size).
absl::StatusOr<Tensor> EmptyFor(size_t count, const std::vector<int64_t>& shape, DataType dtype) {
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok()) return n.status();
  if (*n != static_cast<int64_t>(count)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor of ", *n, " elements given ", count, " values"));
  }
  return Tensor::Empty(shape, dtype, Device::Cpu());
}

}  // namespace

absl::StatusOr<Tensor> TensorFromDoubles(const std::vector<double>& values,
                                         const std::vector<int64_t>& shape, DataType dtype) {
  absl::StatusOr<Tensor> t = EmptyFor(values.size(), shape, dtype);
  if (!t.ok()) return t.status();
  void* p = (*t)->element_data();
  const bool known = DispatchScalarType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < values.size(); ++i)
      static_cast<T*>(p)[i] = ScalarFromDouble<T>(values[i]);
  });
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", dtype.ToString()));
  }
  return t;
}

absl::StatusOr<Tensor> TensorFromInts(const std::vector<int64_t>& values,
                                      const std::vector<int64_t>& shape, DataType dtype) {
  if (dtype.lanes() == 1 && (dtype.is_int() || dtype.is_uint())) {
    absl::StatusOr<Tensor> t = EmptyFor(values.size(), shape, dtype);
    if (!t.ok()) return t.status();
    void* p = (*t)->element_data();
    // Integers keep all 64 bits (a double would round above 2^53).
    bool written = false;
    DispatchScalarType(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T>) {
        for (size_t i = 0; i < values.size(); ++i)
          static_cast<T*>(p)[i] = static_cast<T>(values[i]);
        written = true;
      }
    });
    if (written) return t;
  }
  return TensorFromDoubles(std::vector<double>(values.begin(), values.end()), shape, dtype);
}

absl::StatusOr<Expr> ScalarConstant(DataType dtype, double value) {
  absl::StatusOr<Tensor> t = TensorFromDoubles({value}, {}, dtype);
  if (!t.ok()) return t.status();
  return MakeConstant(*t);
}

std::optional<std::vector<int64_t>> ConstValues(const KnownInts& k) {
  std::vector<int64_t> out;
  out.reserve(k.values.size());
  for (const PrimExpr& v : k.values) {
    const int64_t* c = v.as_int();
    if (c == nullptr) return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

KnownInts MakeKnownInts(const std::vector<int64_t>& values, bool scalar, DataType dtype) {
  KnownInts k;
  for (int64_t v : values) k.values.push_back(PrimExpr(v));
  k.scalar = scalar;
  k.dtype = dtype;
  return k;
}

std::optional<KnownInts> KnownIntsFromTensor(const Tensor& t) {
  if (!t || t->ndim() > 1 || t->NumElements() > kMaxKnownInts) return std::nullopt;
  const DataType d = t->dtype();
  if (!(d.is_int() || d.is_uint()) || d.lanes() != 1) return std::nullopt;
  std::optional<std::vector<int64_t>> v = IntsFromTensor(t);
  if (!v.has_value()) return std::nullopt;
  return MakeKnownInts(*v, t->ndim() == 0, d);
}

std::optional<Tensor> TensorFromKnownInts(const KnownInts& k) {
  std::optional<std::vector<int64_t>> v = ConstValues(k);
  if (!v.has_value()) return std::nullopt;
  std::vector<int64_t> shape;
  if (!k.scalar) shape.push_back(static_cast<int64_t>(v->size()));
  absl::StatusOr<Tensor> t = TensorFromInts(*v, shape, k.dtype);
  if (!t.ok()) return std::nullopt;
  return *t;
}

}  // namespace tether::compiler::onnx_frontend
