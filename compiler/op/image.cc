// relax.image.resize2d: resizes the two spatial dims of an NCHW tensor by
// nearest-neighbour, linear or cubic interpolation, with the attributes of
// TVM's relax.image.resize2d:
//   size                              (out_h, out_w) (one value: both)
//   roi                               [start_h, start_w, end_h, end_w] in
//                                     normalized coordinates, read by
//                                     tf_crop_and_resize only (default [0, 0, 1, 1])
//   layout                            "NCHW" (the only one supported)
//   method                            nearest_neighbor | linear | cubic
//   coordinate_transformation_mode    half_pixel | align_corners | asymmetric |
//                                     pytorch_half_pixel | tf_crop_and_resize |
//                                     tf_half_pixel_for_nearest
//   rounding_method                   round | floor | ceil | round_prefer_floor |
//                                     round_prefer_ceil ("" : round), nearest only
//   cubic_alpha, cubic_exclude        the cubic kernel's a and whether taps outside
//                                     the input get weight 0 (the rest renormalized;
//                                     linear too, as ONNX's exclude_outside)
//   extrapolation_value               tf_crop_and_resize's value outside the input
//   out_dtype                         the result's dtype (default: the data's)
// and one Tether extension, `scale` (h, w): the scale factors the coordinate
// transformation divides by. ONNX Resize given `scales` transforms with
// those, not with out/in (a 4-wide axis scaled by 0.6 has 2 outputs but
// maps x to (x + 0.5) / 0.6 - 0.5); absent, the scale is out/in, as TVM.
// The scales may instead come as an optional second argument, a 1-D float
// tensor of two values (h, w) read when the kernel runs (an ONNX `scales`
// fed at run time); then `size` holds the output extents that the caller
// computed from them.
//
// The semantics are ONNX's (onnx/reference/ops/op_resize.py): each axis maps
// an output index to a real input coordinate, whose floor x0 and fraction t
// pick the taps (nearest: one by the rounding method; linear: x0, x0 + 1;
// cubic: x0 - 1 .. x0 + 2) and their weights; tap indices are clamped to the
// input (edge padding), and the 2-D value is the separable sum. Coordinates
// and weights are computed in float64, the sum in float64 too, and cast to
// the output dtype at the end (integer outputs truncate, as the reference's
// astype). The operator is injective (a `compute`), as TVM registers it:
// each output element reads at most 16 input elements.
//
// The text parser reads list attributes as int dims, so `roi` and `scale`
// (float lists) print but do not parse back yet.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/op/op.h"
#include "compiler/op/op_common.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler {

namespace {

constexpr char kResize2d[] = "relax.image.resize2d";

bool OneOf(const std::string& s, const std::vector<std::string>& options) {
  for (const std::string& o : options) {
    if (s == o) return true;
  }
  return false;
}

// A list attribute of numbers (ints, or PrimExpr int/float constants) as
// doubles; nullopt when absent. INVALID_ARGUMENT naming `key` for anything else.
absl::StatusOr<std::optional<std::vector<double>>> NumbersAttr(const CallNode& call,
                                                               const std::string& key) {
  auto it = call.attrs.find(key);
  if (it == call.attrs.end()) return std::optional<std::vector<double>>();
  std::vector<double> out;
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&it->second)) {
    for (int64_t v : *ints) out.push_back(static_cast<double>(v));
    return std::optional<std::vector<double>>(out);
  }
  if (const auto* exprs = std::get_if<std::vector<PrimExpr>>(&it->second)) {
    for (const PrimExpr& e : *exprs) {
      if (const auto* f = e.as<FloatImmNode>()) {
        out.push_back(f->value);
      } else if (const int64_t* i = e.as_int()) {
        out.push_back(static_cast<double>(*i));
      } else {
        return OpError(call, absl::StrCat(key, " must hold constants, got ", ToString(e)));
      }
    }
    return std::optional<std::vector<double>>(out);
  }
  return OpError(call, absl::StrCat(key, " must be a list of numbers, got ", ToString(it->second)));
}

// The resolved attributes of one call.
struct ResizeParams {
  std::vector<PrimExpr> size;                // (out_h, out_w)
  std::vector<double> roi;                   // start_h, start_w, end_h, end_w
  std::optional<std::vector<double>> scale;  // (h, w), when given
  std::string method;
  std::string mode;
  std::string rounding;
  double cubic_alpha = -0.75;
  bool cubic_exclude = false;
  double extrapolation_value = 0.0;
  std::optional<DataType> out_dtype;
};

absl::StatusOr<ResizeParams> ParseResizeAttrs(const CallNode& call) {
  ResizeParams p;
  auto size = call.attrs.find("size");
  if (size == call.attrs.end()) return OpError(call, "the size attribute is required");
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&size->second)) {
    for (int64_t v : *ints) p.size.push_back(PrimExpr(v));
  } else if (const auto* exprs = std::get_if<std::vector<PrimExpr>>(&size->second)) {
    for (const PrimExpr& e : *exprs) {
      if (!e.dtype().is_int()) {
        return OpError(call, absl::StrCat("size must hold integers, got ", ToString(e)));
      }
      p.size.push_back(e);
    }
  } else {
    return OpError(call, absl::StrCat("size must be a list of ints, got ", ToString(size->second)));
  }
  if (p.size.size() == 1) p.size.push_back(p.size[0]);
  if (p.size.size() != 2) {
    return OpError(call, absl::StrCat("size must have 1 or 2 values, got ", p.size.size()));
  }
  for (const PrimExpr& d : p.size) {
    if (const int64_t* v = d.as_int(); v != nullptr && *v < 1) {
      return OpError(call, absl::StrCat("size must be positive, got ", ToString(size->second)));
    }
  }

  absl::StatusOr<std::optional<std::vector<double>>> roi = NumbersAttr(call, "roi");
  if (!roi.ok()) return roi.status();
  p.roi = roi->value_or(std::vector<double>{0, 0, 1, 1});
  if (p.roi.size() != 4) {
    return OpError(call, absl::StrCat("roi must have 4 values (start_h, start_w, end_h, end_w), "
                                      "got ",
                                      p.roi.size()));
  }
  absl::StatusOr<std::optional<std::vector<double>>> scale = NumbersAttr(call, "scale");
  if (!scale.ok()) return scale.status();
  p.scale = *scale;
  if (p.scale.has_value()) {
    if (p.scale->size() == 1) p.scale->push_back((*p.scale)[0]);
    if (p.scale->size() != 2 || !((*p.scale)[0] > 0) || !((*p.scale)[1] > 0)) {
      return OpError(call, absl::StrCat("scale must be 1 or 2 positive values, got [",
                                        absl::StrJoin(*p.scale, ", "), "]"));
    }
  }

  const std::string layout = GetStringAttr(call.attrs, "layout", "NCHW");
  if (layout != "NCHW") {
    return OpError(call, absl::StrCat("layout '", layout, "' is not supported (only NCHW)"));
  }
  p.method = GetStringAttr(call.attrs, "method", "linear");
  if (!OneOf(p.method, {"nearest_neighbor", "linear", "cubic"})) {
    return OpError(call, absl::StrCat("method '", p.method,
                                      "' is not one of nearest_neighbor, linear, cubic"));
  }
  p.mode = GetStringAttr(call.attrs, "coordinate_transformation_mode", "half_pixel");
  if (!OneOf(p.mode, {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
                      "tf_crop_and_resize", "tf_half_pixel_for_nearest"})) {
    return OpError(call, absl::StrCat("coordinate_transformation_mode '", p.mode,
                                      "' is not one of half_pixel, align_corners, asymmetric, "
                                      "pytorch_half_pixel, tf_crop_and_resize, "
                                      "tf_half_pixel_for_nearest"));
  }
  p.rounding = GetStringAttr(call.attrs, "rounding_method", "round");
  if (p.rounding.empty()) p.rounding = "round";
  if (!OneOf(p.rounding, {"round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil"})) {
    return OpError(call, absl::StrCat("rounding_method '", p.rounding,
                                      "' is not one of round, floor, ceil, round_prefer_floor, "
                                      "round_prefer_ceil"));
  }
  p.cubic_alpha = GetFloatAttr(call.attrs, "cubic_alpha", -0.75);
  auto exclude = call.attrs.find("cubic_exclude");
  if (exclude != call.attrs.end()) {
    if (const auto* b = std::get_if<bool>(&exclude->second)) {
      p.cubic_exclude = *b;
    } else {
      p.cubic_exclude = GetIntAttr(call.attrs, "cubic_exclude", 0) != 0;
    }
  }
  p.extrapolation_value = GetFloatAttr(call.attrs, "extrapolation_value", 0.0);
  if (call.attrs.count("out_dtype") > 0) {
    p.out_dtype = GetDTypeAttr(call.attrs, "out_dtype");
    if (!p.out_dtype.has_value()) {
      return OpError(call, absl::StrCat("out_dtype ", ToString(call.attrs.at("out_dtype")),
                                        " is not a dtype"));
    }
  }
  return p;
}

absl::StatusOr<StructInfo> InferResize2d(const CallNode& call) {
  if (call.args.size() != 1 && call.args.size() != 2) {
    return OpError(call,
                   absl::StrCat("expects 1 or 2 arguments (data, scale), got ", call.args.size()));
  }
  absl::StatusOr<const TensorStructInfoNode*> x = TensorArg(call, 0);
  if (!x.ok()) return x.status();
  absl::StatusOr<ResizeParams> p = ParseResizeAttrs(call);
  if (!p.ok()) return p.status();
  if (call.args.size() == 2) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* sc, TensorArg(call, 1));
    const bool two = sc->ndim == 1 && (!sc->shape.has_value() || AsConstInt((*sc->shape)[0]) == 2);
    if (!two || (sc->dtype.has_value() && !sc->dtype->is_float()) || p->scale.has_value()) {
      return OpError(call, absl::StrCat("scale must be a float tensor of 2 values (h, w) "
                                        "without a scale attribute, got ",
                                        ToString(call.args[1].struct_info())));
    }
  }
  if ((*x)->ndim != -1 && (*x)->ndim != 4) {
    return OpError(call, absl::StrCat("data must have 4 dims (NCHW), got ", (*x)->ndim));
  }
  std::optional<DataType> dtype = p->out_dtype.has_value() ? p->out_dtype : (*x)->dtype;
  if ((*x)->dtype.has_value() && !(*x)->dtype->is_float() && !(*x)->dtype->is_int() &&
      !(*x)->dtype->is_uint()) {
    return OpError(call, absl::StrCat("data of dtype ", (*x)->dtype->ToString(),
                                      " cannot be resized (numbers only)"));
  }
  if (!(*x)->shape.has_value()) return TensorSInfoOfRank(4, dtype);
  const std::vector<PrimExpr>& s = *(*x)->shape;
  return TensorSInfo({s[0], s[1], p->size[0], p->size[1]}, dtype);
}

// ---- compute -------------------------------------------------------------

const DataType kF64 = DataType::Float(64);

PrimExpr F64(double v) { return FloatImm(kF64, v); }
PrimExpr ToF64(const PrimExpr& e) { return Cast(kF64, e); }
PrimExpr FloorF(const PrimExpr& e) { return Call(kF64, "floor", {e}); }

// One axis of the resize: its input extent, output extent, scale and roi.
struct Axis {
  PrimExpr in;     // int64 input extent
  PrimExpr out;    // int64 output extent
  PrimExpr scale;  // float64 scale factor (given, or out / in)
  double roi_start = 0, roi_end = 1;
};

// The input coordinate (float64) output index `o` maps to.
PrimExpr SourceCoordinate(const ResizeParams& p, const Axis& a, const PrimExpr& o) {
  const PrimExpr of = ToF64(o);
  const PrimExpr in_f = ToF64(a.in);
  // ONNX's reference compares the real-valued output extent scale * in.
  const PrimExpr out_real = a.scale * in_f;
  if (p.mode == "half_pixel") return (of + F64(0.5)) / a.scale - F64(0.5);
  if (p.mode == "pytorch_half_pixel") {
    return Select(EQ(out_real, F64(1.0)), F64(-0.5), (of + F64(0.5)) / a.scale - F64(0.5));
  }
  if (p.mode == "align_corners") {
    return Select(EQ(out_real, F64(1.0)), F64(0.0), of * (in_f - F64(1.0)) / (out_real - F64(1.0)));
  }
  if (p.mode == "asymmetric") return of / a.scale;
  if (p.mode == "tf_half_pixel_for_nearest") return (of + F64(0.5)) / a.scale;
  // tf_crop_and_resize: the roi spans [start, end] * (in - 1).
  const PrimExpr span = F64(a.roi_end - a.roi_start) * (in_f - F64(1.0));
  const PrimExpr start = F64(a.roi_start) * (in_f - F64(1.0));
  return Select(GT(a.out, 1), start + of * span / ToF64(a.out - 1), start + span * F64(0.5));
}

// One tap of an axis: the clamped input index and its weight (float64).
struct Tap {
  PrimExpr index;
  PrimExpr weight;
};

PrimExpr Clamp(const PrimExpr& i, const PrimExpr& extent) { return Max(Min(i, extent - 1), 0); }

// The cubic convolution kernel of ONNX / Keys with parameter A at distance d
// (|d| < 2): (A+2)|d|^3 - (A+3)|d|^2 + 1 for |d| <= 1, A|d|^3 - 5A|d|^2 +
// 8A|d| - 4A for 1 < |d| < 2.
PrimExpr CubicNear(const PrimExpr& d, double A) {
  return (F64(A + 2) * d - F64(A + 3)) * d * d + F64(1.0);
}
PrimExpr CubicFar(const PrimExpr& d, double A) {
  return ((F64(A) * d - F64(5 * A)) * d + F64(8 * A)) * d - F64(4 * A);
}

// The factor k of an axis scaled up by a constant whole number (scale k,
// out == in * k, both extents constant), or 0.
int64_t WholeUpscale(const Axis& a) {
  const auto* s = a.scale.as<FloatImmNode>();
  const int64_t *in = a.in.as_int(), *out = a.out.as_int();
  if (s == nullptr || in == nullptr || out == nullptr || s->value < 1 || s->value > 1 << 20) {
    return 0;
  }
  const auto k = static_cast<int64_t>(s->value);
  return static_cast<double>(k) == s->value && *out == *in * k ? k : 0;
}

// The taps of one axis for output index `o`, and (for tf_crop_and_resize)
// whether the coordinate falls outside the input.
std::vector<Tap> AxisTaps(const ResizeParams& p, const Axis& a, const PrimExpr& o,
                          PrimExpr* outside) {
  // Nearest, asymmetric, floor by a whole factor (torch's
  // F.interpolate(scale_factor=k, mode="nearest")): input index o / k, in
  // integers. floor(o / k) in float64 is the same for any o below 2^53, and
  // the float64 division, floor and conversion per element made DBNet's
  // fused FPN upsample-and-add kernels 2x slower than their convolution.
  if (p.method == "nearest_neighbor" && p.mode == "asymmetric" && p.rounding == "floor") {
    if (const int64_t k = WholeUpscale(a); k > 0) {
      *outside = BoolImm(false);
      return {{FloorDiv(o, PrimExpr(k)), F64(1.0)}};
    }
  }
  const PrimExpr x = SourceCoordinate(p, a, o);
  const PrimExpr in_f = ToF64(a.in);
  *outside =
      p.mode == "tf_crop_and_resize" ? Or(LT(x, F64(0.0)), GT(x, in_f - F64(1.0))) : BoolImm(false);
  const PrimExpr xf = FloorF(x);
  const PrimExpr x0 = Cast(DataType::Int(64), xf);
  const PrimExpr t = x - xf;
  std::vector<Tap> taps;
  if (p.method == "nearest_neighbor") {
    PrimExpr idx;
    if (p.rounding == "round_prefer_floor") {
      idx = Select(LE(t, F64(0.5)), x0, x0 + 1);
    } else if (p.rounding == "round_prefer_ceil") {
      idx = Select(LT(t, F64(0.5)), x0, x0 + 1);
    } else if (p.rounding == "floor") {
      idx = x0;
    } else if (p.rounding == "ceil") {
      idx = Select(EQ(t, F64(0.0)), x0, x0 + 1);
    } else {  // round: halves away from zero
      idx = Cast(DataType::Int(64), Call(kF64, "round", {x}));
    }
    taps.push_back({Clamp(idx, a.in), F64(1.0)});
    return taps;
  }
  std::vector<PrimExpr> raw_index;
  std::vector<PrimExpr> weight;
  if (p.method == "linear") {
    raw_index = {x0, x0 + 1};
    weight = {F64(1.0) - t, t};
  } else {
    const double A = p.cubic_alpha;
    raw_index = {x0 - 1, x0, x0 + 1, x0 + 2};
    weight = {CubicFar(t + F64(1.0), A), CubicNear(t, A), CubicNear(F64(1.0) - t, A),
              CubicFar(F64(2.0) - t, A)};
  }
  if (p.cubic_exclude) {
    // Taps outside the input weigh nothing; the rest are renormalized.
    PrimExpr sum = F64(0.0);
    for (size_t k = 0; k < weight.size(); ++k) {
      PrimExpr inside = And(GE(raw_index[k], 0), LT(raw_index[k], a.in));
      weight[k] = Select(inside, weight[k], F64(0.0));
      sum = sum + weight[k];
    }
    for (PrimExpr& w : weight) w = w / sum;
  }
  for (size_t k = 0; k < weight.size(); ++k) taps.push_back({Clamp(raw_index[k], a.in), weight[k]});
  return taps;
}

PrimExpr ComputeResize2d(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  // Infer ran on this call, so the attributes parse.
  absl::StatusOr<ResizeParams> p = ParseResizeAttrs(*ctx.call);
  const std::vector<PrimExpr>& in = ArgShape(ctx, 0);
  const std::vector<PrimExpr>& out = OutShape(ctx);
  const DataType out_t = ctx.out_sinfo.as<TensorStructInfoNode>()->dtype.value_or(kF64);
  Axis axes[2];
  for (int k = 0; k < 2; ++k) {
    axes[k].in = in[2 + k];
    axes[k].out = out[2 + k];
    if (ctx.inputs.size() > 1) {
      axes[k].scale = ToF64(ctx.inputs[1]({PrimExpr(int64_t{k})}));
    } else {
      axes[k].scale =
          p->scale.has_value() ? F64((*p->scale)[k]) : ToF64(axes[k].out) / ToF64(axes[k].in);
    }
    axes[k].roi_start = p->roi[k];
    axes[k].roi_end = p->roi[2 + k];
  }
  PrimExpr out_h, out_w;
  const std::vector<Tap> th = AxisTaps(*p, axes[0], idx[2], &out_h);
  const std::vector<Tap> tw = AxisTaps(*p, axes[1], idx[3], &out_w);
  const TensorReader& read = ctx.inputs[0];
  PrimExpr value;
  if (p->method == "nearest_neighbor") {
    value = read({idx[0], idx[1], th[0].index, tw[0].index});
  } else {
    for (const Tap& h : th) {
      PrimExpr row;
      for (const Tap& w : tw) {
        PrimExpr term = w.weight * ToF64(read({idx[0], idx[1], h.index, w.index}));
        row = row.defined() ? row + term : term;
      }
      PrimExpr term = h.weight * row;
      value = value.defined() ? value + term : term;
    }
  }
  if (p->mode == "tf_crop_and_resize") {
    value = Select(Or(out_h, out_w), F64(p->extrapolation_value), ToF64(value));
  }
  return Cast(out_t, value);
}

// ---- grid_sample -----------------------------------------------------------

// relax.image.grid_sample(data [N, C, H, W], grid [N, Ho, Wo, 2]) ->
// [N, C, Ho, Wo]: each output element samples data[n, c] at the grid's
// (x, y), normalized to [-1, 1] (-1 the left/top edge: the first pixel's
// centre with align_corners, its outer edge without). Attributes, with
// PyTorch's semantics (which ONNX GridSample-16 follows):
//   method: "bilinear" (default), "nearest" (round half to even), "bicubic"
//     (A = -0.75, the 4x4 taps each placed by the padding mode);
//   padding_mode: "zeros" (taps outside read 0), "border" (coordinates
//     clamped to the edge), "reflection" (reflected at the border, then
//     clamped);
//   align_corners: bool.
struct GridSampleParams {
  std::string method;
  std::string padding;
  bool align = false;
};

absl::StatusOr<GridSampleParams> ParseGridSampleAttrs(const CallNode& call) {
  GridSampleParams p;
  p.method = GetStringAttr(call.attrs, "method", "bilinear");
  p.padding = GetStringAttr(call.attrs, "padding_mode", "zeros");
  p.align = GetBoolAttr(call.attrs, "align_corners", false);
  if (p.method != "bilinear" && p.method != "nearest" && p.method != "bicubic") {
    return OpError(
        call, absl::StrCat("method '", p.method, "' is not one of bilinear, nearest, bicubic"));
  }
  if (p.padding != "zeros" && p.padding != "border" && p.padding != "reflection") {
    return OpError(call, absl::StrCat("padding_mode '", p.padding,
                                      "' is not one of zeros, border, reflection"));
  }
  return p;
}

absl::StatusOr<StructInfo> InferGridSample(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 2); !s.ok()) return s;
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* x, TensorArg(call, 0));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* g, TensorArg(call, 1));
  TETHER_RETURN_IF_ERROR(ParseGridSampleAttrs(call).status());
  if ((x->ndim != -1 && x->ndim != 4) || (g->ndim != -1 && g->ndim != 4)) {
    return OpError(call, absl::StrCat("data must be 4-D (N, C, H, W) and grid 4-D (N, H_out, "
                                      "W_out, 2), got ",
                                      ToString(call.args[0].struct_info()), " and ",
                                      ToString(call.args[1].struct_info())));
  }
  for (const TensorStructInfoNode* t : {x, g}) {
    if (t->dtype.has_value() && !t->dtype->is_float()) {
      return OpError(call,
                     absl::StrCat("data and grid must be floats, got ", t->dtype->ToString()));
    }
  }
  if (!x->shape.has_value() || !g->shape.has_value()) return TensorSInfoOfRank(4, x->dtype);
  const std::vector<PrimExpr>& xs = *x->shape;
  const std::vector<PrimExpr>& gs = *g->shape;
  if (std::optional<int64_t> two = AsConstInt(gs[3]); two.has_value() && *two != 2) {
    return OpError(call, absl::StrCat("grid's last dim must be 2 (x, y), got ", *two));
  }
  std::optional<int64_t> xn = AsConstInt(xs[0]), gn = AsConstInt(gs[0]);
  if (xn.has_value() && gn.has_value() && *xn != *gn) {
    return OpError(call, absl::StrCat("data has batch ", *xn, " but grid has ", *gn));
  }
  if (AsConstInt(xs[2]) == 0 || AsConstInt(xs[3]) == 0) {
    return OpError(call, "cannot sample an empty image (height or width 0)");
  }
  return TensorSInfo({xs[0], xs[1], gs[1], gs[2]}, x->dtype, x->vdevice);
}

// |x| - min folded into [0, span) with every other fold mirrored, as
// PyTorch's reflect_coordinates(x, twice_low, twice_high).
PrimExpr Reflect(const PrimExpr& x, double twice_low, const PrimExpr& twice_high) {
  const PrimExpr min = F64(twice_low / 2);
  const PrimExpr span = (twice_high - F64(twice_low)) / F64(2.0);
  const PrimExpr a = Select(LT(x - min, F64(0.0)), min - x, x - min);
  const PrimExpr flips = FloorF(a / span);
  const PrimExpr extra = a - flips * span;
  const PrimExpr even = EQ(FloorMod(Cast(DataType::Int(64), flips), PrimExpr(2)), PrimExpr(0));
  return Select(LE(span, F64(0.0)), F64(0.0), Select(even, extra + min, span - extra + min));
}

// A coordinate placed by the padding mode (PyTorch's compute_coordinates).
PrimExpr PadCoordinate(const GridSampleParams& p, const PrimExpr& x, const PrimExpr& size) {
  const PrimExpr last = ToF64(size) - F64(1.0);
  auto clip = [&](const PrimExpr& v) { return Max(Min(v, last), F64(0.0)); };
  if (p.padding == "border") return clip(x);
  if (p.padding == "reflection") {
    return clip(p.align ? Reflect(x, 0.0, F64(2.0) * last)
                        : Reflect(x, -1.0, F64(2.0) * ToF64(size) - F64(1.0)));
  }
  return x;
}

PrimExpr ComputeGridSample(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const GridSampleParams p = *ParseGridSampleAttrs(*ctx.call);
  const std::vector<PrimExpr>& xs = ArgShape(ctx, 0);
  const PrimExpr& h = xs[2];
  const PrimExpr& w = xs[3];
  const DataType out_t = ctx.out_sinfo.as<TensorStructInfoNode>()->dtype.value_or(kF64);
  const TensorReader& data = ctx.inputs[0];
  const TensorReader& grid = ctx.inputs[1];
  auto unnormalize = [&](const PrimExpr& g, const PrimExpr& size) {
    const PrimExpr s = ToF64(size);
    return p.align ? (g + F64(1.0)) / F64(2.0) * (s - F64(1.0))
                   : ((g + F64(1.0)) * s - F64(1.0)) / F64(2.0);
  };
  const PrimExpr gx = unnormalize(ToF64(grid({idx[0], idx[2], idx[3], PrimExpr(0)})), w);
  const PrimExpr gy = unnormalize(ToF64(grid({idx[0], idx[2], idx[3], PrimExpr(1)})), h);
  // data[n, c, yi, xi] as float64, or 0 outside (the read itself clamped).
  auto read = [&](const PrimExpr& yi, const PrimExpr& xi) {
    const PrimExpr inside = And(And(GE(yi, 0), LT(yi, h)), And(GE(xi, 0), LT(xi, w)));
    return Select(inside, ToF64(data({idx[0], idx[1], Clamp(yi, h), Clamp(xi, w)})), F64(0.0));
  };
  const DataType i64 = DataType::Int(64);
  PrimExpr value;
  if (p.method == "nearest") {
    // Round half to even (nearbyint).
    auto nearest = [&](const PrimExpr& v) {
      const PrimExpr f = FloorF(v);
      const PrimExpr i = Cast(i64, f);
      const PrimExpr t = v - f;
      return Select(LT(t, F64(0.5)), i,
                    Select(GT(t, F64(0.5)), i + 1,
                           Select(EQ(FloorMod(i, PrimExpr(2)), PrimExpr(0)), i, i + 1)));
    };
    value = read(nearest(PadCoordinate(p, gy, h)), nearest(PadCoordinate(p, gx, w)));
  } else if (p.method == "bilinear") {
    const PrimExpr x = PadCoordinate(p, gx, w), y = PadCoordinate(p, gy, h);
    const PrimExpr xf = FloorF(x), yf = FloorF(y);
    const PrimExpr x0 = Cast(i64, xf), y0 = Cast(i64, yf);
    const PrimExpr tx = x - xf, ty = y - yf;
    value = (F64(1.0) - ty) * ((F64(1.0) - tx) * read(y0, x0) + tx * read(y0, x0 + 1)) +
            ty * ((F64(1.0) - tx) * read(y0 + 1, x0) + tx * read(y0 + 1, x0 + 1));
  } else {
    // Bicubic: the unpadded coordinate's 4x4 taps, each tap's index placed
    // by the padding mode.
    const double A = -0.75;
    const PrimExpr xf = FloorF(gx), yf = FloorF(gy);
    const PrimExpr tx = gx - xf, ty = gy - yf;
    auto weights = [&](const PrimExpr& t) {
      return std::vector<PrimExpr>{CubicFar(t + F64(1.0), A), CubicNear(t, A),
                                   CubicNear(F64(1.0) - t, A), CubicFar(F64(2.0) - t, A)};
    };
    const std::vector<PrimExpr> wx = weights(tx), wy = weights(ty);
    auto tap = [&](const PrimExpr& base, int k, const PrimExpr& size) {
      return Cast(i64, PadCoordinate(p, base + F64(k - 1), size));
    };
    for (int j = 0; j < 4; ++j) {
      PrimExpr row;
      for (int i = 0; i < 4; ++i) {
        PrimExpr term = wx[i] * read(tap(yf, j, h), tap(xf, i, w));
        row = row.defined() ? row + term : term;
      }
      PrimExpr term = wy[j] * row;
      value = value.defined() ? value + term : term;
    }
  }
  return Cast(out_t, value);
}

// ---- roi_align ---------------------------------------------------------------

// relax.image.roi_align(data [N, C, H, W], rois [R, 4] (x1, y1, x2, y2),
// batch_indices [R] ints) -> [R, C, output_height, output_width]: each bin
// averages (mode "avg") or takes the largest weighted corner of (mode
// "max", ONNX Runtime's definition) sampling_ratio x sampling_ratio
// bilinear samples, as ONNX RoiAlign-16. Attributes: output_height,
// output_width, sampling_ratio (> 0: the count must be static, so the
// adaptive ceil(roi / bins) of sampling_ratio 0 is vm.builtin.roi_align's),
// spatial_scale, mode, half_pixel (coordinates shifted by half a pixel; else
// rois are at least 1 x 1). A sample more than a pixel outside the input
// counts 0; a batch index out of range is clamped (never a wild read).
struct RoiAlignParams {
  int64_t out_h = 1, out_w = 1, ratio = 0;
  double scale = 1.0;
  bool max = false;
  bool half_pixel = true;
};

absl::StatusOr<RoiAlignParams> ParseRoiAlignAttrs(const CallNode& call) {
  RoiAlignParams p;
  p.out_h = GetIntAttr(call.attrs, "output_height", 1);
  p.out_w = GetIntAttr(call.attrs, "output_width", 1);
  p.ratio = GetIntAttr(call.attrs, "sampling_ratio", 0);
  p.scale = GetFloatAttr(call.attrs, "spatial_scale", 1.0);
  const std::string mode = GetStringAttr(call.attrs, "mode", "avg");
  p.max = mode == "max";
  p.half_pixel = GetBoolAttr(call.attrs, "half_pixel", true);
  if (p.out_h < 1 || p.out_w < 1) {
    return OpError(call,
                   absl::StrCat("output size ", p.out_h, " x ", p.out_w, " must be positive"));
  }
  if (p.ratio < 1 || p.ratio > 16) {
    return OpError(call, absl::StrCat("sampling_ratio must be 1 to 16, got ", p.ratio));
  }
  if (mode != "avg" && mode != "max") {
    return OpError(call, absl::StrCat("mode '", mode, "' is not avg or max"));
  }
  return p;
}

absl::StatusOr<StructInfo> InferRoiAlign(const CallNode& call) {
  if (absl::Status s = CheckNumArgs(call, 3); !s.ok()) return s;
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* x, TensorArg(call, 0));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* rois, TensorArg(call, 1));
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* idx, TensorArg(call, 2));
  TETHER_ASSIGN_OR_RETURN(RoiAlignParams p, ParseRoiAlignAttrs(call));
  if ((x->ndim != -1 && x->ndim != 4) || (rois->ndim != -1 && rois->ndim != 2) ||
      (idx->ndim != -1 && idx->ndim != 1)) {
    return OpError(call, absl::StrCat("data must be 4-D, rois 2-D and batch_indices 1-D, got ",
                                      ToString(call.args[0].struct_info()), ", ",
                                      ToString(call.args[1].struct_info()), " and ",
                                      ToString(call.args[2].struct_info())));
  }
  if ((x->dtype.has_value() && !x->dtype->is_float()) ||
      (rois->dtype.has_value() && !rois->dtype->is_float()) ||
      (idx->dtype.has_value() && !idx->dtype->is_int())) {
    return OpError(call, "data and rois must be floats, batch_indices integers");
  }
  if (!x->shape.has_value() || !rois->shape.has_value()) return TensorSInfoOfRank(4, x->dtype);
  if (std::optional<int64_t> four = AsConstInt((*rois->shape)[1]); four.has_value() && *four != 4) {
    return OpError(call,
                   absl::StrCat("rois must have 4 values (x1, y1, x2, y2) per row, got ", *four));
  }
  if (AsConstInt((*x->shape)[0]) == 0 || AsConstInt((*x->shape)[2]) == 0 ||
      AsConstInt((*x->shape)[3]) == 0) {
    return OpError(call, "cannot align rois on an empty input (batch, height or width 0)");
  }
  if (idx->shape.has_value()) {
    std::optional<int64_t> r = AsConstInt((*rois->shape)[0]), i = AsConstInt((*idx->shape)[0]);
    if (r.has_value() && i.has_value() && *r != *i) {
      return OpError(call, absl::StrCat(*r, " rois but ", *i, " batch indices"));
    }
  }
  return TensorSInfo({(*rois->shape)[0], (*x->shape)[1], PrimExpr(p.out_h), PrimExpr(p.out_w)},
                     x->dtype, x->vdevice);
}

PrimExpr ComputeRoiAlign(const LowerContext& ctx, const std::vector<PrimExpr>& idx) {
  const RoiAlignParams p = *ParseRoiAlignAttrs(*ctx.call);
  const std::vector<PrimExpr>& xs = ArgShape(ctx, 0);
  const PrimExpr &h = xs[2], &w = xs[3];
  const DataType out_t = ctx.out_sinfo.as<TensorStructInfoNode>()->dtype.value_or(kF64);
  const DataType i64 = DataType::Int(64);
  const PrimExpr& r = idx[0];
  const PrimExpr b = Clamp(Cast(i64, ctx.inputs[2]({r})), xs[0]);
  auto roi = [&](int k) {
    return ToF64(ctx.inputs[1]({r, PrimExpr(int64_t{k})})) * F64(p.scale) -
           F64(p.half_pixel ? 0.5 : 0.0);
  };
  const PrimExpr x1 = roi(0), y1 = roi(1);
  PrimExpr rw = roi(2) - x1, rh = roi(3) - y1;
  if (!p.half_pixel) {
    rw = Max(rw, F64(1.0));
    rh = Max(rh, F64(1.0));
  }
  const PrimExpr bin_h = rh / F64(static_cast<double>(p.out_h));
  const PrimExpr bin_w = rw / F64(static_cast<double>(p.out_w));
  const PrimExpr hf = ToF64(h), wf = ToF64(w);
  // One bilinear sample (ONNX Runtime's rules): 0 beyond a pixel outside,
  // else the corners' weighted values (clamped to the last row/column).
  auto sample = [&](const PrimExpr& yy, const PrimExpr& xx) {
    const PrimExpr outside =
        Or(Or(LT(yy, F64(-1.0)), GT(yy, hf)), Or(LT(xx, F64(-1.0)), GT(xx, wf)));
    const PrimExpr y = Max(yy, F64(0.0)), x = Max(xx, F64(0.0));
    const PrimExpr y0 = Cast(i64, FloorF(y)), x0 = Cast(i64, FloorF(x));
    const PrimExpr y_edge = GE(y0, h - 1), x_edge = GE(x0, w - 1);
    const PrimExpr ylo = Select(y_edge, h - 1, y0), xlo = Select(x_edge, w - 1, x0);
    const PrimExpr yhi = Select(y_edge, h - 1, y0 + 1), xhi = Select(x_edge, w - 1, x0 + 1);
    const PrimExpr ly = Select(y_edge, F64(0.0), y - ToF64(y0));
    const PrimExpr lx = Select(x_edge, F64(0.0), x - ToF64(x0));
    auto v = [&](const PrimExpr& yi, const PrimExpr& xi) {
      return ToF64(ctx.inputs[0]({b, idx[1], Clamp(yi, h), Clamp(xi, w)}));
    };
    const PrimExpr hy = F64(1.0) - ly, hx = F64(1.0) - lx;
    std::vector<PrimExpr> terms = {hy * hx * v(ylo, xlo), hy * lx * v(ylo, xhi),
                                   ly * hx * v(yhi, xlo), ly * lx * v(yhi, xhi)};
    PrimExpr out;
    for (const PrimExpr& t : terms) {
      out = !out.defined() ? t : (p.max ? Max(out, t) : out + t);
    }
    return Select(outside, F64(0.0), out);
  };
  const double g = static_cast<double>(p.ratio);
  PrimExpr acc;
  for (int64_t iy = 0; iy < p.ratio; ++iy) {
    const PrimExpr yy =
        y1 + ToF64(idx[2]) * bin_h + F64((static_cast<double>(iy) + 0.5) / g) * bin_h;
    for (int64_t ix = 0; ix < p.ratio; ++ix) {
      const PrimExpr xx =
          x1 + ToF64(idx[3]) * bin_w + F64((static_cast<double>(ix) + 0.5) / g) * bin_w;
      const PrimExpr s = sample(yy, xx);
      acc = !acc.defined() ? s : (p.max ? Max(acc, s) : acc + s);
    }
  }
  if (!p.max) acc = acc / F64(g * g);
  return Cast(out_t, acc);
}

}  // namespace

void RegisterImageOps() {
  OpInfo info;
  info.name = kResize2d;
  info.pattern = OpPattern::kInjective;
  info.num_args = -1;  // data, and the optional run-time scale
  info.infer = InferResize2d;
  info.compute = ComputeResize2d;
  RegisterOp(std::move(info));
  RegisterComputeOp("relax.image.grid_sample", OpPattern::kInjective, 2, InferGridSample,
                    ComputeGridSample);
  RegisterComputeOp("relax.image.roi_align", OpPattern::kInjective, 3, InferRoiAlign,
                    ComputeRoiAlign);
}

}  // namespace tether::compiler
