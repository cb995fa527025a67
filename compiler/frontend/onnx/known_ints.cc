// Small tensors <-> int64/double lists for the ONNX converters. Elements are
// read and written through a per-dtype switch; float16 and bfloat16 go
// through float32 bit manipulation (round to nearest even on the way down).
#include "compiler/frontend/onnx/known_ints.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tether::compiler::onnx_frontend {
namespace {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);  // nan, inf
  if (abs >= 0x477ff000u) return sign | 0x7c00;                                 // overflow
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    float a;
    std::memcpy(&a, &abs, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

template <typename T>
void Fill(void* dst, const std::vector<double>& v) {
  T* p = static_cast<T*>(dst);
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
}

template <typename T>
void FillInts(void* dst, const std::vector<int64_t>& v) {
  T* p = static_cast<T*>(dst);
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
}

template <typename T, typename Out>
void Read(const void* src, int64_t n, std::vector<Out>* out) {
  const T* p = static_cast<const T*>(src);
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) (*out)[static_cast<size_t>(i)] = static_cast<Out>(p[i]);
}

}  // namespace

std::optional<std::vector<int64_t>> IntsFromTensor(const Tensor& t) {
  if (!t || t->device().type != kDLCPU || !t->IsContiguous()) return std::nullopt;
  const DataType d = t->dtype();
  const void* p = t->element_data();
  const int64_t n = t->NumElements();
  std::vector<int64_t> out;
  if (d.is_bool()) {
    Read<uint8_t>(p, n, &out);
    for (int64_t& v : out) v = v != 0;
    return out;
  }
  if (d.lanes() != 1) return std::nullopt;
  if (!d.is_int() && !d.is_uint()) return std::nullopt;
  const bool sign = d.is_int();
  switch (d.bits()) {
    case 8:
      sign ? Read<int8_t>(p, n, &out) : Read<uint8_t>(p, n, &out);
      return out;
    case 16:
      sign ? Read<int16_t>(p, n, &out) : Read<uint16_t>(p, n, &out);
      return out;
    case 32:
      sign ? Read<int32_t>(p, n, &out) : Read<uint32_t>(p, n, &out);
      return out;
    case 64:
      sign ? Read<int64_t>(p, n, &out) : Read<uint64_t>(p, n, &out);
      return out;
    default:
      return std::nullopt;
  }
}

std::optional<std::vector<double>> DoublesFromTensor(const Tensor& t) {
  if (!t || t->device().type != kDLCPU || !t->IsContiguous()) return std::nullopt;
  const DataType d = t->dtype();
  const void* p = t->element_data();
  const int64_t n = t->NumElements();
  std::vector<double> out;
  if (d.lanes() != 1) return std::nullopt;
  if (d.is_float()) {
    switch (d.bits()) {
      case 16: {
        const auto* h = static_cast<const uint16_t*>(p);
        for (int64_t i = 0; i < n; ++i) out.push_back(HalfToFloat(h[i]));
        return out;
      }
      case 32:
        Read<float>(p, n, &out);
        return out;
      case 64:
        Read<double>(p, n, &out);
        return out;
      default:
        return std::nullopt;
    }
  }
  if (d.is_bfloat16()) {
    const auto* h = static_cast<const uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i) out.push_back(BFloat16ToFloat(h[i]));
    return out;
  }
  std::optional<std::vector<int64_t>> ints = IntsFromTensor(t);
  if (!ints.has_value()) return std::nullopt;
  if (d.is_uint() && d.bits() == 64) {
    Read<uint64_t>(p, n, &out);
    return out;
  }
  out.assign(ints->begin(), ints->end());
  return out;
}

absl::StatusOr<Tensor> TensorFromDoubles(const std::vector<double>& values,
                                         const std::vector<int64_t>& shape, DataType dtype) {
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok()) return n.status();
  if (*n != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor of ", *n, " elements given ", values.size(), " values"));
  }
  absl::StatusOr<Tensor> t = Tensor::Empty(shape, dtype, Device::Cpu());
  if (!t.ok()) return t.status();
  void* p = (*t)->element_data();
  const int bits = dtype.bits();
  if (dtype.lanes() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", dtype.ToString()));
  }
  if (dtype.is_bool()) {
    auto* b = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < values.size(); ++i) b[i] = values[i] != 0;
  } else if (dtype.is_bfloat16()) {
    auto* h = static_cast<uint16_t*>(p);
    for (size_t i = 0; i < values.size(); ++i)
      h[i] = FloatToBFloat16(static_cast<float>(values[i]));
  } else if (dtype.is_float() && bits == 16) {
    auto* h = static_cast<uint16_t*>(p);
    for (size_t i = 0; i < values.size(); ++i) h[i] = FloatToHalf(static_cast<float>(values[i]));
  } else if (dtype.is_float() && bits == 32) {
    Fill<float>(p, values);
  } else if (dtype.is_float() && bits == 64) {
    Fill<double>(p, values);
  } else if (dtype.is_int() && bits == 8) {
    Fill<int8_t>(p, values);
  } else if (dtype.is_int() && bits == 16) {
    Fill<int16_t>(p, values);
  } else if (dtype.is_int() && bits == 32) {
    Fill<int32_t>(p, values);
  } else if (dtype.is_int() && bits == 64) {
    Fill<int64_t>(p, values);
  } else if (dtype.is_uint() && bits == 8) {
    Fill<uint8_t>(p, values);
  } else if (dtype.is_uint() && bits == 16) {
    Fill<uint16_t>(p, values);
  } else if (dtype.is_uint() && bits == 32) {
    Fill<uint32_t>(p, values);
  } else if (dtype.is_uint() && bits == 64) {
    Fill<uint64_t>(p, values);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", dtype.ToString()));
  }
  return t;
}

absl::StatusOr<Tensor> TensorFromInts(const std::vector<int64_t>& values,
                                      const std::vector<int64_t>& shape, DataType dtype) {
  if (dtype.lanes() == 1 && (dtype.is_int() || dtype.is_uint())) {
    absl::StatusOr<int64_t> n = CheckedNumElements(shape);
    if (!n.ok()) return n.status();
    if (*n != static_cast<int64_t>(values.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor of ", *n, " elements given ", values.size(), " values"));
    }
    absl::StatusOr<Tensor> t = Tensor::Empty(shape, dtype, Device::Cpu());
    if (!t.ok()) return t.status();
    void* p = (*t)->element_data();
    switch (dtype.bits()) {
      case 8:
        FillInts<int8_t>(p, values);
        return t;
      case 16:
        FillInts<int16_t>(p, values);
        return t;
      case 32:
        FillInts<int32_t>(p, values);
        return t;
      case 64:
        FillInts<int64_t>(p, values);
        return t;
      default:
        break;
    }
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
