// ONNX converters for the recurrent layers RNN, GRU and LSTM (opset 7 on;
// the `layout` attribute from opset 14), unrolled at import time into
// Relax operators: each time step is its own few bindings, so the sequence
// length (dim 0 of X, dim 1 with layout=1) must be a constant; the batch
// and input sizes may be symbolic.
//
// X is made time-major, [seq, batch, input], and X * W^T for every step and
// direction is one matmul against W reshaped to [dirs * gates * hidden,
// input] and transposed, with the input-side bias (Wb + Rb, less GRU's Rbh
// under linear_before_reset) added once. One relax.split per direction
// cuts that product into the steps' [1, batch, gates * hidden] blocks (the
// steps' kernels are then identical, emitted once). Each step adds its only
// matmul H(t-1) * R^T, and applies the equations of the ONNX spec: RNN
// Ht = f(.); GRU with its gates in the order z, r, h in W, R and B, and
// linear_before_reset; LSTM with its gates in the order i, o, f, c, the
// peepholes P = [Pi, Po, Pf] and input_forget (f = 1 - i). `clip` bounds
// every gate's pre-activation (not LSTM's h(Ct)), as onnxruntime does.
// States carry a leading unit dim, [1, batch, hidden], so steps concatenate
// into Y and directions into Y_h / Y_c without reshapes. The reverse
// direction (the second one of a bidirectional node) walks t = seq-1 .. 0.
//
// sequence_lens, a constant or a run-time tensor, becomes one mask per
// step, t < sequence_lens[b]: where it is false the step keeps the state
// and writes zeros to Y. A batch element's forward pass thus stops at its
// length and its reverse pass starts at its last valid step, as in
// onnxruntime; Y_h and Y_c hold the state after the last valid step
// (forward) or after step 0 (reverse), and an element of length 0 keeps
// its initial state. No mask is emitted when sequence_lens is absent or a
// constant equal to the sequence length everywhere.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/frontend/onnx/convert_elementwise.h"
#include "compiler/frontend/onnx/convert_nn_util.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/tir/arith.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/error.h"

namespace tether::compiler::onnx_frontend {
namespace {

using nn_convert::DimsMayMatch;
using nn_convert::ExpandDims;
using nn_convert::ScalarConstant;

enum class Cell { kRnn, kGru, kLstm };

// Inputs of the three operators (P and initial_c are LSTM's only).
constexpr int kX = 0, kW = 1, kR = 2, kB = 3, kSequenceLens = 4, kInitialH = 5, kInitialC = 6,
              kP = 7;

int64_t NumGates(Cell cell) {
  switch (cell) {
    case Cell::kRnn:
      return 1;
    case Cell::kGru:
      return 3;
    case Cell::kLstm:
      return 4;
  }
  return 1;
}

// ---- Activations ----

struct Activation {
  std::string op;  // as EmitActivation names it
  double alpha = 0;
  double beta = 0;
};

// An activation the `activations` attribute may name: whether it reads an
// alpha and a beta from activation_alpha / activation_beta, and their
// defaults, those of the ONNX operator of the same name (of the former
// experimental ones, Affine defaults to the identity, ScaledTanh to tanh).
struct ActivationSpec {
  const char* op;
  bool has_alpha;
  bool has_beta;
  double default_alpha;
  double default_beta;
};

constexpr ActivationSpec kActivations[] = {
    {"Relu", false, false, 0, 0},        {"Tanh", false, false, 0, 0},
    {"Sigmoid", false, false, 0, 0},     {"Affine", true, true, 1, 0},
    {"LeakyRelu", true, false, 0.01, 0}, {"ThresholdedRelu", true, false, 1, 0},
    {"ScaledTanh", true, true, 1, 1},    {"HardSigmoid", true, true, 0.2, 0.5},
    {"Elu", true, false, 1, 0},          {"Softsign", false, false, 0, 0},
    {"Softplus", false, false, 0, 0},
};

// The activations of each direction in turn, `per` of them (f for RNN; f, g
// for GRU; f, g, h for LSTM): the attribute's names, matched regardless of
// case as onnxruntime does, or the spec's defaults. alpha and beta values
// are consumed in order by the activations that take them. A bidirectional
// node given only `per` names uses them for both directions.
absl::StatusOr<std::vector<Activation>> ReadActivations(const ConvertContext& ctx, Cell cell,
                                                        int64_t dirs) {
  std::vector<std::string> defaults;
  switch (cell) {
    case Cell::kRnn:
      defaults = {"Tanh"};
      break;
    case Cell::kGru:
      defaults = {"Sigmoid", "Tanh"};
      break;
    case Cell::kLstm:
      defaults = {"Sigmoid", "Tanh", "Tanh"};
      break;
  }
  const size_t per = defaults.size();
  std::vector<std::string> names = ctx.AttrStrings("activations");
  if (names.empty()) names = defaults;
  if (names.size() != per && names.size() != per * static_cast<size_t>(dirs)) {
    return ctx.Invalid(absl::StrCat("activations has ", names.size(), " names, expected ",
                                    per * static_cast<size_t>(dirs)));
  }
  const std::vector<float> alphas = ctx.AttrFloats("activation_alpha");
  const std::vector<float> betas = ctx.AttrFloats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> acts;
  for (const std::string& name : names) {
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& s : kActivations) {
      if (absl::EqualsIgnoreCase(name, s.op)) spec = &s;
    }
    if (spec == nullptr) {
      std::vector<std::string> known;
      for (const ActivationSpec& s : kActivations) known.push_back(s.op);
      return ctx.Invalid(
          absl::StrCat("activation '", name, "' is not one of ", absl::StrJoin(known, ", ")));
    }
    Activation a{spec->op, spec->default_alpha, spec->default_beta};
    if (spec->has_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (spec->has_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    acts.push_back(std::move(a));
  }
  if (acts.size() == per && dirs == 2) {
    for (size_t k = 0; k < per; ++k) acts.push_back(acts[k]);
  }
  return acts;
}

// ---- Operands ----

// The checked operands of one node, time-major.
struct Operands {
  Cell cell = Cell::kRnn;
  DataType dtype;
  int64_t gates = 1;  // per direction: 1, 3 or 4
  int64_t hidden = 0;
  int64_t seq = 0;
  int64_t dirs = 1;
  bool reverse = false;      // a single direction, walked backwards
  bool batch_major = false;  // layout=1
  PrimExpr batch, input;
  Expr x;                        // [seq, batch, input]
  Expr w;                        // [dirs, gates * hidden, input]
  Expr r;                        // [dirs, gates * hidden, hidden]
  std::optional<Expr> b;         // [dirs, 2 * gates * hidden]
  std::optional<Expr> lens;      // [1, batch, 1]; absent when no step is masked
  DataType lens_dtype;           // of sequence_lens
  std::optional<Expr> h0, c0;    // [dirs, batch, hidden]
  std::optional<Expr> p;         // [dirs, 3 * hidden]
  std::vector<Activation> acts;  // `per` for each direction
  std::optional<double> clip;
  bool linear_before_reset = false;
  bool input_forget = false;

  int64_t gate_width() const { return gates * hidden; }
  bool reversed(int64_t d) const { return reverse || d == 1; }
};

std::string ShapeString(const std::vector<PrimExpr>& shape) {
  return absl::StrCat(
      "[",
      absl::StrJoin(shape, ", ",
                    [](std::string* out, const PrimExpr& e) { out->append(ToString(e)); }),
      "]");
}

// Input `i` (`what`) checked against `want` (the rank, and the dims that are
// constants in both) and `dtype` where each is known; INVALID_ARGUMENT
// otherwise.
absl::Status CheckInput(ConvertContext& ctx, int i, absl::string_view what,
                        const std::vector<PrimExpr>& want, std::optional<DataType> dtype) {
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, ctx.InputTensorInfo(i));
  if (dtype.has_value() && t->dtype.has_value() && *t->dtype != *dtype) {
    return ctx.Invalid(absl::StrCat("input ", i, " (", what, ") is ", t->dtype->ToString(),
                                    ", expected ", dtype->ToString()));
  }
  if (t->ndim >= 0 && t->ndim != static_cast<int>(want.size())) {
    return ctx.Invalid(absl::StrCat("input ", i, " (", what, ") has ", t->ndim,
                                    " dims, expected shape ", ShapeString(want)));
  }
  if (t->shape.has_value()) {
    for (size_t k = 0; k < want.size(); ++k) {
      if (!DimsMayMatch((*t->shape)[k], want[k])) {
        return ctx.Invalid(absl::StrCat("input ", i, " (", what, ") has shape ",
                                        ShapeString(*t->shape), ", expected ", ShapeString(want)));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Expr> Permute(ConvertContext& ctx, const Expr& x, std::vector<int64_t> axes) {
  return ctx.EmitOp("relax.permute_dims", {x}, {{"axes", std::move(axes)}});
}

// A [dirs, batch, hidden] state input (initial_h or initial_c), time-major.
absl::StatusOr<std::optional<Expr>> ReadState(ConvertContext& ctx, int i, absl::string_view what,
                                              const Operands& ops) {
  if (!ctx.HasInput(i)) return std::optional<Expr>();
  const PrimExpr dirs(ops.dirs), hidden(ops.hidden);
  TETHER_RETURN_IF_ERROR(CheckInput(ctx, i, what,
                                    ops.batch_major
                                        ? std::vector<PrimExpr>{ops.batch, dirs, hidden}
                                        : std::vector<PrimExpr>{dirs, ops.batch, hidden},
                                    ops.dtype));
  TETHER_ASSIGN_OR_RETURN(Expr s, ctx.Input(i));
  if (ops.batch_major) {
    TETHER_ASSIGN_OR_RETURN(s, Permute(ctx, s, {1, 0, 2}));
  }
  return std::optional<Expr>(s);
}

// sequence_lens as a [1, batch, 1] mask operand, or nullopt when it is
// absent or a constant that masks no step.
absl::StatusOr<std::optional<Expr>> ReadSequenceLens(ConvertContext& ctx, Operands& ops) {
  if (!ctx.HasInput(kSequenceLens)) return std::optional<Expr>();
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* t, ctx.InputTensorInfo(kSequenceLens));
  if (!t->dtype.has_value() || !t->dtype->is_int()) {
    return ctx.Invalid(absl::StrCat(
        "input 4 (sequence_lens) must be int32, got ",
        t->dtype.has_value() ? t->dtype->ToString() : std::string("an unknown dtype")));
  }
  ops.lens_dtype = *t->dtype;
  TETHER_RETURN_IF_ERROR(CheckInput(ctx, kSequenceLens, "sequence_lens", {ops.batch}, {}));
  if (std::optional<KnownInts> known = ctx.KnownInput(kSequenceLens)) {
    bool masks = false, all_constant = true;
    for (size_t k = 0; k < known->values.size(); ++k) {
      std::optional<int64_t> v = AsConstInt(known->values[k]);
      if (!v.has_value()) {
        all_constant = false;
        continue;
      }
      if (*v < 0 || *v > ops.seq) {
        return ctx.Invalid(
            absl::StrCat("sequence_lens[", k, "] = ", *v, " is outside [0, ", ops.seq, "]"));
      }
      masks |= *v < ops.seq;
    }
    if (all_constant && !masks) return std::optional<Expr>();
  }
  TETHER_ASSIGN_OR_RETURN(Expr lens, ctx.Input(kSequenceLens));
  TETHER_ASSIGN_OR_RETURN(lens, ExpandDims(ctx, lens, {0, 2}));
  return std::optional<Expr>(lens);
}

absl::StatusOr<Operands> ReadOperands(ConvertContext& ctx, Cell cell) {
  Operands ops;
  ops.cell = cell;
  ops.gates = NumGates(cell);
  const int64_t layout = ctx.AttrInt("layout", 0);
  if (layout != 0 && layout != 1) {
    return ctx.Invalid(absl::StrCat("layout ", layout, " is not 0 or 1"));
  }
  if (layout == 1 && ctx.opset() < 14) {
    return ctx.Invalid("layout=1 needs opset 14 (the attribute is new there)");
  }
  ops.batch_major = layout == 1;
  const std::string direction = ctx.AttrString("direction", "forward");
  if (direction == "bidirectional") {
    ops.dirs = 2;
  } else if (direction == "reverse") {
    ops.reverse = true;
  } else if (direction != "forward") {
    return ctx.Invalid(
        absl::StrCat("direction '", direction, "' is not one of forward, reverse, bidirectional"));
  }

  // X: the sequence length must be a constant; batch and input may not be.
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* xi, ctx.InputTensorInfo(kX));
  if (!xi->dtype.has_value() || !xi->dtype->is_float()) {
    return ctx.Invalid(absl::StrCat(
        "input 0 (X) must be a float tensor, got ",
        xi->dtype.has_value() ? xi->dtype->ToString() : std::string("an unknown dtype")));
  }
  ops.dtype = *xi->dtype;
  if (xi->ndim >= 0 && xi->ndim != 3) {
    return ctx.Invalid(absl::StrCat("input 0 (X) has ", xi->ndim, " dims, expected 3"));
  }
  const int seq_axis = ops.batch_major ? 1 : 0;
  if (!xi->shape.has_value()) {
    return ctx.Unsupported(absl::StrCat(
        "the sequence length (dim ", seq_axis, " of X) is unknown: ", ctx.node().op_type(),
        " is unrolled at import time and needs a static sequence length"));
  }
  const std::vector<PrimExpr>& xs = *xi->shape;
  std::optional<int64_t> seq = AsConstInt(xs[seq_axis]);
  if (!seq.has_value()) {
    return ctx.Unsupported(
        absl::StrCat("the sequence length (dim ", seq_axis, " of X) is '", ToString(xs[seq_axis]),
                     "', not a constant: ", ctx.node().op_type(),
                     " is unrolled at import time and needs a static sequence length"));
  }
  if (*seq == 0) return ctx.Unsupported("a sequence length of 0");
  ops.seq = *seq;
  ops.batch = xs[ops.batch_major ? 0 : 1];
  ops.input = xs[2];

  // hidden_size: the attribute, else R's last dim.
  TETHER_ASSIGN_OR_RETURN(const TensorStructInfoNode* ri, ctx.InputTensorInfo(kR));
  if (ctx.HasAttr("hidden_size")) {
    ops.hidden = ctx.AttrInt("hidden_size", 0);
    if (ops.hidden <= 0) {
      return ctx.Invalid(absl::StrCat("hidden_size ", ops.hidden, " is not positive"));
    }
  } else {
    std::optional<int64_t> h;
    if (ri->shape.has_value() && ri->ndim == 3) h = AsConstInt((*ri->shape)[2]);
    if (!h.has_value()) {
      return ctx.Unsupported("hidden_size is absent and R's last dim is not a constant");
    }
    ops.hidden = *h;
  }
  const PrimExpr dirs(ops.dirs), gh(ops.gate_width()), hidden(ops.hidden);
  TETHER_RETURN_IF_ERROR(CheckInput(ctx, kW, "W", {dirs, gh, ops.input}, ops.dtype));
  TETHER_RETURN_IF_ERROR(CheckInput(ctx, kR, "R", {dirs, gh, hidden}, ops.dtype));
  TETHER_ASSIGN_OR_RETURN(ops.x, ctx.Input(kX));
  if (ops.batch_major) {
    TETHER_ASSIGN_OR_RETURN(ops.x, Permute(ctx, ops.x, {1, 0, 2}));
  }
  TETHER_ASSIGN_OR_RETURN(ops.w, ctx.Input(kW));
  TETHER_ASSIGN_OR_RETURN(ops.r, ctx.Input(kR));
  if (ctx.HasInput(kB)) {
    TETHER_RETURN_IF_ERROR(
        CheckInput(ctx, kB, "B", {dirs, PrimExpr(2 * ops.gate_width())}, ops.dtype));
    TETHER_ASSIGN_OR_RETURN(Expr b, ctx.Input(kB));
    ops.b = b;
  }
  TETHER_ASSIGN_OR_RETURN(ops.lens, ReadSequenceLens(ctx, ops));
  TETHER_ASSIGN_OR_RETURN(ops.h0, ReadState(ctx, kInitialH, "initial_h", ops));
  if (cell == Cell::kLstm) {
    TETHER_ASSIGN_OR_RETURN(ops.c0, ReadState(ctx, kInitialC, "initial_c", ops));
    if (ctx.HasInput(kP)) {
      TETHER_RETURN_IF_ERROR(CheckInput(ctx, kP, "P", {dirs, PrimExpr(3 * ops.hidden)}, ops.dtype));
      TETHER_ASSIGN_OR_RETURN(Expr p, ctx.Input(kP));
      ops.p = p;
    }
    ops.input_forget = ctx.AttrInt("input_forget", 0) != 0;
  }
  if (cell == Cell::kGru) ops.linear_before_reset = ctx.AttrInt("linear_before_reset", 0) != 0;
  if (ctx.HasAttr("clip")) {
    const float clip = ctx.AttrFloat("clip", 0);
    if (!(clip > 0)) return ctx.Invalid(absl::StrCat("clip ", clip, " is not positive"));
    ops.clip = clip;
  }
  TETHER_ASSIGN_OR_RETURN(ops.acts, ReadActivations(ctx, cell, ops.dirs));
  return ops;
}

// ---- Emission helpers ----

// x[begin[k]:end[k]] along each of `axes`.
absl::StatusOr<Expr> SliceAxes(ConvertContext& ctx, const Expr& x, std::vector<int64_t> axes,
                               std::vector<int64_t> begin, std::vector<int64_t> end) {
  return ctx.EmitOp(
      "relax.strided_slice", {x},
      {{"axes", std::move(axes)}, {"begin", std::move(begin)}, {"end", std::move(end)}});
}

absl::StatusOr<Expr> Slice(ConvertContext& ctx, const Expr& x, int64_t axis, int64_t begin,
                           int64_t end) {
  return SliceAxes(ctx, x, {axis}, {begin}, {end});
}

// The fields concatenated along `axis` (one field: itself).
absl::StatusOr<Expr> Concat(ConvertContext& ctx, std::vector<Expr> fields, int64_t axis) {
  if (fields.size() == 1) return fields[0];
  return ctx.EmitOp("relax.concat", {MakeTuple(std::move(fields))}, {{"axis", axis}});
}

absl::StatusOr<Expr> Add(ConvertContext& ctx, const Expr& a, const Expr& b) {
  return ctx.EmitOp("relax.add", {a, b});
}

absl::StatusOr<Expr> Mul(ConvertContext& ctx, const Expr& a, const Expr& b) {
  return ctx.EmitOp("relax.multiply", {a, b});
}

// 1 - x.
absl::StatusOr<Expr> OneMinus(ConvertContext& ctx, const Operands& ops, const Expr& x) {
  TETHER_ASSIGN_OR_RETURN(Expr one, ScalarConstant(ops.dtype, 1));
  return ctx.EmitOp("relax.subtract", {one, x});
}

absl::StatusOr<Expr> Activate(ConvertContext& ctx, const Operands& ops, const Activation& f,
                              const Expr& x) {
  return EmitActivation(ctx, f.op, x, ops.dtype, f.alpha, f.beta);
}

// f(x) for a gate's pre-activation x: clipped to [-clip, clip] first.
absl::StatusOr<Expr> Gate(ConvertContext& ctx, const Operands& ops, const Activation& f, Expr x) {
  if (ops.clip.has_value()) {
    TETHER_ASSIGN_OR_RETURN(Expr lo, ScalarConstant(ops.dtype, -*ops.clip));
    TETHER_ASSIGN_OR_RETURN(Expr hi, ScalarConstant(ops.dtype, *ops.clip));
    TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.maximum", {x, lo}));
    TETHER_ASSIGN_OR_RETURN(x, ctx.EmitOp("relax.minimum", {x, hi}));
  }
  return Activate(ctx, ops, f, x);
}

// X * W^T plus the input-side bias, for every step and direction:
// [seq, batch, dirs * gates * hidden], direction d in columns
// [d * gates * hidden, (d + 1) * gates * hidden).
absl::StatusOr<Expr> EmitInputProjection(ConvertContext& ctx, const Operands& ops) {
  const int64_t gh = ops.gate_width();
  TETHER_ASSIGN_OR_RETURN(
      Expr w,
      ctx.EmitOp("relax.reshape", {ops.w, MakeShapeExpr({PrimExpr(ops.dirs * gh), ops.input})}));
  TETHER_ASSIGN_OR_RETURN(w, Permute(ctx, w, {1, 0}));
  TETHER_ASSIGN_OR_RETURN(Expr xw, ctx.EmitOp("relax.matmul", {ops.x, w}));
  if (!ops.b.has_value()) return xw;
  // B = [Wb, Rb]: Rb joins Wb here except GRU's Rbh under linear_before_reset,
  // which is added inside r * (...) at each step.
  TETHER_ASSIGN_OR_RETURN(Expr wb, Slice(ctx, *ops.b, 1, 0, gh));
  TETHER_ASSIGN_OR_RETURN(Expr rb, Slice(ctx, *ops.b, 1, gh, 2 * gh));
  Expr bias;
  if (ops.linear_before_reset) {
    const int64_t zr = 2 * ops.hidden;
    TETHER_ASSIGN_OR_RETURN(Expr wb_zr, Slice(ctx, wb, 1, 0, zr));
    TETHER_ASSIGN_OR_RETURN(Expr rb_zr, Slice(ctx, rb, 1, 0, zr));
    TETHER_ASSIGN_OR_RETURN(Expr wb_h, Slice(ctx, wb, 1, zr, gh));
    TETHER_ASSIGN_OR_RETURN(Expr sum, Add(ctx, wb_zr, rb_zr));
    TETHER_ASSIGN_OR_RETURN(bias, Concat(ctx, {sum, wb_h}, 1));
  } else {
    TETHER_ASSIGN_OR_RETURN(bias, Add(ctx, wb, rb));
  }
  TETHER_ASSIGN_OR_RETURN(
      bias, ctx.EmitOp("relax.reshape", {bias, MakeShapeExpr({PrimExpr(ops.dirs * gh)})}));
  return Add(ctx, xw, bias);
}

// ---- One direction ----

// The per-step operands of direction d.
struct DirectionWeights {
  Expr rt;                            // R^T [1, hidden, gates * hidden] (GRU without
                                      // linear_before_reset: the z and r columns)
  std::optional<Expr> rt_h;           // GRU without linear_before_reset: Rh^T [1, hidden, hidden]
  std::optional<Expr> rb_h;           // GRU with linear_before_reset and B: Rbh [1, hidden]
  std::optional<Expr> p_i, p_o, p_f;  // LSTM with P: [1, hidden] each
  std::vector<Activation> acts;       // f (, g (, h))
};

// `rt_all` is R^T for all directions, [dirs, hidden, gates * hidden].
absl::StatusOr<DirectionWeights> ReadDirection(ConvertContext& ctx, const Operands& ops,
                                               const Expr& rt_all, int64_t d) {
  DirectionWeights dw;
  const int64_t h = ops.hidden, gh = ops.gate_width();
  const size_t per = ops.acts.size() / static_cast<size_t>(ops.dirs);
  dw.acts.assign(ops.acts.begin() + static_cast<std::ptrdiff_t>(per * d),
                 ops.acts.begin() + static_cast<std::ptrdiff_t>(per * (d + 1)));
  TETHER_ASSIGN_OR_RETURN(dw.rt, Slice(ctx, rt_all, 0, d, d + 1));
  if (ops.cell == Cell::kGru && !ops.linear_before_reset) {
    TETHER_ASSIGN_OR_RETURN(Expr rt_h, Slice(ctx, dw.rt, 2, 2 * h, 3 * h));
    dw.rt_h = rt_h;
    TETHER_ASSIGN_OR_RETURN(dw.rt, Slice(ctx, dw.rt, 2, 0, 2 * h));
  }
  if (ops.cell == Cell::kGru && ops.linear_before_reset && ops.b.has_value()) {
    TETHER_ASSIGN_OR_RETURN(Expr rb_h,
                            SliceAxes(ctx, *ops.b, {0, 1}, {d, gh + 2 * h}, {d + 1, 2 * gh}));
    dw.rb_h = rb_h;
  }
  if (ops.cell == Cell::kLstm && ops.p.has_value()) {
    TETHER_ASSIGN_OR_RETURN(Expr p, Slice(ctx, *ops.p, 0, d, d + 1));
    TETHER_ASSIGN_OR_RETURN(Expr p_i, Slice(ctx, p, 1, 0, h));
    TETHER_ASSIGN_OR_RETURN(Expr p_o, Slice(ctx, p, 1, h, 2 * h));
    TETHER_ASSIGN_OR_RETURN(Expr p_f, Slice(ctx, p, 1, 2 * h, 3 * h));
    dw.p_i = p_i;
    dw.p_o = p_o;
    dw.p_f = p_f;
  }
  return dw;
}

// The recurrent state of one direction, [1, batch, hidden] each.
struct State {
  Expr h;
  Expr c;  // LSTM only
};

// Direction d's slice of a [dirs, batch, hidden] initial state, or zeros.
absl::StatusOr<Expr> InitialState(ConvertContext& ctx, const Operands& ops,
                                  const std::optional<Expr>& given, int64_t d) {
  if (given.has_value()) return Slice(ctx, *given, 0, d, d + 1);
  return ctx.EmitOp("relax.zeros", {MakeShapeExpr({PrimExpr(1), ops.batch, PrimExpr(ops.hidden)})},
                    {{"dtype", ops.dtype}});
}

// Ht = f(xw + Ht-1 * R^T), xw = Xt * W^T + Wb + Rb.
absl::StatusOr<State> RnnStep(ConvertContext& ctx, const Operands& ops, const DirectionWeights& dw,
                              const Expr& xw, const State& prev) {
  TETHER_ASSIGN_OR_RETURN(Expr hr, ctx.EmitOp("relax.matmul", {prev.h, dw.rt}));
  TETHER_ASSIGN_OR_RETURN(Expr pre, Add(ctx, xw, hr));
  TETHER_ASSIGN_OR_RETURN(Expr h, Gate(ctx, ops, dw.acts[0], pre));
  return State{h, Expr()};
}

// zt = f(xw_z + Ht-1 * Rz^T), rt = f(xw_r + Ht-1 * Rr^T),
// ht = g(xw_h + (rt . Ht-1) * Rh^T)        (Rbh is in xw_h), or
// ht = g(xw_h + rt . (Ht-1 * Rh^T + Rbh))  with linear_before_reset,
// Ht = (1 - zt) . ht + zt . Ht-1.
absl::StatusOr<State> GruStep(ConvertContext& ctx, const Operands& ops, const DirectionWeights& dw,
                              const Expr& xw, const State& prev) {
  const int64_t h = ops.hidden;
  const Activation& f = dw.acts[0];
  const Activation& g = dw.acts[1];
  TETHER_ASSIGN_OR_RETURN(Expr hr, ctx.EmitOp("relax.matmul", {prev.h, dw.rt}));
  TETHER_ASSIGN_OR_RETURN(Expr x_zr, Slice(ctx, xw, 2, 0, 2 * h));
  Expr hr_zr = hr;
  if (ops.linear_before_reset) {
    TETHER_ASSIGN_OR_RETURN(hr_zr, Slice(ctx, hr, 2, 0, 2 * h));
  }
  TETHER_ASSIGN_OR_RETURN(Expr zr, Add(ctx, x_zr, hr_zr));
  TETHER_ASSIGN_OR_RETURN(Expr z_pre, Slice(ctx, zr, 2, 0, h));
  TETHER_ASSIGN_OR_RETURN(Expr z, Gate(ctx, ops, f, z_pre));
  TETHER_ASSIGN_OR_RETURN(Expr r_pre, Slice(ctx, zr, 2, h, 2 * h));
  TETHER_ASSIGN_OR_RETURN(Expr r, Gate(ctx, ops, f, r_pre));
  TETHER_ASSIGN_OR_RETURN(Expr x_h, Slice(ctx, xw, 2, 2 * h, 3 * h));
  Expr h_pre;
  if (ops.linear_before_reset) {
    TETHER_ASSIGN_OR_RETURN(Expr hh, Slice(ctx, hr, 2, 2 * h, 3 * h));
    if (dw.rb_h.has_value()) {
      TETHER_ASSIGN_OR_RETURN(hh, Add(ctx, hh, *dw.rb_h));
    }
    TETHER_ASSIGN_OR_RETURN(Expr rhh, Mul(ctx, r, hh));
    TETHER_ASSIGN_OR_RETURN(h_pre, Add(ctx, x_h, rhh));
  } else {
    TETHER_ASSIGN_OR_RETURN(Expr rh, Mul(ctx, r, prev.h));
    TETHER_ASSIGN_OR_RETURN(Expr rhr, ctx.EmitOp("relax.matmul", {rh, *dw.rt_h}));
    TETHER_ASSIGN_OR_RETURN(h_pre, Add(ctx, x_h, rhr));
  }
  TETHER_ASSIGN_OR_RETURN(Expr ht, Gate(ctx, ops, g, h_pre));
  TETHER_ASSIGN_OR_RETURN(Expr keep, OneMinus(ctx, ops, z));
  TETHER_ASSIGN_OR_RETURN(Expr fresh, Mul(ctx, keep, ht));
  TETHER_ASSIGN_OR_RETURN(Expr carried, Mul(ctx, z, prev.h));
  TETHER_ASSIGN_OR_RETURN(Expr next, Add(ctx, fresh, carried));
  return State{next, Expr()};
}

// it = f(xw_i + Ht-1 * Ri^T + Pi . Ct-1), ft = f(xw_f + Ht-1 * Rf^T + Pf . Ct-1)
// (1 - it with input_forget), ct = g(xw_c + Ht-1 * Rc^T),
// Ct = ft . Ct-1 + it . ct, ot = f(xw_o + Ht-1 * Ro^T + Po . Ct), Ht = ot . h(Ct).
absl::StatusOr<State> LstmStep(ConvertContext& ctx, const Operands& ops, const DirectionWeights& dw,
                               const Expr& xw, const State& prev) {
  const int64_t h = ops.hidden;
  const Activation& f = dw.acts[0];
  const Activation& g = dw.acts[1];
  const Activation& act_h = dw.acts[2];
  TETHER_ASSIGN_OR_RETURN(Expr hr, ctx.EmitOp("relax.matmul", {prev.h, dw.rt}));
  TETHER_ASSIGN_OR_RETURN(Expr gates, Add(ctx, xw, hr));
  // The pre-activation of gate k (i, o, f, c), plus peephole . cell when given.
  auto pre = [&](int64_t k, const std::optional<Expr>& peephole,
                 const Expr& cell) -> absl::StatusOr<Expr> {
    TETHER_ASSIGN_OR_RETURN(Expr x, Slice(ctx, gates, 2, k * h, (k + 1) * h));
    if (!peephole.has_value()) return x;
    TETHER_ASSIGN_OR_RETURN(Expr pc, Mul(ctx, *peephole, cell));
    return Add(ctx, x, pc);
  };
  TETHER_ASSIGN_OR_RETURN(Expr i_pre, pre(0, dw.p_i, prev.c));
  TETHER_ASSIGN_OR_RETURN(Expr i, Gate(ctx, ops, f, i_pre));
  Expr forget;
  if (ops.input_forget) {
    TETHER_ASSIGN_OR_RETURN(forget, OneMinus(ctx, ops, i));
  } else {
    TETHER_ASSIGN_OR_RETURN(Expr f_pre, pre(2, dw.p_f, prev.c));
    TETHER_ASSIGN_OR_RETURN(forget, Gate(ctx, ops, f, f_pre));
  }
  TETHER_ASSIGN_OR_RETURN(Expr c_pre, pre(3, std::nullopt, prev.c));
  TETHER_ASSIGN_OR_RETURN(Expr c, Gate(ctx, ops, g, c_pre));
  TETHER_ASSIGN_OR_RETURN(Expr kept, Mul(ctx, forget, prev.c));
  TETHER_ASSIGN_OR_RETURN(Expr added, Mul(ctx, i, c));
  TETHER_ASSIGN_OR_RETURN(Expr cell, Add(ctx, kept, added));
  TETHER_ASSIGN_OR_RETURN(Expr o_pre, pre(1, dw.p_o, cell));
  TETHER_ASSIGN_OR_RETURN(Expr o, Gate(ctx, ops, f, o_pre));
  TETHER_ASSIGN_OR_RETURN(Expr hc, Activate(ctx, ops, act_h, cell));
  TETHER_ASSIGN_OR_RETURN(Expr next, Mul(ctx, o, hc));
  return State{next, cell};
}

// ---- The node ----

ConvertResult ConvertRecurrent(ConvertContext& ctx, Cell cell) {
  TETHER_ASSIGN_OR_RETURN(Operands ops, ReadOperands(ctx, cell));
  const int64_t gh = ops.gate_width();
  TETHER_ASSIGN_OR_RETURN(Expr xw_all, EmitInputProjection(ctx, ops));
  TETHER_ASSIGN_OR_RETURN(Expr rt_all, Permute(ctx, ops.r, {0, 2, 1}));
  TETHER_ASSIGN_OR_RETURN(Expr zero, ScalarConstant(ops.dtype, 0));
  // masks[t]: [1, batch, 1], whether step t is within each batch element's
  // length (shared by the directions).
  std::vector<Expr> masks;
  if (ops.lens.has_value()) {
    for (int64_t t = 0; t < ops.seq; ++t) {
      TETHER_ASSIGN_OR_RETURN(Expr step, ScalarConstant(ops.lens_dtype, static_cast<double>(t)));
      TETHER_ASSIGN_OR_RETURN(Expr m, ctx.EmitOp("relax.less", {step, *ops.lens}));
      masks.push_back(m);
    }
  }
  std::vector<Expr> ys, hs, cs;
  for (int64_t d = 0; d < ops.dirs; ++d) {
    TETHER_ASSIGN_OR_RETURN(DirectionWeights dw, ReadDirection(ctx, ops, rt_all, d));
    State state;
    TETHER_ASSIGN_OR_RETURN(state.h, InitialState(ctx, ops, ops.h0, d));
    if (cell == Cell::kLstm) {
      TETHER_ASSIGN_OR_RETURN(state.c, InitialState(ctx, ops, ops.c0, d));
    }
    // The direction's projections, split into steps by one operator: every
    // step's cell then reads its own tensor, so the steps' kernels are
    // identical (one kernel, deduplicated, not one per step offset).
    Expr xw_d = xw_all;
    if (ops.dirs > 1) {
      TETHER_ASSIGN_OR_RETURN(xw_d, Slice(ctx, xw_all, 2, d * gh, (d + 1) * gh));
    }
    Expr steps = xw_d;
    if (ops.seq > 1) {
      TETHER_ASSIGN_OR_RETURN(
          steps, ctx.EmitOp("relax.split", {xw_d},
                            {{"indices_or_sections", AttrValue(ops.seq)}, {"axis", int64_t{0}}}));
    }
    std::vector<Expr> y(static_cast<size_t>(ops.seq));
    for (int64_t k = 0; k < ops.seq; ++k) {
      const int64_t t = ops.reversed(d) ? ops.seq - 1 - k : k;
      Expr xw = steps;
      if (ops.seq > 1) {
        TETHER_ASSIGN_OR_RETURN(xw, ctx.Emit(MakeTupleGetItem(steps, static_cast<int>(t))));
      }
      absl::StatusOr<State> next = cell == Cell::kRnn   ? RnnStep(ctx, ops, dw, xw, state)
                                   : cell == Cell::kGru ? GruStep(ctx, ops, dw, xw, state)
                                                        : LstmStep(ctx, ops, dw, xw, state);
      if (!next.ok()) return next.status();
      const size_t at = static_cast<size_t>(t);
      if (masks.empty()) {
        y[at] = next->h;
      } else {
        const Expr& m = masks[at];
        TETHER_ASSIGN_OR_RETURN(y[at], ctx.EmitOp("relax.where", {m, next->h, zero}));
        TETHER_ASSIGN_OR_RETURN(next->h, ctx.EmitOp("relax.where", {m, next->h, state.h}));
        if (cell == Cell::kLstm) {
          TETHER_ASSIGN_OR_RETURN(next->c, ctx.EmitOp("relax.where", {m, next->c, state.c}));
        }
      }
      state = *std::move(next);
    }
    TETHER_ASSIGN_OR_RETURN(Expr yd, Concat(ctx, std::move(y), 0));  // [seq, batch, hidden]
    TETHER_ASSIGN_OR_RETURN(yd, ExpandDims(ctx, yd, {1}));
    ys.push_back(yd);
    hs.push_back(state.h);
    if (cell == Cell::kLstm) cs.push_back(state.c);
  }
  // Y [seq, dirs, batch, hidden], Y_h and Y_c [dirs, batch, hidden]; with
  // layout=1 [batch, seq, dirs, hidden] and [batch, dirs, hidden].
  std::vector<Expr> outs(cell == Cell::kLstm ? 3 : 2);
  TETHER_ASSIGN_OR_RETURN(outs[0], Concat(ctx, std::move(ys), 1));
  TETHER_ASSIGN_OR_RETURN(outs[1], Concat(ctx, std::move(hs), 0));
  if (cell == Cell::kLstm) {
    TETHER_ASSIGN_OR_RETURN(outs[2], Concat(ctx, std::move(cs), 0));
  }
  if (ops.batch_major) {
    TETHER_ASSIGN_OR_RETURN(outs[0], Permute(ctx, outs[0], {2, 0, 1, 3}));
    for (size_t k = 1; k < outs.size(); ++k) {
      TETHER_ASSIGN_OR_RETURN(outs[k], Permute(ctx, outs[k], {1, 0, 2}));
    }
  }
  // Y is emitted even when only Y_h is read (it holds output 0's place);
  // dead code elimination drops what no output reads.
  std::vector<OnnxValue> result;
  for (size_t k = 0; k < outs.size() && static_cast<int>(k) < ctx.node().output_size(); ++k) {
    result.push_back(OnnxValue::Of(outs[k]));
  }
  return result;
}

}  // namespace

void RegisterRecurrentConverters() {
  RegisterConverter("RNN", 7,
                    [](ConvertContext& ctx) { return ConvertRecurrent(ctx, Cell::kRnn); });
  RegisterConverter("GRU", 7,
                    [](ConvertContext& ctx) { return ConvertRecurrent(ctx, Cell::kGru); });
  RegisterConverter("LSTM", 7,
                    [](ConvertContext& ctx) { return ConvertRecurrent(ctx, Cell::kLstm); });
}

}  // namespace tether::compiler::onnx_frontend
