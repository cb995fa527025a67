// Test helpers for the ONNX importer (header-only; every tests/onnx suite
// includes it): tensors from C++ vectors, ONNX attributes, a ModelBuilder for
// small graphs, MakeNodeModel for the one-node models most converter tests
// need, and RunModel/RunNode, which import, Build() and run "main" on a
// local VM and return the output tensors. TensorsNear compares outputs with
// a tolerance (exact for integer and bool tensors).
//
//   auto out = RunNode("Add", {In("a", MakeTensor<float>({2}, {1, 2})),
//                              Init("b", MakeTensor<float>({2}, {3, 4}))});
//   ASSERT_TRUE(out.ok()) << out.status();
//   EXPECT_TRUE(TensorsNear((*out)[0], MakeTensor<float>({2}, {4, 6})));
//
// Thread contract: thread-compatible helpers for tests.
#ifndef TETHER_TESTS_ONNX_ONNX_TEST_UTIL_H_
#define TETHER_TESTS_ONNX_ONNX_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/build.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "runtime/vm/local_vm.h"

namespace tether::compiler::onnx_frontend::testing {

// ---- Tensors ----

template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::Float(32);
  if constexpr (std::is_same_v<T, double>) return DataType::Float(64);
  if constexpr (std::is_same_v<T, int8_t>) return DataType::Int(8);
  if constexpr (std::is_same_v<T, int16_t>) return DataType::Int(16);
  if constexpr (std::is_same_v<T, int32_t>) return DataType::Int(32);
  if constexpr (std::is_same_v<T, int64_t>) return DataType::Int(64);
  if constexpr (std::is_same_v<T, uint8_t>) return DataType::UInt(8);
  if constexpr (std::is_same_v<T, uint16_t>) return DataType::UInt(16);
  if constexpr (std::is_same_v<T, uint32_t>) return DataType::UInt(32);
  if constexpr (std::is_same_v<T, uint64_t>) return DataType::UInt(64);
  return DataType();
}

// A CPU tensor of T's dtype (float, double, intN_t, uintN_t).
template <typename T>
Tensor MakeTensor(std::vector<int64_t> shape, std::vector<T> values) {
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, DataTypeOf<T>(), values.data(), values.size() * sizeof(T));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

inline Tensor MakeBoolTensor(std::vector<int64_t> shape, std::vector<bool> values) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  absl::StatusOr<Tensor> t = Tensor::FromBytes(shape, DataType::Bool(), bytes.data(), bytes.size());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// A tensor of any dtype from doubles (float16 and bool included).
inline Tensor MakeTensorOf(DataType dtype, std::vector<int64_t> shape, std::vector<double> values) {
  absl::StatusOr<Tensor> t = TensorFromDoubles(values, shape, dtype);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// The elements of a CPU tensor of T's dtype.
template <typename T>
std::vector<T> ReadTensor(const Tensor& t) {
  EXPECT_EQ(t->dtype(), DataTypeOf<T>()) << t.ToString();
  std::vector<T> out(static_cast<size_t>(t->NumElements()));
  if (t->dtype() == DataTypeOf<T>())
    std::memcpy(out.data(), t->element_data(), out.size() * sizeof(T));
  return out;
}

inline std::vector<int64_t> ShapeOf(const Tensor& t) {
  return std::vector<int64_t>(t->shape().begin(), t->shape().end());
}

// Same dtype and shape, and every element within atol + rtol * |want|
// (exact for integer and bool dtypes; NaN matches NaN, inf matches inf).
inline ::testing::AssertionResult TensorsNear(const Tensor& got, const Tensor& want,
                                              double rtol = 1e-5, double atol = 1e-6) {
  if (!got || !want) return ::testing::AssertionFailure() << "null tensor";
  if (got->dtype() != want->dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << got->dtype().ToString() << ", want " << want->dtype().ToString();
  }
  if (ShapeOf(got) != ShapeOf(want)) {
    return ::testing::AssertionFailure()
           << "shape [" << absl::StrJoin(ShapeOf(got), ", ") << "], want ["
           << absl::StrJoin(ShapeOf(want), ", ") << "]";
  }
  const bool exact = !(want->dtype().is_float() || want->dtype().is_bfloat16());
  if (exact) {
    std::optional<std::vector<int64_t>> g = IntsFromTensor(got), w = IntsFromTensor(want);
    if (!g || !w) return ::testing::AssertionFailure() << "unreadable dtype";
    for (size_t i = 0; i < g->size(); ++i) {
      if ((*g)[i] != (*w)[i]) {
        return ::testing::AssertionFailure()
               << "element " << i << " is " << (*g)[i] << ", want " << (*w)[i] << " (got ["
               << absl::StrJoin(*g, ", ") << "])";
      }
    }
    return ::testing::AssertionSuccess();
  }
  std::optional<std::vector<double>> g = DoublesFromTensor(got), w = DoublesFromTensor(want);
  if (!g || !w) return ::testing::AssertionFailure() << "unreadable dtype";
  for (size_t i = 0; i < g->size(); ++i) {
    const double a = (*g)[i], b = (*w)[i];
    if (std::isnan(b) ? std::isnan(a)
                      : (std::isinf(b) ? a == b : std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      continue;
    }
    return ::testing::AssertionFailure() << "element " << i << " is " << a << ", want " << b
                                         << " (got [" << absl::StrJoin(*g, ", ") << "])";
  }
  return ::testing::AssertionSuccess();
}

// ---- Attributes ----

inline ::onnx::AttributeProto MakeIntAttr(const std::string& name, int64_t v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}
inline ::onnx::AttributeProto MakeFloatAttr(const std::string& name, float v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}
inline ::onnx::AttributeProto MakeIntsAttr(const std::string& name, std::vector<int64_t> v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}
inline ::onnx::AttributeProto MakeFloatsAttr(const std::string& name, std::vector<float> v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::FLOATS);
  for (float x : v) a.add_floats(x);
  return a;
}
inline ::onnx::AttributeProto MakeStringAttr(const std::string& name, const std::string& v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

// A TensorProto holding `t` (raw_data), named `name`.
inline ::onnx::TensorProto ToTensorProto(const std::string& name, const Tensor& t) {
  ::onnx::TensorProto p;
  p.set_name(name);
  absl::StatusOr<int> type = DataTypeToOnnx(t->dtype());
  EXPECT_TRUE(type.ok()) << type.status();
  p.set_data_type(type.ok() ? *type : 0);
  for (int64_t d : t->shape()) p.add_dims(d);
  p.set_raw_data(
      std::string(static_cast<const char*>(t->element_data()), static_cast<size_t>(t->NumBytes())));
  return p;
}

inline ::onnx::AttributeProto MakeTensorAttr(const std::string& name, const Tensor& t) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto::TENSOR);
  *a.mutable_t() = ToTensorProto("", t);
  return a;
}

// ---- Models ----

// A graph input of `dtype` whose dims are given as text: "3" a fixed dim,
// "n" a dim_param, "?" an unknown dim. No dims at all: rank 0.
inline ::onnx::ValueInfoProto MakeValueInfo(const std::string& name, DataType dtype,
                                            const std::vector<std::string>& dims) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  absl::StatusOr<int> type = DataTypeToOnnx(dtype);
  EXPECT_TRUE(type.ok()) << type.status();
  tt->set_elem_type(type.ok() ? *type : 0);
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    int64_t value = 0;
    if (absl::SimpleAtoi(d, &value)) {
      dim->set_dim_value(value);
    } else if (d != "?") {
      dim->set_dim_param(d);
    }
  }
  return v;
}

inline std::vector<std::string> DimsOf(const Tensor& t) {
  std::vector<std::string> dims;
  for (int64_t d : t->shape()) dims.push_back(absl::StrCat(d));
  return dims;
}

// Builds a ModelProto node by node.
class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 17) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }
  ModelBuilder& Input(const std::string& name, DataType dtype,
                      const std::vector<std::string>& dims) {
    *model_.mutable_graph()->add_input() = MakeValueInfo(name, dtype, dims);
    return *this;
  }
  // A graph input with the (fixed) shape and dtype of `like`.
  ModelBuilder& Input(const std::string& name, const Tensor& like) {
    return Input(name, like->dtype(), DimsOf(like));
  }
  ModelBuilder& Initializer(const std::string& name, const Tensor& value) {
    *model_.mutable_graph()->add_initializer() = ToTensorProto(name, value);
    return *this;
  }
  ModelBuilder& Node(const std::string& op_type, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs,
                     const std::vector<::onnx::AttributeProto>& attrs = {},
                     const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op_type);
    n->set_name(name);
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    for (const auto& a : attrs) *n->add_attribute() = a;
    return *this;
  }
  ModelBuilder& Output(const std::string& name) {
    model_.mutable_graph()->add_output()->set_name(name);
    return *this;
  }
  const ::onnx::ModelProto& model() const { return model_; }
  ::onnx::ModelProto& mutable_model() { return model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }

 private:
  ::onnx::ModelProto model_;
};

// An input of a one-node model: a graph input fed at run time (In), an
// initializer (Init), or an absent optional input (Absent()).
struct NodeInput {
  std::string name;
  Tensor value;
  bool initializer = false;
};
inline NodeInput In(std::string name, Tensor value) { return {std::move(name), value, false}; }
inline NodeInput Init(std::string name, Tensor value) { return {std::move(name), value, true}; }
inline NodeInput Absent() { return {"", Tensor(), false}; }

// A model of one node "node" of `op_type` reading `inputs` (in order) with
// outputs "y0", "y1", ... (all graph outputs).
inline ::onnx::ModelProto MakeNodeModel(const std::string& op_type,
                                        const std::vector<NodeInput>& inputs,
                                        const std::vector<::onnx::AttributeProto>& attrs = {},
                                        int num_outputs = 1, int opset = 17) {
  ModelBuilder b(opset);
  std::vector<std::string> names, outs;
  for (const NodeInput& in : inputs) {
    names.push_back(in.name);
    if (in.name.empty()) continue;
    if (in.initializer) {
      b.Initializer(in.name, in.value);
    } else {
      b.Input(in.name, in.value);
    }
  }
  for (int i = 0; i < num_outputs; ++i) outs.push_back(absl::StrCat("y", i));
  b.Node(op_type, names, outs, attrs, "node");
  for (const std::string& o : outs) b.Output(o);
  return b.model();
}

// The graph inputs of MakeNodeModel's model, in order (what RunModel needs).
inline std::vector<Tensor> RuntimeInputs(const std::vector<NodeInput>& inputs) {
  std::vector<Tensor> out;
  for (const NodeInput& in : inputs) {
    if (!in.name.empty() && !in.initializer) out.push_back(in.value);
  }
  return out;
}

// The outputs of a built executable's "main" as tensors (a tuple unpacked).
inline absl::StatusOr<std::vector<Tensor>> OutputTensors(const Value& v) {
  std::vector<Tensor> out;
  if (v.is_tuple()) {
    for (const Value& f : v.AsRef<TupleObj>()->fields) {
      if (!f.is_tensor()) return absl::InternalError(absl::StrCat("output is a ", f.TypeName()));
      out.push_back(Tensor(f.AsRef<TensorObj>()));
    }
  } else if (v.is_tensor()) {
    out.push_back(Tensor(v.AsRef<TensorObj>()));
  } else {
    return absl::InternalError(absl::StrCat("output is a ", v.TypeName()));
  }
  return out;
}

// Imports `model`, builds it for the host and runs "main" on `inputs` (the
// graph inputs in order; kept params are bound through BuildOptions::params).
inline absl::StatusOr<std::vector<Tensor>> RunModel(const ::onnx::ModelProto& model,
                                                    const std::vector<Tensor>& inputs,
                                                    const OnnxImportOptions& options = {}) {
  absl::StatusOr<ImportedModel> imported = ImportOnnxBytes(model.SerializeAsString(), options);
  if (!imported.ok()) return imported.status();
  BuildOptions build;
  build.params = imported->params;
  absl::StatusOr<Ref<vm::Executable>> exec = Build(imported->module, build);
  if (!exec.ok()) return exec.status();
  absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> vm =
      vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  if (!vm.ok()) return vm.status();
  std::vector<Value> args(inputs.begin(), inputs.end());
  absl::StatusOr<Value> out = (*vm)->Invoke("main", args);
  if (!out.ok()) return out.status();
  return OutputTensors(*out);
}

// Imports `model`, builds it for the host and runs "main" on `inputs` (any
// values: a sequence is a Tuple, an empty optional None); its result as the
// VM returns it (a Tuple for several outputs).
inline absl::StatusOr<Value> RunModelValues(const ::onnx::ModelProto& model,
                                            const std::vector<Value>& inputs) {
  absl::StatusOr<ImportedModel> imported = ImportOnnxBytes(model.SerializeAsString());
  if (!imported.ok()) return imported.status();
  absl::StatusOr<Ref<vm::Executable>> exec = Build(imported->module, BuildOptions());
  if (!exec.ok()) return exec.status();
  absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> vm =
      vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  if (!vm.ok()) return vm.status();
  return (*vm)->Invoke("main", inputs);
}

// MakeNodeModel + RunModel.
inline absl::StatusOr<std::vector<Tensor>> RunNode(
    const std::string& op_type, const std::vector<NodeInput>& inputs,
    const std::vector<::onnx::AttributeProto>& attrs = {}, int num_outputs = 1, int opset = 17) {
  return RunModel(MakeNodeModel(op_type, inputs, attrs, num_outputs, opset), RuntimeInputs(inputs));
}

// MakeNodeModel + import only (for error tests).
inline absl::StatusOr<ImportedModel> ImportNode(
    const std::string& op_type, const std::vector<NodeInput>& inputs,
    const std::vector<::onnx::AttributeProto>& attrs = {}, int num_outputs = 1, int opset = 17) {
  return ImportOnnxBytes(
      MakeNodeModel(op_type, inputs, attrs, num_outputs, opset).SerializeAsString());
}

}  // namespace tether::compiler::onnx_frontend::testing

#endif  // TETHER_TESTS_ONNX_ONNX_TEST_UTIL_H_
