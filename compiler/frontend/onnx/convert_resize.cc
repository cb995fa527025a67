// ONNX converters for Resize (opsets 10, 11, 13) and Upsample (opsets 7, 9),
// onto relax.image.resize2d, and for GridSample (opset 16) and RoiAlign
// (opsets 10, 16) onto relax.image.grid_sample and relax.image.roi_align
// (compiler/op/image.cc).
//
// The output shape comes from `sizes` or from `scales` (floor(in * scale), as
// ONNX's reference). Both may be known at import time (initializers,
// Constants, shape-derived values, maybe symbolic) or read when the model
// runs: run-time sizes become symbolic vars; run-time scales become sizes
// computed in the graph plus a tensor argument of relax.image.resize2d that
// the kernel reads its coordinate scales from. `roi` for tf_crop_and_resize
// and the scales of Resize-10/Upsample (whose rounding depends on their
// values) must be known at import time: UNIMPLEMENTED "must be known at
// import time" otherwise, the message the conformance runner recognizes.
// Only the last two dims may be resized; other ranks than 4 are
// reshaped to (prod(leading dims), 1, H, W) and back. When `scales` is
// given, the op's `scale` attribute carries it, because ONNX transforms
// coordinates with the given scale, not with out / in.
//
// Resize-10 and Upsample have no coordinate_transformation_mode: they are
// asymmetric, and nearest rounds down when upsampling and up when
// downsampling (ONNX Runtime's behaviour, which the test data follows).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::InputShape;

// Where a node's inputs and attributes are, by operator version.
struct ResizeForm {
  int roi = -1;         // input index of roi, -1: none
  int scales = -1;      // input index of scales, -1: the `scales` attribute (Upsample-7)
  int sizes = -1;       // input index of sizes, -1: none
  bool legacy = false;  // Resize-10 / Upsample: asymmetric, "simple" nearest rounding
};

// A float input known at import time as doubles; nullopt when absent or
// empty (opset 11 marks an unused scales or roi by an empty tensor).
absl::StatusOr<std::optional<std::vector<double>>> ConstantFloats(ConvertContext& ctx, int i,
                                                                  absl::string_view what,
                                                                  absl::string_view why) {
  if (i < 0 || !ctx.HasInput(i)) return std::optional<std::vector<double>>();
  std::optional<Tensor> t = ctx.ConstantInput(i);
  if (!t.has_value()) {
    return ctx.Unsupported(
        absl::StrCat("input ", i, " (", what, ") must be known at import time (", why, ")"));
  }
  if ((*t)->NumElements() == 0) return std::optional<std::vector<double>>();
  std::optional<std::vector<double>> v = DoublesFromTensor(*t);
  if (!v.has_value()) {
    return ctx.Invalid(absl::StrCat("input ", i, " (", what, ") has the non-numeric dtype ",
                                    (*t)->dtype().ToString()));
  }
  return v;
}

// A `scales` input read when the model runs, checked: a float tensor of
// one value per dim of `in`.
absl::StatusOr<Expr> RunTimeScales(ConvertContext& ctx, int i, const std::vector<PrimExpr>& in) {
  TETHER_ASSIGN_OR_RETURN(Expr scales, ctx.Input(i));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(i));
  const bool fits = info->ndim == 1 && info->shape.has_value() &&
                    AsConstInt((*info->shape)[0]) == static_cast<int64_t>(in.size());
  if (!fits || !info->dtype.has_value() || !info->dtype->is_float()) {
    return ctx.Invalid(absl::StrCat("input ", i, " (scales) must be a float tensor of ", in.size(),
                                    " values, got ", ToString(scales.struct_info())));
  }
  return scales;
}

// The output extents floor(in * scale) of run-time scales, computed in
// float64 when the model runs (as ONNX's reference) and read into symbolic
// vars. The input's dims must be constants.
absl::StatusOr<std::vector<PrimExpr>> ScaledSizes(ConvertContext& ctx, int i,
                                                  const std::vector<PrimExpr>& in) {
  std::vector<double> dims;
  for (const PrimExpr& d : in) {
    const int64_t* v = d.as_int();
    if (v == nullptr) {
      return ctx.Unsupported(absl::StrCat("run-time scales over the symbolic dim ", ToString(d)));
    }
    dims.push_back(static_cast<double>(*v));
  }
  const DataType f64 = DataType::Float(64);
  TETHER_ASSIGN_OR_RETURN(Expr scales, ctx.Input(i));
  TETHER_ASSIGN_OR_RETURN(scales, ctx.EmitOp("relax.astype", {scales}, {{"dtype", f64}}));
  TETHER_ASSIGN_OR_RETURN(Tensor t,
                          TensorFromDoubles(dims, {static_cast<int64_t>(dims.size())}, f64));
  TETHER_ASSIGN_OR_RETURN(Expr out, ctx.EmitOp("relax.multiply", {scales, MakeConstant(t)}));
  TETHER_ASSIGN_OR_RETURN(out, ctx.EmitOp("relax.floor", {out}));
  TETHER_ASSIGN_OR_RETURN(out, ctx.EmitOp("relax.astype", {out}, {{"dtype", DataType::Int(64)}}));
  TETHER_ASSIGN_OR_RETURN(KnownInts k, ctx.RunTimeInts(out, ctx.node().input(i)));
  return k.values;
}

// The (h, w) scales the kernel reads: the last two of `scales` (1 and the
// only one for rank 1).
absl::StatusOr<Expr> SpatialScales(ConvertContext& ctx, const Expr& scales, size_t rank) {
  if (rank >= 2) {
    TETHER_ASSIGN_OR_RETURN(
        Tensor idx, TensorFromInts({static_cast<int64_t>(rank) - 2, static_cast<int64_t>(rank) - 1},
                                   {2}, DataType::Int(64)));
    return ctx.EmitOp("relax.take", {scales, MakeConstant(idx)}, {{"axis", int64_t{0}}});
  }
  const auto* info = scales.struct_info().as<TensorStructInfoNode>();
  TETHER_ASSIGN_OR_RETURN(Tensor one, TensorFromDoubles({1.0}, {1}, *info->dtype));
  return ctx.EmitOp("relax.concat", {MakeTuple({MakeConstant(one), scales})},
                    {{"axis", int64_t{0}}});
}

std::string ModeOf(ConvertContext& ctx, const ResizeForm& form) {
  if (form.legacy) return "asymmetric";
  const std::string mode = ctx.AttrString("coordinate_transformation_mode", "half_pixel");
  // The ONNX test suite (and exporters of its time) spell it short.
  return mode == "tf_half_pixel_for_nn" ? std::string("tf_half_pixel_for_nearest") : mode;
}

ConvertResult ConvertResize(ConvertContext& ctx, const ResizeForm& form) {
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> in, InputShape(ctx, 0));
  const size_t rank = in.size();
  if (rank == 0) return ctx.Invalid("the input is a scalar (nothing to resize)");

  // The method.
  const std::string mode = ctx.AttrString("mode", "nearest");
  std::string method;
  if (mode == "nearest") {
    method = "nearest_neighbor";
  } else if (mode == "linear" || (form.legacy && mode == "bilinear")) {
    method = "linear";
  } else if (mode == "cubic" && !form.legacy) {
    method = "cubic";
  } else {
    return ctx.Invalid(absl::StrCat("mode '", mode, "' is not one of nearest, linear",
                                    form.legacy ? "" : ", cubic"));
  }
  const std::string ctm = ModeOf(ctx, form);
  if (ctm == "half_pixel_symmetric") {
    return ctx.Unsupported("coordinate_transformation_mode half_pixel_symmetric");
  }
  if (ctm != "half_pixel" && ctm != "align_corners" && ctm != "asymmetric" &&
      ctm != "pytorch_half_pixel" && ctm != "tf_crop_and_resize" &&
      ctm != "tf_half_pixel_for_nearest") {
    return ctx.Invalid(absl::StrCat("coordinate_transformation_mode '", ctm, "' is unknown"));
  }

  // Scales or sizes. Sizes read when the model runs are symbolic vars;
  // scales read then become sizes (floor(in * scale), computed in the graph)
  // and a tensor the kernel reads its coordinate scales from.
  std::optional<std::vector<double>> scales;
  std::optional<Expr> run_time_scale;  // (h, w), for relax.image.resize2d
  bool run_time_sizes = false;
  if (form.scales < 0) {
    if (!ctx.HasAttr("scales")) return ctx.Invalid("the scales attribute is required");
    std::vector<float> f = ctx.AttrFloats("scales");
    scales = std::vector<double>(f.begin(), f.end());
  } else if (ctx.HasInput(form.scales) && !ctx.ConstantInput(form.scales).has_value() &&
             !form.legacy) {
    TETHER_ASSIGN_OR_RETURN(run_time_scale, RunTimeScales(ctx, form.scales, in));
  } else {
    TETHER_ASSIGN_OR_RETURN(
        scales, ConstantFloats(ctx, form.scales, "scales", "the output shape depends on it"));
  }
  std::optional<std::vector<PrimExpr>> sizes;
  if (run_time_scale.has_value()) {
    TETHER_ASSIGN_OR_RETURN(sizes, ScaledSizes(ctx, form.scales, in));
    TETHER_ASSIGN_OR_RETURN(run_time_scale, SpatialScales(ctx, *run_time_scale, rank));
    run_time_sizes = true;
  } else if (form.sizes >= 0 && ctx.HasInput(form.sizes)) {
    run_time_sizes = !ctx.KnownInput(form.sizes).has_value();
    TETHER_ASSIGN_OR_RETURN(KnownInts k, ctx.KnownOrRunTimeInts(form.sizes, "sizes"));
    if (!k.values.empty()) sizes = k.values;
  }
  if (scales.has_value() && sizes.has_value()) {
    return ctx.Invalid("scales and sizes are both given (only one may be)");
  }
  if (!scales.has_value() && !sizes.has_value()) {
    return ctx.Invalid("neither scales nor sizes is given");
  }
  const size_t given = scales.has_value() ? scales->size() : sizes->size();
  if (given != rank) {
    return ctx.Invalid(absl::StrCat(scales.has_value() ? "scales" : "sizes", " has ", given,
                                    " values for an input of ", rank, " dims"));
  }
  if (scales.has_value()) {
    for (double s : *scales) {
      if (!(s > 0) || !std::isfinite(s)) {
        return ctx.Invalid(absl::StrCat("scales [", absl::StrJoin(*scales, ", "),
                                        "] must be positive and finite"));
      }
    }
  }

  // roi, read by tf_crop_and_resize only.
  std::vector<double> roi;
  for (size_t d = 0; d < rank; ++d) roi.push_back(0.0);
  for (size_t d = 0; d < rank; ++d) roi.push_back(1.0);
  if (ctm == "tf_crop_and_resize") {
    TETHER_ASSIGN_OR_RETURN(
        std::optional<std::vector<double>> r,
        ConstantFloats(ctx, form.roi, "roi", "tf_crop_and_resize maps coordinates through it"));
    if (r.has_value()) {
      if (r->size() != 2 * rank) {
        return ctx.Invalid(absl::StrCat("roi has ", r->size(), " values for an input of ", rank,
                                        " dims, expected ", 2 * rank));
      }
      roi = *r;
    }
  }

  // Only the last two dims (the last one for rank 1) may change. Sizes read
  // when the model runs are checked then: the result is viewed with each
  // leading dim as itself when its size matches, else 0, a view whose
  // element count differs.
  const size_t first_spatial = rank >= 2 ? rank - 2 : 0;
  std::vector<PrimExpr> checked_lead;
  for (size_t d = 0; d < first_spatial; ++d) {
    if (run_time_sizes) {
      checked_lead.push_back(Select(EQ((*sizes)[d], in[d]), in[d], PrimExpr(0)));
      continue;
    }
    const bool same = scales.has_value() ? (*scales)[d] == 1.0 : ProveEqual((*sizes)[d], in[d]);
    const int64_t* dim = in[d].as_int();
    const bool roi_identity =
        (roi[d] == 0.0 && roi[rank + d] == 1.0) || (dim != nullptr && *dim == 1);
    if (!same || (ctm == "tf_crop_and_resize" && !roi_identity)) {
      return ctx.Unsupported(absl::StrCat(
          "resizing dim ", d, " of ", rank,
          " (only the last two dims can be resized; scales/sizes must keep the others)"));
    }
  }

  // The spatial axes (height, width), with a unit height for rank 1.
  std::vector<PrimExpr> in_hw, out_hw;
  std::vector<double> scale_hw, roi_hw(4);
  for (size_t d = first_spatial; d < rank; ++d) {
    if (sizes.has_value()) {
      out_hw.push_back((*sizes)[d]);
    } else {
      const double s = (*scales)[d];
      if (const int64_t* v = in[d].as_int()) {
        out_hw.push_back(PrimExpr(static_cast<int64_t>(std::floor(static_cast<double>(*v) * s))));
      } else if (s == std::floor(s)) {
        out_hw.push_back(Simplify(in[d] * PrimExpr(static_cast<int64_t>(s))));
      } else {
        return ctx.Unsupported(absl::StrCat("scale ", s, " of the symbolic dim ", ToString(in[d]),
                                            " (only integer scales keep the shape symbolic)"));
      }
      scale_hw.push_back(s);
    }
    in_hw.push_back(in[d]);
  }
  if (rank == 1) {
    in_hw.insert(in_hw.begin(), PrimExpr(1));
    out_hw.insert(out_hw.begin(), PrimExpr(1));
    if (!scale_hw.empty()) scale_hw.insert(scale_hw.begin(), 1.0);
  }
  for (int k = 0; k < 2; ++k) {
    const size_t d = rank == 1 ? 0 : first_spatial + static_cast<size_t>(k);
    roi_hw[k] = rank == 1 && k == 0 ? 0.0 : roi[d];
    roi_hw[2 + k] = rank == 1 && k == 0 ? 1.0 : roi[rank + d];
  }
  for (const PrimExpr& o : out_hw) {
    if (const int64_t* v = o.as_int(); v != nullptr && *v < 1) {
      return ctx.Unsupported(absl::StrCat("an empty output (output spatial dims ",
                                          ToString(out_hw[0]), " x ", ToString(out_hw[1]), ")"));
    }
  }

  // Rounding of nearest.
  std::string rounding = "round_prefer_floor";
  if (form.legacy) {
    // A scale of 1 maps to integers, which both roundings keep.
    const bool up = scales.has_value() && (*scales)[rank - 1] >= 1.0 &&
                    (rank == 1 || (*scales)[rank - 2] >= 1.0);
    const bool down = scales.has_value() && (*scales)[rank - 1] <= 1.0 &&
                      (rank == 1 || (*scales)[rank - 2] <= 1.0);
    if (method == "nearest_neighbor" && !up && !down) {
      return ctx.Unsupported(
          "nearest with one spatial axis scaled up and the other down (the two round "
          "differently)");
    }
    rounding = up ? "floor" : "ceil";
  } else {
    rounding = ctx.AttrString("nearest_mode", "round_prefer_floor");
    if (rounding != "round_prefer_floor" && rounding != "round_prefer_ceil" &&
        rounding != "floor" && rounding != "ceil") {
      return ctx.Invalid(absl::StrCat("nearest_mode '", rounding, "' is unknown"));
    }
  }

  Attrs attrs;
  attrs["size"] = out_hw;
  attrs["layout"] = std::string("NCHW");
  attrs["method"] = method;
  attrs["coordinate_transformation_mode"] = ctm;
  attrs["rounding_method"] = rounding;
  attrs["cubic_alpha"] = static_cast<double>(ctx.AttrFloat("cubic_coeff_a", -0.75f));
  attrs["cubic_exclude"] = static_cast<int64_t>(ctx.AttrInt("exclude_outside", 0) != 0);
  attrs["extrapolation_value"] = static_cast<double>(ctx.AttrFloat("extrapolation_value", 0.0f));
  if (ctm == "tf_crop_and_resize") {
    std::vector<PrimExpr> r;
    for (double v : roi_hw) r.push_back(FloatImm(DataType::Float(64), v));
    attrs["roi"] = r;
  }
  if (!scale_hw.empty()) {
    std::vector<PrimExpr> s;
    for (double v : scale_hw) s.push_back(FloatImm(DataType::Float(64), v));
    attrs["scale"] = s;
  }

  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (rank != 4) {
    std::vector<PrimExpr> lead(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(first_spatial));
    TETHER_ASSIGN_OR_RETURN(
        x,
        ctx.EmitOp("relax.reshape",
                   {x, MakeShapeExpr({Simplify(Product(lead)), PrimExpr(1), in_hw[0], in_hw[1]})}));
  }
  std::vector<Expr> args{x};
  if (run_time_scale.has_value()) args.push_back(*run_time_scale);
  TETHER_ASSIGN_OR_RETURN(Expr y,
                          ctx.EmitOp("relax.image.resize2d", std::move(args), std::move(attrs)));
  if (rank != 4) {
    std::vector<PrimExpr> out_shape(in.begin(),
                                    in.begin() + static_cast<std::ptrdiff_t>(first_spatial));
    for (size_t k = rank == 1 ? 1 : 0; k < 2; ++k) out_shape.push_back(out_hw[k]);
    TETHER_ASSIGN_OR_RETURN(y, ctx.EmitOp("relax.reshape", {y, MakeShapeExpr(out_shape)}));
  }
  if (!checked_lead.empty()) {
    const auto* info = y.struct_info().as<TensorStructInfoNode>();
    std::vector<PrimExpr> shape = *info->shape;
    for (size_t d = 0; d < checked_lead.size(); ++d) shape[d] = checked_lead[d];
    TETHER_ASSIGN_OR_RETURN(y, EmitRunTimeView(ctx, y, shape, *info->dtype));
  }
  return One(y);
}

// GridSample-16 (4-D) onto relax.image.grid_sample: mode bilinear, nearest
// or bicubic, padding_mode zeros, border or reflection, align_corners.
ConvertResult ConvertGridSample(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* x, ctx.InputTensorInfo(0));
  if (x->ndim != 4) {
    return ctx.Unsupported(absl::StrCat("a ", x->ndim, "-D input (only 4-D, N x C x H x W)"));
  }
  const std::string mode = ctx.AttrString("mode", "bilinear");
  const std::string padding = ctx.AttrString("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") {
    return ctx.Invalid(absl::StrCat("mode '", mode, "' is not one of bilinear, nearest, bicubic"));
  }
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return ctx.Invalid(
        absl::StrCat("padding_mode '", padding, "' is not one of zeros, border, reflection"));
  }
  TETHER_ASSIGN_OR_RETURN(Expr data, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(Expr grid, ctx.Input(1));
  return One(ctx.EmitOp("relax.image.grid_sample", {data, grid},
                        {{"method", mode},
                         {"padding_mode", padding},
                         {"align_corners", ctx.AttrInt("align_corners", 0) != 0}}));
}

// RoiAlign-10/16 onto relax.image.roi_align. Opset 10 has no
// coordinate_transformation_mode: it is output_half_pixel (no half-pixel
// shift). sampling_ratio 0 (adaptive: ceil(roi size / bins) samples per bin
// side, a count per roi) runs on the host as vm.builtin.roi_align.
ConvertResult ConvertRoiAlign(ConvertContext& ctx) {
  const int64_t ratio = ctx.AttrInt("sampling_ratio", 0);
  if (ratio < 0) return ctx.Invalid(absl::StrCat("sampling_ratio ", ratio, " is negative"));
  const std::string ctm = ctx.opset() >= 16
                              ? ctx.AttrString("coordinate_transformation_mode", "half_pixel")
                              : std::string("output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return ctx.Invalid(absl::StrCat("coordinate_transformation_mode '", ctm,
                                    "' is not half_pixel or output_half_pixel"));
  }
  std::vector<Expr> args;
  for (int i = 0; i < 3; ++i) {
    TETHER_ASSIGN_OR_RETURN(Expr e, ctx.Input(i));
    args.push_back(e);
  }
  const int64_t out_h = ctx.AttrInt("output_height", 1), out_w = ctx.AttrInt("output_width", 1);
  const std::string mode = ctx.AttrString("mode", "avg");
  if (ratio == 0) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* x, ctx.InputTensorInfo(0));
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* rois, ctx.InputTensorInfo(1));
    if (x->ndim != 4 || rois->ndim != 2 || !x->shape.has_value() || !rois->shape.has_value() ||
        !x->dtype.has_value() ||
        !(x->dtype->is_float() && (x->dtype->bits() == 32 || x->dtype->bits() == 64))) {
      return ctx.Unsupported(
          "sampling_ratio 0 (adaptive) on data that is not float32/float64 [N, C, H, W] with rois "
          "[R, 4] of known rank");
    }
    if (out_h < 1 || out_w < 1) {
      return ctx.Invalid(absl::StrCat("output size ", out_h, " x ", out_w, " must be positive"));
    }
    if (mode != "avg" && mode != "max") {
      return ctx.Invalid(absl::StrCat("mode '", mode, "' is not avg or max"));
    }
    std::vector<Expr> call = {
        args[0],
        args[1],
        args[2],
        MakePrimValue(PrimExpr(out_h)),
        MakePrimValue(PrimExpr(out_w)),
        MakePrimValue(FloatImm(DataType::Float(64), ctx.AttrFloat("spatial_scale", 1.0f))),
        MakePrimValue(PrimExpr(int64_t{mode == "max"})),
        MakePrimValue(PrimExpr(int64_t{ctm == "half_pixel"}))};
    const std::vector<PrimExpr> shape = {(*rois->shape)[0], (*x->shape)[1], PrimExpr(out_h),
                                         PrimExpr(out_w)};
    return One(
        EmitPackedCall(ctx, "vm.builtin.roi_align", std::move(call), TensorSInfo(shape, x->dtype)));
  }
  return One(
      ctx.EmitOp("relax.image.roi_align", std::move(args),
                 {{"output_height", out_h},
                  {"output_width", out_w},
                  {"sampling_ratio", ratio},
                  {"spatial_scale", static_cast<double>(ctx.AttrFloat("spatial_scale", 1.0f))},
                  {"mode", mode},
                  {"half_pixel", ctm == "half_pixel"}}));
}

}  // namespace

void RegisterResizeConverters() {
  RegisterConverter("RoiAlign", 10, ConvertRoiAlign);
  RegisterConverter("GridSample", 16, ConvertGridSample);
  RegisterConverter("Upsample", 7, [](ConvertContext& ctx) {
    return ConvertResize(ctx, ResizeForm{-1, -1, -1, true});
  });
  RegisterConverter("Upsample", 9, [](ConvertContext& ctx) {
    return ConvertResize(ctx, ResizeForm{-1, 1, -1, true});
  });
  RegisterConverter("Resize", 10, [](ConvertContext& ctx) {
    return ConvertResize(ctx, ResizeForm{-1, 1, -1, true});
  });
  RegisterConverter("Resize", 11, [](ConvertContext& ctx) {
    return ConvertResize(ctx, ResizeForm{1, 2, 3, false});
  });
  RegisterConverter("Resize", 13, [](ConvertContext& ctx) {
    return ConvertResize(ctx, ResizeForm{1, 2, 3, false});
  });
}

}  // namespace tether::compiler::onnx_frontend
