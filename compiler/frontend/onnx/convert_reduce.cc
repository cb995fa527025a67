// ONNX converters for reductions and arg-reductions: ReduceSum, ReduceMean,
// ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare, ArgMax and ArgMin, and TopK.
//
// The reduced axes come from the `axes` attribute, or (ReduceSum from
// opset 13, the others from opset 18) from the optional second input, which
// must then be known at import time. No axes reduces everything unless
// noop_with_empty_axes is set (then the node is an identity). The composite
// reductions are built from relax.sum / relax.max and elementwise ops;
// LogSumExp subtracts the maximum first so large inputs do not overflow.
// ArgMax/ArgMin with select_last_index reverse the axis (a strided slice)
// and map the index back. TopK is relax.topk (compiler/op/sorting.cc), its k
// known at import time.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::InputDType;
using nn_convert::InputRank;
using nn_convert::InputShape;
using nn_convert::NormalizeAxis;

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The reduce attributes of a node: "axis" (absent: all) and "keepdims";
// nullopt for an identity (empty axes with noop_with_empty_axes).
absl::StatusOr<std::optional<Attrs>> ReduceAttrs(ConvertContext& ctx, int since_axes_input) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  std::vector<int64_t> axes;
  if (ctx.opset() >= since_axes_input) {
    if (ctx.HasInput(1)) {
      TETHER_ASSIGN_OR_RETURN(axes, ctx.ConstantInts(1, "axes"));
    }
  } else {
    axes = ctx.AttrInts("axes");
  }
  const bool keepdims = ctx.AttrInt("keepdims", 1) != 0;
  if (axes.empty()) {
    if (ctx.opset() >= since_axes_input && ctx.AttrInt("noop_with_empty_axes", 0) != 0) {
      return std::optional<Attrs>();
    }
    return std::optional<Attrs>(Attrs{{"keepdims", keepdims}});
  }
  std::vector<int64_t> normalized;
  for (int64_t a : axes) {
    TETHER_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, "axis"));
    for (int64_t seen : normalized) {
      if (seen == n) {
        return ctx.Invalid(absl::StrCat("axes [", absl::StrJoin(axes, ", "), "] repeat axis ", a));
      }
    }
    normalized.push_back(n);
  }
  return std::optional<Attrs>(Attrs{{"axis", normalized}, {"keepdims", keepdims}});
}

ConvertResult ConvertReduce(ConvertContext& ctx, Reduce kind, int since_axes_input) {
  TETHER_ASSIGN_OR_RETURN(std::optional<Attrs> attrs, ReduceAttrs(ctx, since_axes_input));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (!attrs.has_value()) return One(x);
  Expr y;
  switch (kind) {
    case Reduce::kSum: {
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.sum", {x}, *attrs));
      break;
    }
    case Reduce::kMean: {
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.mean", {x}, *attrs));
      break;
    }
    case Reduce::kMax: {
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.max", {x}, *attrs));
      break;
    }
    case Reduce::kMin: {
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.min", {x}, *attrs));
      break;
    }
    case Reduce::kProd: {
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.prod", {x}, *attrs));
      break;
    }
    case Reduce::kL1: {
      TETHER_ASSIGN_OR_RETURN(Expr a, ctx.EmitOp("relax.abs", {x}));
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.sum", {a}, *attrs));
      break;
    }
    case Reduce::kL2:
    case Reduce::kSumSquare: {
      TETHER_ASSIGN_OR_RETURN(Expr sq, ctx.EmitOp("relax.multiply", {x, x}));
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.sum", {sq}, *attrs));
      if (kind == Reduce::kL2) {
        TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
        if (dtype.is_float()) {
          TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.sqrt", {y}));
        } else {
          // Integer L2 norms round down, as the reference's astype does.
          TETHER_ASSIGN_OR_RETURN(
              Expr f, ctx.EmitOp("relax.astype", {y}, {{"dtype", DataType::Float(64)}}));
          TETHER_ASSIGN_OR_RETURN(f, ctx.EmitOp("relax.sqrt", {f}));
          TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.astype", {f}, {{"dtype", dtype}}));
        }
      }
      break;
    }
    case Reduce::kLogSum: {
      TETHER_ASSIGN_OR_RETURN(Expr s, ctx.EmitOp("relax.sum", {x}, *attrs));
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.log", {s}));
      break;
    }
    case Reduce::kLogSumExp: {
      // log(sum(exp(x - m))) + m with m the maximum (kept dims for the subtraction).
      Attrs keep = *attrs;
      keep["keepdims"] = true;
      TETHER_ASSIGN_OR_RETURN(Expr m_keep, ctx.EmitOp("relax.max", {x}, keep));
      TETHER_ASSIGN_OR_RETURN(Expr d, ctx.EmitOp("relax.subtract", {x, m_keep}));
      TETHER_ASSIGN_OR_RETURN(d, ctx.EmitOp("relax.exp", {d}));
      TETHER_ASSIGN_OR_RETURN(Expr s, ctx.EmitOp("relax.sum", {d}, *attrs));
      TETHER_ASSIGN_OR_RETURN(s, ctx.EmitOp("relax.log", {s}));
      Expr m = m_keep;
      if (!GetBoolAttr(*attrs, "keepdims", true)) {
        TETHER_ASSIGN_OR_RETURN(m, ctx.EmitOp("relax.max", {x}, *attrs));
      }
      TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {s, m}));
      break;
    }
  }
  return One(y);
}

ConvertResult ConvertArgReduce(ConvertContext& ctx, bool is_max) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  if (rank == 0) return ctx.Invalid("input must have at least 1 dim");
  TETHER_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.AttrInt("axis", 0), rank, "axis"));
  const bool keepdims = ctx.AttrInt("keepdims", 1) != 0;
  const bool last = ctx.AttrInt("select_last_index", 0) != 0;
  const char* op = is_max ? "relax.argmax" : "relax.argmin";
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  Attrs attrs = {{"axis", axis}, {"keepdims", keepdims}};
  if (!last) {
    TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp(op, {x}, attrs));
    return One(y);
  }
  // The last extreme is the first one of the reversed axis: index d-1-i.
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  const int64_t* extent = shape[axis].as_int();
  if (extent == nullptr) {
    return ctx.Unsupported(
        absl::StrCat("select_last_index over the symbolic dim ", ToString(shape[axis])));
  }
  TETHER_ASSIGN_OR_RETURN(
      Expr rev, ctx.EmitOp("relax.strided_slice", {x},
                           {{"axes", std::vector<int64_t>{axis}},
                            {"begin", std::vector<int64_t>{-1}},
                            {"end", std::vector<int64_t>{std::numeric_limits<int64_t>::min() / 2}},
                            {"strides", std::vector<int64_t>{-1}}}));
  TETHER_ASSIGN_OR_RETURN(Expr i, ctx.EmitOp(op, {rev}, attrs));
  TETHER_ASSIGN_OR_RETURN(Expr top, nn_convert::ScalarConstant(DataType::Int(64), *extent - 1));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.subtract", {top, i}));
  return One(y);
}

void RegisterReduce(const std::string& op, Reduce kind, int since_axes_input) {
  RegisterConverter(op, 1, [kind, since_axes_input](ConvertContext& ctx) {
    return ConvertReduce(ctx, kind, since_axes_input);
  });
}

// Values and int64 indices of the k largest (or smallest) along `axis`,
// sorted; k is attribute `k` (opset 1) or input 1 (opset 10 on).
ConvertResult ConvertTopK(ConvertContext& ctx) {
  int64_t k = ctx.AttrInt("k", -1);
  if (ctx.opset() >= 10) {
    TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> ks, ctx.ConstantInts(1, "K"));
    if (ks.size() != 1) return ctx.Invalid("input 1 (K) must hold one value");
    k = ks[0];
  }
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.AttrInt("axis", -1), rank, "axis"));
  if (k < 0) return ctx.Invalid(absl::StrCat("k must not be negative, got ", k));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (k == 0) {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
    shape[static_cast<size_t>(axis)] = PrimExpr(0);
    TETHER_ASSIGN_OR_RETURN(DataType dt, InputDType(ctx, 0));
    TETHER_ASSIGN_OR_RETURN(Expr v,
                            ctx.EmitOp("relax.zeros", {MakeShapeExpr(shape)}, {{"dtype", dt}}));
    TETHER_ASSIGN_OR_RETURN(
        Expr i, ctx.EmitOp("relax.zeros", {MakeShapeExpr(shape)}, {{"dtype", DataType::Int(64)}}));
    return std::vector<OnnxValue>{OnnxValue::Of(v), OnnxValue::Of(i)};
  }
  const bool largest = ctx.AttrInt("largest", 1) != 0;
  TETHER_ASSIGN_OR_RETURN(
      Expr both, ctx.EmitOp("relax.topk", {x}, {{"k", k}, {"axis", axis}, {"largest", largest}}));
  TETHER_ASSIGN_OR_RETURN(Expr values, ctx.Emit(MakeTupleGetItem(both, 0)));
  TETHER_ASSIGN_OR_RETURN(Expr indices, ctx.Emit(MakeTupleGetItem(both, 1)));
  return std::vector<OnnxValue>{OnnxValue::Of(values), OnnxValue::Of(indices)};
}

}  // namespace

// Called from RegisterNNConverters (convert_nn.cc).
void RegisterReduceConverters() {
  RegisterReduce("ReduceSum", Reduce::kSum, 13);
  RegisterReduce("ReduceMean", Reduce::kMean, 18);
  RegisterReduce("ReduceMax", Reduce::kMax, 18);
  RegisterReduce("ReduceMin", Reduce::kMin, 18);
  RegisterReduce("ReduceProd", Reduce::kProd, 18);
  RegisterReduce("ReduceL1", Reduce::kL1, 18);
  RegisterReduce("ReduceL2", Reduce::kL2, 18);
  RegisterReduce("ReduceLogSum", Reduce::kLogSum, 18);
  RegisterReduce("ReduceLogSumExp", Reduce::kLogSumExp, 18);
  RegisterReduce("ReduceSumSquare", Reduce::kSumSquare, 18);
  RegisterConverter("ArgMax", 1, [](ConvertContext& ctx) { return ConvertArgReduce(ctx, true); });
  RegisterConverter("ArgMin", 1, [](ConvertContext& ctx) { return ConvertArgReduce(ctx, false); });
  RegisterConverter("TopK", 1, ConvertTopK);
}

}  // namespace tether::compiler::onnx_frontend
