// Helpers shared by the ONNX converters: small integer tensors <-> int64
// lists (the import-time values of shape computations, KnownInts), and
// constant tensors of any dtype made from doubles (the alpha of LeakyRelu
// as a float64 scalar for a float64 model).
//
// Thread contract: thread-safe (pure functions).
#ifndef TETHER_COMPILER_FRONTEND_ONNX_KNOWN_INTS_H_
#define TETHER_COMPILER_FRONTEND_ONNX_KNOWN_INTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/relax/expr.h"
#include "runtime/core/tensor.h"

namespace tether::compiler::onnx_frontend {

// The elements of a CPU tensor of an integer or bool dtype as int64s (any
// rank, row-major); nullopt for other dtypes.
std::optional<std::vector<int64_t>> IntsFromTensor(const Tensor& t);
// The elements of a CPU tensor of any numeric dtype as doubles (float16 and
// bfloat16 included); nullopt for other dtypes.
std::optional<std::vector<double>> DoublesFromTensor(const Tensor& t);

// A CPU tensor of `dtype` (any int, uint, float or bool dtype) with `shape`
// holding `values` converted (bools are value != 0). INVALID_ARGUMENT when
// the count does not match the shape or the dtype is not supported.
absl::StatusOr<Tensor> TensorFromDoubles(const std::vector<double>& values,
                                         const std::vector<int64_t>& shape, DataType dtype);
absl::StatusOr<Tensor> TensorFromInts(const std::vector<int64_t>& values,
                                      const std::vector<int64_t>& shape, DataType dtype);

// A 0-D constant of `dtype` holding `value`.
absl::StatusOr<Expr> ScalarConstant(DataType dtype, double value);

// The int64 values of `k` when none is symbolic.
std::optional<std::vector<int64_t>> ConstValues(const KnownInts& k);
// KnownInts of constants.
KnownInts MakeKnownInts(const std::vector<int64_t>& values, bool scalar = false,
                        DataType dtype = DataType::Int(64));
// The KnownInts of a 0-D/1-D integer tensor (at most kMaxKnownInts
// elements), else nullopt.
inline constexpr int64_t kMaxKnownInts = 4096;
std::optional<KnownInts> KnownIntsFromTensor(const Tensor& t);
// A constant tensor holding `k` (its dtype, 0-D when scalar); nullopt when an
// element is symbolic.
std::optional<Tensor> TensorFromKnownInts(const KnownInts& k);

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_KNOWN_INTS_H_
