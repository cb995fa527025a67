// Sequences and optionals whose structure only the run time knows
// (convert_sequence.cc, control_flow.cc; the VM's runtime/vm/sequence_ops.cc):
// sequences and optionals as graph inputs and outputs, SequenceAt and
// ConcatFromSequence on them, SequenceMap, a sequence carried through a
// Loop, an If returning an empty or a full optional, and symbolic shapes
// used as data. One executable is built per model and run on several inputs.
#include <cstdint>
#include <memory>
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

const DataType kF32 = DataType::Float(32);

Tensor F32(std::vector<int64_t> shape, std::vector<float> v) { return MakeTensor<float>(shape, v); }
Tensor I64(int64_t v) { return MakeTensor<int64_t>({}, {v}); }
Tensor Bool(bool v) { return MakeBoolTensor({}, {v}); }

Value Seq(std::vector<Tensor> tensors) {
  return MakeTuple(std::vector<Value>(tensors.begin(), tensors.end()));
}

// A graph input or output: a sequence of tensors of `dtype` and `dims`.
::onnx::ValueInfoProto SeqInfo(const std::string& name, DataType dtype,
                               const std::vector<std::string>& dims) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  *v.mutable_type()->mutable_sequence_type()->mutable_elem_type() =
      MakeValueInfo("", dtype, dims).type();
  return v;
}

// An optional of `elem`'s type.
::onnx::ValueInfoProto OptInfo(const std::string& name, const ::onnx::ValueInfoProto& elem) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  *v.mutable_type()->mutable_optional_type()->mutable_elem_type() = elem.type();
  return v;
}

::onnx::AttributeProto GraphAttr(const std::string& name, const ModelBuilder& body) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::GRAPH);
  *a.mutable_g() = body.model().graph();
  return a;
}

// A model built once, run on any number of inputs.
class Compiled {
 public:
  explicit Compiled(const ModelBuilder& b) {
    absl::StatusOr<ImportedModel> imported = ImportOnnxBytes(b.Bytes());
    status_ = imported.status();
    if (!status_.ok()) return;
    absl::StatusOr<Ref<vm::Executable>> exec = Build(imported->module, BuildOptions());
    status_ = exec.status();
    if (!status_.ok()) return;
    absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> vm =
        vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
    status_ = vm.status();
    if (vm.ok()) vm_ = std::move(*vm);
  }
  const absl::Status& status() const { return status_; }
  absl::StatusOr<Value> Run(std::vector<Value> inputs) {
    if (!status_.ok()) return status_;
    return vm_->Invoke("main", inputs);
  }

 private:
  absl::Status status_;
  std::unique_ptr<vm::LocalVirtualMachine> vm_;
};

// The tensors of a sequence value.
std::vector<Tensor> Fields(const Value& v) {
  std::vector<Tensor> out;
  EXPECT_TRUE(v.is_tuple()) << v.TypeName();
  if (!v.is_tuple()) return out;
  for (const Value& f : v.AsRef<TupleObj>()->fields) {
    EXPECT_TRUE(f.is_tensor()) << f.TypeName();
    if (f.is_tensor()) out.push_back(Tensor(f.AsRef<TensorObj>()));
  }
  return out;
}

Tensor Field(const Value& tuple, size_t i) {
  return Tensor(tuple.AsRef<TupleObj>()->fields[i].AsRef<TensorObj>());
}

TEST(OnnxRunTimeSequenceTest, SequenceInputsAndOutputsOfAnyLength) {
  ModelBuilder b(17);
  *b.mutable_model().mutable_graph()->add_input() = SeqInfo("s", kF32, {"?"});
  b.Input("x", kF32, {"3"});
  b.Node("SequenceInsert", {"s", "x"}, {"s2"});
  b.Node("SequenceLength", {"s"}, {"n"});
  b.Output("s2").Output("n");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  const Tensor x = F32({3}, {7, 8, 9});

  auto out = model.Run({Seq({F32({2}, {1, 2}), F32({5}, {1, 2, 3, 4, 5})}), x});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> s2 = Fields(Value(out->AsRef<TupleObj>()->fields[0]));
  ASSERT_EQ(s2.size(), 3u);
  EXPECT_TRUE(TensorsNear(s2[0], F32({2}, {1, 2})));
  EXPECT_TRUE(TensorsNear(s2[1], F32({5}, {1, 2, 3, 4, 5})));
  EXPECT_TRUE(TensorsNear(s2[2], x));
  EXPECT_TRUE(TensorsNear(Field(*out, 1), I64(2)));

  // The same executable on an empty sequence.
  out = model.Run({Seq({}), x});
  ASSERT_TRUE(out.ok()) << out.status();
  s2 = Fields(Value(out->AsRef<TupleObj>()->fields[0]));
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_TRUE(TensorsNear(s2[0], x));
  EXPECT_TRUE(TensorsNear(Field(*out, 1), I64(0)));

  // A tensor where the sequence goes.
  out = model.Run({x, x});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("expected a sequence (a Tuple), got Tensor"));
}

TEST(OnnxRunTimeSequenceTest, SequenceAtReadsTensorsOfAnyShapeAtRunTimePositions) {
  ModelBuilder b(17);
  *b.mutable_model().mutable_graph()->add_input() = SeqInfo("s", kF32, {"?"});
  b.Input("pos", DataType::Int(64), {});
  b.Node("SequenceAt", {"s", "pos"}, {"y"});
  b.Node("Add", {"y", "y"}, {"z"});
  b.Output("z");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  const Value s = Seq({F32({2}, {1, 2}), F32({4}, {1, 2, 3, 4})});
  auto out = model.Run({s, I64(1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(Tensor(out->AsRef<TensorObj>()), F32({4}, {2, 4, 6, 8})));
  out = model.Run({s, I64(-2)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(Tensor(out->AsRef<TensorObj>()), F32({2}, {2, 4})));

  out = model.Run({s, I64(2)});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("vm.builtin.sequence_at: position 2 is out of range for a sequence of 2 "
                        "tensors (valid: -2 to 1)"));
  // An element of another rank than the model declares.
  out = model.Run({Seq({F32({1, 2}, {1, 2})}), I64(0)});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

TEST(OnnxRunTimeSequenceTest, ConcatFromSequenceOfRunTimeLength) {
  ModelBuilder b(17);
  *b.mutable_model().mutable_graph()->add_input() = SeqInfo("s", kF32, {"?", "2"});
  b.Node("ConcatFromSequence", {"s"}, {"cat"}, {MakeIntAttr("axis", 1)});
  b.Node("ConcatFromSequence", {"s"}, {"stack"},
         {MakeIntAttr("axis", 0), MakeIntAttr("new_axis", 1)});
  b.Output("cat").Output("stack");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  auto out = model.Run({Seq({F32({2, 2}, {1, 2, 3, 4}), F32({2, 2}, {5, 6, 7, 8})})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(Field(*out, 0), F32({2, 4}, {1, 2, 5, 6, 3, 4, 7, 8})));
  EXPECT_TRUE(TensorsNear(Field(*out, 1), F32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})));

  // Rows of different counts concatenate along axis 1 only if the counts agree.
  out = model.Run({Seq({F32({1, 2}, {1, 2}), F32({2, 2}, {5, 6, 7, 8})})});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("does not concatenate with element 0"));
  out = model.Run({Seq({})});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("concat of an empty sequence"));
}

// SequenceMap over tensors of different lengths: each iteration reads its
// element with its own shape; a tensor input is passed to every iteration.
TEST(OnnxRunTimeSequenceTest, SequenceMapRunsTheBodyOnEachElement) {
  ModelBuilder body(17);
  body.Input("e", kF32, {"?"}).Input("k", kF32, {});
  body.Node("Mul", {"e", "k"}, {"o"});
  *body.mutable_model().mutable_graph()->add_output() = MakeValueInfo("o", kF32, {"?"});
  ModelBuilder b(17);
  *b.mutable_model().mutable_graph()->add_input() = SeqInfo("s", kF32, {"?"});
  b.Input("k", kF32, {});
  b.Node("SequenceMap", {"s", "k"}, {"out"}, {GraphAttr("body", body)}, "map");
  b.Output("out");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  auto out = model.Run({Seq({F32({1}, {1}), F32({3}, {1, 2, 3})}), F32({}, {10})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> got = Fields(*out);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(TensorsNear(got[0], F32({1}, {10})));
  EXPECT_TRUE(TensorsNear(got[1], F32({3}, {10, 20, 30})));
  out = model.Run({Seq({}), F32({}, {10})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Fields(*out).empty());
}

// A Loop whose trip count is a graph input appends one tensor per iteration
// to a carried sequence; zero iterations leave it empty.
TEST(OnnxRunTimeSequenceTest, LoopCarriesAGrowingSequence) {
  ModelBuilder body(17);
  body.Input("i", DataType::Int(64), {}).Input("c", DataType::Bool(), {});
  *body.mutable_model().mutable_graph()->add_input() = SeqInfo("acc", kF32, {});
  body.Node("Cast", {"i"}, {"f"}, {MakeIntAttr("to", 1)});
  body.Node("SequenceInsert", {"acc", "f"}, {"acc2"});
  body.Node("Identity", {"c"}, {"c2"});
  body.Output("c2");
  *body.mutable_model().mutable_graph()->add_output() = SeqInfo("acc2", kF32, {});
  ModelBuilder b(17);
  b.Input("m", DataType::Int(64), {});
  b.Node("SequenceEmpty", {}, {"empty"}, {MakeIntAttr("dtype", 1)});
  b.Node("Loop", {"m", "", "empty"}, {"res"}, {GraphAttr("body", body)}, "loop");
  b.Node("SequenceLength", {"res"}, {"n"});
  b.Output("res").Output("n");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  auto out = model.Run({I64(3)});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> got = Fields(Value(out->AsRef<TupleObj>()->fields[0]));
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(TensorsNear(got[i], F32({}, {float(i)})));
  EXPECT_TRUE(TensorsNear(Field(*out, 1), I64(3)));
  out = model.Run({I64(0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Fields(Value(out->AsRef<TupleObj>()->fields[0])).empty());
  EXPECT_TRUE(TensorsNear(Field(*out, 1), I64(0)));
}

TEST(OnnxRunTimeOptionalTest, AnOptionalInputMayBeEmpty) {
  ModelBuilder b(16);
  *b.mutable_model().mutable_graph()->add_input() = OptInfo("o", MakeValueInfo("", kF32, {"2"}));
  b.Node("OptionalHasElement", {"o"}, {"has"});
  b.Output("has");
  Compiled has(b);
  ASSERT_TRUE(has.status().ok()) << has.status();
  auto out = has.Run({Value()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(Tensor(out->AsRef<TensorObj>()), Bool(false)));
  out = has.Run({F32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(Tensor(out->AsRef<TensorObj>()), Bool(true)));

  ModelBuilder g(16);
  *g.mutable_model().mutable_graph()->add_input() = OptInfo("o", MakeValueInfo("", kF32, {"2"}));
  g.Node("OptionalGetElement", {"o"}, {"v"});
  g.Node("Neg", {"v"}, {"w"});
  g.Output("w");
  Compiled get(g);
  ASSERT_TRUE(get.status().ok()) << get.status();
  out = get.Run({F32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear(Tensor(out->AsRef<TensorObj>()), F32({2}, {-1, -2})));
  out = get.Run({Value()});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(out.status().message(),
              HasSubstr("vm.builtin.optional_get_element: the optional is empty"));
}

// An If whose branches return an empty optional and one holding a sequence.
TEST(OnnxRunTimeOptionalTest, IfReturnsAnEmptyOrAFullOptional) {
  ::onnx::AttributeProto type;
  type.set_name("type");
  type.set_type(::onnx::AttributeProto::TYPE_PROTO);
  *type.mutable_tp() = SeqInfo("", kF32, {"2"}).type();
  ModelBuilder then_b(16);
  then_b.Node("Optional", {}, {"none"}, {type});
  *then_b.mutable_model().mutable_graph()->add_output() = OptInfo("none", SeqInfo("", kF32, {"2"}));
  ModelBuilder else_b(16);
  else_b.Node("SequenceConstruct", {"x"}, {"seq"});
  else_b.Node("Optional", {"seq"}, {"full"});
  *else_b.mutable_model().mutable_graph()->add_output() = OptInfo("full", SeqInfo("", kF32, {"2"}));
  ModelBuilder b(16);
  b.Input("c", DataType::Bool(), {}).Input("x", kF32, {"2"});
  b.Node("If", {"c"}, {"r"}, {GraphAttr("then_branch", then_b), GraphAttr("else_branch", else_b)});
  b.Node("OptionalHasElement", {"r"}, {"has"});
  b.Output("r").Output("has");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  auto out = model.Run({Bool(true), F32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->AsRef<TupleObj>()->fields[0].is_none());
  EXPECT_TRUE(TensorsNear(Field(*out, 1), Bool(false)));
  out = model.Run({Bool(false), F32({2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<Tensor> got = Fields(Value(out->AsRef<TupleObj>()->fields[0]));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(TensorsNear(got[0], F32({2}, {1, 2})));
  EXPECT_TRUE(TensorsNear(Field(*out, 1), Bool(true)));
}

TEST(OnnxRunTimeSequenceTest, RejectsMapInputs) {
  ModelBuilder b(17);
  ::onnx::ValueInfoProto m;
  m.set_name("m");
  m.mutable_type()->mutable_map_type()->set_key_type(::onnx::TensorProto::INT64);
  *m.mutable_type()->mutable_map_type()->mutable_value_type() = MakeValueInfo("", kF32, {}).type();
  *b.mutable_model().mutable_graph()->add_input() = m;
  b.Input("x", kF32, {"2"});
  b.Node("Identity", {"x"}, {"y"});
  b.Output("y");
  auto imported = ImportOnnxBytes(b.Bytes());
  ASSERT_EQ(imported.status().code(), absl::StatusCode::kUnimplemented) << imported.status();
  EXPECT_THAT(imported.status().message(),
              HasSubstr("graph input 'm' is not a tensor, a sequence of tensors or an optional"));
}

// The Shape of an input with a dynamic dim, used as data: the symbolic dim
// becomes a tensor element when the model runs.
TEST(OnnxRunTimeSequenceTest, SymbolicShapeUsedAsData) {
  ModelBuilder b(17);
  b.Input("x", kF32, {"n", "2"});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Mul", {"s", "s"}, {"sq"});
  b.Output("sq");
  Compiled model(b);
  ASSERT_TRUE(model.status().ok()) << model.status();
  for (int64_t n : {1, 5}) {
    auto out = model.Run({F32({n, 2}, std::vector<float>(static_cast<size_t>(2 * n), 0))});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorsNear(Tensor(out->AsRef<TensorObj>()), MakeTensor<int64_t>({2}, {n * n, 4})));
  }
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend::testing
