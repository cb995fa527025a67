// Helpers shared by the matmul and neural-network operator files
// (linear_algebra.cc, conv2d.cc, conv3d.cc, pooling.cc, pool3d.cc,
// normalization.cc): struct-info
// checks with operator-named errors, dimension comparison, loop builders
// and a vector-friendly reduction over a flat range. Internal to
// compiler/op/; other code uses the registry of op.h.
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_OP_NN_COMMON_H_
#define TETHER_COMPILER_OP_NN_COMMON_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/op/op.h"

namespace tether::compiler::nn_internal {

// Argument `i` of `call` as a tensor; INVALID_ARGUMENT naming `op` when the
// call has fewer arguments or the argument is not a tensor.
absl::StatusOr<const TensorStructInfoNode*> TensorArg(const CallNode& call, size_t i,
                                                      absl::string_view op);
// INVALID_ARGUMENT unless `call` has exactly `n` arguments.
absl::Status CheckArity(const CallNode& call, size_t n, absl::string_view op);

// Whether two dimensions are provably equal (structurally, vars by node).
bool SameDim(const PrimExpr& a, const PrimExpr& b);
// Whether `a` is the constant `value`.
bool IsConst(const PrimExpr& a, int64_t value);
// "(2, n, 3)".
std::string ShapeString(const std::vector<PrimExpr>& shape);
// The numpy broadcast of two dims; false when they are not provably
// compatible (two different constants other than 1, or unrelated symbols).
bool BroadcastDim(const PrimExpr& a, const PrimExpr& b, PrimExpr* out);

// ceil(a / b) for b > 0.
PrimExpr CeilDiv(const PrimExpr& a, int64_t b);

// For(v, 0, extent, kind, body(v)) with a fresh int64 var named `name`.
Stmt Loop(const std::string& name, const PrimExpr& extent, ForKind kind,
          const std::function<Stmt(const PrimExpr&)>& body);

// The shape of a tensor struct info; INVALID_ARGUMENT naming `op` and
// `what` when it is unknown (schedules need at least symbolic shapes).
absl::StatusOr<std::vector<PrimExpr>> KnownShape(const StructInfo& sinfo, absl::string_view op,
                                                 absl::string_view what);
// The buffer behind tensor argument `i` (schedules read parameters, never
// inlined producers); INVALID_ARGUMENT naming `op` otherwise.
absl::StatusOr<Buffer> InputBuffer(const LowerContext& ctx, size_t i, absl::string_view op);

// The reader of tensor argument `i` (a parameter load or an inlined
// producer); INVALID_ARGUMENT naming `op` when there is none.
absl::StatusOr<TensorReader> InputReader(const LowerContext& ctx, size_t i, absl::string_view op);

// The type arithmetic runs in: float32 for 16-bit floats, else `dtype`.
DataType ComputeType(DataType dtype);
// Lowest value of a float or int type (the identity of max).
PrimExpr LowestValue(DataType dtype);

// Writes into dst[0] (a kLocal buffer of at least one element) the
// reduction of reader(r) for r in [0, extent): combine(acc, x) starting
// from `init`. Uses kLanes independent partial accumulators over a
// vectorized inner loop so the loop vectorizes without reassociation flags.
inline constexpr int64_t kReduceLanes = 16;
Stmt LaneReduce(const std::string& name, const PrimExpr& extent, DataType dtype,
                const PrimExpr& init, const std::function<PrimExpr(const PrimExpr&)>& reader,
                const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
                const Buffer& dst);

// Spatial attributes of conv2d and the pools: an int list of 1 or 2 values
// ([k] means [k, k]); INVALID_ARGUMENT naming `op` and `key` for another
// length or a value below `min_value`.
absl::StatusOr<std::vector<int64_t>> Pair(const Attrs& attrs, const std::string& key,
                                          std::vector<int64_t> def, int64_t min_value,
                                          absl::string_view op);
// Padding as (top, left, bottom, right) from 1, 2 or 4 non-negative ints.
absl::StatusOr<std::vector<int64_t>> Padding4(const Attrs& attrs, absl::string_view op);
// The 3-D forms (conv3d, the 3-D pools): an int list of 1 or 3 values
// ([k] means [k, k, k]), and padding as (front, top, left, back, bottom,
// right) from 1, 3 or 6 non-negative ints; INVALID_ARGUMENT as above.
absl::StatusOr<std::vector<int64_t>> Triple(const Attrs& attrs, const std::string& key,
                                            std::vector<int64_t> def, int64_t min_value,
                                            absl::string_view op);
absl::StatusOr<std::vector<int64_t>> Padding6(const Attrs& attrs, absl::string_view op);
// INVALID_ARGUMENT unless the string attribute `key` (when present) equals `expected`.
absl::Status CheckLayout(const Attrs& attrs, const std::string& key, const std::string& expected,
                         absl::string_view op);

}  // namespace tether::compiler::nn_internal

#endif  // TETHER_COMPILER_OP_NN_COMMON_H_
