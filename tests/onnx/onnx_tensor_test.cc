// The tensor converters (convert_tensor.cc): Constant in each attribute
// form, Shape/Size as import-time values (symbolic dims included),
// ConstantOfShape, Range, Identity, Dropout in inference, EyeLike.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace tether::compiler::onnx_frontend {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::compiler::onnx_frontend::testing;  // NOLINT(build/namespaces)

// A model whose only node is a Constant with `attr`, output "y".
absl::StatusOr<std::vector<Tensor>> RunConstant(const ::onnx::AttributeProto& attr) {
  ModelBuilder b;
  b.Node("Constant", {}, {"y"}, {attr}).Output("y");
  return RunModel(b.model(), {});
}

TEST(OnnxConstantTest, EachValueAttributeForm) {
  auto t = RunConstant(MakeTensorAttr("value", MakeTensor<int32_t>({2, 2}, {1, 2, 3, 4})));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(TensorsNear((*t)[0], MakeTensor<int32_t>({2, 2}, {1, 2, 3, 4})));
  auto f = RunConstant(MakeFloatAttr("value_float", 2.5f));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], MakeTensorOf(DataType::Float(32), {}, {2.5})));
  auto fs = RunConstant(MakeFloatsAttr("value_floats", {1.5f, -2}));
  ASSERT_TRUE(fs.ok()) << fs.status();
  EXPECT_TRUE(TensorsNear((*fs)[0], MakeTensor<float>({2}, {1.5f, -2})));
  auto i = RunConstant(MakeIntAttr("value_int", 7));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(TensorsNear((*i)[0], MakeTensorOf(DataType::Int(64), {}, {7})));
  auto is = RunConstant(MakeIntsAttr("value_ints", {3, 4, 5}));
  ASSERT_TRUE(is.ok()) << is.status();
  EXPECT_TRUE(TensorsNear((*is)[0], MakeTensor<int64_t>({3}, {3, 4, 5})));
}

TEST(OnnxConstantTest, StringAndSparseAreUnimplemented) {
  auto s = RunConstant(MakeStringAttr("value_string", "hi"));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.status().message(), HasSubstr("(Constant, opset 17): string constants"));
  ::onnx::AttributeProto sparse;
  sparse.set_name("sparse_value");
  sparse.set_type(::onnx::AttributeProto::SPARSE_TENSOR);
  auto sp = RunConstant(sparse);
  EXPECT_EQ(sp.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(sp.status().message(), HasSubstr("sparse_value"));
}

TEST(OnnxConstantTest, NoValueIsInvalid) {
  ModelBuilder b;
  b.Node("Constant", {}, {"y"}).Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("no value attribute"));
}

TEST(OnnxShapeOpTest, ShapeOfStaticInputIsConstant) {
  auto out = RunNode("Shape", {In("x", MakeTensor<float>({2, 3, 4}, std::vector<float>(24)))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({3}, {2, 3, 4})));
}

TEST(OnnxShapeOpTest, StartAndEndSliceTheShapeFromOpset15) {
  Tensor x = MakeTensor<float>({2, 3, 4, 5}, std::vector<float>(120));
  auto out = RunNode("Shape", {In("x", x)}, {MakeIntAttr("start", 1), MakeIntAttr("end", -1)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2}, {3, 4})));
  auto clamped = RunNode("Shape", {In("x", x)}, {MakeIntAttr("start", -10)});
  ASSERT_TRUE(clamped.ok()) << clamped.status();
  EXPECT_TRUE(TensorsNear((*clamped)[0], MakeTensor<int64_t>({4}, {2, 3, 4, 5})));
  auto old = ImportNode("Shape", {In("x", x)}, {MakeIntAttr("start", 1)}, 1, 13);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OnnxShapeOpTest, SizeOfSymbolicInputFeedsArithmetic) {
  // Size(x) of x (n, 3), times 2, as a tensor: fixed through input_shapes.
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "3"})
      .Initializer("two", MakeTensorOf(DataType::Int(64), {}, {2}))
      .Node("Size", {"x"}, {"s"})
      .Node("Mul", {"s", "two"}, {"y"})
      .Output("y");
  OnnxImportOptions options;
  options.input_shapes["x"] = {5, 3};
  auto out = RunModel(b.model(), {MakeTensor<float>({5, 3}, std::vector<float>(15))}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensorOf(DataType::Int(64), {}, {30})));
}

TEST(OnnxShapeOpTest, ConstantOfShapeOfSymbolicShapeRunsAtTwoSizes) {
  // ConstantOfShape(Shape(x)) with value 7 (int32) and x (n, 2).
  ModelBuilder b;
  b.Input("x", DataType::Float(32), {"n", "2"})
      .Node("Shape", {"x"}, {"s"})
      .Node("ConstantOfShape", {"s"}, {"y"},
            {MakeTensorAttr("value", MakeTensor<int32_t>({1}, {7}))})
      .Output("y");
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Ref<vm::Executable>> exec = Build(m->module, {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto vm = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  ASSERT_TRUE(vm.ok()) << vm.status();
  for (int64_t n : {1, 3}) {
    std::vector<Value> args{MakeTensor<float>({n, 2}, std::vector<float>(n * 2))};
    absl::StatusOr<Value> out = (*vm)->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    auto ts = OutputTensors(*out);
    ASSERT_TRUE(ts.ok());
    EXPECT_TRUE(TensorsNear((*ts)[0], MakeTensor<int32_t>({n, 2}, std::vector<int32_t>(n * 2, 7))));
  }
}

TEST(OnnxShapeOpTest, ConstantOfShapeDefaultsToFloatZero) {
  auto out = RunNode("ConstantOfShape", {Init("s", MakeTensor<int64_t>({2}, {2, 1}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2, 1}, {0, 0})));
}

TEST(OnnxShapeOpTest, ConstantOfShapeOfARunTimeShape) {
  auto m = RunNode("ConstantOfShape", {In("s", MakeTensor<int64_t>({2}, {2, 1}))});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(TensorsNear((*m)[0], MakeTensor<float>({2, 1}, {0, 0})));
}

// DFT of the real signal [1, 2, 3, 4]: [10, -2+2i, -2, -2-2i]; onesided
// keeps the first 3; a dft_length of 2 uses [1, 2]: [3, -1]; the inverse of
// the full transform gives the signal back.
TEST(OnnxDFTTest, OnesidedTruncatedAndInverse) {
  const Tensor x = MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4});
  auto onesided = RunNode("DFT", {In("x", x)}, {MakeIntAttr("onesided", 1)}, 1, 17);
  ASSERT_TRUE(onesided.ok()) << onesided.status();
  EXPECT_TRUE(
      TensorsNear((*onesided)[0], MakeTensor<float>({1, 3, 2}, {10, 0, -2, 2, -2, 0}), 1e-5, 1e-5));
  auto cut = RunNode("DFT", {In("x", x), Init("n", MakeTensor<int64_t>({}, {2}))}, {}, 1, 17);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(TensorsNear((*cut)[0], MakeTensor<float>({1, 2, 2}, {3, 0, -1, 0}), 1e-5, 1e-5));
  auto back = RunNode("DFT", {In("x", MakeTensor<float>({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}))},
                      {MakeIntAttr("inverse", 1)}, 1, 17);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(
      TensorsNear((*back)[0], MakeTensor<float>({1, 4, 2}, {1, 0, 2, 0, 3, 0, 4, 0}), 1e-5, 1e-5));
}

TEST(OnnxRangeTest, IntAndFloatRanges) {
  auto i = RunNode("Range", {Init("a", MakeTensorOf(DataType::Int(32), {}, {10})),
                             Init("b", MakeTensorOf(DataType::Int(32), {}, {4})),
                             Init("c", MakeTensorOf(DataType::Int(32), {}, {-3}))});
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(TensorsNear((*i)[0], MakeTensor<int32_t>({2}, {10, 7})));
  auto f = RunNode("Range", {Init("a", MakeTensorOf(DataType::Float(32), {}, {1})),
                             Init("b", MakeTensorOf(DataType::Float(32), {}, {2})),
                             Init("c", MakeTensorOf(DataType::Float(32), {}, {0.25}))});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(TensorsNear((*f)[0], MakeTensor<float>({4}, {1, 1.25f, 1.5f, 1.75f})));
}

TEST(OnnxRangeTest, ZeroDeltaIsInvalidAndRuntimeBoundsAreRead) {
  auto zero = ImportNode("Range", {Init("a", MakeTensorOf(DataType::Int(64), {}, {0})),
                                   Init("b", MakeTensorOf(DataType::Int(64), {}, {4})),
                                   Init("c", MakeTensorOf(DataType::Int(64), {}, {0}))});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("delta is 0"));
  // Bounds fed at run time are read when the model runs, float ones too
  // (their length computed in the graph).
  auto dynamic = RunNode("Range", {In("a", MakeTensorOf(DataType::Int(64), {}, {1})),
                                   Init("b", MakeTensorOf(DataType::Int(64), {}, {4})),
                                   Init("c", MakeTensorOf(DataType::Int(64), {}, {1}))});
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_TRUE(TensorsNear((*dynamic)[0], MakeTensor<int64_t>({3}, {1, 2, 3})));
  auto floats = RunNode("Range", {In("a", MakeTensorOf(DataType::Float(32), {}, {0.5})),
                                  Init("b", MakeTensorOf(DataType::Float(32), {}, {4})),
                                  Init("c", MakeTensorOf(DataType::Float(32), {}, {1.5}))});
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_TRUE(TensorsNear((*floats)[0], MakeTensor<float>({3}, {0.5f, 2.0f, 3.5f})));
  // A run-time delta of 0 gives no valid length: an error when it runs.
  auto stuck = RunNode("Range", {In("a", MakeTensorOf(DataType::Float(32), {}, {0})),
                                 Init("b", MakeTensorOf(DataType::Float(32), {}, {4})),
                                 In("c", MakeTensorOf(DataType::Float(32), {}, {0}))});
  EXPECT_FALSE(stuck.ok());
}

TEST(OnnxIdentityTest, PassesValuesThrough) {
  auto out = RunNode("Identity", {In("x", MakeTensor<int64_t>({2}, {5, -6}))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int64_t>({2}, {5, -6})));
}

TEST(OnnxDropoutTest, InferencePassesDataAndMaskIsAllTrue) {
  auto out = RunNode("Dropout", {In("x", MakeTensor<float>({3}, {1, 2, 3}))},
                     {MakeFloatAttr("ratio", 0.5f)}, 2, 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({3}, {1, 2, 3})));
  EXPECT_TRUE(TensorsNear((*out)[1], MakeBoolTensor({3}, {true, true, true})));
}

TEST(OnnxDropoutTest, TrainingModeIsUnimplemented) {
  auto m = ImportNode("Dropout", {In("x", MakeTensor<float>({3}, {1, 2, 3})), Absent(),
                                  Init("t", MakeBoolTensor({}, {true}))});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(m.status().message(), HasSubstr("training_mode"));
}

TEST(OnnxEyeLikeTest, OffsetDiagonalWithDType) {
  auto out = RunNode("EyeLike", {In("x", MakeTensor<float>({2, 3}, std::vector<float>(6)))},
                     {MakeIntAttr("k", 1), MakeIntAttr("dtype", ::onnx::TensorProto::INT32)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<int32_t>({2, 3}, {0, 1, 0, 0, 0, 1})));
}

}  // namespace
}  // namespace tether::compiler::onnx_frontend
