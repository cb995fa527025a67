// The ONNX sequence and optional operators: SequenceEmpty,
// SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt,
// SequenceLength, ConcatFromSequence, SplitToSequence, Optional,
// OptionalHasElement and OptionalGetElement (SequenceMap is expanded into a
// Loop by the importer: control_flow.cc).
//
// A sequence whose length is known at import time is a Relax tuple of
// tensors held as an unbound R.tuple of leaves (its fields are vars or
// constants, its struct info a TupleStructInfo), so Insert, Erase and At at
// known positions only rearrange fields and emit no code, SequenceLength is
// a known int64 scalar, and only ConcatFromSequence and SplitToSequence
// emit operators (relax.concat, relax.split).
//
// A sequence whose length only the run time knows -- a graph input, a value
// carried through a Loop, an If's output whose branches differ, a split into
// a number of pieces read at run time -- is an
// R.Object holding a Tuple value of any length, with its tensors' dtype and
// rank on the side (OnnxValue::dynamic). Operators on it, and Insert, Erase
// and At at a position read at run time, are calls of the VM's sequence
// builtins (runtime/vm/sequence_ops.cc) through R.call_pure_packed: a tensor
// read out of a sequence gets fresh symbolic dims with a match cast, and
// the length comes back as a shape, read into a symbolic var. An optional
// is its value, or None when empty; Optional, OptionalHasElement and
// OptionalGetElement on a value known to be present emit no code.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_shape_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/graph_importer.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

// A sequence value: an unbound tuple of leaves.
ConvertResult Sequence(std::vector<Expr> fields) {
  return std::vector<OnnxValue>{OnnxValue::Of(MakeTuple(std::move(fields)))};
}

bool IsObject(const Expr& e) { return e.struct_info().kind() == StructInfoKind::kObject; }

// Whether input `i` is a sequence of run-time length (an R.Object).
bool IsRunTimeSequence(ConvertContext& ctx, int i) {
  if (!ctx.HasInput(i)) return false;
  absl::StatusOr<Expr> e = ctx.Input(i);
  return e.ok() && IsObject(*e);
}

// The type of sequence input `i`: its run-time type, or its static tuple's.
absl::StatusOr<DynamicType> SequenceType(ConvertContext& ctx, int i) {
  if (std::optional<DynamicType> t = ctx.InputDynamicType(i); t.has_value()) {
    if (t->optional) {
      return ctx.Invalid(absl::StrCat("input ", i, " ('", ctx.node().input(i),
                                      "') is an optional, not a sequence"));
    }
    return *t;
  }
  TETHER_ASSIGN_OR_RETURN(Expr e, ctx.Input(i));
  if (e.struct_info().as<TupleStructInfoNode>() == nullptr) {
    return ctx.Invalid(absl::StrCat("input ", i, " ('", ctx.node().input(i),
                                    "') is not a sequence but ", ToString(e.struct_info())));
  }
  return SequenceTypeOfTuple(e.struct_info());
}

// `object`, a tensor of `type`'s dtype and rank read out of a run-time
// sequence or optional, cast to fresh symbolic dims ("<output>_d<k>").
absl::StatusOr<Expr> CastToElement(ConvertContext& ctx, const Expr& object, const DynamicType& type,
                                   absl::string_view what) {
  if (type.ndim < 0 || !type.dtype.has_value()) {
    return ctx.Unsupported(absl::StrCat(what, " holds tensors of unknown ",
                                        type.ndim < 0 ? "rank" : "dtype",
                                        " (the model does not declare it)"));
  }
  const std::string& out = ctx.node().output(0);
  std::vector<PrimExpr> dims;
  for (int d = 0; d < type.ndim; ++d) {
    const size_t k = static_cast<size_t>(d);
    dims.push_back(
        k < type.dims.size() && type.dims[k].defined()
            ? type.dims[k]
            : PrimExpr(Var(SymbolName(absl::StrCat(out.empty() ? "elem" : out, "_d", d)))));
  }
  return ctx.EmitMatchCast(object, TensorSInfo(std::move(dims), type.dtype));
}

// A count the VM returns as a one-dim shape (a sequence's length, whether an
// optional holds a value), as a 0-D tensor of `dtype` whose value is also
// known as a symbolic var.
ConvertResult RunTimeCount(ConvertContext& ctx, const Expr& shape, DataType dtype) {
  const std::string& out = ctx.node().output(0);
  Var n(SymbolName(absl::StrCat(out.empty() ? "count" : out, "_n")));
  TETHER_RETURN_IF_ERROR(ctx.EmitMatchCast(shape, ShapeSInfo({n})).status());
  TETHER_ASSIGN_OR_RETURN(
      Expr t, ctx.EmitOp("relax.full", {MakeShapeExpr({}), MakePrimValue(n)}, {{"dtype", dtype}}));
  OnnxValue v = OnnxValue::Of(t);
  if (dtype == DataType::Int(64)) v.known = KnownInts{{n}, /*scalar=*/true, dtype};
  return std::vector<OnnxValue>{v};
}

// The tensor fields of the sequence input `i`. A tuple bound to a var (not
// made here, but any tuple-typed value is a sequence to ONNX) is unpacked
// with TupleGetItem.
absl::StatusOr<std::vector<Expr>> SequenceInput(ConvertContext& ctx, int i) {
  if (!ctx.HasInput(i)) return ctx.Invalid(absl::StrCat("input ", i, " (sequence) is absent"));
  absl::StatusOr<Expr> seq = ctx.Input(i);
  if (!seq.ok()) return seq.status();
  if (const auto* t = seq->as<TupleNode>()) return t->fields;
  const auto* info = seq->struct_info().as<TupleStructInfoNode>();
  if (info == nullptr) {
    return ctx.Invalid(absl::StrCat("input ", i, " ('", ctx.node().input(i),
                                    "') is not a sequence but ", ToString(seq->struct_info())));
  }
  std::vector<Expr> fields;
  for (size_t k = 0; k < info->fields.size(); ++k) {
    absl::StatusOr<Expr> item = ctx.Emit(MakeTupleGetItem(*seq, static_cast<int>(k)));
    if (!item.ok()) return item.status();
    fields.push_back(*item);
  }
  return fields;
}

// The tensor struct info of `e` (a sequence field or a tensor input).
absl::StatusOr<const TensorStructInfoNode*> TensorInfoOf(const ConvertContext& ctx, const Expr& e,
                                                         absl::string_view what) {
  const auto* t = e.struct_info().as<TensorStructInfoNode>();
  if (t == nullptr) {
    return ctx.Invalid(absl::StrCat(what, " is not a tensor but ", ToString(e.struct_info())));
  }
  return t;
}

// The tensor input `i`, which becomes a sequence element: it must have the
// dtype of the sequence's other elements.
absl::StatusOr<Expr> ElementInput(ConvertContext& ctx, int i, const std::vector<Expr>& fields) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(i);
  if (!info.ok()) return info.status();
  for (const Expr& f : fields) {
    const auto* t = f.struct_info().as<TensorStructInfoNode>();
    if (t != nullptr && t->dtype.has_value() && (*info)->dtype.has_value() &&
        *t->dtype != *(*info)->dtype) {
      return ctx.Invalid(absl::StrCat("input ", i, " ('", ctx.node().input(i), "') is ",
                                      (*info)->dtype->ToString(), ", the sequence holds ",
                                      t->dtype->ToString()));
    }
  }
  return ctx.Input(i);
}

// The position input `i` (a scalar or one-element integer tensor) as a
// constant; UNIMPLEMENTED naming the input when it is a run-time value.
absl::StatusOr<int64_t> PositionInput(ConvertContext& ctx, int i) {
  std::optional<KnownInts> k = ctx.KnownInput(i);
  std::optional<std::vector<int64_t>> v;
  if (k.has_value()) v = ConstValues(*k);
  if (!v.has_value()) {
    return ctx.Unsupported(absl::StrCat("input ", i, " (position '", ctx.node().input(i),
                                        "') must be known at import time"));
  }
  if (v->size() != 1) {
    return ctx.Invalid(
        absl::StrCat("input ", i, " (position) has ", v->size(), " elements, expected a scalar"));
  }
  return (*v)[0];
}

// `pos` in [-size, size + extra) made non-negative (extra is 1 for Insert,
// which may append); INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> NormalizePosition(const ConvertContext& ctx, int64_t pos, size_t size,
                                          int64_t extra) {
  const int64_t n = static_cast<int64_t>(size);
  if (pos < -n || pos >= n + extra) {
    return ctx.Invalid(absl::StrCat("position ", pos, " is out of range for a sequence of ", n,
                                    " tensors (valid: ", -n, " to ", n + extra - 1, ")"));
  }
  return pos < 0 ? pos + n : pos;
}

// ---- Building sequences ----

ConvertResult ConvertSequenceEmpty(ConvertContext& ctx) {
  // The dtype only types the (empty) sequence; check it is one we know.
  if (ctx.HasAttr("dtype")) {
    absl::StatusOr<DataType> dtype =
        DataTypeFromOnnx(static_cast<int>(ctx.AttrInt("dtype", ::onnx::TensorProto::FLOAT)));
    if (!dtype.ok())
      return ctx.Invalid(absl::StrCat("attribute dtype: ", dtype.status().message()));
  }
  return Sequence({});
}

ConvertResult ConvertSequenceConstruct(ConvertContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.Invalid("sequence of no inputs");
  std::vector<Expr> fields;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Invalid(absl::StrCat("input ", i, " is absent"));
    absl::StatusOr<Expr> x = ElementInput(ctx, i, fields);
    if (!x.ok()) return x.status();
    fields.push_back(*x);
  }
  return Sequence(std::move(fields));
}

// Insert or Erase on a run-time sequence, or at a run-time position: the
// builtin, its result a run-time sequence of the input's type (with the
// inserted tensor's dtype and rank when the input's are unknown).
ConvertResult RunTimeEdit(ConvertContext& ctx, const std::string& builtin, int pos_input,
                          int tensor_input) {
  TETHER_ASSIGN_OR_RETURN(DynamicType type, SequenceType(ctx, 0));
  TETHER_ASSIGN_OR_RETURN(Expr seq, ctx.Input(0));
  std::vector<Expr> args = {seq};
  if (tensor_input >= 0) {
    if (!ctx.HasInput(tensor_input)) return ctx.Invalid("input 1 (tensor) is absent");
    TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* info, ctx.InputTensorInfo(tensor_input));
    if (type.dtype.has_value() && info->dtype.has_value() && *type.dtype != *info->dtype) {
      return ctx.Invalid(absl::StrCat("input ", tensor_input, " ('", ctx.node().input(tensor_input),
                                      "') is ", info->dtype->ToString(), ", the sequence holds ",
                                      type.dtype->ToString()));
    }
    if (!type.dtype.has_value()) type.dtype = info->dtype;
    if (type.ndim < 0) type.ndim = info->ndim;
    TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(tensor_input));
    args.push_back(x);
  }
  if (ctx.HasInput(pos_input)) {
    TETHER_ASSIGN_OR_RETURN(Expr pos, ctx.Input(pos_input));
    args.push_back(pos);
  }
  TETHER_ASSIGN_OR_RETURN(Expr out, EmitPackedCall(ctx, builtin, args, ObjectSInfo()));
  return std::vector<OnnxValue>{OnnxValue::Dynamic(out, type)};
}

// Whether input `i` (a position) is present and not known at import time.
bool RunTimePosition(ConvertContext& ctx, int i) {
  if (!ctx.HasInput(i)) return false;
  std::optional<KnownInts> k = ctx.KnownInput(i);
  return !k.has_value() || !ConstValues(*k).has_value();
}

ConvertResult ConvertSequenceInsert(ConvertContext& ctx) {
  if (IsRunTimeSequence(ctx, 0) || RunTimePosition(ctx, 2)) {
    return RunTimeEdit(ctx, "vm.builtin.sequence_insert", 2, 1);
  }
  absl::StatusOr<std::vector<Expr>> fields = SequenceInput(ctx, 0);
  if (!fields.ok()) return fields.status();
  if (!ctx.HasInput(1)) return ctx.Invalid("input 1 (tensor) is absent");
  absl::StatusOr<Expr> x = ElementInput(ctx, 1, *fields);
  if (!x.ok()) return x.status();
  int64_t at = static_cast<int64_t>(fields->size());  // default: the end
  if (ctx.HasInput(2)) {
    absl::StatusOr<int64_t> pos = PositionInput(ctx, 2);
    if (!pos.ok()) return pos.status();
    absl::StatusOr<int64_t> norm = NormalizePosition(ctx, *pos, fields->size(), 1);
    if (!norm.ok()) return norm.status();
    at = *norm;
  }
  fields->insert(fields->begin() + at, *x);
  return Sequence(*std::move(fields));
}

ConvertResult ConvertSequenceErase(ConvertContext& ctx) {
  if (IsRunTimeSequence(ctx, 0) || RunTimePosition(ctx, 1)) {
    return RunTimeEdit(ctx, "vm.builtin.sequence_erase", 1, -1);
  }
  absl::StatusOr<std::vector<Expr>> fields = SequenceInput(ctx, 0);
  if (!fields.ok()) return fields.status();
  if (fields->empty()) return ctx.Invalid("cannot erase from an empty sequence");
  int64_t at = static_cast<int64_t>(fields->size()) - 1;  // default: the last
  if (ctx.HasInput(1)) {
    absl::StatusOr<int64_t> pos = PositionInput(ctx, 1);
    if (!pos.ok()) return pos.status();
    absl::StatusOr<int64_t> norm = NormalizePosition(ctx, *pos, fields->size(), 0);
    if (!norm.ok()) return norm.status();
    at = *norm;
  }
  fields->erase(fields->begin() + at);
  return Sequence(*std::move(fields));
}

// ---- Reading sequences ----

ConvertResult ConvertSequenceAt(ConvertContext& ctx) {
  if (!ctx.HasInput(1)) return ctx.Invalid("input 1 (position) is absent");
  if (IsRunTimeSequence(ctx, 0) || RunTimePosition(ctx, 1)) {
    TETHER_ASSIGN_OR_RETURN(DynamicType type, SequenceType(ctx, 0));
    TETHER_ASSIGN_OR_RETURN(Expr seq, ctx.Input(0));
    TETHER_ASSIGN_OR_RETURN(Expr pos, ctx.Input(1));
    TETHER_ASSIGN_OR_RETURN(
        Expr elem, EmitPackedCall(ctx, "vm.builtin.sequence_at", {seq, pos}, ObjectSInfo()));
    return One(CastToElement(ctx, elem, type, "the sequence"));
  }
  absl::StatusOr<std::vector<Expr>> fields = SequenceInput(ctx, 0);
  if (!fields.ok()) return fields.status();
  absl::StatusOr<int64_t> pos = PositionInput(ctx, 1);
  if (!pos.ok()) return pos.status();
  absl::StatusOr<int64_t> norm = NormalizePosition(ctx, *pos, fields->size(), 0);
  if (!norm.ok()) return norm.status();
  return std::vector<OnnxValue>{OnnxValue::Of((*fields)[static_cast<size_t>(*norm)])};
}

ConvertResult ConvertSequenceLength(ConvertContext& ctx) {
  if (IsRunTimeSequence(ctx, 0)) {
    TETHER_RETURN_IF_ERROR(SequenceType(ctx, 0).status());
    TETHER_ASSIGN_OR_RETURN(Expr seq, ctx.Input(0));
    TETHER_ASSIGN_OR_RETURN(
        Expr n, EmitPackedCall(ctx, "vm.builtin.sequence_length", {seq}, ShapeSInfoOfRank(1)));
    return RunTimeCount(ctx, n, DataType::Int(64));
  }
  absl::StatusOr<std::vector<Expr>> fields = SequenceInput(ctx, 0);
  if (!fields.ok()) return fields.status();
  return std::vector<OnnxValue>{
      OnnxValue::Known(MakeKnownInts({static_cast<int64_t>(fields->size())}, /*scalar=*/true))};
}

ConvertResult ConvertConcatFromSequence(ConvertContext& ctx) {
  if (!ctx.HasAttr("axis")) return ctx.Invalid("missing attribute axis");
  const int64_t axis = ctx.AttrInt("axis", 0);
  const int64_t new_axis = ctx.AttrInt("new_axis", 0);
  if (new_axis != 0 && new_axis != 1) {
    return ctx.Invalid(absl::StrCat("new_axis is ", new_axis, ", expected 0 or 1"));
  }
  if (IsRunTimeSequence(ctx, 0)) {
    TETHER_ASSIGN_OR_RETURN(DynamicType type, SequenceType(ctx, 0));
    if (type.ndim < 0) return ctx.Unsupported("concat of a sequence of tensors of unknown rank");
    TETHER_ASSIGN_OR_RETURN(int64_t a, NormalizeOnnxAxis(ctx, axis, type.ndim + new_axis, "axis"));
    TETHER_ASSIGN_OR_RETURN(Expr seq, ctx.Input(0));
    TETHER_ASSIGN_OR_RETURN(Expr out, EmitPackedCall(ctx, "vm.builtin.sequence_concat",
                                                     {seq, MakePrimValue(PrimExpr(a)),
                                                      MakePrimValue(PrimExpr(new_axis))},
                                                     ObjectSInfo()));
    type.ndim += static_cast<int>(new_axis);
    type.dims.clear();  // the concatenated axis differs
    return One(CastToElement(ctx, out, type, "the sequence"));
  }
  absl::StatusOr<std::vector<Expr>> fields = SequenceInput(ctx, 0);
  if (!fields.ok()) return fields.status();
  if (fields->empty()) return ctx.Invalid("concat of an empty sequence");
  int64_t rank = -1;
  for (size_t k = 0; k < fields->size(); ++k) {
    absl::StatusOr<const TensorStructInfoNode*> info =
        TensorInfoOf(ctx, (*fields)[k], absl::StrCat("sequence element ", k));
    if (!info.ok()) return info.status();
    if ((*info)->ndim < 0) continue;
    if (rank >= 0 && (*info)->ndim != rank) {
      return ctx.Invalid(absl::StrCat("sequence element ", k, " has ", (*info)->ndim,
                                      " dims, element 0 has ", rank));
    }
    rank = (*info)->ndim;
  }
  if (rank < 0) return ctx.Unsupported("concat of a sequence of tensors of unknown rank");
  // With new_axis the result has rank + 1 dims and the axis counts in those.
  absl::StatusOr<int64_t> a = NormalizeOnnxAxis(ctx, axis, rank + new_axis, "axis");
  if (!a.ok()) return a.status();
  std::vector<Expr> parts = *fields;
  if (new_axis == 1) {
    for (Expr& p : parts) {
      absl::StatusOr<Expr> e =
          ctx.EmitOp("relax.expand_dims", {p}, {{"axis", std::vector<int64_t>{*a}}});
      if (!e.ok()) return e.status();
      p = *e;
    }
  }
  if (parts.size() == 1) return One(parts[0]);
  absl::StatusOr<Expr> out =
      ctx.EmitOp("relax.concat", {MakeTuple(std::move(parts))}, {{"axis", *a}});
  if (!out.ok()) return out.status();
  return One(*out);
}

// ---- SplitToSequence ----

// The chunk sizes of SplitToSequence along an axis of size `dim`: from the
// `split` input (a scalar: equal chunks, the last one smaller; 1-D: those
// sizes), or chunks of 1 without it.
absl::StatusOr<std::vector<int64_t>> SplitSizes(ConvertContext& ctx, const PrimExpr& dim,
                                                int64_t axis) {
  std::optional<int64_t> size = AsConstInt(dim);
  if (!ctx.HasInput(1)) {
    if (!size.has_value()) {
      return ctx.Unsupported(absl::StrCat("split into chunks of 1 along axis ", axis, " of size ",
                                          ToString(dim), " (the sequence length must be known)"));
    }
    return std::vector<int64_t>(static_cast<size_t>(*size), 1);
  }
  std::optional<KnownInts> k = ctx.KnownInput(1);
  std::optional<std::vector<int64_t>> split;
  if (k.has_value()) split = ConstValues(*k);
  if (!split.has_value()) {
    return ctx.Unsupported(
        absl::StrCat("input 1 (split '", ctx.node().input(1), "') must be known at import time"));
  }
  if (k->scalar) {
    const int64_t chunk = (*split)[0];
    if (chunk <= 0) return ctx.Invalid(absl::StrCat("split ", chunk, " is not positive"));
    if (!size.has_value()) {
      return ctx.Unsupported(absl::StrCat("split into chunks of ", chunk, " along axis ", axis,
                                          " of size ", ToString(dim),
                                          " (the sequence length must be known)"));
    }
    std::vector<int64_t> sizes;
    for (int64_t done = 0; done < *size; done += chunk)
      sizes.push_back(std::min(chunk, *size - done));
    return sizes;
  }
  int64_t sum = 0;
  for (int64_t s : *split) {
    if (s < 0) return ctx.Invalid(absl::StrCat("split size ", s, " is negative"));
    sum += s;
  }
  if (split->empty()) return ctx.Invalid("split is an empty list");
  if (size.has_value() && *size != sum) {
    return ctx.Invalid(absl::StrCat("split sizes [", absl::StrJoin(*split, ", "), "] sum to ", sum,
                                    ", but axis ", axis, " has size ", *size));
  }
  return *split;
}

ConvertResult ConvertSplitToSequence(ConvertContext& ctx) {
  absl::StatusOr<const TensorStructInfoNode*> info = ctx.InputTensorInfo(0);
  if (!info.ok()) return info.status();
  if (!(*info)->shape.has_value()) {
    return ctx.Unsupported("split of a tensor of unknown shape");
  }
  absl::StatusOr<int64_t> axis =
      NormalizeOnnxAxis(ctx, ctx.AttrInt("axis", 0), (*info)->ndim, "axis");
  if (!axis.ok()) return axis.status();
  const int64_t keepdims = ctx.AttrInt("keepdims", 1);
  if (keepdims != 0 && keepdims != 1) {
    return ctx.Invalid(absl::StrCat("keepdims is ", keepdims, ", expected 0 or 1"));
  }
  // keepdims only applies without a split input (chunks of 1).
  const bool squeeze = keepdims == 0 && !ctx.HasInput(1);
  absl::StatusOr<std::vector<int64_t>> sizes =
      SplitSizes(ctx, (*(*info)->shape)[static_cast<size_t>(*axis)], *axis);
  absl::StatusOr<Expr> x = ctx.Input(0);
  if (!x.ok()) return x.status();
  if (!sizes.ok() && sizes.status().code() == absl::StatusCode::kUnimplemented) {
    // The number of pieces is only known at run time (a split read then, or
    // chunks of an axis of symbolic size): a run-time sequence.
    std::vector<Expr> args = {*x, MakePrimValue(PrimExpr(*axis))};
    if (ctx.HasInput(1)) {
      TETHER_ASSIGN_OR_RETURN(Expr split, ctx.Input(1));
      args.push_back(split);
    } else {
      TETHER_ASSIGN_OR_RETURN(Expr none,
                              EmitPackedCall(ctx, "vm.builtin.null_value", {}, ObjectSInfo()));
      args.push_back(none);
    }
    args.push_back(MakePrimValue(PrimExpr(keepdims)));
    TETHER_ASSIGN_OR_RETURN(
        Expr seq, EmitPackedCall(ctx, "vm.builtin.split_to_sequence", args, ObjectSInfo()));
    DynamicType type;
    type.sequence = true;
    type.dtype = (*info)->dtype;
    type.ndim = static_cast<int>((*info)->ndim) - (squeeze ? 1 : 0);
    return std::vector<OnnxValue>{OnnxValue::Dynamic(seq, type)};
  }
  if (!sizes.ok()) return sizes.status();

  std::vector<Expr> fields;
  if (sizes->size() == 1) {
    fields.push_back(*x);
  } else if (!sizes->empty()) {
    std::vector<int64_t> indices;
    int64_t sum = 0;
    for (size_t k = 0; k + 1 < sizes->size(); ++k) indices.push_back(sum += (*sizes)[k]);
    absl::StatusOr<Expr> tuple =
        ctx.EmitOp("relax.split", {*x}, {{"indices_or_sections", indices}, {"axis", *axis}});
    if (!tuple.ok()) return tuple.status();
    for (size_t k = 0; k < sizes->size(); ++k) {
      absl::StatusOr<Expr> item = ctx.Emit(MakeTupleGetItem(*tuple, static_cast<int>(k)));
      if (!item.ok()) return item.status();
      fields.push_back(*item);
    }
  }
  if (squeeze) {
    for (Expr& f : fields) {
      absl::StatusOr<Expr> e =
          ctx.EmitOp("relax.squeeze", {f}, {{"axis", std::vector<int64_t>{*axis}}});
      if (!e.ok()) return e.status();
      f = *e;
    }
  }
  return Sequence(std::move(fields));
}

// ---- Optionals ----

// Optional(x): x itself (an optional that holds a value is its value);
// without an input, None of the `type` attribute's type.
ConvertResult ConvertOptional(ConvertContext& ctx) {
  if (ctx.HasInput(0)) {
    TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
    OnnxValue v = OnnxValue::Of(x);
    if (std::optional<DynamicType> t = ctx.InputDynamicType(0); t.has_value()) {
      if (t->optional) return ctx.Invalid("input 0 is an optional already");
      v.dynamic = *t;
      v.dynamic->optional = true;
    }
    return std::vector<OnnxValue>{v};
  }
  const ::onnx::AttributeProto* type_attr = nullptr;
  for (const auto& a : ctx.node().attribute()) {
    if (a.name() == "type") type_attr = &a;
  }
  if (type_attr == nullptr || type_attr->type() != ::onnx::AttributeProto::TYPE_PROTO) {
    return ctx.Invalid("an Optional without an input needs the attribute type (a TypeProto)");
  }
  ::onnx::TypeProto optional_type;
  *optional_type.mutable_optional_type()->mutable_elem_type() = type_attr->tp();
  TETHER_ASSIGN_OR_RETURN(std::optional<DynamicType> type,
                          DynamicTypeOf(optional_type, "the attribute type"));
  TETHER_ASSIGN_OR_RETURN(Expr none,
                          EmitPackedCall(ctx, "vm.builtin.null_value", {}, ObjectSInfo()));
  return std::vector<OnnxValue>{OnnxValue::Dynamic(none, *type)};
}

ConvertResult ConvertOptionalHasElement(ConvertContext& ctx) {
  auto constant = [&](bool value) -> ConvertResult {
    TETHER_ASSIGN_OR_RETURN(Tensor t, TensorFromInts({value ? 1 : 0}, {}, DataType::Bool()));
    return One(MakeConstant(t));
  };
  if (!ctx.HasInput(0)) return constant(false);  // opset 18: an absent input is empty
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  if (!IsObject(x)) return constant(true);
  TETHER_ASSIGN_OR_RETURN(
      Expr has, EmitPackedCall(ctx, "vm.builtin.optional_has_element", {x}, ShapeSInfoOfRank(1)));
  return RunTimeCount(ctx, has, DataType::Bool());
}

ConvertResult ConvertOptionalGetElement(ConvertContext& ctx) {
  if (!ctx.HasInput(0)) return ctx.Invalid("input 0 (optional) is absent");
  TETHER_ASSIGN_OR_RETURN(Expr x, ctx.Input(0));
  std::optional<DynamicType> type = ctx.InputDynamicType(0);
  // A value known to be present (a tensor, a static sequence; opset 18 also
  // takes a plain tensor or sequence) is its own element.
  if (!IsObject(x)) return One(x);
  if (!type.has_value()) return ctx.Invalid("input 0 is not an optional");
  TETHER_ASSIGN_OR_RETURN(
      Expr elem, EmitPackedCall(ctx, "vm.builtin.optional_get_element", {x}, ObjectSInfo()));
  type->optional = false;
  if (type->sequence) return std::vector<OnnxValue>{OnnxValue::Dynamic(elem, *type)};
  return One(CastToElement(ctx, elem, *type, "the optional"));
}

}  // namespace

DynamicType SequenceTypeOfTuple(const StructInfo& tuple) {
  DynamicType type;
  type.sequence = true;
  const auto* info = tuple.as<TupleStructInfoNode>();
  if (info == nullptr) return type;
  bool first = true;
  for (const StructInfo& f : info->fields) {
    const auto* t = f.as<TensorStructInfoNode>();
    std::optional<DataType> dtype = t == nullptr ? std::nullopt : t->dtype;
    const int ndim = t == nullptr ? -1 : t->ndim;
    if (first) {
      type.dtype = dtype;
      type.ndim = ndim;
      first = false;
      continue;
    }
    if (type.dtype != dtype) type.dtype = std::nullopt;
    if (type.ndim != ndim) type.ndim = -1;
  }
  return type;
}

void RegisterSequenceConverters() {
  RegisterConverter("SequenceEmpty", 11, ConvertSequenceEmpty);
  RegisterConverter("SequenceConstruct", 11, ConvertSequenceConstruct);
  RegisterConverter("SequenceInsert", 11, ConvertSequenceInsert);
  RegisterConverter("SequenceErase", 11, ConvertSequenceErase);
  RegisterConverter("SequenceAt", 11, ConvertSequenceAt);
  RegisterConverter("SequenceLength", 11, ConvertSequenceLength);
  RegisterConverter("ConcatFromSequence", 11, ConvertConcatFromSequence);
  RegisterConverter("SplitToSequence", 11, ConvertSplitToSequence);
  RegisterConverter("Optional", 15, ConvertOptional);
  RegisterConverter("OptionalHasElement", 15, ConvertOptionalHasElement);
  RegisterConverter("OptionalGetElement", 15, ConvertOptionalGetElement);
}

}  // namespace tether::compiler::onnx_frontend
