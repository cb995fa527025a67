// The VM's sequence and optional builtins (runtime/vm/sequence_ops.cc),
// called directly: the edge cases the ONNX models in tests/onnx do not
// reach (default positions, narrow position dtypes, bad arguments).
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/registry.h"
#include "runtime/core/tensor.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor Make(std::vector<int64_t> shape, std::vector<T> v, DataType dtype) {
  absl::StatusOr<Tensor> t = Tensor::FromBytes(shape, dtype, v.data(), v.size() * sizeof(T));
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}
Tensor F32(std::vector<int64_t> shape, std::vector<float> v) {
  return Make<float>(shape, v, DataType::Float(32));
}

absl::StatusOr<Value> Call(const char* name, std::vector<Value> args) {
  RegisterBuiltins();
  Function f = Registry::Get(name);
  EXPECT_TRUE(f) << name;
  return f(ArgSpan(args.data(), args.size()));
}

std::vector<float> Floats(const Value& v) {
  Tensor t(v.AsRef<TensorObj>());
  std::vector<float> out(static_cast<size_t>(t->NumElements()));
  std::memcpy(out.data(), t->element_data(), out.size() * sizeof(float));
  return out;
}

Value Seq3() {
  return MakeTuple({Value(F32({1}, {0})), Value(F32({1}, {1})), Value(F32({1}, {2}))});
}

TEST(SequenceOpsTest, EraseTakesTheLastByDefaultAndAnyIntegerPosition) {
  absl::StatusOr<Value> out = Call("vm.builtin.sequence_erase", {Seq3()});
  ASSERT_TRUE(out.ok()) << out.status();
  const auto& f = out->AsRef<TupleObj>()->fields;
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(Floats(f[1]), std::vector<float>{1});

  // An int32 position, and a uint8 one.
  out = Call("vm.builtin.sequence_erase",
             {Seq3(), Value(Make<int32_t>({}, {-3}, DataType::Int(32)))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats(out->AsRef<TupleObj>()->fields[0]), std::vector<float>{1});
  out = Call("vm.builtin.sequence_erase",
             {Seq3(), Value(Make<uint8_t>({1}, {1}, DataType::UInt(8)))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats(out->AsRef<TupleObj>()->fields[1]), std::vector<float>{2});
}

TEST(SequenceOpsTest, BadArgumentsAreInvalid) {
  auto expect_invalid = [](absl::StatusOr<Value> out, const char* what) {
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr(what));
  };
  expect_invalid(Call("vm.builtin.sequence_erase", {MakeTuple({})}),
                 "cannot erase from an empty sequence");
  expect_invalid(Call("vm.builtin.sequence_at",
                      {Seq3(), Value(Make<int64_t>({2}, {0, 1}, DataType::Int(64)))}),
                 "the position must be one integer");
  expect_invalid(Call("vm.builtin.sequence_at", {Seq3(), Value(F32({}, {0}))}),
                 "the position must be one integer");
  expect_invalid(Call("vm.builtin.sequence_insert", {Seq3(), Value(int64_t{1})}),
                 "expected a tensor");
  expect_invalid(Call("vm.builtin.sequence_length", {Value(F32({1}, {0}))}), "expected a sequence");
  expect_invalid(Call("vm.builtin.sequence_concat",
                      {MakeTuple({Value(F32({1}, {0})), Value(F32({2}, {0, 1}))}),
                       Value(int64_t{0}), Value(int64_t{1})}),
                 "does not concatenate");
  expect_invalid(Call("vm.builtin.optional_get_element", {Value()}), "the optional is empty");
}

TEST(SequenceOpsTest, ConcatStacksOnANewLastAxis) {
  absl::StatusOr<Value> out = Call("vm.builtin.sequence_concat",
                                   {MakeTuple({Value(F32({2}, {1, 2})), Value(F32({2}, {3, 4}))}),
                                    Value(int64_t{1}), Value(int64_t{1})});
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor t(out->AsRef<TensorObj>());
  EXPECT_EQ(std::vector<int64_t>(t->shape().begin(), t->shape().end()),
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Floats(*out), (std::vector<float>{1, 3, 2, 4}));
}

TEST(SequenceOpsTest, LengthAndPresenceAreShapes) {
  absl::StatusOr<Value> n = Call("vm.builtin.sequence_length", {Seq3()});
  ASSERT_TRUE(n.ok() && n->is_shape()) << n.status();
  EXPECT_EQ(n->AsRef<ShapeObj>()->dims[0], 3);
  absl::StatusOr<Value> has = Call("vm.builtin.optional_has_element", {Value()});
  ASSERT_TRUE(has.ok() && has->is_shape()) << has.status();
  EXPECT_EQ(has->AsRef<ShapeObj>()->dims[0], 0);
  has = Call("vm.builtin.optional_has_element", {Seq3()});
  ASSERT_TRUE(has.ok()) << has.status();
  EXPECT_EQ(has->AsRef<ShapeObj>()->dims[0], 1);
}

}  // namespace
}  // namespace tether::vm
