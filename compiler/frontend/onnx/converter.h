// The converter registry of the ONNX importer: one Converter per ONNX
// operator (and opset range), which turns one NodeProto into Relax bindings
// through a ConvertContext. Converters live in per-family files
// (convert_*.cc), each with one Register*Converters function called from
// importer.cc, as the operator families of compiler/op/ are.
//
// A converter reads its inputs and attributes through the context, emits
// Relax operator calls (ctx.EmitOp("relax.add", {a, b})), and returns one
// OnnxValue per node output. Values that are small integer tensors known at
// import time -- shapes and what is computed from them -- travel as
// OnnxValue::known, so Shape -> Gather -> Concat -> Reshape works with
// symbolic dims and emits no code; such a value is turned into a constant
// tensor only when a consumer needs it as a tensor.
//
// Errors come from ctx.Unsupported (UNIMPLEMENTED) and ctx.Invalid
// (INVALID_ARGUMENT); both prefix "onnx: node 'NAME' (OP, opset N): ".
//
// Thread contract: converters are pure functions of their context; the
// registry is filled once (on first import) and read-only afterwards.
#ifndef TETHER_COMPILER_FRONTEND_ONNX_CONVERTER_H_
#define TETHER_COMPILER_FRONTEND_ONNX_CONVERTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/struct_info.h"
#include "compiler/tir/prim_expr.h"
#include "runtime/core/tensor.h"

namespace onnx {
class NodeProto;
}  // namespace onnx

namespace tether::compiler::onnx_frontend {

// The elements of a 0-D or 1-D integer tensor known at import time, maybe
// symbolic (Shape of an input with dim_params).
struct KnownInts {
  std::vector<PrimExpr> values;
  bool scalar = false;  // 0-D (then values has one element)
  DataType dtype = DataType::Int(64);
};

// The ONNX type of a sequence or optional whose structure only the run time
// knows (its expr is R.Object; a sequence is a Tuple value of any length, an
// empty optional None: docs/design/onnx-conformance.md, "Sequences").
struct DynamicType {
  bool optional = false;          // optional(...): maybe None
  bool sequence = false;          // a sequence of tensors (inside the optional, when optional)
  std::optional<DataType> dtype;  // of the tensors, when known
  int ndim = -1;                  // of the tensors, -1 when unknown
  // With a known ndim, the declared dims of the tensors: a constant, the
  // importer's var of a dim_param, or undefined (a fresh var when read).
  std::vector<PrimExpr> dims;
};

// The type of a sequence held as a static tuple (TupleStructInfo): a
// sequence whose tensors' dtype and rank are those all its fields share.
// Defined in convert_sequence.cc.
DynamicType SequenceTypeOfTuple(const StructInfo& tuple);

// One value of the ONNX graph.
struct OnnxValue {
  Expr expr;                           // a Relax leaf (var or constant) with struct info; may be
                                       // null when `known` is set (materialized on demand)
  std::optional<KnownInts> known;      // set for import-time integer values
  std::optional<DynamicType> dynamic;  // set for R.Object sequences and optionals
  static OnnxValue Of(Expr e) { return OnnxValue{std::move(e), std::nullopt, std::nullopt}; }
  static OnnxValue Known(KnownInts k) { return OnnxValue{Expr(), std::move(k), std::nullopt}; }
  static OnnxValue Dynamic(Expr e, DynamicType t) {
    return OnnxValue{std::move(e), std::nullopt, std::move(t)};
  }
};

class ConvertContext {
 public:
  virtual ~ConvertContext() = default;

  virtual const onnx::NodeProto& node() const = 0;
  virtual int64_t opset() const = 0;  // of the default domain
  // "node 'conv_3' (Conv, opset 13)" (the output name stands in for an empty node name).
  virtual std::string Describe() const = 0;

  // Inputs. An optional input given as "" (or beyond the node's list) is absent.
  virtual int num_inputs() const = 0;
  virtual bool HasInput(int i) const = 0;
  // The input as a Relax value (known ints are materialized as a constant
  // tensor; symbolic ones are UNIMPLEMENTED). INVALID_ARGUMENT when absent.
  virtual absl::StatusOr<Expr> Input(int i) = 0;
  // The input's tensor struct info (dtype, ndim, shape maybe symbolic);
  // INVALID_ARGUMENT when absent or not a tensor.
  virtual absl::StatusOr<const TensorStructInfoNode*> InputTensorInfo(int i) = 0;
  // The input's type when it is a sequence or optional of run-time structure
  // (an R.Object value); nullopt for anything else or an absent input.
  virtual std::optional<DynamicType> InputDynamicType(int i) const = 0;
  // The input's concrete value when it is an initializer, a Constant's
  // output or known ints with no symbolic element; else nullopt.
  virtual std::optional<Tensor> ConstantInput(int i) const = 0;
  // The input's elements when it is a 0-D/1-D integer value known at import
  // time (constant or shape-derived, maybe symbolic); else nullopt.
  virtual std::optional<KnownInts> KnownInput(int i) const = 0;
  // ConstantInput as int64s (any integer dtype); UNIMPLEMENTED "input 1
  // (shape) must be known at import time" otherwise.
  virtual absl::StatusOr<std::vector<int64_t>> ConstantInts(int i, absl::string_view what) = 0;
  // KnownInput, or else the elements of a run-time 0-D/1-D integer tensor of
  // static length (at most kMaxRunTimeInts), read when the model runs into
  // fresh symbolic vars (R.tensor_to_shape, then a match_cast that defines
  // them), for converters that can work with symbolic values: a Reshape's
  // shape fed from a graph input. Each input is read once per node scope
  // (the same vars on later calls). UNIMPLEMENTED "input 1 (shape) must be
  // known at import time" for anything else.
  virtual absl::StatusOr<KnownInts> KnownOrRunTimeInts(int i, absl::string_view what) = 0;
  // The elements of `value`, a 0-D or 1-D tensor of an integer dtype and
  // static length (at most kMaxRunTimeInts) computed in the graph, read when
  // the model runs into fresh symbolic vars named after `name` (as
  // KnownOrRunTimeInts, not cached). INVALID_ARGUMENT for any other value.
  virtual absl::StatusOr<KnownInts> RunTimeInts(const Expr& value, absl::string_view name) = 0;

  // Attributes (defaults when absent; a present attribute of the wrong type
  // is INVALID_ARGUMENT through CheckAttrs, which the importer runs first).
  virtual bool HasAttr(absl::string_view name) const = 0;
  virtual int64_t AttrInt(absl::string_view name, int64_t def) const = 0;
  virtual float AttrFloat(absl::string_view name, float def) const = 0;
  virtual std::string AttrString(absl::string_view name, absl::string_view def) const = 0;
  virtual std::vector<int64_t> AttrInts(absl::string_view name,
                                        std::vector<int64_t> def = {}) const = 0;
  virtual std::vector<float> AttrFloats(absl::string_view name,
                                        std::vector<float> def = {}) const = 0;
  virtual std::vector<std::string> AttrStrings(absl::string_view name,
                                               std::vector<std::string> def = {}) const = 0;
  virtual absl::StatusOr<Tensor> AttrTensor(absl::string_view name) const = 0;

  // Emits `value` (normalized, struct info inferred) and returns the bound var.
  virtual absl::StatusOr<Expr> Emit(const Expr& value) = 0;
  // Emits var = R.match_cast(value, sinfo): a result whose shape only the
  // run time knows gets the dims of `sinfo` (fresh symbolic vars).
  virtual absl::StatusOr<Expr> EmitMatchCast(const Expr& value, const StructInfo& sinfo) = 0;
  // Emits a call of the Relax operator `op` ("relax.add").
  virtual absl::StatusOr<Expr> EmitOp(absl::string_view op, std::vector<Expr> args,
                                      Attrs attrs = {}) = 0;

  // Status helpers with Describe() as prefix.
  virtual absl::Status Unsupported(absl::string_view what) const = 0;  // UNIMPLEMENTED
  virtual absl::Status Invalid(absl::string_view what) const = 0;      // INVALID_ARGUMENT
};

// The longest run-time integer vector KnownOrRunTimeInts reads into symbolic
// vars (shapes, pads and repeats are short).
inline constexpr int64_t kMaxRunTimeInts = 64;

// One OnnxValue per node output, in order (trailing optional outputs that
// nothing reads may be left off).
using ConvertResult = absl::StatusOr<std::vector<OnnxValue>>;
using Converter = std::function<ConvertResult(ConvertContext& ctx)>;

// The result of a converter with one output: `e`, or its error.
inline ConvertResult One(absl::StatusOr<Expr> e) {
  if (!e.ok()) return e.status();
  return std::vector<OnnxValue>{OnnxValue::Of(*std::move(e))};
}

// Registers `fn` for `op_type` from `since_opset` on (until the next
// registration of the same op with a higher since_opset). Aborts on a
// duplicate (op_type, since_opset): a build bug any test catches.
void RegisterConverter(std::string op_type, int since_opset, Converter fn);

// One function per family, each in its own file, called once by the importer.
void RegisterElementwiseConverters();  // convert_elementwise.cc: arithmetic, math, activations,
                                       // logic, compare, Where, Clip, Cast
void RegisterTensorConverters();       // convert_tensor.cc: Constant, Shape, Size,
                                       // ConstantOfShape, Range, Identity, Dropout
void RegisterNNConverters();           // convert_nn.cc: MatMul, Gemm, Conv, pools, norms,
                                       // Softmax/LogSoftmax, reductions, ArgMax/ArgMin, TopK,
                                       // Einsum
void RegisterShapeConverters();        // convert_shape.cc: Reshape, Transpose, Flatten,
                                       // Squeeze, Unsqueeze, Concat, Split, Slice, Gather,
                                       // Expand, Tile, ...
void RegisterLossConverters();         // convert_loss.cc: NegativeLogLikelihoodLoss,
                                       // SoftmaxCrossEntropyLoss
void RegisterResizeConverters();       // convert_resize.cc: Resize, Upsample, GridSample, RoiAlign
void RegisterSequenceConverters();     // convert_sequence.cc: Sequence*, ConcatFromSequence,
                                       // SplitToSequence (import-time tuples)
void RegisterRecurrentConverters();    // convert_recurrent.cc: RNN, GRU, LSTM (unrolled)
void RegisterDataDependentConverters();  // convert_data_dependent.cc: NonZero, Compress,
                                         // NonMaxSuppression (run-time output shapes)
void RegisterQuantizeConverters();       // convert_quantize.cc: Quantize/DequantizeLinear,
                                         // DynamicQuantizeLinear, MatMulInteger, ConvInteger,
                                         // QLinearMatMul, QLinearConv

}  // namespace tether::compiler::onnx_frontend

#endif  // TETHER_COMPILER_FRONTEND_ONNX_CONVERTER_H_
