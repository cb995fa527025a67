// Tests of the ONNX sequence converters (convert_sequence.cc): sequences
// built, edited and read at import time (Relax tuples), ConcatFromSequence
// and SplitToSequence run on the local VM against values computed here, and
// the errors for bad positions. Sequences and optionals of run-time
// structure: onnx_runtime_sequence_test.cc.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend::testing {
namespace {

using ::testing::HasSubstr;

// A float tensor of `shape` holding base, base + 1, ...
Tensor Iota(std::vector<int64_t> shape, float base) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(base + static_cast<float>(i));
  return MakeTensor<float>(shape, values);
}

Tensor Scalar64(int64_t v) { return MakeTensor<int64_t>({}, {v}); }

// Three distinct tensors of shape [2, 3]: A (0..5), B (10..15), C (20..25).
const Tensor& A() {
  static const Tensor* t = new Tensor(Iota({2, 3}, 0));
  return *t;
}
const Tensor& B() {
  static const Tensor* t = new Tensor(Iota({2, 3}, 10));
  return *t;
}
const Tensor& C() {
  static const Tensor* t = new Tensor(Iota({2, 3}, 20));
  return *t;
}

// A model with graph inputs a, b, c (the tensors above) and `nodes` after
// them; `positions` become initializers, output "out".
struct Node {
  std::string op;
  std::vector<std::string> inputs;
  std::string output;
  std::vector<::onnx::AttributeProto> attrs = {};
};

ModelBuilder SequenceModel(const std::vector<Node>& nodes,
                           const std::vector<std::pair<std::string, int64_t>>& positions,
                           const std::vector<std::string>& outputs = {"out"}) {
  ModelBuilder b(17);
  b.Input("a", A()).Input("b", B()).Input("c", C());
  for (const auto& [name, value] : positions) b.Initializer(name, Scalar64(value));
  for (const Node& n : nodes) b.Node(n.op, n.inputs, {n.output}, n.attrs, n.output + "_node");
  for (const std::string& o : outputs) b.Output(o);
  return b;
}

absl::StatusOr<std::vector<Tensor>> RunAbc(const ModelBuilder& b) {
  return RunModel(b.model(), {A(), B(), C()});
}

// ---- SequenceInsert ----

// Empty, insert a, insert b, insert c at `pos`, read back at `at`.
absl::StatusOr<std::vector<Tensor>> InsertThenAt(int64_t pos, int64_t at) {
  return RunAbc(SequenceModel({{"SequenceEmpty", {}, "s0"},
                               {"SequenceInsert", {"s0", "a"}, "s1"},
                               {"SequenceInsert", {"s1", "b"}, "s2"},
                               {"SequenceInsert", {"s2", "c", "pos"}, "s3"},
                               {"SequenceAt", {"s3", "at"}, "out"}},
                              {{"pos", pos}, {"at", at}}));
}

TEST(OnnxSequenceInsertTest, InsertsAtAPositivePosition) {
  // [a, b] insert c at 0 -> [c, a, b].
  auto out = InsertThenAt(0, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], C()));
  out = InsertThenAt(0, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], B()));
}

TEST(OnnxSequenceInsertTest, NegativePositionCountsFromTheBack) {
  // [a, b] insert c at -1 -> [a, c, b].
  auto out = InsertThenAt(-1, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], C()));
  out = InsertThenAt(-1, -1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], B()));
}

TEST(OnnxSequenceInsertTest, PositionEqualToLengthAppends) {
  auto out = InsertThenAt(2, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], C()));
}

TEST(OnnxSequenceInsertTest, DefaultPositionIsTheEnd) {
  auto out = RunAbc(SequenceModel({{"SequenceConstruct", {"a", "b"}, "s1"},
                                   {"SequenceInsert", {"s1", "c"}, "s2"},
                                   {"SequenceAt", {"s2", "at"}, "out"}},
                                  {{"at", -1}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], C()));
}

TEST(OnnxSequenceInsertTest, RejectsOutOfRangePosition) {
  for (int64_t pos : {3, -3}) {
    auto out = InsertThenAt(pos, 0);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("position " + std::to_string(pos) +
                                                  " is out of range for a sequence of 2"));
    EXPECT_THAT(out.status().message(), HasSubstr("SequenceInsert"));
  }
}

TEST(OnnxSequenceInsertTest, RejectsElementOfAnotherDtype) {
  ModelBuilder b(17);
  b.Input("a", A()).Input("i", MakeTensor<int64_t>({2}, {1, 2}));
  b.Node("SequenceConstruct", {"a"}, {"s"});
  b.Node("SequenceInsert", {"s", "i"}, {"s2"});
  b.Node("ConcatFromSequence", {"s2"}, {"out"}, {MakeIntAttr("axis", 0)});
  b.Output("out");
  auto imported = ImportOnnxBytes(b.Bytes());
  ASSERT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument) << imported.status();
  EXPECT_THAT(imported.status().message(), HasSubstr("is int64, the sequence holds float32"));
}

TEST(OnnxSequenceInsertTest, RunTimePositionIsReadWhenTheModelRuns) {
  ModelBuilder b(17);
  b.Input("a", A()).Input("b", B()).Input("pos", DataType::Int(64), {});
  b.Node("SequenceConstruct", {"a"}, {"s"});
  b.Node("SequenceInsert", {"s", "b", "pos"}, {"s2"}, {}, "ins");
  b.Node("ConcatFromSequence", {"s2"}, {"out"}, {MakeIntAttr("axis", 0)});
  b.Output("out");
  std::vector<float> b_then_a, a_then_b;
  for (int i = 0; i < 6; ++i) b_then_a.push_back(10 + i);
  for (int i = 0; i < 6; ++i) b_then_a.push_back(i);
  for (int i = 0; i < 6; ++i) a_then_b.push_back(i);
  for (int i = 0; i < 6; ++i) a_then_b.push_back(10 + i);
  for (auto [pos, want] :
       {std::pair{0, b_then_a}, std::pair{1, a_then_b}, std::pair{-1, b_then_a}}) {
    auto out = RunModel(b.model(), {A(), B(), Scalar64(pos)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({4, 3}, want))) << "pos " << pos;
  }
  // Past the end (a sequence of 1 takes positions -1 to 1): refused when it runs.
  auto out = RunModel(b.model(), {A(), B(), Scalar64(2)});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("vm.builtin.sequence_insert: position 2 is out of range for a sequence "
                        "of 1 tensors (valid: -1 to 1)"));
}

// ---- SequenceErase ----

absl::StatusOr<std::vector<Tensor>> EraseThenAt(std::optional<int64_t> pos, int64_t at) {
  std::vector<std::pair<std::string, int64_t>> positions = {{"at", at}};
  std::vector<std::string> erase_inputs = {"s1"};
  if (pos.has_value()) {
    positions.push_back({"pos", *pos});
    erase_inputs.push_back("pos");
  }
  return RunAbc(SequenceModel({{"SequenceConstruct", {"a", "b", "c"}, "s1"},
                               {"SequenceErase", erase_inputs, "s2"},
                               {"SequenceAt", {"s2", "at"}, "out"},
                               {"SequenceLength", {"s2"}, "len"}},
                              positions, {"out", "len"}));
}

TEST(OnnxSequenceEraseTest, ErasesAtPositiveAndNegativePositions) {
  auto out = EraseThenAt(0, 0);  // [b, c]
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], B()));
  EXPECT_TRUE(TensorsNear((*out)[1], Scalar64(2)));
  out = EraseThenAt(-2, 1);  // [a, c]
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], C()));
}

TEST(OnnxSequenceEraseTest, DefaultErasesTheLast) {
  auto out = EraseThenAt(std::nullopt, -1);  // [a, b]
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], B()));
  EXPECT_TRUE(TensorsNear((*out)[1], Scalar64(2)));
}

TEST(OnnxSequenceEraseTest, RejectsOutOfRangePosition) {
  for (int64_t pos : {3, -4}) {
    auto out = EraseThenAt(pos, 0);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("position " + std::to_string(pos) +
                                                  " is out of range for a sequence of 3"));
  }
}

TEST(OnnxSequenceEraseTest, RejectsEraseFromEmptySequence) {
  auto out = RunAbc(SequenceModel({{"SequenceEmpty", {}, "s0"},
                                   {"SequenceErase", {"s0"}, "s1"},
                                   {"SequenceLength", {"s1"}, "out"}},
                                  {}));
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("cannot erase from an empty sequence"));
}

// ---- SequenceAt, SequenceLength ----

TEST(OnnxSequenceAtTest, RejectsOutOfRangePosition) {
  auto out = RunAbc(SequenceModel(
      {{"SequenceConstruct", {"a", "b"}, "s"}, {"SequenceAt", {"s", "at"}, "out"}}, {{"at", 2}}));
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("position 2 is out of range for a sequence of 2 tensors (valid: -2 to 1)"));
}

TEST(OnnxSequenceAtTest, RejectsATensorAsTheSequence) {
  auto out = RunAbc(SequenceModel({{"SequenceAt", {"a", "at"}, "out"}}, {{"at", 0}}));
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("input 0 ('a') is not a sequence"));
}

TEST(OnnxSequenceLengthTest, CountsEmptyAndBuiltSequences) {
  auto out = RunAbc(SequenceModel({{"SequenceEmpty", {}, "e"},
                                   {"SequenceLength", {"e"}, "n0"},
                                   {"SequenceConstruct", {"a", "b", "c", "a"}, "s"},
                                   {"SequenceLength", {"s"}, "n4"}},
                                  {}, {"n0", "n4"}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(0)));
  EXPECT_TRUE(TensorsNear((*out)[1], Scalar64(4)));
}

// ---- ConcatFromSequence ----

// a, b, c (each [2, 3]) concatenated or stacked.
absl::StatusOr<std::vector<Tensor>> ConcatAbc(int64_t axis, int64_t new_axis) {
  return RunAbc(SequenceModel({{"SequenceConstruct", {"a", "b", "c"}, "s"},
                               {"ConcatFromSequence",
                                {"s"},
                                "out",
                                {MakeIntAttr("axis", axis), MakeIntAttr("new_axis", new_axis)}}},
                              {}));
}

// The element (i, j) of a (k = 0), b (1) or c (2).
float Elem(int k, int i, int j) { return static_cast<float>(10 * k + 3 * i + j); }

TEST(OnnxConcatFromSequenceTest, ConcatenatesAlongAnAxis) {
  auto out = ConcatAbc(1, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want;  // [2, 9]
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 3; ++k) {
      for (int j = 0; j < 3; ++j) want.push_back(Elem(k, i, j));
    }
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 9}, want)));
}

TEST(OnnxConcatFromSequenceTest, NewAxisStacksAtTheLastAxis) {
  auto out = ConcatAbc(-1, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want;  // [2, 3, 3]: out[i][j][k]
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) want.push_back(Elem(k, i, j));
    }
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 3, 3}, want)));
}

TEST(OnnxConcatFromSequenceTest, NewAxisAcceptsMinusRankMinusOne) {
  auto out = ConcatAbc(-3, 1);  // rank 2: -3 is the new front axis
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want;  // [3, 2, 3]
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) want.push_back(Elem(k, i, j));
    }
  }
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3, 2, 3}, want)));
}

TEST(OnnxConcatFromSequenceTest, RejectsAxisOutOfRange) {
  auto out = ConcatAbc(2, 0);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("axis 2 is out of range"));
  out = ConcatAbc(-4, 1);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("axis -4 is out of range"));
}

TEST(OnnxConcatFromSequenceTest, RejectsEmptySequence) {
  auto out = RunAbc(SequenceModel(
      {{"SequenceEmpty", {}, "s"}, {"ConcatFromSequence", {"s"}, "out", {MakeIntAttr("axis", 0)}}},
      {}));
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("concat of an empty sequence"));
}

// ---- SplitToSequence ----

// x: [2, 5] holding 0..9, split along axis 1 (`split` an initializer when
// given), with the sequence length and the elements at 0, 1 and -1 as outputs.
absl::StatusOr<std::vector<Tensor>> SplitX(std::optional<Tensor> split, int64_t keepdims) {
  ModelBuilder b(17);
  b.Input("x", DataType::Float(32), {"2", "5"});
  std::vector<std::string> inputs = {"x"};
  if (split.has_value()) {
    b.Initializer("split", *split);
    inputs.push_back("split");
  }
  b.Initializer("p0", Scalar64(0))
      .Initializer("p1", Scalar64(1))
      .Initializer("plast", Scalar64(-1));
  b.Node("SplitToSequence", inputs, {"s"},
         {MakeIntAttr("axis", -1), MakeIntAttr("keepdims", keepdims)});
  b.Node("SequenceLength", {"s"}, {"len"});
  b.Node("SequenceAt", {"s", "p0"}, {"e0"});
  b.Node("SequenceAt", {"s", "p1"}, {"e1"});
  b.Node("SequenceAt", {"s", "plast"}, {"elast"});
  b.Output("len").Output("e0").Output("e1").Output("elast");
  return RunModel(b.model(), {Iota({2, 5}, 0)});
}

TEST(OnnxSplitToSequenceTest, WithoutSplitMakesChunksOfOne) {
  auto out = SplitX(std::nullopt, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(5)));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2, 1}, {0, 5})));
  EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<float>({2, 1}, {1, 6})));
  EXPECT_TRUE(TensorsNear((*out)[3], MakeTensor<float>({2, 1}, {4, 9})));
}

TEST(OnnxSplitToSequenceTest, KeepdimsZeroSqueezesTheAxis) {
  auto out = SplitX(std::nullopt, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(5)));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2}, {0, 5})));
  EXPECT_TRUE(TensorsNear((*out)[3], MakeTensor<float>({2}, {4, 9})));
}

TEST(OnnxSplitToSequenceTest, ScalarSplitMakesEqualChunksAndASmallerLast) {
  // keepdims is ignored with a split input.
  auto out = SplitX(Scalar64(2), 0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(3)));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2, 2}, {0, 1, 5, 6})));
  EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<float>({2, 2}, {2, 3, 7, 8})));
  EXPECT_TRUE(TensorsNear((*out)[3], MakeTensor<float>({2, 1}, {4, 9})));
}

TEST(OnnxSplitToSequenceTest, ListSplitGivesThoseSizes) {
  auto out = SplitX(MakeTensor<int64_t>({3}, {1, 3, 1}), 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(3)));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2, 1}, {0, 5})));
  EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<float>({2, 3}, {1, 2, 3, 6, 7, 8})));
  EXPECT_TRUE(TensorsNear((*out)[3], MakeTensor<float>({2, 1}, {4, 9})));
}

TEST(OnnxSplitToSequenceTest, RejectsSizesThatDoNotSumToTheAxis) {
  auto out = SplitX(MakeTensor<int64_t>({2}, {1, 3}), 1);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("split sizes [1, 3] sum to 4, but axis 1 has size 5"));
}

TEST(OnnxSplitToSequenceTest, RejectsNonPositiveScalarSplit) {
  auto out = SplitX(Scalar64(0), 1);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("split 0 is not positive"));
}

TEST(OnnxSplitToSequenceTest, ListSplitWorksOnASymbolicDim) {
  ModelBuilder b(17);
  b.Input("x", DataType::Float(32), {"n"});
  b.Initializer("split", MakeTensor<int64_t>({3}, {1, 2, 3}));
  b.Initializer("p", Scalar64(1));
  b.Node("SplitToSequence", {"x", "split"}, {"s"});
  b.Node("SequenceLength", {"s"}, {"len"});
  b.Node("SequenceAt", {"s", "p"}, {"e1"});
  b.Output("len").Output("e1");
  auto out = RunModel(b.model(), {Iota({6}, 0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(3)));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({2}, {1, 2})));
}

TEST(OnnxSplitToSequenceTest, RunTimeSplitGivesARunTimeSequence) {
  ModelBuilder b(17);
  b.Input("x", DataType::Float(32), {"6"}).Input("split", DataType::Int(64), {"3"});
  b.Initializer("p", Scalar64(2));
  b.Node("SplitToSequence", {"x", "split"}, {"s"}, {}, "sts");
  b.Node("SequenceLength", {"s"}, {"len"});
  b.Node("SequenceAt", {"s", "p"}, {"last"});
  b.Output("len").Output("last");
  auto out = RunModel(b.model(), {Iota({6}, 0), MakeTensor<int64_t>({3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(3)));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({3}, {3, 4, 5})));
  // Sizes that do not sum to the axis, or a negative one: refused when it runs.
  for (const auto& [split, what] :
       {std::pair{std::vector<int64_t>{1, 1, 1}, "split sizes sum to 3, but axis 0 has size 6"},
        std::pair{std::vector<int64_t>{-1, 4, 3}, "split size -1 is negative"}}) {
    auto bad = RunModel(b.model(), {Iota({6}, 0), MakeTensor<int64_t>({3}, split)});
    ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
    EXPECT_THAT(bad.status().message(), HasSubstr(what));
  }
}

// Chunks of 1 along an axis of symbolic size, squeezed: as many scalars as
// the axis is long, however long it is.
TEST(OnnxSplitToSequenceTest, ChunksOfASymbolicAxis) {
  ModelBuilder b(17);
  b.Input("x", DataType::Float(32), {"n"});
  b.Initializer("p", Scalar64(-1));
  b.Node("SplitToSequence", {"x"}, {"s"}, {MakeIntAttr("keepdims", 0)});
  b.Node("SequenceLength", {"s"}, {"len"});
  b.Node("SequenceAt", {"s", "p"}, {"last"});
  b.Output("len").Output("last");
  for (int64_t n : {1, 4}) {
    auto out = RunModel(b.model(), {Iota({n}, 10)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsNear((*out)[0], Scalar64(n)));
    EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({}, {static_cast<float>(9 + n)})));
  }
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
