// The recurrent converters (convert_recurrent.cc): RNN, GRU and LSTM in
// every direction, with per-batch sequence_lens (fed at run time and as a
// constant), initial states, LSTM peepholes and input_forget, GRU's
// linear_before_reset, clip, custom activations with alpha/beta, layout=1,
// float32 and float64, a symbolic batch, and the errors for a symbolic
// sequence length and malformed nodes. The expected values come from
// Reference below, a direct transcription of the ONNX equations run per
// batch element (a reverse pass starts at the element's last valid step,
// steps past its length write zeros, as onnxruntime does), in double,
// through the whole stack on the local VM.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "compiler/build.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

::onnx::AttributeProto MakeStringsAttr(const std::string& name, const std::vector<std::string>& v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::STRINGS);
  for (const std::string& s : v) a.add_strings(s);
  return a;
}

// One node's inputs and attributes. Tensors are time-major ([seq, batch,
// input] and [dirs, batch, hidden]) whatever the layout; the model gets them
// batch-major under layout=1.
struct RecurrentCase {
  std::string op;  // RNN, GRU or LSTM
  int64_t seq = 3, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  int64_t layout = 0;
  std::vector<double> x, w, r;
  std::optional<std::vector<double>> b, h0, c0, p;
  std::optional<std::vector<int32_t>> lens;
  bool lens_constant = false;  // an initializer rather than a graph input
  std::vector<std::string> activations;
  std::vector<float> alphas, betas;
  std::optional<float> clip;
  bool linear_before_reset = false;
  bool input_forget = false;
  DataType dtype = DataType::Float(32);  // of X, W, R, B, the states and P

  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t gates() const { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }
};

std::vector<double> Random(std::mt19937& rng, int64_t n, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& e : v) e = static_cast<float>(u(rng));  // exactly representable in float
  return v;
}

// X, W and R of random values in [-1, 1) (weights in [-0.5, 0.5)).
RecurrentCase MakeCase(const std::string& op, const std::string& direction, uint32_t seed,
                       int64_t seq = 3, int64_t batch = 2) {
  RecurrentCase c;
  c.op = op;
  c.direction = direction;
  c.seq = seq;
  c.batch = batch;
  std::mt19937 rng(seed);
  const int64_t gh = c.gates() * c.hidden;
  c.x = Random(rng, c.seq * c.batch * c.input);
  c.w = Random(rng, c.dirs() * gh * c.input, 0.5);
  c.r = Random(rng, c.dirs() * gh * c.hidden, 0.5);
  return c;
}

void AddBias(RecurrentCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  c.b = Random(rng, c.dirs() * 2 * c.gates() * c.hidden, 0.5);
}

void AddInitialStates(RecurrentCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  c.h0 = Random(rng, c.dirs() * c.batch * c.hidden);
  if (c.op == "LSTM") c.c0 = Random(rng, c.dirs() * c.batch * c.hidden);
}

// ---- Reference ----

struct Act {
  std::string op;
  double alpha = 0, beta = 0;
};

double Apply(const Act& a, double x) {
  if (a.op == "Relu") return std::max(0.0, x);
  if (a.op == "Tanh") return std::tanh(x);
  if (a.op == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (a.op == "Affine") return a.alpha * x + a.beta;
  if (a.op == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (a.op == "ThresholdedRelu") return x > a.alpha ? x : 0;
  if (a.op == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  if (a.op == "HardSigmoid") return std::min(std::max(a.alpha * x + a.beta, 0.0), 1.0);
  if (a.op == "Elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1);
  if (a.op == "Softsign") return x / (1 + std::fabs(x));
  if (a.op == "Softplus") return std::log1p(std::exp(x));
  ADD_FAILURE() << "unknown activation " << a.op;
  return 0;
}

// The activation `name` spelled as the ONNX spec does (names match
// regardless of case).
std::string Canonical(const std::string& name) {
  for (const char* op : {"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu",
                         "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"}) {
    if (absl::EqualsIgnoreCase(name, op)) return op;
  }
  return name;
}

// The activations of direction d: the case's names (or the defaults), alpha
// and beta consumed in order by the activations that take them, with the
// ONNX operators' defaults.
std::vector<Act> Activations(const RecurrentCase& c, int64_t d) {
  std::vector<std::string> names = c.activations;
  const size_t per = c.op == "RNN" ? 1 : c.op == "GRU" ? 2 : 3;
  if (names.empty()) {
    names = c.op == "RNN"   ? std::vector<std::string>{"Tanh"}
            : c.op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  }
  size_t ai = 0, bi = 0;
  std::vector<Act> all;
  for (const std::string& name : names) {
    const std::string n = Canonical(name);
    Act a{n};
    const bool has_alpha = n == "Affine" || n == "LeakyRelu" || n == "ThresholdedRelu" ||
                           n == "ScaledTanh" || n == "HardSigmoid" || n == "Elu";
    const bool has_beta = n == "Affine" || n == "ScaledTanh" || n == "HardSigmoid";
    a.alpha = n == "LeakyRelu" ? 0.01 : n == "HardSigmoid" ? 0.2 : 1.0;
    a.beta = n == "HardSigmoid" ? 0.5 : n == "ScaledTanh" ? 1.0 : 0.0;
    if (has_alpha && ai < c.alphas.size()) a.alpha = c.alphas[ai++];
    if (has_beta && bi < c.betas.size()) a.beta = c.betas[bi++];
    all.push_back(a);
  }
  const size_t first = all.size() == per ? 0 : per * static_cast<size_t>(d);
  return std::vector<Act>(all.begin() + first, all.begin() + first + per);
}

struct Outputs {
  std::vector<double> y, y_h, y_c;  // [seq, dirs, batch, hidden], [dirs, batch, hidden]
};

Outputs Reference(const RecurrentCase& c) {
  const int64_t S = c.seq, B = c.batch, I = c.input, H = c.hidden, D = c.dirs(), G = c.gates();
  Outputs out;
  out.y.assign(static_cast<size_t>(S * D * B * H), 0.0);
  out.y_h.assign(static_cast<size_t>(D * B * H), 0.0);
  out.y_c.assign(out.y_h.size(), 0.0);
  auto clip = [&](double v) {
    return c.clip.has_value() ? std::min(std::max(v, -double{*c.clip}), double{*c.clip}) : v;
  };
  for (int64_t d = 0; d < D; ++d) {
    const std::vector<Act> act = Activations(c, d);
    const bool reverse = c.direction == "reverse" || d == 1;
    // Row k of W[d] . x, R[d] . h, and the biases Wb[d][k], Rb[d][k].
    auto wx = [&](int64_t k, const double* x) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += c.w[(d * G * H + k) * I + i] * x[i];
      return s;
    };
    auto rh = [&](int64_t k, const std::vector<double>& h) {
      double s = 0;
      for (int64_t i = 0; i < H; ++i) s += c.r[(d * G * H + k) * H + i] * h[i];
      return s;
    };
    auto wb = [&](int64_t k) { return c.b ? (*c.b)[d * 2 * G * H + k] : 0.0; };
    auto rb = [&](int64_t k) { return c.b ? (*c.b)[d * 2 * G * H + G * H + k] : 0.0; };
    for (int64_t n = 0; n < B; ++n) {
      const int64_t len = c.lens ? (*c.lens)[n] : S;
      std::vector<double> h(H, 0.0), cell(H, 0.0);
      for (int64_t j = 0; j < H; ++j) {
        if (c.h0) h[j] = (*c.h0)[(d * B + n) * H + j];
        if (c.c0) cell[j] = (*c.c0)[(d * B + n) * H + j];
      }
      for (int64_t k = 0; k < len; ++k) {
        const int64_t t = reverse ? len - 1 - k : k;
        const double* x = &c.x[(t * B + n) * I];
        std::vector<double> nh(H), nc(H);
        for (int64_t j = 0; j < H; ++j) {
          if (c.op == "RNN") {
            nh[j] = Apply(act[0], clip(wx(j, x) + rh(j, h) + wb(j) + rb(j)));
          } else if (c.op == "GRU") {
            const double z = Apply(act[0], clip(wx(j, x) + rh(j, h) + wb(j) + rb(j)));
            auto r_of = [&](int64_t q) {
              return Apply(act[0], clip(wx(H + q, x) + rh(H + q, h) + wb(H + q) + rb(H + q)));
            };
            double pre = wx(2 * H + j, x) + wb(2 * H + j);
            if (c.linear_before_reset) {
              pre += r_of(j) * (rh(2 * H + j, h) + rb(2 * H + j));
            } else {
              std::vector<double> reset(H);
              for (int64_t q = 0; q < H; ++q) reset[q] = r_of(q) * h[q];
              pre += rh(2 * H + j, reset) + rb(2 * H + j);
            }
            const double ht = Apply(act[1], clip(pre));
            nh[j] = (1 - z) * ht + z * h[j];
          } else {
            auto peep = [&](int64_t q) { return c.p ? (*c.p)[d * 3 * H + q * H + j] : 0.0; };
            auto pre = [&](int64_t q) {
              return wx(q * H + j, x) + rh(q * H + j, h) + wb(q * H + j) + rb(q * H + j);
            };
            const double i = Apply(act[0], clip(pre(0) + peep(0) * cell[j]));
            const double f =
                c.input_forget ? 1 - i : Apply(act[0], clip(pre(2) + peep(2) * cell[j]));
            const double g = Apply(act[1], clip(pre(3)));
            nc[j] = f * cell[j] + i * g;
            const double o = Apply(act[0], clip(pre(1) + peep(1) * nc[j]));
            nh[j] = o * Apply(act[2], nc[j]);
          }
        }
        h = nh;
        if (c.op == "LSTM") cell = nc;
        for (int64_t j = 0; j < H; ++j) out.y[((t * D + d) * B + n) * H + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        out.y_h[(d * B + n) * H + j] = h[j];
        out.y_c[(d * B + n) * H + j] = cell[j];
      }
    }
  }
  return out;
}

// ---- Running a case ----

// A [a, b, rest] row-major array with its first two dims swapped.
std::vector<double> SwapLeading(const std::vector<double>& v, int64_t a, int64_t b) {
  const int64_t rest = static_cast<int64_t>(v.size()) / (a * b);
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::copy_n(v.begin() + (i * b + j) * rest, rest, out.begin() + (j * a + i) * rest);
    }
  }
  return out;
}

// A tensor of the case's dtype.
Tensor Make(const RecurrentCase& c, std::vector<int64_t> shape, const std::vector<double>& v) {
  return MakeTensorOf(c.dtype, std::move(shape), v);
}

std::vector<NodeInput> Inputs(const RecurrentCase& c) {
  const int64_t S = c.seq, B = c.batch, D = c.dirs(), GH = c.gates() * c.hidden, H = c.hidden;
  const bool bm = c.layout == 1;
  std::vector<NodeInput> in{In("x", bm ? Make(c, {B, S, c.input}, SwapLeading(c.x, S, B))
                                       : Make(c, {S, B, c.input}, c.x)),
                            In("w", Make(c, {D, GH, c.input}, c.w)),
                            In("r", Make(c, {D, GH, H}, c.r))};
  in.push_back(c.b ? In("b", Make(c, {D, 2 * GH}, *c.b)) : Absent());
  if (c.lens) {
    Tensor t = MakeTensor<int32_t>({B}, *c.lens);
    in.push_back(c.lens_constant ? Init("lens", t) : In("lens", t));
  } else {
    in.push_back(Absent());
  }
  auto state = [&](const std::string& name, const std::optional<std::vector<double>>& s) {
    if (!s) return Absent();
    return In(name, bm ? Make(c, {B, D, H}, SwapLeading(*s, D, B)) : Make(c, {D, B, H}, *s));
  };
  in.push_back(state("h0", c.h0));
  if (c.op == "LSTM") {
    in.push_back(state("c0", c.c0));
    in.push_back(c.p ? In("p", Make(c, {D, 3 * H}, *c.p)) : Absent());
  }
  while (in.back().name.empty()) in.pop_back();
  return in;
}

std::vector<::onnx::AttributeProto> Attrs(const RecurrentCase& c) {
  std::vector<::onnx::AttributeProto> attrs{MakeIntAttr("hidden_size", c.hidden),
                                            MakeStringAttr("direction", c.direction)};
  if (c.layout != 0) attrs.push_back(MakeIntAttr("layout", c.layout));
  if (!c.activations.empty()) attrs.push_back(MakeStringsAttr("activations", c.activations));
  if (!c.alphas.empty()) attrs.push_back(MakeFloatsAttr("activation_alpha", c.alphas));
  if (!c.betas.empty()) attrs.push_back(MakeFloatsAttr("activation_beta", c.betas));
  if (c.clip) attrs.push_back(MakeFloatAttr("clip", *c.clip));
  if (c.linear_before_reset) attrs.push_back(MakeIntAttr("linear_before_reset", 1));
  if (c.input_forget) attrs.push_back(MakeIntAttr("input_forget", 1));
  return attrs;
}

int NumOutputs(const RecurrentCase& c) { return c.op == "LSTM" ? 3 : 2; }

// The reference outputs as tensors of the case's layout.
std::vector<Tensor> Expected(const RecurrentCase& c) {
  const Outputs ref = Reference(c);
  const int64_t S = c.seq, B = c.batch, D = c.dirs(), H = c.hidden;
  std::vector<Tensor> out;
  if (c.layout == 1) {
    // [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden].
    std::vector<double> y(ref.y.size());
    for (int64_t t = 0; t < S; ++t)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t n = 0; n < B; ++n)
          for (int64_t j = 0; j < H; ++j)
            y[((n * S + t) * D + d) * H + j] = ref.y[((t * D + d) * B + n) * H + j];
    out.push_back(Make(c, {B, S, D, H}, y));
    out.push_back(Make(c, {B, D, H}, SwapLeading(ref.y_h, D, B)));
    out.push_back(Make(c, {B, D, H}, SwapLeading(ref.y_c, D, B)));
  } else {
    out.push_back(Make(c, {S, D, B, H}, ref.y));
    out.push_back(Make(c, {D, B, H}, ref.y_h));
    out.push_back(Make(c, {D, B, H}, ref.y_c));
  }
  out.resize(static_cast<size_t>(NumOutputs(c)));
  return out;
}

// Runs the case's node (opset 14) and checks every output against Reference.
void ExpectMatchesReference(const RecurrentCase& c, int opset = 14) {
  const std::vector<NodeInput> inputs = Inputs(c);
  auto out = RunNode(c.op, inputs, Attrs(c), NumOutputs(c), opset);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<Tensor> want = Expected(c);
  ASSERT_EQ(out->size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_TRUE(TensorsNear((*out)[k], want[k], 1e-4, 1e-5)) << "output " << k;
  }
}

// ---- LSTM ----

// Bidirectional, 4 steps, lengths 4, 2 and 1 fed at run time, with
// initial states, peepholes and biases.
RecurrentCase BidirectionalLstmWithLengths(uint32_t seed) {
  RecurrentCase c = MakeCase("LSTM", "bidirectional", seed, 4, 3);
  AddBias(c, seed + 1);
  AddInitialStates(c, seed + 2);
  std::mt19937 rng(seed + 3);
  c.p = Random(rng, c.dirs() * 3 * c.hidden, 0.5);
  c.lens = std::vector<int32_t>{4, 2, 1};
  return c;
}

TEST(OnnxRecurrentTest, BidirectionalLstmWithRunTimeSequenceLens) {
  RecurrentCase c = BidirectionalLstmWithLengths(11);
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, StepsPastASequenceLengthWriteZerosAndKeepTheState) {
  RecurrentCase c = BidirectionalLstmWithLengths(12);
  auto out = RunNode(c.op, Inputs(c), Attrs(c), 3);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> y = ReadTensor<float>((*out)[0]);    // [4, 2, 3, 4]
  const std::vector<float> y_h = ReadTensor<float>((*out)[1]);  // [2, 3, 4]
  // Batch element 1 has length 2: steps 2 and 3 are zero in both directions.
  for (int64_t t = 2; t < 4; ++t) {
    for (int64_t d = 0; d < 2; ++d) {
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(y[((t * 2 + d) * 3 + 1) * 4 + j], 0.0f);
    }
  }
  // Its forward Y_h is Y at its last valid step; the reverse one Y at step 0.
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(y_h[(0 * 3 + 1) * 4 + j], y[((1 * 2 + 0) * 3 + 1) * 4 + j]);
    EXPECT_EQ(y_h[(1 * 3 + 1) * 4 + j], y[((0 * 2 + 1) * 3 + 1) * 4 + j]);
  }
}

TEST(OnnxRecurrentTest, ConstantSequenceLensMatchRunTimeOnes) {
  RecurrentCase c = BidirectionalLstmWithLengths(13);
  c.lens_constant = true;
  ExpectMatchesReference(c);
  // Full lengths emit no mask and give the unmasked result.
  c.lens = std::vector<int32_t>{4, 4, 4};
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, ZeroLengthKeepsTheInitialState) {
  RecurrentCase c = BidirectionalLstmWithLengths(14);
  c.lens = std::vector<int32_t>{0, 3, 4};
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, LstmLayout1WithStatesAndLengths) {
  RecurrentCase c = BidirectionalLstmWithLengths(15);
  c.layout = 1;
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, LstmClipAndInputForget) {
  RecurrentCase c = MakeCase("LSTM", "reverse", 16);
  AddBias(c, 17);
  AddInitialStates(c, 18);
  c.clip = 0.3f;
  c.input_forget = true;
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, LstmActivationsWithAlphaAndBeta) {
  RecurrentCase c = MakeCase("LSTM", "bidirectional", 19);
  AddBias(c, 20);
  // Forward f, g, h: HardSigmoid(0.3, 0.4), LeakyRelu(0.2), Softsign;
  // reverse: Sigmoid, Elu(0.7), Affine(0.5, 0.1).
  c.activations = {"HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "Elu", "Affine"};
  c.alphas = {0.3f, 0.2f, 0.7f, 0.5f};
  c.betas = {0.4f, 0.1f};
  ExpectMatchesReference(c);
  // With the alphas and betas left out, each takes its ONNX default; names
  // match regardless of case.
  c.alphas.clear();
  c.betas.clear();
  c.activations = {"scaledtanh", "ThresholdedRelu", "HARDSIGMOID", "tanh", "Relu", "Elu"};
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, LstmAtOpset7) {
  RecurrentCase c = MakeCase("LSTM", "forward", 21);
  AddBias(c, 22);
  ExpectMatchesReference(c, 7);
}

// ---- GRU ----

TEST(OnnxRecurrentTest, GruLinearBeforeResetBidirectionalWithLengths) {
  RecurrentCase c = MakeCase("GRU", "bidirectional", 31);
  AddBias(c, 32);
  AddInitialStates(c, 33);
  c.linear_before_reset = true;
  c.lens = std::vector<int32_t>{1, 3};
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, GruInDoubleWithLengths) {
  RecurrentCase c = MakeCase("GRU", "bidirectional", 38);
  AddBias(c, 39);
  c.dtype = DataType::Float(64);
  c.lens = std::vector<int32_t>{3, 2};
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, GruResetBeforeLinearReverse) {
  RecurrentCase c = MakeCase("GRU", "reverse", 34);
  AddBias(c, 35);
  AddInitialStates(c, 36);
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, GruLinearBeforeResetWithoutBiasLayout1Clip) {
  RecurrentCase c = MakeCase("GRU", "forward", 37);
  c.linear_before_reset = true;
  c.layout = 1;
  c.clip = 0.5f;
  ExpectMatchesReference(c);
}

// ---- RNN ----

TEST(OnnxRecurrentTest, RnnPerDirectionActivations) {
  RecurrentCase c = MakeCase("RNN", "bidirectional", 41);
  AddBias(c, 42);
  AddInitialStates(c, 43);
  c.activations = {"Relu", "ThresholdedRelu"};
  c.alphas = {0.1f};
  c.lens = std::vector<int32_t>{2, 3};
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, RnnOneActivationListServesBothDirections) {
  RecurrentCase c = MakeCase("RNN", "bidirectional", 44);
  c.activations = {"Softplus"};
  ExpectMatchesReference(c);
}

// ---- Shapes and outputs ----

// The steps read their projections from one split, so their kernels are
// identical and emitted once: the lowered module has as many step-matmul
// kernels for 12 steps as for 2 (not one per step offset).
TEST(OnnxRecurrentTest, StepsShareTheirKernels) {
  auto step_kernels = [](int64_t steps) -> int {
    RecurrentCase c = MakeCase("LSTM", "forward", 53, steps, 2);
    absl::StatusOr<ImportedModel> imported =
        ImportNode(c.op, Inputs(c), Attrs(c), NumOutputs(c), 14);
    EXPECT_TRUE(imported.ok()) << imported.status();
    if (!imported.ok()) return -1;
    absl::StatusOr<std::string> ir = EmitLoweredIR(imported->module, BuildOptions());
    EXPECT_TRUE(ir.ok()) << ir.status();
    if (!ir.ok()) return -1;
    int n = 0;
    for (size_t at = ir->find("def fused_"); at != std::string::npos;
         at = ir->find("def fused_", at + 1)) {
      const size_t end = ir->find('(', at);
      if (ir->substr(at, end - at).find("matmul") != std::string::npos) ++n;
    }
    return n;
  };
  const int two = step_kernels(2);
  EXPECT_GT(two, 0);
  EXPECT_EQ(step_kernels(12), two);
  RecurrentCase c = MakeCase("LSTM", "forward", 54, 12, 2);
  ExpectMatchesReference(c);
}

TEST(OnnxRecurrentTest, SymbolicBatch) {
  RecurrentCase c = BidirectionalLstmWithLengths(51);
  std::vector<NodeInput> inputs = Inputs(c);
  ModelBuilder m(14);
  std::vector<std::string> names;
  for (const NodeInput& in : inputs) {
    names.push_back(in.name);
    if (in.name.empty()) continue;
    std::vector<std::string> dims = DimsOf(in.value);
    if (in.name == "x") dims[1] = "batch";
    if (in.name == "lens") dims[0] = "batch";
    if (in.name == "h0" || in.name == "c0") dims[1] = "batch";
    m.Input(in.name, in.value->dtype(), dims);
  }
  m.Node("LSTM", names, {"y", "y_h", "y_c"}, Attrs(c), "lstm");
  m.Output("y").Output("y_h").Output("y_c");
  auto out = RunModel(m.model(), RuntimeInputs(inputs));
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<Tensor> want = Expected(c);
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_TRUE(TensorsNear((*out)[k], want[k], 1e-4, 1e-5)) << "output " << k;
  }
}

TEST(OnnxRecurrentTest, OnlyYhRead) {
  RecurrentCase c = MakeCase("GRU", "forward", 52);
  std::vector<NodeInput> inputs = Inputs(c);
  ModelBuilder m(14);
  for (const NodeInput& in : inputs) m.Input(in.name, in.value);
  m.Node("GRU", {"x", "w", "r"}, {"", "y_h"}, Attrs(c), "gru").Output("y_h");
  auto out = RunModel(m.model(), RuntimeInputs(inputs));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_TRUE(TensorsNear((*out)[0], Expected(c)[1], 1e-4, 1e-5));
}

// ---- Errors ----

TEST(OnnxRecurrentTest, RejectsSymbolicSequenceLength) {
  RecurrentCase c = MakeCase("LSTM", "forward", 61);
  ModelBuilder m(14);
  m.Input("x", DataType::Float(32), {"seq", "2", "3"})
      .Input("w", DataType::Float(32), {"1", "16", "3"})
      .Input("r", DataType::Float(32), {"1", "16", "4"})
      .Node("LSTM", {"x", "w", "r"}, {"y"}, Attrs(c), "encoder")
      .Output("y");
  auto imported = ImportOnnxBytes(m.Bytes());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(imported.status().message(),
              HasSubstr("node 'encoder' (LSTM, opset 14): the sequence length (dim 0 of X) is "
                        "'seq', not a constant"));
  EXPECT_THAT(imported.status().message(), HasSubstr("needs a static sequence length"));
}

TEST(OnnxRecurrentTest, RejectsMalformedNodes) {
  RecurrentCase c = MakeCase("GRU", "forward", 62);
  struct Bad {
    std::vector<::onnx::AttributeProto> attrs;
    int opset;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {{MakeIntAttr("hidden_size", 5)},
       14,
       "input 1 (W) has shape [1, 12, 3], expected [1, 15, 3]"},
      {{MakeStringAttr("direction", "sideways")}, 14, "direction 'sideways' is not one of"},
      {{MakeStringsAttr("activations", {"Sigmoid", "Gelu"})},
       14,
       "activation 'Gelu' is not one of Relu"},
      {{MakeStringsAttr("activations", {"Sigmoid", "Tanh", "Tanh"})},
       14,
       "activations has 3 names, expected 2"},
      {{MakeIntAttr("layout", 1)}, 13, "layout=1 needs opset 14"},
      {{MakeFloatAttr("clip", -1)}, 14, "clip -1 is not positive"},
  };
  for (const Bad& b : bad) {
    auto imported = ImportNode("GRU", Inputs(c), b.attrs, 2, b.opset);
    ASSERT_FALSE(imported.ok()) << b.message;
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument) << b.message;
    EXPECT_THAT(imported.status().message(), HasSubstr(b.message));
  }
}

TEST(OnnxRecurrentTest, RejectsOutOfRangeConstantSequenceLens) {
  RecurrentCase c = MakeCase("RNN", "forward", 63);
  c.lens = std::vector<int32_t>{3, 4};
  c.lens_constant = true;
  auto imported = ImportNode("RNN", Inputs(c), Attrs(c), 2);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(imported.status().message(), HasSubstr("sequence_lens[1] = 4 is outside [0, 3]"));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
