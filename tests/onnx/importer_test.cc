// The ONNX importer's graph walk (importer.cc): model parsing and its errors,
// opset checks, graph inputs with symbolic and overridden dims,
// initializers as constants or kept parameters, multiple outputs, and the
// error naming an unsupported operator.
#include "compiler/frontend/onnx/importer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/relax/struct_info.h"
#include "compiler/text/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

// x (n, 3) + y (n, 3) -> relu -> out; both inputs name the dim "n".
ModelBuilder SymbolicAddModel() {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "3"})
      .Input("y", DataType::Float(32), {"n", "3"})
      .Node("Add", {"x", "y"}, {"s"})
      .Node("Relu", {"s"}, {"out"})
      .Output("out");
  return b;
}

const FunctionNode* Main(const ImportedModel& m) {
  Expr f = m.module.Lookup("main");
  return f.defined() ? f.as<FunctionNode>() : nullptr;
}

const TensorStructInfoNode* ParamInfo(const ImportedModel& m, size_t i) {
  const FunctionNode* f = Main(m);
  if (f == nullptr || i >= f->params.size()) return nullptr;
  return f->params[i].struct_info().as<TensorStructInfoNode>();
}

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".onnx");
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

TEST(OnnxImporterTest, RejectsBytesThatAreNotAModel) {
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes("\xff\xff\xff\xff not a protobuf");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("not a serialized ModelProto"));
}

TEST(OnnxImporterTest, RejectsTruncatedFileNamingIt) {
  std::string bytes = SymbolicAddModel().Bytes();
  std::string path = WriteTempFile("truncated", bytes.substr(0, bytes.size() - 7));
  absl::StatusOr<ImportedModel> m = ImportOnnxFile(path);
  std::filesystem::remove(path);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr(path));
}

TEST(OnnxImporterTest, MissingFileIsNotFound) {
  absl::StatusOr<ImportedModel> m = ImportOnnxFile("/nonexistent/dir/model.onnx");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent/dir/model.onnx"));
}

TEST(OnnxImporterTest, ModelWithoutGraphIsInvalid) {
  ::onnx::ModelProto model;
  model.add_opset_import()->set_version(13);
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(model.SerializeAsString());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("no graph"));
}

TEST(OnnxImporterTest, UnknownOperatorNamesOpOpsetAndNode) {
  ModelBuilder b(13);
  b.Input("x", DataType::Float(32), {"2"}).Node("FancyOp", {"x"}, {"y"}, {}, "fancy_1").Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(),
              HasSubstr("node 'fancy_1' (FancyOp, opset 13): unsupported operator"));
}

TEST(OnnxImporterTest, OperatorNewerThanModelOpsetSaysSince) {
  // HardSwish exists from opset 14.
  ModelBuilder b(13);
  b.Input("x", DataType::Float(32), {"2"}).Node("HardSwish", {"x"}, {"y"}).Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("node 'y' (HardSwish, opset 13)"));
  EXPECT_THAT(m.status().message(), HasSubstr("from opset 14"));
}

TEST(OnnxImporterTest, OpsetOutOfRangeIsUnimplemented) {
  for (int opset : {0, 18}) {
    ModelBuilder b(opset);
    b.Input("x", DataType::Float(32), {"2"}).Node("Relu", {"x"}, {"y"}).Output("y");
    absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented) << opset;
    EXPECT_THAT(m.status().message(), HasSubstr(absl::StrCat("opset ", opset)));
    EXPECT_THAT(m.status().message(), HasSubstr("1 to 17"));
  }
}

// Before opset 7, arithmetic broadcast only with broadcast=1; with `axis`,
// B's dims line up with A's from that axis (legacy broadcasting).
TEST(OnnxImporterTest, Opset6ArithmeticLegacyBroadcastAlongAnAxis) {
  onnx::AttributeProto broadcast = MakeIntAttr("broadcast", 1);
  onnx::AttributeProto axis = MakeIntAttr("axis", 1);
  ModelBuilder b(6);
  b.Input("a", DataType::Float(32), {"2", "3", "2"})
      .Input("b", DataType::Float(32), {"3"})
      .Node("Add", {"a", "b"}, {"y"}, {broadcast, axis})
      .Output("y");
  std::vector<float> av(12);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i);
  absl::StatusOr<std::vector<Tensor>> out = RunModel(
      b.model(), {MakeTensor<float>({2, 3, 2}, av), MakeTensor<float>({3}, {100, 200, 300})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> got = ReadTensor<float>((*out)[0]);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(got[i], av[i] + 100.0f * static_cast<float>(i / 2 % 3 + 1));
}

TEST(OnnxImporterTest, OtherDomainNodeIsUnimplementedNamingDomain) {
  ModelBuilder b(13);
  b.Input("x", DataType::Float(32), {"2"}).Node("Gelu", {"x"}, {"y"}).Output("y");
  b.mutable_model().mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("domain 'com.microsoft'"));
}

TEST(OnnxImporterTest, NodeReadingUndefinedValueIsInvalid) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"2"}).Node("Add", {"x", "ghost"}, {"y"}).Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("undefined value 'ghost'"));
}

TEST(OnnxImporterTest, WrongAttributeTypeIsInvalid) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"2"})
      .Node("LeakyRelu", {"x"}, {"y"}, {MakeStringAttr("alpha", "big")})
      .Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("attribute 'alpha' has type STRING"));
}

TEST(OnnxImporterTest, SharedDimParamIsOneSymbolicVar) {
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(SymbolicAddModel().Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->input_names, ElementsAre("x", "y"));
  EXPECT_THAT(m->output_names, ElementsAre("out"));
  EXPECT_EQ(m->opset, 17);
  const TensorStructInfoNode* x = ParamInfo(*m, 0);
  const TensorStructInfoNode* y = ParamInfo(*m, 1);
  ASSERT_TRUE(x && y && x->shape && y->shape);
  const auto* n = (*x->shape)[0].as<PrimVarNode>();
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, "n");
  EXPECT_TRUE((*x->shape)[0].same_as((*y->shape)[0]));
  const FunctionNode* f = Main(*m);
  EXPECT_EQ(GetStringAttr(f->attrs, "global_symbol", ""), "main");
  EXPECT_EQ(GetIntAttr(f->attrs, "num_input", -1), 2);
}

TEST(OnnxImporterTest, SymbolicModelRunsAtTwoSizes) {
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(SymbolicAddModel().Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Ref<vm::Executable>> exec = Build(m->module, {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  ASSERT_TRUE(vm.ok()) << vm.status();
  for (int64_t n : {1, 4}) {
    std::vector<float> x, y, want;
    for (int64_t i = 0; i < n * 3; ++i) {
      x.push_back(static_cast<float>(i) - 5);
      y.push_back(1.5f);
      want.push_back(std::max(0.0f, x.back() + 1.5f));
    }
    std::vector<Value> args{MakeTensor<float>({n, 3}, x), MakeTensor<float>({n, 3}, y)};
    absl::StatusOr<Value> out = (*vm)->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<std::vector<Tensor>> ts = OutputTensors(*out);
    ASSERT_TRUE(ts.ok());
    EXPECT_TRUE(TensorsNear((*ts)[0], MakeTensor<float>({n, 3}, want))) << "n = " << n;
  }
}

TEST(OnnxImporterTest, UnknownDimBecomesFreshVarNamedAfterInput) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"?", "2"}).Node("Relu", {"x"}, {"y"}).Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  const TensorStructInfoNode* x = ParamInfo(*m, 0);
  ASSERT_TRUE(x && x->shape);
  const auto* v = (*x->shape)[0].as<PrimVarNode>();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->name, "x_d0");
}

TEST(OnnxImporterTest, InputShapesFixDimParamsForEveryInput) {
  OnnxImportOptions options;
  options.input_shapes["x"] = {5, 3};
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(SymbolicAddModel().Bytes(), options);
  ASSERT_TRUE(m.ok()) << m.status();
  for (size_t i = 0; i < 2; ++i) {
    const TensorStructInfoNode* t = ParamInfo(*m, i);
    ASSERT_TRUE(t && t->shape);
    const int64_t* d = (*t->shape)[0].as_int();
    ASSERT_NE(d, nullptr) << "param " << i;
    EXPECT_EQ(*d, 5);
  }
}

TEST(OnnxImporterTest, InputShapesErrorsNameTheProblem) {
  struct Case {
    std::string name;
    std::vector<int64_t> dims;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{{"x", {5}, "gives input 'x' 1 dims, the model declares 2"},
                                         {"x", {5, 4}, "dim 1 = 4, the model fixes it to 3"},
                                         {"z", {1}, "'z', which is not a graph input"}}) {
    OnnxImportOptions options;
    options.input_shapes[c.name] = c.dims;
    absl::StatusOr<ImportedModel> m = ImportOnnxBytes(SymbolicAddModel().Bytes(), options);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(m.status().message(), HasSubstr(c.message));
  }
}

TEST(OnnxImporterTest, InitializersBecomeConstants) {
  auto inputs = std::vector<NodeInput>{In("x", MakeTensor<float>({2}, {1, 2})),
                                       Init("w", MakeTensor<float>({2}, {3, 4}))};
  absl::StatusOr<ImportedModel> m = ImportNode("Mul", inputs);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Main(*m)->params.size(), 1u);
  EXPECT_TRUE(m->params.empty());
  auto out = RunNode("Mul", inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {3, 8})));
}

TEST(OnnxImporterTest, KeepParamsInInputMakesTrailingParams) {
  auto inputs = std::vector<NodeInput>{In("x", MakeTensor<float>({2}, {1, 2})),
                                       Init("w", MakeTensor<float>({2}, {3, 4}))};
  ::onnx::ModelProto model = MakeNodeModel("Mul", inputs);
  OnnxImportOptions options;
  options.keep_params_in_input = true;
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(model.SerializeAsString(), options);
  ASSERT_TRUE(m.ok()) << m.status();
  const FunctionNode* f = Main(*m);
  ASSERT_EQ(f->params.size(), 2u);
  EXPECT_EQ(f->params[1].as<VarNode>()->name_hint, "w");
  EXPECT_EQ(GetIntAttr(f->attrs, "num_input", -1), 1);
  ASSERT_EQ(m->params.count("w"), 1u);
  EXPECT_TRUE(TensorsNear(m->params.at("w"), MakeTensor<float>({2}, {3, 4})));
  // RunModel binds the kept params through BuildOptions::params.
  auto out = RunModel(model, {MakeTensor<float>({2}, {1, 2})}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {3, 8})));
}

TEST(OnnxImporterTest, InitializerListedAsInputIsNotAParam) {
  ModelBuilder b(9);
  b.Input("x", DataType::Float(32), {"2"})
      .Input("w", DataType::Float(32), {"2"})
      .Initializer("w", MakeTensor<float>({2}, {1, 1}))
      .Node("Add", {"x", "w"}, {"y"})
      .Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->input_names, ElementsAre("x"));
}

TEST(OnnxImporterTest, MultipleOutputsComeBackAsTuple) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"3"})
      .Node("Neg", {"x"}, {"n"})
      .Node("Abs", {"x"}, {"a"})
      .Output("a")
      .Output("n")
      .Output("x");
  auto out = RunModel(b.model(), {MakeTensor<float>({3}, {-1, 2, -3})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, {1, 2, 3})));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeTensor<float>({3}, {1, -2, 3})));
  EXPECT_TRUE(TensorsNear((*out)[2], MakeTensor<float>({3}, {-1, 2, -3})));
}

TEST(OnnxImporterTest, GraphOutputNotProducedIsInvalid) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"3"}).Node("Neg", {"x"}, {"n"}).Output("m");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("graph output 'm'"));
}

TEST(OnnxImporterTest, ShapeArithmeticStaysSymbolicAndEmitsNoCode) {
  // Shape(x) * 2 as a graph output: known at import time, so materialized
  // as a constant when the dims are fixed, and from the symbolic dims (one
  // relax.full per element) when they are not.
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "3"})
      .Initializer("two", MakeTensor<int64_t>({1}, {2}))
      .Node("Shape", {"x"}, {"s"})
      .Node("Mul", {"s", "two"}, {"y"})
      .Output("y");
  absl::StatusOr<ImportedModel> symbolic = ImportOnnxBytes(b.Bytes());
  ASSERT_TRUE(symbolic.ok()) << symbolic.status();
  EXPECT_THAT(PrintModule(symbolic->module), Not(HasSubstr("R.multiply")));
  auto dynamic = RunModel(b.model(), {MakeTensor<float>({5, 3}, std::vector<float>(15, 0))});
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_TRUE(TensorsNear((*dynamic)[0], MakeTensor<int64_t>({2}, {10, 6})));
  OnnxImportOptions options;
  options.input_shapes["x"] = {4, 3};
  auto out = RunModel(b.model(), {MakeTensor<float>({4, 3}, std::vector<float>(12, 0))}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2}, {8, 6})));
}

TEST(OnnxImporterTest, SupportedOpsIsSortedAndHasCoreOps) {
  std::vector<std::string> ops = SupportedOnnxOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"Add", "Relu", "Cast", "Shape", "Constant"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
}

TEST(OnnxImporterTest, OnlyOtherDomainsIsUnimplementedNamingThem) {
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"2"}).Node("Relu", {"x"}, {"y"}).Output("y");
  b.mutable_model().mutable_opset_import(0)->set_domain("ai.onnx.preview.training");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("'ai.onnx.preview.training' 17"));
}

TEST(OnnxImporterTest, FrozenInputBecomesKnownConstant) {
  // Reshape-free check: Shape arithmetic on a frozen int input folds, and
  // the frozen input leaves main's parameters.
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"2"})
      .Input("k", DataType::Int(64), {"1"})
      .Node("Add", {"k", "k"}, {"k2"})
      .Node("Cast", {"k2"}, {"kf"}, {MakeIntAttr("to", ::onnx::TensorProto::FLOAT)})
      .Node("Mul", {"x", "kf"}, {"y"})
      .Output("y");
  OnnxImportOptions options;
  options.frozen_inputs["k"] = MakeTensor<int64_t>({1}, {3});
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes(), options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->input_names, ElementsAre("x"));
  EXPECT_EQ(Main(*m)->params.size(), 1u);
  auto out = RunModel(b.model(), {MakeTensor<float>({2}, {1, 2})}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {6, 12})));
}

TEST(OnnxImporterTest, FrozenInputMustMatchDeclaration) {
  ModelBuilder b;
  b.Input("k", DataType::Int(64), {"2"}).Node("Neg", {"k"}, {"y"}).Output("y");
  struct Case {
    std::string name;
    Tensor value;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"k", MakeTensor<int32_t>({2}, {1, 2}), "is int32, declared int64"},
           {"k", MakeTensor<int64_t>({3}, {1, 2, 3}), "frozen input 'k' has shape"},
           {"q", MakeTensor<int64_t>({2}, {1, 2}), "'q', which is not a graph input"}}) {
    OnnxImportOptions options;
    options.frozen_inputs[c.name] = c.value;
    absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes(), options);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(m.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
