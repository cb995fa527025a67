// ONNX converters for linear algebra, convolution and pooling: MatMul, Gemm,
// Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
// and Pad. The normalizations and softmaxes live in convert_norm.cc, the
// reductions in convert_reduce.cc and Einsum in convert_einsum.cc;
// RegisterNNConverters registers all four files.
//
// Gemm is emitted as relax.matmul followed by elementwise multiply/add so
// fusion sees matmul + epilogue. Conv, ConvTranspose and the pools map onto
// the 2-D NCHW Relax operators, or the 3-D NCDHW ones (conv3d, max_pool3d,
// avg_pool3d) for 5-d inputs; 1-D forms get a unit height (expand_dims /
// squeeze, both injective and free after fusion). Explicit pads and auto_pad
// (SAME_UPPER, SAME_LOWER, VALID) are resolved to explicit padding at import
// time, which needs static spatial dims only for the SAME forms.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {

void RegisterNormConverters();    // convert_norm.cc
void RegisterReduceConverters();  // convert_reduce.cc
void RegisterEinsumConverter();   // convert_einsum.cc

namespace {

using nn_convert::ExpandDims;
using nn_convert::InputDType;
using nn_convert::InputRank;
using nn_convert::InputShape;
using nn_convert::MulScalar;
using nn_convert::Squeeze;

// ---- MatMul, Gemm ------------------------------------------------------

ConvertResult ConvertMatMul(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr a, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr b, ctx.Input(1));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.matmul", {a, b}));
  return One(y);
}

ConvertResult ConvertGemm(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr a, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr b, ctx.Input(1));
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  for (int i = 0; i < 2; ++i) {
    TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, i));
    if (rank != 2) {
      return ctx.Invalid(absl::StrCat("input ", i, " must have 2 dims, got ", rank));
    }
  }
  const float alpha = ctx.AttrFloat("alpha", 1.0f);
  const float beta = ctx.AttrFloat("beta", 1.0f);
  if (ctx.AttrInt("transA", 0) != 0) {
    TETHER_ASSIGN_OR_RETURN(
        a, ctx.EmitOp("relax.permute_dims", {a}, {{"axes", std::vector<int64_t>{1, 0}}}));
  }
  if (ctx.AttrInt("transB", 0) != 0) {
    TETHER_ASSIGN_OR_RETURN(
        b, ctx.EmitOp("relax.permute_dims", {b}, {{"axes", std::vector<int64_t>{1, 0}}}));
  }
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.matmul", {a, b}));
  if (alpha != 1.0f) {
    TETHER_ASSIGN_OR_RETURN(y, MulScalar(ctx, y, dtype, alpha));
  }
  if (ctx.HasInput(2) && beta != 0.0f) {
    TETHER_ASSIGN_OR_RETURN(Expr c, ctx.Input(2));
    if (beta != 1.0f) {
      TETHER_ASSIGN_OR_RETURN(c, MulScalar(ctx, c, dtype, beta));
    }
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, c}));
  }
  return One(y);
}

// ---- Spatial attributes ---------------------------------------------------

// The resolved spatial parameters of a Conv or pool node with `sp` spatial dims.
struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pad_begin, pad_end;
};

// Reads strides / dilations (default 1) and the padding (pads or auto_pad)
// for the kernel `kernel` over the input's spatial dims `in`.
absl::StatusOr<Window> ResolveWindow(ConvertContext& ctx, const std::vector<PrimExpr>& in,
                                     std::vector<int64_t> kernel) {
  const size_t sp = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = ctx.AttrInts("strides", std::vector<int64_t>(sp, 1));
  w.dilations = ctx.AttrInts("dilations", std::vector<int64_t>(sp, 1));
  if (w.strides.size() != sp || w.dilations.size() != sp) {
    return ctx.Invalid(absl::StrCat("strides [", absl::StrJoin(w.strides, ", "),
                                    "] and dilations [", absl::StrJoin(w.dilations, ", "),
                                    "] must have ", sp, " values"));
  }
  for (size_t i = 0; i < sp; ++i) {
    if (w.strides[i] < 1 || w.dilations[i] < 1 || w.kernel[i] < 1) {
      return ctx.Invalid(absl::StrCat(
          "kernel, strides and dilations must be positive, got [", absl::StrJoin(w.kernel, ", "),
          "], [", absl::StrJoin(w.strides, ", "), "], [", absl::StrJoin(w.dilations, ", "), "]"));
    }
  }
  const std::string auto_pad = ctx.AttrString("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = ctx.AttrInts("pads", std::vector<int64_t>(2 * sp, 0));
    if (pads.size() != 2 * sp) {
      return ctx.Invalid(
          absl::StrCat("pads [", absl::StrJoin(pads, ", "), "] must have ", 2 * sp, " values"));
    }
    for (int64_t p : pads) {
      if (p < 0)
        return ctx.Unsupported(absl::StrCat("negative pads [", absl::StrJoin(pads, ", "), "]"));
    }
    w.pad_begin.assign(pads.begin(), pads.begin() + sp);
    w.pad_end.assign(pads.begin() + sp, pads.end());
    return w;
  }
  if (auto_pad == "VALID") {
    w.pad_begin.assign(sp, 0);
    w.pad_end.assign(sp, 0);
    return w;
  }
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return ctx.Invalid(absl::StrCat("auto_pad '", auto_pad,
                                    "' is not one of NOTSET, VALID, "
                                    "SAME_UPPER, SAME_LOWER"));
  }
  for (size_t i = 0; i < sp; ++i) {
    const int64_t* d = in[i].as_int();
    if (d == nullptr) {
      return ctx.Unsupported(
          absl::StrCat("auto_pad ", auto_pad, " with the symbolic spatial dim ", ToString(in[i])));
    }
    const int64_t out = (*d + w.strides[i] - 1) / w.strides[i];
    const int64_t total = std::max<int64_t>(
        0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - *d);
    const int64_t small = total / 2;
    w.pad_begin.push_back(auto_pad == "SAME_UPPER" ? small : total - small);
    w.pad_end.push_back(auto_pad == "SAME_UPPER" ? total - small : small);
  }
  return w;
}

// The spatial dims of a Conv / pool input of rank 3, 4 or 5; UNIMPLEMENTED
// for other ranks (more than 3 spatial dims).
absl::StatusOr<std::vector<PrimExpr>> SpatialDims(ConvertContext& ctx, int input) {
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, input));
  if (shape.size() < 3 || shape.size() > 5) {
    return ctx.Unsupported(absl::StrCat(
        "inputs of ", shape.size(), " dims (only 1-D, 2-D and 3-D spatial forms: 3 to 5 dims)"));
  }
  return std::vector<PrimExpr>(shape.begin() + 2, shape.end());
}

// The window attributes in the 2-D form of a 1-D node (unit height).
void LiftTo2d(Window& w) {
  if (w.kernel.size() != 1) return;
  w.kernel.insert(w.kernel.begin(), 1);
  w.strides.insert(w.strides.begin(), 1);
  w.dilations.insert(w.dilations.begin(), 1);
  w.pad_begin.insert(w.pad_begin.begin(), 0);
  w.pad_end.insert(w.pad_end.begin(), 0);
}

// The relax padding attribute: all the begins, then all the ends
// ((top, left, bottom, right) in 2-D, (front, top, left, back, bottom,
// right) in 3-D).
std::vector<int64_t> PaddingAttr(const Window& w) {
  std::vector<int64_t> p = w.pad_begin;
  p.insert(p.end(), w.pad_end.begin(), w.pad_end.end());
  return p;
}

// The kernel's spatial dims from a weight of shape (O, I, k0, k1, ...):
// constants, sp of them.
absl::StatusOr<std::vector<int64_t>> KernelDims(ConvertContext& ctx,
                                                const std::vector<PrimExpr>& wshape, size_t sp) {
  if (wshape.size() != sp + 2) {
    return ctx.Invalid(absl::StrCat("weight has ", wshape.size(), " dims, expected ", sp + 2));
  }
  std::vector<int64_t> kernel;
  for (size_t i = 0; i < sp; ++i) {
    const int64_t* k = wshape[2 + i].as_int();
    if (k == nullptr) {
      return ctx.Unsupported(
          absl::StrCat("a weight with the symbolic kernel dim ", ToString(wshape[2 + i])));
    }
    kernel.push_back(*k);
  }
  return kernel;
}

// ---- Conv ------------------------------------------------------------------

}  // namespace

namespace nn_convert {

absl::StatusOr<Expr> EmitConvolution(ConvertContext& ctx, int x_input, int w_input, Expr x,
                                     Expr weight) {
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> in, SpatialDims(ctx, x_input));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> wshape, InputShape(ctx, w_input));
  const size_t sp = in.size();
  TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelDims(ctx, wshape, sp));
  if (ctx.HasAttr("kernel_shape") && ctx.AttrInts("kernel_shape") != kernel) {
    return ctx.Invalid(
        absl::StrCat("kernel_shape [", absl::StrJoin(ctx.AttrInts("kernel_shape"), ", "),
                     "] does not match the weight's [", absl::StrJoin(kernel, ", "), "]"));
  }
  TETHER_ASSIGN_OR_RETURN(Window w, ResolveWindow(ctx, in, kernel));
  const int64_t group = ctx.AttrInt("group", 1);
  if (group < 1) return ctx.Invalid(absl::StrCat("group must be positive, got ", group));
  if (sp == 1) {
    LiftTo2d(w);
    TETHER_ASSIGN_OR_RETURN(x, ExpandDims(ctx, x, {2}));
    TETHER_ASSIGN_OR_RETURN(weight, ExpandDims(ctx, weight, {2}));
  }
  TETHER_ASSIGN_OR_RETURN(Expr y,
                          ctx.EmitOp(sp == 3 ? "relax.nn.conv3d" : "relax.nn.conv2d", {x, weight},
                                     {{"strides", w.strides},
                                      {"padding", PaddingAttr(w)},
                                      {"dilation", w.dilations},
                                      {"groups", group}}));
  if (sp == 1) return Squeeze(ctx, y, {2});
  return y;
}

}  // namespace nn_convert

namespace {

ConvertResult ConvertConv(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr weight, ctx.Input(1));
  TETHER_ASSIGN_OR_RETURN(Expr y, nn_convert::EmitConvolution(ctx, 0, 1, x, weight));
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(int bias_rank, InputRank(ctx, 2));
    if (bias_rank != 1) return ctx.Invalid(absl::StrCat("bias must have 1 dim, got ", bias_rank));
    TETHER_ASSIGN_OR_RETURN(Expr bias, ctx.Input(2));
    TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
    std::vector<int64_t> axes;
    for (int a = 1; a + 1 < rank; ++a) axes.push_back(a);
    TETHER_ASSIGN_OR_RETURN(bias, ExpandDims(ctx, bias, axes));
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, bias}));
  }
  return One(y);
}

// ---- Pools -------------------------------------------------------------------

ConvertResult ConvertPool(ConvertContext& ctx, bool is_max) {
  const bool indices = is_max && nn_convert::WantsOutput(ctx, 1);
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> in, SpatialDims(ctx, 0));
  const size_t sp = in.size();
  if (indices && sp != 2) return ctx.Unsupported("the Indices output of a MaxPool that is not 2-D");
  if (!ctx.HasAttr("kernel_shape")) return ctx.Invalid("missing attribute kernel_shape");
  std::vector<int64_t> kernel = ctx.AttrInts("kernel_shape");
  if (kernel.size() != sp) {
    return ctx.Invalid(absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ", "), "] must have ",
                                    sp, " values for an input of ", sp + 2, " dims"));
  }
  TETHER_ASSIGN_OR_RETURN(Window w, ResolveWindow(ctx, in, kernel));
  const bool ceil_mode = ctx.AttrInt("ceil_mode", 0) != 0;
  const bool count_include_pad = !is_max && ctx.AttrInt("count_include_pad", 0) != 0;
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (sp == 1) {
    LiftTo2d(w);
    TETHER_ASSIGN_OR_RETURN(x, ExpandDims(ctx, x, {2}));
  }
  // With SAME the resolved pads already give ceil(in / stride) outputs
  // under floor division, whatever ceil_mode says.
  const bool same = ctx.AttrString("auto_pad", "NOTSET").rfind("SAME", 0) == 0;
  const std::string op =
      absl::StrCat(is_max ? "relax.nn.max_pool" : "relax.nn.avg_pool", sp == 3 ? "3d" : "2d");
  Attrs attrs = {{"pool_size", w.kernel},           {"strides", w.strides},
                 {"padding", PaddingAttr(w)},       {"dilation", w.dilations},
                 {"ceil_mode", ceil_mode && !same}, {"count_include_pad", count_include_pad}};
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp(op, {x}, attrs));
  if (sp == 1) {
    TETHER_ASSIGN_OR_RETURN(y, Squeeze(ctx, y, {2}));
  }
  if (!indices) return One(y);
  attrs["storage_order"] = ctx.AttrInt("storage_order", 0);
  TETHER_ASSIGN_OR_RETURN(Expr i, ctx.EmitOp("relax.nn.max_pool2d_indices", {x}, attrs));
  return std::vector<OnnxValue>{OnnxValue::Of(y), OnnxValue::Of(i)};
}

// MaxUnpool-11 (2-D): each value of X written at its index I (flat, as
// MaxPool's Indices) of a zero output of the natural unpooled shape,
// (in - 1) * stride + kernel - pads: relax.zeros and a scatter_elements over
// the flattened tensors (indices out of range are clamped by the scatter,
// never written outside). An output_shape input (known at import time or
// read when the model runs) then pads or crops that result at the end of
// each dim, as ONNX Runtime (the indices keep addressing the natural shape).
ConvertResult ConvertMaxUnpool(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  if (shape.size() != 4 || !info->dtype.has_value()) {
    return ctx.Unsupported("MaxUnpool of an input that is not 4-D (N, C, H, W)");
  }
  const std::vector<int64_t> kernel = ctx.AttrInts("kernel_shape");
  const std::vector<int64_t> strides = ctx.AttrInts("strides", {1, 1});
  const std::vector<int64_t> pads = ctx.AttrInts("pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4) {
    return ctx.Invalid("kernel_shape, strides and pads must fit 2 spatial dims");
  }
  std::vector<PrimExpr> natural = shape;
  for (size_t k = 0; k < 2; ++k) {
    natural[2 + k] =
        Simplify((shape[2 + k] - 1) * strides[k] + (kernel[k] - pads[k] - pads[2 + k]));
  }
  const DataType i64 = DataType::Int(64);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr ind, ctx.Input(1));
  const PrimExpr in_n = Simplify(Product(shape)), out_n = Simplify(Product(natural));
  TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.reshape", {x, MakeShapeExpr({in_n})}));
  TETHER_ASSIGN_OR_RETURN(ind, ctx.EmitOp("relax.astype", {ind}, {{"dtype", i64}}));
  TETHER_ASSIGN_OR_RETURN(ind, ctx.EmitOp("relax.reshape", {ind, MakeShapeExpr({in_n})}));
  TETHER_ASSIGN_OR_RETURN(
      Expr zeros, ctx.EmitOp("relax.zeros", {MakeShapeExpr({out_n})}, {{"dtype", *info->dtype}}));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.scatter_elements", {zeros, ind, x},
                                             {{"axis", int64_t{0}}, {"reduction", "update"}}));
  TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.reshape", {y, MakeShapeExpr(natural)}));
  if (!ctx.HasInput(2)) return One(y);
  TETHER_ASSIGN_OR_RETURN(KnownInts o, ctx.KnownOrRunTimeInts(2, "output_shape"));
  if (o.values.size() != 4) return ctx.Invalid("output_shape must have 4 values");
  std::vector<PrimExpr> width;
  for (size_t k = 0; k < 4; ++k) {
    width.push_back(PrimExpr(0));
    width.push_back(Simplify(Cast(i64, o.values[k]) - natural[k]));
  }
  return One(ctx.EmitOp("relax.nn.pad", {y, MakeShapeExpr(width)}, {{"pad_mode", "constant"}}));
}

ConvertResult ConvertGlobalPool(ConvertContext& ctx, bool is_max) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  if (rank < 3) return ctx.Invalid(absl::StrCat("input must have at least 3 dims, got ", rank));
  std::vector<int64_t> axes;
  for (int k = 2; k < rank; ++k) axes.push_back(k);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp(is_max ? "relax.max" : "relax.mean", {x},
                                             {{"axis", axes}, {"keepdims", true}}));
  return One(y);
}

// ---- ConvTranspose --------------------------------------------------------------

// A transposed convolution as a convolution: the input dilated by the
// strides (zeros between elements: expand_dims, pad, reshape), padded by
// (k - 1) * d - pad (negative widths crop) plus output_padding at the end,
// and convolved (stride 1) with the spatially flipped kernel whose in/out
// channels are swapped per group. The weight-side ops fold when the weight
// is an initializer.
// Whether a 2-D transposed convolution's windows do not overlap (kernel ==
// strides, no padding, dilation or output padding, one group, a static
// input): torch's ConvTranspose2d(k=2, s=2) in U-Net and DBNet heads. Each
// output pixel then takes exactly one input pixel, and the general form
// below would spend (s*s - 1)/(s*s) of its products on inserted zeros.
bool IsDepthToSpace(size_t sp, int64_t group, const std::vector<int64_t>& kernel,
                    const std::vector<int64_t>& strides, const std::vector<int64_t>& dil,
                    const std::vector<int64_t>& out_pad, const std::vector<int64_t>& pads,
                    const std::vector<PrimExpr>& xshape) {
  if (sp != 2 || group != 1 || kernel != strides) return false;
  for (const std::vector<int64_t>* v : {&dil}) {
    for (int64_t d : *v) {
      if (d != 1) return false;
    }
  }
  for (const std::vector<int64_t>* v : {&out_pad, &pads}) {
    for (int64_t d : *v) {
      if (d != 0) return false;
    }
  }
  for (const PrimExpr& d : xshape) {
    if (d.as_int() == nullptr) return false;
  }
  return true;
}

// The non-overlapping transposed convolution as a product and a
// depth-to-space: Z = conv2d(x, W') 1x1 with W'[(o, a, b), c] = w[c, o, a,
// b] (the CPU GEMM schedule; the weight side folds), then
// relax.nn.depth_to_space(Z, [KH, KW], "CRD"): output (n, o, h * KH + a,
// w * KW + b) is Z's channel (o, a, b) at (h, w). That is one pass over the
// output, which the elementwise ops after it (bias, BatchNorm, activation)
// fuse into.
ConvertResult ConvTransposeAsDepthToSpace(ConvertContext& ctx, const Expr& x, Expr w,
                                          const std::vector<PrimExpr>& xshape, int64_t cout,
                                          const std::vector<int64_t>& kernel) {
  const int64_t c = *xshape[1].as_int(), kh = kernel[0], kw = kernel[1];
  auto shape = [](std::vector<int64_t> dims) {
    std::vector<PrimExpr> v;
    for (int64_t d : dims) v.emplace_back(d);
    return MakeShapeExpr(std::move(v));
  };
  TETHER_ASSIGN_OR_RETURN(
      w, ctx.EmitOp("relax.permute_dims", {w}, {{"axes", std::vector<int64_t>{1, 2, 3, 0}}}));
  TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.reshape", {w, shape({cout * kh * kw, c, 1, 1})}));
  TETHER_ASSIGN_OR_RETURN(Expr z, ctx.EmitOp("relax.nn.conv2d", {x, w}, {}));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp("relax.nn.depth_to_space", {z},
                                             {{"block_size", std::vector<int64_t>{kh, kw}},
                                              {"mode", std::string("CRD")}}));
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(Expr bias, ctx.Input(2));
    TETHER_ASSIGN_OR_RETURN(bias, ExpandDims(ctx, bias, {1, 2}));
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, bias}));
  }
  return One(y);
}

ConvertResult ConvertConvTranspose(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> in, SpatialDims(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> xshape, InputShape(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> wshape, InputShape(ctx, 1));
  const size_t sp = in.size();
  TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelDims(ctx, wshape, sp));
  const int64_t group = ctx.AttrInt("group", 1);
  if (group < 1) return ctx.Invalid(absl::StrCat("group must be positive, got ", group));
  const int64_t* cin = wshape[0].as_int();
  const int64_t* cout_g = wshape[1].as_int();
  if (cin == nullptr || cout_g == nullptr || *cin % group != 0) {
    return ctx.Invalid(absl::StrCat("weight channels (", ToString(wshape[0]), ", ",
                                    ToString(wshape[1]), ") do not fit group ", group));
  }
  std::vector<int64_t> strides = ctx.AttrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = ctx.AttrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> out_pad = ctx.AttrInts("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> pads = ctx.AttrInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (strides.size() != sp || dil.size() != sp || out_pad.size() != sp || pads.size() != 2 * sp) {
    return ctx.Invalid(absl::StrCat("strides, dilations, output_padding and pads must have ", sp,
                                    ", ", sp, ", ", sp, " and ", 2 * sp, " values"));
  }
  for (size_t i = 0; i < sp; ++i) {
    if (strides[i] < 1 || dil[i] < 1) {
      return ctx.Invalid(absl::StrCat("strides [", absl::StrJoin(strides, ", "),
                                      "] and dilations [", absl::StrJoin(dil, ", "),
                                      "] must be positive"));
    }
  }
  const std::string auto_pad = ctx.AttrString("auto_pad", "NOTSET");
  std::vector<int64_t> output_shape = ctx.AttrInts("output_shape");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return ctx.Invalid(absl::StrCat("auto_pad '", auto_pad,
                                    "' is not one of NOTSET, VALID, "
                                    "SAME_UPPER, SAME_LOWER"));
  }
  if (auto_pad == "VALID") pads.assign(2 * sp, 0);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!output_shape.empty() || same) {
    if (!output_shape.empty() && output_shape.size() != sp) {
      return ctx.Invalid(absl::StrCat("output_shape [", absl::StrJoin(output_shape, ", "),
                                      "] must have ", sp, " values"));
    }
    for (size_t i = 0; i < sp; ++i) {
      const int64_t* d = in[i].as_int();
      if (d == nullptr) {
        return ctx.Unsupported(absl::StrCat(
            "output_shape or auto_pad with the symbolic spatial dim ", ToString(in[i])));
      }
      const int64_t want = output_shape.empty() ? *d * strides[i] : output_shape[i];
      const int64_t total =
          strides[i] * (*d - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - want;
      // Floor division, as the reference: a negative total (a larger
      // output_shape) grows the end.
      const int64_t half = FloorDivInt(total, 2);
      pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[sp + i] = total - pads[i];
    }
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr w, ctx.Input(1));
  if (IsDepthToSpace(sp, group, kernel, strides, dil, out_pad, pads, xshape)) {
    return ConvTransposeAsDepthToSpace(ctx, x, w, xshape, *cout_g, kernel);
  }
  if (sp == 1) {
    TETHER_ASSIGN_OR_RETURN(x, ExpandDims(ctx, x, {2}));
    TETHER_ASSIGN_OR_RETURN(w, ExpandDims(ctx, w, {2}));
    xshape.insert(xshape.begin() + 2, PrimExpr(1));
    kernel.insert(kernel.begin(), 1);
    strides.insert(strides.begin(), 1);
    dil.insert(dil.begin(), 1);
    out_pad.insert(out_pad.begin(), 0);
    pads = {0, pads[0], 0, pads[1]};
  }
  // Dilate: (N, C, H, W) -> (N, C, H, 1, W, 1) -> pad to (N, C, H, sh, W, sw) ->
  // (N, C, H * sh, W * sw), and likewise with a depth axis in 3-D; the
  // trailing s - 1 zeros of each axis are cropped below.
  const size_t ns = kernel.size();  // 2 or 3 once a 1-D node is lifted
  const bool dilate = std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v > 1; });
  if (dilate) {
    std::vector<int64_t> axes, dilate_width(2 * (2 + 2 * ns), 0);
    std::vector<PrimExpr> dilated = {xshape[0], xshape[1]};
    for (size_t i = 0; i < ns; ++i) {
      axes.push_back(static_cast<int64_t>(3 + 2 * i));
      dilate_width[2 * (3 + 2 * i) + 1] = strides[i] - 1;
      dilated.push_back(Simplify(xshape[2 + i] * PrimExpr(strides[i])));
    }
    TETHER_ASSIGN_OR_RETURN(x, ExpandDims(ctx, x, axes));
    TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.nn.pad", {x}, {{"pad_width", dilate_width}}));
    TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.reshape", {x, MakeShapeExpr(dilated)}));
  }
  std::vector<int64_t> width = {0, 0, 0, 0};
  for (size_t i = 0; i < ns; ++i) {
    const int64_t reach = (kernel[i] - 1) * dil[i];
    width.push_back(reach - pads[i]);
    width.push_back(reach - pads[ns + i] + out_pad[i] - (strides[i] - 1));
  }
  TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.nn.pad", {x}, {{"pad_width", width}}));
  // Weight (C, M/g, k...): flip the kernel axes; swap to (M, C/g, k...) per group.
  const int64_t kmin = std::numeric_limits<int64_t>::min() / 2;
  std::vector<int64_t> flip_axes;
  for (size_t i = 0; i < ns; ++i) flip_axes.push_back(static_cast<int64_t>(2 + i));
  TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.strided_slice", {w},
                                        {{"axes", flip_axes},
                                         {"begin", std::vector<int64_t>(ns, -1)},
                                         {"end", std::vector<int64_t>(ns, kmin)},
                                         {"strides", std::vector<int64_t>(ns, -1)}}));
  const int64_t cg = *cin / group;
  std::vector<PrimExpr> grouped = {PrimExpr(group), PrimExpr(cg), PrimExpr(*cout_g)};
  std::vector<PrimExpr> swapped = {PrimExpr(group * *cout_g), PrimExpr(cg)};
  std::vector<int64_t> perm = {0, 2, 1};
  for (size_t i = 0; i < ns; ++i) {
    grouped.push_back(PrimExpr(kernel[i]));
    swapped.push_back(PrimExpr(kernel[i]));
    perm.push_back(static_cast<int64_t>(3 + i));
  }
  TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.reshape", {w, MakeShapeExpr(grouped)}));
  TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.permute_dims", {w}, {{"axes", perm}}));
  TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.reshape", {w, MakeShapeExpr(swapped)}));
  TETHER_ASSIGN_OR_RETURN(Expr y, ctx.EmitOp(ns == 3 ? "relax.nn.conv3d" : "relax.nn.conv2d",
                                             {x, w}, {{"dilation", dil}, {"groups", group}}));
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(Expr bias, ctx.Input(2));
    std::vector<int64_t> bias_axes;
    for (size_t i = 0; i < ns; ++i) bias_axes.push_back(static_cast<int64_t>(1 + i));
    TETHER_ASSIGN_OR_RETURN(bias, ExpandDims(ctx, bias, bias_axes));
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.add", {y, bias}));
  }
  if (sp == 1) {
    TETHER_ASSIGN_OR_RETURN(y, Squeeze(ctx, y, {2}));
  }
  return One(y);
}

// ---- Pad -----------------------------------------------------------------------

// Pad-11 and later whose pads or constant_value are fed at run time: the
// widths as symbolic vars in relax.nn.pad's shape argument, the value as its
// tensor argument. The input's dims must be constants (not 0): a width
// that crops more than a dim gives a negative dim, which the allocation
// refuses.
ConvertResult RunTimePad(ConvertContext& ctx, int rank, DataType dtype) {
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> shape, InputShape(ctx, 0));
  for (const PrimExpr& d : shape) {
    const int64_t* v = d.as_int();
    if (v == nullptr || *v == 0) {
      return ctx.Unsupported(absl::StrCat("run-time pads on the dim ", ToString(d),
                                          " (only constant, non-empty dims)"));
    }
  }
  TETHER_ASSIGN_OR_RETURN(KnownInts pads, ctx.KnownOrRunTimeInts(1, "pads"));
  if (static_cast<int>(pads.values.size()) != 2 * rank) {
    return ctx.Invalid(absl::StrCat("pads has ", pads.values.size(), " values for an input of ",
                                    rank, " dims, expected ", 2 * rank));
  }
  const std::string mode = ctx.AttrString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    return ctx.Unsupported(absl::StrCat("mode '", mode, "'"));
  }
  std::vector<PrimExpr> width;
  for (int k = 0; k < rank; ++k) {
    width.push_back(Cast(DataType::Int(64), pads.values[k]));
    width.push_back(Cast(DataType::Int(64), pads.values[rank + k]));
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  std::vector<Expr> args{x, MakeShapeExpr(width)};
  Attrs attrs{{"pad_mode", mode}};
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(Expr v, ctx.Input(2));
    TETHER_ASSIGN_OR_RETURN(v, ctx.EmitOp("relax.reshape", {v, MakeShapeExpr({})}));
    TETHER_ASSIGN_OR_RETURN(v, ctx.EmitOp("relax.astype", {v}, {{"dtype", dtype}}));
    args.push_back(v);
  }
  return One(ctx.EmitOp("relax.nn.pad", std::move(args), std::move(attrs)));
}

// Pads from the attribute (before opset 11) or the input, [x1_begin, x2_begin,
// ..., x1_end, x2_end], to relax.nn.pad's interleaved (before, after) pairs.
ConvertResult ConvertPad(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(int rank, InputRank(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(DataType dtype, InputDType(ctx, 0));
  std::vector<int64_t> pads;
  double value = 0.0;
  if (ctx.opset() < 11) {
    pads = ctx.AttrInts("pads");
    value = ctx.AttrFloat("value", 0.0f);
  } else {
    if (ctx.HasInput(3)) return ctx.Unsupported("the axes input of Pad");
    const bool run_time =
        !ctx.ConstantInput(1).has_value() || (ctx.HasInput(2) && !ctx.ConstantInput(2).has_value());
    if (run_time) return RunTimePad(ctx, rank, dtype);
    TETHER_ASSIGN_OR_RETURN(pads, ctx.ConstantInts(1, "pads"));
    if (ctx.HasInput(2)) {
      std::optional<Tensor> v = ctx.ConstantInput(2);
      if (!v.has_value())
        return ctx.Unsupported("input 2 (constant_value) must be known at import time");
      if ((*v)->NumElements() != 1) {
        return ctx.Invalid(
            absl::StrCat("constant_value must have one element, got ", (*v)->NumElements()));
      }
      // Read the scalar through a dtype switch on the few types Pad allows.
      const DataType vt = (*v)->dtype();
      const void* p = (*v)->element_data();
      if (vt == DataType::Float(32)) {
        value = *static_cast<const float*>(p);
      } else if (vt == DataType::Float(64)) {
        value = *static_cast<const double*>(p);
      } else if (vt == DataType::Int(32)) {
        value = *static_cast<const int32_t*>(p);
      } else if (vt == DataType::Int(64)) {
        value = static_cast<double>(*static_cast<const int64_t*>(p));
      } else {
        return ctx.Unsupported(absl::StrCat("constant_value of dtype ", vt.ToString()));
      }
    }
    if (ctx.HasInput(3)) return ctx.Unsupported("the axes input of Pad");
  }
  if (static_cast<int>(pads.size()) != 2 * rank) {
    return ctx.Invalid(absl::StrCat("pads [", absl::StrJoin(pads, ", "), "] must have ", 2 * rank,
                                    " values for an input of ", rank, " dims"));
  }
  const std::string mode = ctx.AttrString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    return ctx.Unsupported(absl::StrCat("mode '", mode, "'"));
  }
  if (mode == "constant" && !dtype.is_float() &&
      value != static_cast<double>(static_cast<int64_t>(value))) {
    return ctx.Invalid(absl::StrCat("constant_value ", value, " is not a ", dtype.ToString()));
  }
  std::vector<int64_t> width;
  for (int k = 0; k < rank; ++k) {
    width.push_back(pads[k]);
    width.push_back(pads[rank + k]);
  }
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(
      Expr y, ctx.EmitOp("relax.nn.pad", {x},
                         {{"pad_width", width}, {"pad_mode", mode}, {"pad_value", value}}));
  return One(y);
}

}  // namespace

void RegisterNNConverters() {
  RegisterConverter("MatMul", 1, ConvertMatMul);
  RegisterConverter("Gemm", 1, ConvertGemm);
  RegisterConverter("Conv", 1, ConvertConv);
  RegisterConverter("MaxPool", 1, [](ConvertContext& ctx) { return ConvertPool(ctx, true); });
  RegisterConverter("AveragePool", 1, [](ConvertContext& ctx) { return ConvertPool(ctx, false); });
  RegisterConverter("GlobalAveragePool", 1,
                    [](ConvertContext& ctx) { return ConvertGlobalPool(ctx, false); });
  RegisterConverter("GlobalMaxPool", 1,
                    [](ConvertContext& ctx) { return ConvertGlobalPool(ctx, true); });
  RegisterConverter("ConvTranspose", 1, ConvertConvTranspose);
  RegisterConverter("Pad", 1, ConvertPad);
  RegisterConverter("MaxUnpool", 11, ConvertMaxUnpool);
  RegisterNormConverters();
  RegisterReduceConverters();
  RegisterEinsumConverter();
}

}  // namespace tether::compiler::onnx_frontend
