// Helpers shared by the shape converters (convert_shape.cc,
// convert_index.cc): axis normalization with ONNX-node errors, and axes
// given as an attribute before some opset and as an input from it on.
//
// Thread contract: free functions over a converter's context; as
// thread-safe as the context they are given.
#ifndef TETHER_COMPILER_FRONTEND_ONNX_CONVERT_SHAPE_UTIL_H_
#define TETHER_COMPILER_FRONTEND_ONNX_CONVERT_SHAPE_UTIL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/frontend/onnx/converter.h"

namespace tether::compiler::onnx_frontend {

// `axis` in [-rank, rank) made non-negative; INVALID_ARGUMENT through
// ctx.Invalid naming `what` ("axis 3 is out of range for a tensor of 2
// dims") otherwise.
absl::StatusOr<int64_t> NormalizeOnnxAxis(const ConvertContext& ctx, int64_t axis, int64_t rank,
                                          absl::string_view what);
// Each axis normalized; INVALID_ARGUMENT on one out of range or a repeat.
absl::StatusOr<std::vector<int64_t>> NormalizeOnnxAxes(const ConvertContext& ctx,
                                                       const std::vector<int64_t>& axes,
                                                       int64_t rank, absl::string_view what);

// The axes of Squeeze/Unsqueeze-like operators: the attribute `name` before
// `input_since_opset`, input `input_index` (which must be known at import
// time) from it on. nullopt when absent.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesAttrOrInput(ConvertContext& ctx,
                                                                    int64_t input_since_opset,
                                                                    int input_index,
                                                                    absl::string_view name);

// Axes read when the model runs (symbolic), made non-negative for `rank`
// dims with a Select; evaluated then.
PrimExpr RunTimeAxis(const PrimExpr& axis, int64_t rank);
std::vector<PrimExpr> RunTimeAxes(const KnownInts& axes, int64_t rank);
// Per dim of a `rank`-dim tensor, whether it is one of `axes` (booleans).
std::vector<PrimExpr> AxisMask(const std::vector<PrimExpr>& axes, int64_t rank);
// The `out_rank` dims of `shape` whose `removed` is false, in order, each
// picked with Selects (0 where fewer remain).
std::vector<PrimExpr> KeptDims(const std::vector<PrimExpr>& shape,
                               const std::vector<PrimExpr>& removed, int64_t out_rank);

// int64 [0, n) (n maybe symbolic) reshaped to `shape`, whose dims multiply
// to n (a 1 on each side of n places it on an axis).
absl::StatusOr<Expr> EmitIota(ConvertContext& ctx, const PrimExpr& n,
                              const std::vector<PrimExpr>& shape);

// R.call_pure_packed(builtin, args...) returning `sinfo`: a VM builtin run
// on the host (the data-dependent ops, the sequence builtins, checks).
absl::StatusOr<Expr> EmitPackedCall(ConvertContext& ctx, const std::string& builtin,
                                    std::vector<Expr> args, StructInfo sinfo);

// `x` viewed as `shape` (dims computed when the model runs, maybe with
// Selects): vm.builtin.reshape, which refuses an element count that differs.
absl::StatusOr<Expr> EmitRunTimeView(ConvertContext& ctx, const Expr& x,
                                     const std::vector<PrimExpr>& shape, DataType dtype);

// `x` itself when `ok` (a boolean of symbolic vars) holds when the model
// runs; otherwise the run fails with INVALID_ARGUMENT "<node>: `what`"
// (vm.builtin.require). For values read at run time that no view catches.
absl::StatusOr<Expr> EmitRequire(ConvertContext& ctx, const Expr& x, const PrimExpr& ok,
                                 absl::string_view what);

// Registers GatherElements, Trilu, CumSum, OneHot, DepthToSpace and
// SpaceToDepth (convert_index.cc); called by RegisterShapeConverters.
void RegisterIndexConverters();

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_CONVERT_SHAPE_UTIL_H_
