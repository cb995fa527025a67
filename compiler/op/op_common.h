// Helpers shared by the operator families of compiler/op/: argument
// access with operator-named errors, numpy broadcasting of symbolic shapes
// and of indices, and axis normalization.
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_OP_OP_COMMON_H_
#define TETHER_COMPILER_OP_OP_COMMON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/op/op.h"
#include "compiler/relax/expr.h"

namespace tether::compiler {

// INVALID_ARGUMENT "<op>: <message>".
absl::Status OpError(const CallNode& call, absl::string_view message);
// The name of the operator `call` calls ("relax.add"), or "call".
std::string OpName(const CallNode& call);

// INVALID_ARGUMENT unless `call` has exactly `n` arguments.
absl::Status CheckNumArgs(const CallNode& call, size_t n);
// The tensor struct info of argument `i`; INVALID_ARGUMENT naming the
// operator when it is missing or not a tensor.
absl::StatusOr<const TensorStructInfoNode*> TensorArg(const CallNode& call, size_t i);

// The values of shape argument `i` (a ShapeExpr, or anything whose struct
// info knows its values); INVALID_ARGUMENT naming the operator otherwise.
absl::StatusOr<std::vector<PrimExpr>> ShapeArg(const CallNode& call, size_t i);

// The numpy broadcast of two shapes; dims are compared with ProveEqual and
// size-1 dims stretch. nullopt (shape unknown, rank known) when a pair of
// symbolic dims cannot be proven equal; INVALID_ARGUMENT naming the operator
// and both struct infos when constant dims differ.
absl::StatusOr<std::optional<std::vector<PrimExpr>>> BroadcastShapes(const CallNode& call,
                                                                     const std::vector<PrimExpr>& a,
                                                                     const std::vector<PrimExpr>& b,
                                                                     const StructInfo& a_sinfo,
                                                                     const StructInfo& b_sinfo);

// The struct info of broadcasting `tensors` together (tensors[i] is the
// struct info of call.args[i], used in error messages), with `dtype` as the
// result dtype (nullopt: unknown) and the first tensor's device. Unknown
// shapes or unprovable symbolic dims give a tensor of known rank only.
absl::StatusOr<StructInfo> BroadcastSInfo(const CallNode& call,
                                          const std::vector<const TensorStructInfoNode*>& tensors,
                                          std::optional<DataType> dtype);

// The indices into an operand of shape `in_shape` that an output element at
// `out_indices` reads under broadcasting: leading output dims the operand
// lacks are dropped, its size-1 dims read index 0.
std::vector<PrimExpr> BroadcastIndices(const std::vector<PrimExpr>& out_indices,
                                       const std::vector<PrimExpr>& in_shape);

// The shape of tensor argument `i` of the lowered call (known by contract).
const std::vector<PrimExpr>& ArgShape(const LowerContext& ctx, size_t i);
// The shape of output `k` of the lowered call.
const std::vector<PrimExpr>& OutShape(const LowerContext& ctx, size_t k = 0);

// `axis` in [-ndim, ndim) made non-negative; INVALID_ARGUMENT naming the
// operator otherwise.
absl::StatusOr<int64_t> NormalizeAxis(const CallNode& call, int64_t axis, int64_t ndim);
// The call's "axis" attribute (default 0), normalized for `ndim` dims.
absl::StatusOr<int64_t> AxisAttr(const CallNode& call, int64_t ndim);
// Each axis normalized; INVALID_ARGUMENT on a repeat.
absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const CallNode& call,
                                                   const std::vector<int64_t>& axes, int64_t ndim);

// Row-major flat index of `idx` in `shape`, and the multi-index of a flat
// index (simplified; the first dim is not wrapped).
PrimExpr RavelIndex(const std::vector<PrimExpr>& idx, const std::vector<PrimExpr>& shape);
std::vector<PrimExpr> UnravelIndex(const PrimExpr& flat, const std::vector<PrimExpr>& shape);

// A tensor struct info with t's dtype and device, and `shape` (simplified)
// when known, else rank `ndim`.
StructInfo TensorLike(const TensorStructInfoNode* t, std::optional<std::vector<PrimExpr>> shape,
                      int ndim);

// Every dim of `shape` simplified (arith.h).
std::vector<PrimExpr> SimplifyShape(std::vector<PrimExpr> shape);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_OP_OP_COMMON_H_
