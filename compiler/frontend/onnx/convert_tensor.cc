// ONNX tensor converters: Constant, Shape, Size, ConstantOfShape, Range,
// Identity, Dropout (inference), EyeLike, the Hann, Hamming and Blackman
// windows, DFT and STFT (matrix products). Shape and Size produce import-time
// values (KnownInts, symbolic when the input's dims are); Range and EyeLike
// are computed at import time from constant inputs, Range's bounds else read
// when the model runs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

ConvertResult ConvertConstant(ConvertContext& ctx) {
  if (ctx.HasAttr("sparse_value")) return ctx.Unsupported("sparse_value");
  if (ctx.HasAttr("value_string") || ctx.HasAttr("value_strings")) {
    return ctx.Unsupported("string constants");
  }
  absl::StatusOr<Tensor> t;
  if (ctx.HasAttr("value")) {
    t = ctx.AttrTensor("value");
  } else if (ctx.HasAttr("value_float")) {
    t = TensorFromDoubles({ctx.AttrFloat("value_float", 0)}, {}, DataType::Float(32));
  } else if (ctx.HasAttr("value_floats")) {
    std::vector<float> v = ctx.AttrFloats("value_floats");
    t = TensorFromDoubles(std::vector<double>(v.begin(), v.end()), {static_cast<int64_t>(v.size())},
                          DataType::Float(32));
  } else if (ctx.HasAttr("value_int")) {
    t = TensorFromInts({ctx.AttrInt("value_int", 0)}, {}, DataType::Int(64));
  } else if (ctx.HasAttr("value_ints")) {
    std::vector<int64_t> v = ctx.AttrInts("value_ints");
    t = TensorFromInts(v, {static_cast<int64_t>(v.size())}, DataType::Int(64));
  } else {
    return ctx.Invalid("no value attribute");
  }
  if (!t.ok()) return t.status();
  return One(MakeConstant(*t));
}

// The input's shape (symbolic dims allowed); UNIMPLEMENTED for unknown rank.
absl::StatusOr<std::vector<PrimExpr>> InputShape(ConvertContext& ctx, int i) {
  absl::StatusOr<const TensorStructInfoNode*> t = ctx.InputTensorInfo(i);
  if (!t.ok()) return t.status();
  if (!(*t)->shape.has_value()) {
    return ctx.Unsupported(absl::StrCat("the shape of input ", i, " is not known at import time (",
                                        (*t)->ndim < 0 ? "unknown rank" : "unknown dims", ")"));
  }
  return *(*t)->shape;
}

ConvertResult ConvertShape(ConvertContext& ctx) {
  absl::StatusOr<std::vector<PrimExpr>> shape = InputShape(ctx, 0);
  if (!shape.ok()) return shape.status();
  const int64_t rank = static_cast<int64_t>(shape->size());
  int64_t start = ctx.AttrInt("start", 0);
  int64_t end = ctx.AttrInt("end", rank);
  if (ctx.opset() < 15 && (ctx.HasAttr("start") || ctx.HasAttr("end"))) {
    return ctx.Invalid("start and end need opset 15");
  }
  // Negative values count from the back; both are clamped to [0, rank].
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  KnownInts k;
  for (int64_t i = start; i < end; ++i) k.values.push_back((*shape)[static_cast<size_t>(i)]);
  return std::vector<OnnxValue>{OnnxValue::Known(std::move(k))};
}

ConvertResult ConvertSize(ConvertContext& ctx) {
  absl::StatusOr<std::vector<PrimExpr>> shape = InputShape(ctx, 0);
  if (!shape.ok()) return shape.status();
  KnownInts k;
  k.scalar = true;
  k.values.push_back(Product(*shape));
  return std::vector<OnnxValue>{OnnxValue::Known(std::move(k))};
}

ConvertResult ConvertConstantOfShape(ConvertContext& ctx) {
  absl::StatusOr<KnownInts> shape = ctx.KnownOrRunTimeInts(0, "shape");
  if (!shape.ok()) return shape.status();
  Tensor value;
  if (ctx.HasAttr("value")) {
    absl::StatusOr<Tensor> t = ctx.AttrTensor("value");
    if (!t.ok()) return t.status();
    if ((*t)->NumElements() != 1) {
      return ctx.Invalid(absl::StrCat("value must have one element, got ", (*t)->NumElements()));
    }
    absl::StatusOr<Tensor> scalar = t->CreateView({}, (*t)->dtype());
    if (!scalar.ok()) return scalar.status();
    value = *scalar;
  } else {
    absl::StatusOr<Tensor> t = TensorFromDoubles({0.0}, {}, DataType::Float(32));
    if (!t.ok()) return t.status();
    value = *t;
  }
  for (const PrimExpr& d : shape->values) {
    if (const int64_t* c = d.as_int(); c != nullptr && *c < 0) {
      return ctx.Invalid(absl::StrCat("negative dim ", *c, " in the shape"));
    }
  }
  // A small 0-D or 1-D integer result of a known shape stays known (a shape
  // computation's ConstantOfShape, as in an expanded LayerNormalization).
  const std::optional<std::vector<int64_t>> dims = ConstValues(*shape);
  if (dims.has_value() && dims->size() <= 1 && value->dtype().is_int()) {
    const int64_t count = dims->empty() ? 1 : (*dims)[0];
    std::optional<std::vector<int64_t>> v = IntsFromTensor(value);
    if (count <= kMaxKnownInts && v.has_value() && v->size() == 1) {
      return std::vector<OnnxValue>{
          OnnxValue::Known(MakeKnownInts(std::vector<int64_t>(static_cast<size_t>(count), (*v)[0]),
                                         dims->empty(), value->dtype()))};
    }
  }
  absl::StatusOr<Expr> out =
      ctx.EmitOp("relax.full", {MakeShapeExpr(shape->values), MakeConstant(value)},
                 {{"dtype", value->dtype()}});
  if (!out.ok()) return out.status();
  return One(*out);
}

// Range of integers some of whose inputs are symbolic or read at run time:
// relax.arange over the symbolic length.
// A float Range whose bounds are read when the model runs: its length
// max(ceil((limit - start) / delta), 0) computed in the graph and read into
// a symbolic var, then start + i * delta over arange(length). Whether delta
// is 0 is read with it, and the result is viewed at a length one longer when
// it is, a view whose element count differs: INVALID_ARGUMENT when it runs.
ConvertResult RunTimeFloatRange(ConvertContext& ctx, DataType dtype) {
  Expr v[3];
  for (int i = 0; i < 3; ++i) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(i));
    if (info->ndim > 1 || info->dtype != dtype) {
      return ctx.Invalid(absl::StrCat("input ", i, " must be a ", dtype.ToString(), " scalar"));
    }
    TETHER_ASSIGN_OR_RETURN(v[i], ctx.Input(i));
    TETHER_ASSIGN_OR_RETURN(v[i], ctx.EmitOp("relax.reshape", {v[i], MakeShapeExpr({})}));
  }
  TETHER_ASSIGN_OR_RETURN(Expr n, ctx.EmitOp("relax.subtract", {v[1], v[0]}));
  TETHER_ASSIGN_OR_RETURN(n, ctx.EmitOp("relax.divide", {n, v[2]}));
  TETHER_ASSIGN_OR_RETURN(n, ctx.EmitOp("relax.ceil", {n}));
  TETHER_ASSIGN_OR_RETURN(Expr zero, ScalarConstant(dtype, 0));
  TETHER_ASSIGN_OR_RETURN(n, ctx.EmitOp("relax.maximum", {n, zero}));
  TETHER_ASSIGN_OR_RETURN(Expr stuck, ctx.EmitOp("relax.equal", {v[2], zero}));
  TETHER_ASSIGN_OR_RETURN(n, ctx.EmitOp("relax.where", {stuck, zero, n}));
  Expr pair[2] = {n, stuck};
  for (Expr& e : pair) {
    TETHER_ASSIGN_OR_RETURN(e, ctx.EmitOp("relax.astype", {e}, {{"dtype", DataType::Int(64)}}));
    TETHER_ASSIGN_OR_RETURN(e, ctx.EmitOp("relax.reshape", {e, MakeShapeExpr({PrimExpr(1)})}));
  }
  TETHER_ASSIGN_OR_RETURN(Expr both, ctx.EmitOp("relax.concat", {MakeTuple({pair[0], pair[1]})},
                                                {{"axis", int64_t{0}}}));
  TETHER_ASSIGN_OR_RETURN(KnownInts len, ctx.RunTimeInts(both, ctx.node().output(0)));
  TETHER_ASSIGN_OR_RETURN(Expr i,
                          ctx.EmitOp("relax.arange",
                                     {MakePrimValue(PrimExpr(0)), MakePrimValue(len.values[0]),
                                      MakePrimValue(PrimExpr(1))},
                                     {{"dtype", dtype}}));
  TETHER_ASSIGN_OR_RETURN(i, ctx.EmitOp("relax.multiply", {i, v[2]}));
  TETHER_ASSIGN_OR_RETURN(Expr range, ctx.EmitOp("relax.add", {v[0], i}));
  const PrimExpr checked = Select(EQ(len.values[1], PrimExpr(0)), len.values[0], PrimExpr(1));
  return One(EmitRunTimeView(ctx, range, {checked}, dtype));
}

ConvertResult SymbolicRange(ConvertContext& ctx) {
  static constexpr const char* kNames[] = {"start", "limit", "delta"};
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  const DataType dtype = (*info)->dtype.value_or(DataType::Float(32));
  if (!dtype.is_int()) return RunTimeFloatRange(ctx, dtype);
  std::vector<Expr> args;
  std::vector<PrimExpr> v;
  const bool shape_derived = ctx.KnownInput(1).has_value();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<KnownInts> k = ctx.KnownOrRunTimeInts(i, kNames[i]);
    if (!k.ok()) return k.status();
    if (k->values.size() != 1) {
      return ctx.Invalid(absl::StrCat("input ", i, " (", kNames[i], ") must be a scalar"));
    }
    v.push_back(Cast(DataType::Int(64), k->values[0]));
    args.push_back(MakePrimValue(v.back()));
  }
  absl::StatusOr<Expr> range = ctx.EmitOp("relax.arange", std::move(args), {{"dtype", dtype}});
  std::optional<int64_t> start = AsConstInt(v[0]), delta = AsConstInt(v[2]);
  if (!range.ok() || !shape_derived || !start.has_value() || !delta.has_value() || *delta <= 0) {
    return One(range);
  }
  // A limit computed from a shape (Range(0, Shape(x)[1], 1), position ids):
  // its length is ceil((limit - start) / delta) without the clamp at 0 that
  // a limit below start would need, so it stays comparable with the dims it
  // came from (checked when the model runs).
  PrimExpr n = Simplify(FloorDiv(v[1] - v[0] + PrimExpr(*delta - 1), PrimExpr(*delta)));
  return One(ctx.EmitMatchCast(*range, TensorSInfo({n}, dtype)));
}

ConvertResult ConvertRange(ConvertContext& ctx) {
  std::optional<Tensor> ts[3];
  for (int i = 0; i < 3; ++i) {
    ts[i] = ctx.ConstantInput(i);
    if (!ts[i].has_value()) return SymbolicRange(ctx);
    if ((*ts[i])->NumElements() != 1) {
      return ctx.Invalid(absl::StrCat("input ", i, " must be a scalar, got ", ts[i]->ToString()));
    }
  }
  const DataType dtype = (*ts[0])->dtype();
  std::optional<std::vector<double>> s = DoublesFromTensor(*ts[0]), l = DoublesFromTensor(*ts[1]),
                                     d = DoublesFromTensor(*ts[2]);
  if (!s || !l || !d) return ctx.Unsupported(absl::StrCat("dtype ", dtype.ToString()));
  const double start = (*s)[0], limit = (*l)[0], delta = (*d)[0];
  if (delta == 0) return ctx.Invalid("delta is 0");
  const double count = std::max(std::ceil((limit - start) / delta), 0.0);
  if (!(count <= 1 << 26)) return ctx.Invalid(absl::StrCat("range of ", count, " elements"));
  const bool is_int = dtype.is_int() || dtype.is_uint();
  std::vector<double> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) {
    // As the spec: start + i * delta.
    values[i] = start + static_cast<double>(i) * delta;
  }
  absl::StatusOr<Tensor> t =
      is_int ? TensorFromInts(std::vector<int64_t>(values.begin(), values.end()),
                              {static_cast<int64_t>(values.size())}, dtype)
             : TensorFromDoubles(values, {static_cast<int64_t>(values.size())}, dtype);
  if (!t.ok()) return t.status();
  return One(MakeConstant(*t));
}

ConvertResult ConvertIdentity(ConvertContext& ctx) {
  if (std::optional<KnownInts> k = ctx.KnownInput(0)) {
    if (!ctx.ConstantInput(0).has_value()) {
      return std::vector<OnnxValue>{OnnxValue::Known(*k)};
    }
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  // A sequence or an optional of run-time structure keeps its type.
  if (std::optional<DynamicType> t = ctx.InputDynamicType(0); t.has_value()) {
    return std::vector<OnnxValue>{OnnxValue::Dynamic(*x, *t)};
  }
  return One(*x);
}

ConvertResult ConvertDropout(ConvertContext& ctx) {
  // Inference: the data passes through. training_mode (opset 12 input 2)
  // must be absent or a constant false.
  if (ctx.HasInput(2)) {
    std::optional<Tensor> mode = ctx.ConstantInput(2);
    std::optional<std::vector<int64_t>> v = mode ? IntsFromTensor(*mode) : std::nullopt;
    if (!v.has_value() || v->size() != 1) {
      return ctx.Unsupported("training_mode that is not a constant");
    }
    if ((*v)[0] != 0) return ctx.Unsupported("training_mode=true (only inference is supported)");
  }
  if (ctx.opset() < 7 && ctx.AttrInt("is_test", 0) == 0) {
    return ctx.Unsupported("is_test=0 (only inference is supported)");
  }
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  std::vector<OnnxValue> outs{OnnxValue::Of(*x)};
  if (ctx.node().output_size() > 1 && !ctx.node().output(1).empty()) {
    absl::StatusOr<Expr> mask = ctx.EmitOp("relax.ones_like", {*x}, {{"dtype", DataType::Bool()}});
    if (!mask.ok()) return mask.status();
    outs.push_back(OnnxValue::Of(*mask));
  }
  return outs;
}

ConvertResult ConvertEyeLike(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> t = ctx.InputTensorInfo(0);
  if (!t.ok()) return t.status();
  if (!(*t)->shape.has_value() || (*t)->shape->size() != 2) {
    return ctx.Invalid("input 0 must be a 2-D tensor");
  }
  const int64_t* rows = (*t)->shape->at(0).as_int();
  const int64_t* cols = (*t)->shape->at(1).as_int();
  if (rows == nullptr || cols == nullptr) return ctx.Unsupported("symbolic dims");
  DataType dtype = (*t)->dtype.value_or(DataType::Float(32));
  if (ctx.HasAttr("dtype")) {
    absl::StatusOr<DataType> d = DataTypeFromOnnx(static_cast<int>(ctx.AttrInt("dtype", 0)));
    if (!d.ok()) return ctx.Unsupported(d.status().message());
    dtype = *d;
  }
  const int64_t k = ctx.AttrInt("k", 0);
  std::vector<double> values(static_cast<size_t>(*rows * *cols), 0.0);
  for (int64_t i = 0; i < *rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < *cols) values[static_cast<size_t>(i * *cols + j)] = 1.0;
  }
  absl::StatusOr<Tensor> out = TensorFromDoubles(values, {*rows, *cols}, dtype);
  if (!out.ok()) return out.status();
  return One(MakeConstant(*out));
}

// HannWindow, HammingWindow, BlackmanWindow (opset 17): a0 - a1 cos(2 pi n / N)
// + a2 cos(4 pi n / N) for n in [0, size), N = size (periodic) or size - 1.
// The size may be read at run time.
ConvertResult ConvertWindow(ConvertContext& ctx, double a0, double a1, double a2) {
  const DataType f32 = DataType::Float(32);
  TETHER_ASSIGN_OR_RETURN(KnownInts size, ctx.KnownOrRunTimeInts(0, "size"));
  if (size.values.size() != 1) return ctx.Invalid("input 0 (size) must be a scalar");
  absl::StatusOr<DataType> out =
      DataTypeFromOnnx(static_cast<int>(ctx.AttrInt("output_datatype", 1)));
  if (!out.ok()) return ctx.Unsupported(out.status().message());
  const PrimExpr n = Cast(DataType::Int(64), size.values[0]);
  TETHER_ASSIGN_OR_RETURN(Expr idx, ctx.EmitOp("relax.arange",
                                               {MakePrimValue(PrimExpr(0)), MakePrimValue(n),
                                                MakePrimValue(PrimExpr(1))},
                                               {{"dtype", f32}}));
  TETHER_ASSIGN_OR_RETURN(Expr len, ctx.Input(0));
  TETHER_ASSIGN_OR_RETURN(len, ctx.EmitOp("relax.astype", {len}, {{"dtype", f32}}));
  if (ctx.AttrInt("periodic", 1) == 0) {
    TETHER_ASSIGN_OR_RETURN(Expr one, ScalarConstant(f32, 1));
    TETHER_ASSIGN_OR_RETURN(len, ctx.EmitOp("relax.subtract", {len, one}));
  }
  TETHER_ASSIGN_OR_RETURN(Expr two_pi, ScalarConstant(f32, 2 * M_PI));
  TETHER_ASSIGN_OR_RETURN(Expr phase, ctx.EmitOp("relax.multiply", {idx, two_pi}));
  TETHER_ASSIGN_OR_RETURN(phase, ctx.EmitOp("relax.divide", {phase, len}));
  auto term = [&](double a, double k) -> absl::StatusOr<Expr> {
    TETHER_ASSIGN_OR_RETURN(Expr kc, ScalarConstant(f32, k));
    TETHER_ASSIGN_OR_RETURN(Expr p, ctx.EmitOp("relax.multiply", {phase, kc}));
    TETHER_ASSIGN_OR_RETURN(Expr c, ctx.EmitOp("relax.cos", {p}));
    TETHER_ASSIGN_OR_RETURN(Expr ac, ScalarConstant(f32, a));
    return ctx.EmitOp("relax.multiply", {c, ac});
  };
  TETHER_ASSIGN_OR_RETURN(Expr w, ScalarConstant(f32, a0));
  TETHER_ASSIGN_OR_RETURN(Expr t1, term(-a1, 1));
  TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.add", {t1, w}));
  if (a2 != 0) {
    TETHER_ASSIGN_OR_RETURN(Expr t2, term(a2, 2));
    TETHER_ASSIGN_OR_RETURN(w, ctx.EmitOp("relax.add", {w, t2}));
  }
  if (*out != f32) return One(ctx.EmitOp("relax.astype", {w}, {{"dtype", *out}}));
  return One(w);
}

}  // namespace

// The real and imaginary parts of a signal times (c - i sn) along its last
// axis, by matrix products: re c + im sn and im c - re sn. part(0) gives the
// real part, part(1) the imaginary one when `parts` is 2.
struct Complex {
  Expr re, im;
};

absl::StatusOr<Complex> TransformBy(ConvertContext& ctx, int64_t parts,
                                    const std::function<absl::StatusOr<Expr>(int64_t)>& part,
                                    const Expr& c, const Expr& sn) {
  TETHER_ASSIGN_OR_RETURN(Expr re, part(0));
  TETHER_ASSIGN_OR_RETURN(Expr yr, ctx.EmitOp("relax.matmul", {re, c}));
  TETHER_ASSIGN_OR_RETURN(Expr rs, ctx.EmitOp("relax.matmul", {re, sn}));
  TETHER_ASSIGN_OR_RETURN(Expr yi, ctx.EmitOp("relax.negative", {rs}));
  if (parts == 2) {
    TETHER_ASSIGN_OR_RETURN(Expr im, part(1));
    TETHER_ASSIGN_OR_RETURN(Expr is, ctx.EmitOp("relax.matmul", {im, sn}));
    TETHER_ASSIGN_OR_RETURN(yr, ctx.EmitOp("relax.add", {yr, is}));
    TETHER_ASSIGN_OR_RETURN(Expr ic, ctx.EmitOp("relax.matmul", {im, c}));
    TETHER_ASSIGN_OR_RETURN(yi, ctx.EmitOp("relax.add", {yi, ic}));
  }
  return Complex{yr, yi};
}

// DFT-17 as matrix products: the signal axis moved last, the real and
// imaginary parts multiplied by constant cos and sin matrices of
// [samples, frequencies] (a dft_length known at import time truncates or
// zero-pads; onesided keeps the first length / 2 + 1 frequencies; inverse
// flips the sign of the sines and divides by the length), moved back, and
// stacked as the last dim [real, imag]. The shape must be static.
ConvertResult ConvertDFT(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  if (!info->shape.has_value() || !info->dtype.has_value() || !info->dtype->is_float() ||
      info->ndim < 2) {
    return ctx.Unsupported("DFT of a tensor of unknown shape, rank below 2 or not float");
  }
  std::vector<int64_t> shape;
  for (const PrimExpr& d : *info->shape) {
    const int64_t* v = d.as_int();
    if (v == nullptr)
      return ctx.Unsupported(absl::StrCat("DFT over the symbolic dim ", ToString(d)));
    shape.push_back(*v);
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t parts = shape.back();
  if (parts != 1 && parts != 2) {
    return ctx.Invalid(absl::StrCat("the last dim must be 1 (real) or 2 (complex), got ", parts));
  }
  int64_t axis = ctx.AttrInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1) {
    return ctx.Invalid(
        absl::StrCat("axis ", ctx.AttrInt("axis", 1), " is not a signal axis of ", rank, " dims"));
  }
  const bool inverse = ctx.AttrInt("inverse", 0) != 0;
  const bool onesided = ctx.AttrInt("onesided", 0) != 0;
  if (onesided && parts == 2) return ctx.Invalid("onesided needs a real input");
  const int64_t n = shape[static_cast<size_t>(axis)];
  int64_t length = n;
  if (ctx.HasInput(1)) {
    TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> l, ctx.ConstantInts(1, "dft_length"));
    if (l.size() != 1 || l[0] < 1) return ctx.Invalid("dft_length must be one positive value");
    length = l[0];
  }
  const int64_t used = std::min(n, length);
  const int64_t freqs = onesided ? length / 2 + 1 : length;
  std::vector<double> cosv, sinv;
  const double norm = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  for (int64_t i = 0; i < used; ++i) {
    for (int64_t k = 0; k < freqs; ++k) {
      // (i * k) mod length keeps the angle small and exact.
      const double theta =
          2 * M_PI * static_cast<double>((i * k) % length) / static_cast<double>(length);
      cosv.push_back(std::cos(theta) * norm);
      sinv.push_back(std::sin(theta) * (inverse ? -norm : 1.0));
    }
  }
  const DataType dt = *info->dtype;
  TETHER_ASSIGN_OR_RETURN(Tensor ct, TensorFromDoubles(cosv, {used, freqs}, dt));
  TETHER_ASSIGN_OR_RETURN(Tensor st, TensorFromDoubles(sinv, {used, freqs}, dt));
  const Expr c = MakeConstant(ct), sn = MakeConstant(st);
  std::vector<int64_t> perm, back(static_cast<size_t>(rank - 1));
  for (int64_t d = 0; d < rank - 1; ++d) {
    if (d != axis) perm.push_back(d);
  }
  perm.push_back(axis);
  for (size_t k = 0; k < perm.size(); ++k)
    back[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  // Part p of the signal, its first `used` samples, the signal axis last.
  auto part = [&](int64_t p) -> absl::StatusOr<Expr> {
    TETHER_ASSIGN_OR_RETURN(Expr v, ctx.EmitOp("relax.strided_slice", {x},
                                               {{"axes", std::vector<int64_t>{rank - 1, axis}},
                                                {"begin", std::vector<int64_t>{p, 0}},
                                                {"end", std::vector<int64_t>{p + 1, used}},
                                                {"strides", std::vector<int64_t>{1, 1}}}));
    TETHER_ASSIGN_OR_RETURN(
        v, ctx.EmitOp("relax.squeeze", {v}, {{"axis", std::vector<int64_t>{rank - 1}}}));
    return ctx.EmitOp("relax.permute_dims", {v}, {{"axes", perm}});
  };
  TETHER_ASSIGN_OR_RETURN(Complex y, TransformBy(ctx, parts, part, c, sn));
  Expr out[2] = {y.re, y.im};
  for (Expr& e : out) {
    TETHER_ASSIGN_OR_RETURN(e, ctx.EmitOp("relax.permute_dims", {e}, {{"axes", back}}));
    TETHER_ASSIGN_OR_RETURN(
        e, ctx.EmitOp("relax.expand_dims", {e}, {{"axis", std::vector<int64_t>{rank - 1}}}));
  }
  return One(ctx.EmitOp("relax.concat", {MakeTuple({out[0], out[1]})}, {{"axis", rank - 1}}));
}

// STFT-17: frames of frame_length samples every frame_step (both known at
// import time or read when the model runs; the length may come from the
// window instead), times the window, each transformed as by DFT (onesided
// by default): [batch, frames, bins, 2]. The cos and sin matrices are
// computed in the graph from arange((i * k) mod length), in float64, so
// they follow a run-time length; with constants they fold at compile time.
ConvertResult ConvertSTFT(ConvertContext& ctx) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(0));
  if (!info->shape.has_value() || !info->dtype.has_value() || !info->dtype->is_float() ||
      info->ndim != 3) {
    return ctx.Unsupported("STFT of a signal that is not [batch, length, 1 or 2] of floats");
  }
  const std::vector<PrimExpr>& shape = *info->shape;
  const std::optional<int64_t> parts = AsConstInt(shape[2]);
  if (parts != 1 && parts != 2) {
    return ctx.Invalid(
        absl::StrCat("the last dim must be 1 (real) or 2 (complex), got ", ToString(shape[2])));
  }
  const bool onesided = ctx.AttrInt("onesided", 1) != 0;
  if (onesided && parts == 2) return ctx.Invalid("onesided needs a real signal");
  const DataType i64 = DataType::Int(64), f64 = DataType::Float(64), dt = *info->dtype;
  TETHER_ASSIGN_OR_RETURN(KnownInts step_k, ctx.KnownOrRunTimeInts(1, "frame_step"));
  if (step_k.values.size() != 1) return ctx.Invalid("frame_step must be one value");
  const PrimExpr step = Cast(i64, step_k.values[0]);
  PrimExpr length;
  std::optional<Expr> window;
  if (ctx.HasInput(2)) {
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* w, ctx.InputTensorInfo(2));
    if (w->ndim != 1 || !w->shape.has_value()) return ctx.Invalid("the window must be 1-D");
    length = (*w->shape)[0];
    TETHER_ASSIGN_OR_RETURN(Expr wv, ctx.Input(2));
    TETHER_ASSIGN_OR_RETURN(wv, ctx.EmitOp("relax.astype", {wv}, {{"dtype", dt}}));
    window = wv;
  }
  if (ctx.HasInput(3)) {
    TETHER_ASSIGN_OR_RETURN(KnownInts l, ctx.KnownOrRunTimeInts(3, "frame_length"));
    if (l.values.size() != 1) return ctx.Invalid("frame_length must be one value");
    if (!length.defined()) length = Cast(i64, l.values[0]);
  }
  if (!length.defined()) return ctx.Invalid("neither a window nor a frame_length is given");
  const PrimExpr frames = Simplify(FloorDiv(shape[1] - length, step) + 1);
  const PrimExpr bins = onesided ? Simplify(FloorDiv(length, PrimExpr(2)) + 1) : length;
  auto scalar = [&](const PrimExpr& v, DataType t) {
    return ctx.EmitOp("relax.full", {MakeShapeExpr({}), MakePrimValue(v)}, {{"dtype", t}});
  };
  // Sample index of each frame's taps: frame * step + tap, [frames, length].
  TETHER_ASSIGN_OR_RETURN(Expr f, EmitIota(ctx, frames, {frames, PrimExpr(1)}));
  TETHER_ASSIGN_OR_RETURN(Expr s, scalar(step, i64));
  TETHER_ASSIGN_OR_RETURN(f, ctx.EmitOp("relax.multiply", {f, s}));
  TETHER_ASSIGN_OR_RETURN(Expr tap, EmitIota(ctx, length, {PrimExpr(1), length}));
  TETHER_ASSIGN_OR_RETURN(Expr idx, ctx.EmitOp("relax.add", {f, tap}));
  // cos and sin of 2 pi ((i * k) mod length) / length, [length, bins].
  TETHER_ASSIGN_OR_RETURN(Expr i, EmitIota(ctx, length, {length, PrimExpr(1)}));
  TETHER_ASSIGN_OR_RETURN(Expr k, EmitIota(ctx, bins, {PrimExpr(1), bins}));
  TETHER_ASSIGN_OR_RETURN(Expr ik, ctx.EmitOp("relax.multiply", {i, k}));
  TETHER_ASSIGN_OR_RETURN(Expr len_i, scalar(length, i64));
  TETHER_ASSIGN_OR_RETURN(Expr wraps, ctx.EmitOp("relax.floor_divide", {ik, len_i}));
  TETHER_ASSIGN_OR_RETURN(wraps, ctx.EmitOp("relax.multiply", {wraps, len_i}));
  TETHER_ASSIGN_OR_RETURN(ik, ctx.EmitOp("relax.subtract", {ik, wraps}));
  TETHER_ASSIGN_OR_RETURN(Expr theta, ctx.EmitOp("relax.astype", {ik}, {{"dtype", f64}}));
  TETHER_ASSIGN_OR_RETURN(Expr len_f, scalar(length, f64));
  TETHER_ASSIGN_OR_RETURN(Expr two_pi, ScalarConstant(f64, 2 * M_PI));
  TETHER_ASSIGN_OR_RETURN(theta, ctx.EmitOp("relax.multiply", {theta, two_pi}));
  TETHER_ASSIGN_OR_RETURN(theta, ctx.EmitOp("relax.divide", {theta, len_f}));
  TETHER_ASSIGN_OR_RETURN(Expr c, ctx.EmitOp("relax.cos", {theta}));
  TETHER_ASSIGN_OR_RETURN(c, ctx.EmitOp("relax.astype", {c}, {{"dtype", dt}}));
  TETHER_ASSIGN_OR_RETURN(Expr sn, ctx.EmitOp("relax.sin", {theta}));
  TETHER_ASSIGN_OR_RETURN(sn, ctx.EmitOp("relax.astype", {sn}, {{"dtype", dt}}));
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  // Part p of the signal framed: [batch, frames, length], windowed.
  auto framed = [&](int64_t p) -> absl::StatusOr<Expr> {
    TETHER_ASSIGN_OR_RETURN(Expr v, ctx.EmitOp("relax.strided_slice", {x},
                                               {{"axes", std::vector<int64_t>{2}},
                                                {"begin", std::vector<int64_t>{p}},
                                                {"end", std::vector<int64_t>{p + 1}},
                                                {"strides", std::vector<int64_t>{1}}}));
    TETHER_ASSIGN_OR_RETURN(v,
                            ctx.EmitOp("relax.squeeze", {v}, {{"axis", std::vector<int64_t>{2}}}));
    TETHER_ASSIGN_OR_RETURN(v, ctx.EmitOp("relax.take", {v, idx}, {{"axis", int64_t{1}}}));
    if (window.has_value()) {
      TETHER_ASSIGN_OR_RETURN(v, ctx.EmitOp("relax.multiply", {v, *window}));
    }
    return v;
  };
  TETHER_ASSIGN_OR_RETURN(Complex y, TransformBy(ctx, *parts, framed, c, sn));
  for (Expr* e : {&y.re, &y.im}) {
    TETHER_ASSIGN_OR_RETURN(
        *e, ctx.EmitOp("relax.expand_dims", {*e}, {{"axis", std::vector<int64_t>{3}}}));
  }
  return One(ctx.EmitOp("relax.concat", {MakeTuple({y.re, y.im})}, {{"axis", int64_t{3}}}));
}

void RegisterTensorConverters() {
  RegisterConverter("Constant", 1, ConvertConstant);
  RegisterConverter("Shape", 1, ConvertShape);
  RegisterConverter("Size", 1, ConvertSize);
  RegisterConverter("ConstantOfShape", 9, ConvertConstantOfShape);
  RegisterConverter("Range", 11, ConvertRange);
  RegisterConverter("Identity", 1, ConvertIdentity);
  RegisterConverter("Dropout", 1, ConvertDropout);
  RegisterConverter("EyeLike", 9, ConvertEyeLike);
  RegisterConverter("DFT", 17, ConvertDFT);
  RegisterConverter("STFT", 17, ConvertSTFT);
  RegisterConverter("HannWindow", 17,
                    [](ConvertContext& ctx) { return ConvertWindow(ctx, 0.5, 0.5, 0); });
  RegisterConverter("HammingWindow", 17, [](ConvertContext& ctx) {
    return ConvertWindow(ctx, 25.0 / 46.0, 21.0 / 46.0, 0);
  });
  RegisterConverter("BlackmanWindow", 17,
                    [](ConvertContext& ctx) { return ConvertWindow(ctx, 0.42, 0.5, 0.08); });
}

}  // namespace tether::compiler::onnx_frontend
