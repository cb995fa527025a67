// Tests of Value: every kind's constructors, accessors, type names and
// printing, copy and move semantics, and the reference counts of the objects a
// Value holds.
#include "runtime/core/value.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core/function.h"
#include "runtime/core/object.h"
#include "runtime/core/tensor.h"

namespace tether {
namespace {

// An object that counts how many of its kind are alive, to catch leaks and
// double frees.
class CountedObj final : public Object {
 public:
  explicit CountedObj(int tag = 0) : tag(tag) { ++live; }
  ~CountedObj() override {
    --live;
    ++destroyed;
  }
  absl::string_view type_key() const override { return "test.Counted"; }

  const int tag;
  static inline int live = 0;
  static inline int destroyed = 0;
};

class ValueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CountedObj::live = 0;
    CountedObj::destroyed = 0;
  }
  void TearDown() override { EXPECT_EQ(CountedObj::live, 0) << "a CountedObj leaked"; }
};

static_assert(sizeof(Value) == 16, "Value is meant to be 16 bytes");

TEST_F(ValueTest, DefaultIsNone) {
  Value v;
  EXPECT_TRUE(v.is_none());
  EXPECT_EQ(v.kind(), Value::Kind::kNone);
  EXPECT_FALSE(v.is_object());
  EXPECT_EQ(v.object(), nullptr);
  EXPECT_EQ(v.TypeName(), "None");
  EXPECT_EQ(v.ToString(), "None");
}

TEST_F(ValueTest, IntegralConstructorsAreUnambiguousInts) {
  const int i = -3;
  const long l = 1L << 40;
  const size_t z = 12;
  const unsigned u = 7;
  const int16_t s = -2;
  const uint8_t b = 255;
  const int64_t big = INT64_MIN;
  EXPECT_EQ(Value(i).int_value(), -3);
  EXPECT_EQ(Value(l).int_value(), int64_t{1} << 40);
  EXPECT_EQ(Value(z).int_value(), 12);
  EXPECT_EQ(Value(u).int_value(), 7);
  EXPECT_EQ(Value(s).int_value(), -2);
  EXPECT_EQ(Value(b).int_value(), 255);
  EXPECT_EQ(Value(big).int_value(), INT64_MIN);
  for (const Value& v : {Value(i), Value(l), Value(z), Value(u), Value(s), Value(b), Value(0)}) {
    EXPECT_TRUE(v.is_int());
    EXPECT_EQ(v.kind(), Value::Kind::kInt);
    EXPECT_EQ(v.TypeName(), "int");
  }
  EXPECT_EQ(Value(-42).ToString(), "-42");
  static_assert(std::is_convertible_v<int, Value>);
  static_assert(std::is_convertible_v<long, Value>);
  static_assert(std::is_convertible_v<size_t, Value>);
}

TEST_F(ValueTest, BoolIsNotAnInt) {
  Value t(true);
  Value f(false);
  EXPECT_TRUE(t.is_bool());
  EXPECT_FALSE(t.is_int());
  EXPECT_TRUE(t.bool_value());
  EXPECT_FALSE(f.bool_value());
  EXPECT_EQ(t.TypeName(), "bool");
  EXPECT_EQ(t.ToString(), "True");
  EXPECT_EQ(f.ToString(), "False");
}

TEST_F(ValueTest, FloatHoldsADouble) {
  Value v(1.5);
  EXPECT_TRUE(v.is_float());
  EXPECT_EQ(v.float_value(), 1.5);
  EXPECT_EQ(v.TypeName(), "float");
  EXPECT_EQ(v.ToString(), "1.5");
  Value from_float(2.25f);
  EXPECT_TRUE(from_float.is_float());
  EXPECT_EQ(from_float.float_value(), 2.25);
}

TEST_F(ValueTest, DataTypeAndDeviceAreInline) {
  Value dt(DataType::Float(16, 4));
  EXPECT_TRUE(dt.is_dtype());
  EXPECT_EQ(dt.dtype_value(), DataType::Float(16, 4));
  EXPECT_EQ(dt.TypeName(), "DataType");
  EXPECT_EQ(dt.ToString(), "float16x4");

  Value dev(Device::Cuda(2));
  EXPECT_TRUE(dev.is_device());
  EXPECT_EQ(dev.device_value(), Device::Cuda(2));
  EXPECT_EQ(dev.TypeName(), "Device");
  EXPECT_EQ(dev.ToString(), "cuda:2");
}

TEST_F(ValueTest, OpaquePointerIsKeptAsIs) {
  int target = 0;
  Value v = Value::OpaquePtr(&target);
  EXPECT_TRUE(v.is_opaque_ptr());
  EXPECT_EQ(v.opaque_ptr(), &target);
  EXPECT_EQ(v.TypeName(), "pointer");
  EXPECT_EQ(v.ToString().rfind("<pointer ", 0), 0u) << v.ToString();
  Value copy = v;
  EXPECT_EQ(copy.opaque_ptr(), &target);
}

TEST_F(ValueTest, StringsFromEveryStringType) {
  std::string s = "hello";
  for (const Value& v :
       {Value("hello"), Value(s), Value(absl::string_view(s)), Value(std::string("hello"))}) {
    EXPECT_TRUE(v.is_string());
    EXPECT_TRUE(v.is_object());
    EXPECT_EQ(v.object_type(), TypeIndex::kString);
    EXPECT_EQ(v.string_value(), "hello");
    EXPECT_EQ(v.TypeName(), "String");
    EXPECT_EQ(v.ToString(), "\"hello\"");
  }
  EXPECT_EQ(Value("").string_value(), "");
  EXPECT_EQ(Value(std::string("a\0b", 3)).string_value().size(), 3u);
}

TEST_F(ValueTest, ShapeHoldsItsDims) {
  Value v = MakeShape({2, 3, 4});
  ASSERT_TRUE(v.is_shape());
  EXPECT_EQ(v.TypeName(), "Shape");
  EXPECT_EQ(v.ToString(), "Shape[2, 3, 4]");
  Ref<ShapeObj> shape = v.AsRef<ShapeObj>();
  EXPECT_EQ(shape->dims, (ShapeObj::Dims{2, 3, 4}));
  EXPECT_EQ(MakeShape({}).ToString(), "Shape[]");
}

TEST_F(ValueTest, ShapeToStringFormatsAList) {
  std::vector<int64_t> dims = {1, -2, 3};
  EXPECT_EQ(ShapeToString(dims), "[1, -2, 3]");
  EXPECT_EQ(ShapeToString({}), "[]");
}

TEST_F(ValueTest, TuplesPrintLikePython) {
  EXPECT_EQ(MakeTuple({}).ToString(), "()");
  EXPECT_EQ(MakeTuple({Value(1)}).ToString(), "(1,)");
  EXPECT_EQ(MakeTuple({Value(1), Value("a"), Value(true)}).ToString(), "(1, \"a\", True)");
  Value v = MakeTuple({Value(1)});
  EXPECT_TRUE(v.is_tuple());
  EXPECT_EQ(v.TypeName(), "Tuple");
}

TEST_F(ValueTest, NestedTuplesPrintRecursively) {
  Value inner = MakeTuple({Value(2), Value(3)});
  Value single = MakeTuple({Value()});
  Value outer = MakeTuple({Value(1), inner, MakeTuple({}), single, MakeShape({5})});
  EXPECT_EQ(outer.ToString(), "(1, (2, 3), (), (None,), Shape[5])");
  Value deep = MakeTuple({MakeTuple({MakeTuple({Value(DataType::Int(8))})})});
  EXPECT_EQ(deep.ToString(), "(((int8,),),)");
}

TEST_F(ValueTest, TensorAndFunctionPrintTheirSummary) {
  absl::StatusOr<Tensor> t =
      Tensor::Empty(std::vector<int64_t>{2, 3}, DataType::Float(32), Device::Cpu());
  ASSERT_TRUE(t.ok()) << t.status();
  Value tv = *t;
  EXPECT_TRUE(tv.is_tensor());
  EXPECT_EQ(tv.TypeName(), "Tensor");
  EXPECT_EQ(tv.ToString(), "float32[2, 3]@cpu:0");

  Function f = Function::FromTyped("test.value.f", []() {});
  Value fv = f;
  EXPECT_TRUE(fv.is_function());
  EXPECT_EQ(fv.TypeName(), "Function");
  EXPECT_EQ(fv.ToString(), "<Function test.value.f>");
}

TEST_F(ValueTest, OtherObjectsUseTheirTypeKey) {
  Value v(MakeRef<CountedObj>());
  EXPECT_TRUE(v.is_object());
  EXPECT_EQ(v.object_type(), TypeIndex::kOther);
  EXPECT_FALSE(v.is_string() || v.is_shape() || v.is_tensor() || v.is_tuple() || v.is_function() ||
               v.is_closure());
  EXPECT_EQ(v.TypeName(), "test.Counted");
  EXPECT_EQ(v.ToString(), "<test.Counted>");
}

TEST_F(ValueTest, NullRefIsNone) {
  Value v(Ref<CountedObj>{});
  EXPECT_TRUE(v.is_none());
  EXPECT_EQ(v.object(), nullptr);
}

TEST_F(ValueTest, ScalarKindPredicatesAreExclusive) {
  const Value values[] = {Value(),
                          Value(1),
                          Value(1.0),
                          Value(true),
                          Value(DataType()),
                          Value(Device::Cpu()),
                          Value::OpaquePtr(nullptr)};
  for (const Value& v : values) {
    int set = v.is_none() + v.is_int() + v.is_float() + v.is_bool() + v.is_dtype() + v.is_device() +
              v.is_opaque_ptr() + v.is_object();
    EXPECT_EQ(set, 1) << v.TypeName();
    EXPECT_EQ(v.object_type(), TypeIndex::kOther);
    EXPECT_EQ(v.object(), nullptr);
  }
}

TEST_F(ValueTest, ConstructingFromARefCopyAddsOneReference) {
  Ref<CountedObj> ref = MakeRef<CountedObj>();
  EXPECT_EQ(ref->use_count(), 1);
  {
    Value v(ref);
    EXPECT_EQ(ref->use_count(), 2);
    EXPECT_EQ(v.object(), ref.get());
  }
  EXPECT_EQ(ref->use_count(), 1);
  EXPECT_EQ(CountedObj::destroyed, 0);
}

TEST_F(ValueTest, ConstructingFromAMovedRefTakesItsReference) {
  Ref<CountedObj> ref = MakeRef<CountedObj>();
  CountedObj* raw = ref.get();
  Value v(std::move(ref));
  EXPECT_EQ(ref.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(raw->use_count(), 1);
  v = Value();
  EXPECT_EQ(CountedObj::destroyed, 1);
}

TEST_F(ValueTest, CopiesShareTheObjectAndCountReferences) {
  Value a(MakeRef<CountedObj>(7));
  Object* obj = a.object();
  EXPECT_EQ(obj->use_count(), 1);
  {
    Value b = a;
    EXPECT_EQ(obj->use_count(), 2);
    EXPECT_EQ(b.object(), obj);
    Value c;
    c = b;
    EXPECT_EQ(obj->use_count(), 3);
    c = a;  // same object again
    EXPECT_EQ(obj->use_count(), 3);
  }
  EXPECT_EQ(obj->use_count(), 1);
  EXPECT_EQ(a.AsRef<CountedObj>()->tag, 7);
  EXPECT_EQ(obj->use_count(), 1);
  EXPECT_EQ(CountedObj::destroyed, 0);
}

TEST_F(ValueTest, MovesTransferWithoutTouchingTheCount) {
  Value a(MakeRef<CountedObj>());
  Object* obj = a.object();
  Value b = std::move(a);
  EXPECT_TRUE(a.is_none());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.object(), obj);
  EXPECT_EQ(obj->use_count(), 1);
  Value c;
  c = std::move(b);
  EXPECT_TRUE(b.is_none());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(obj->use_count(), 1);
  EXPECT_EQ(CountedObj::destroyed, 0);
}

TEST_F(ValueTest, AssignmentReleasesTheOldObject) {
  Value v(MakeRef<CountedObj>(1));
  v = Value(MakeRef<CountedObj>(2));
  EXPECT_EQ(CountedObj::destroyed, 1);
  EXPECT_EQ(CountedObj::live, 1);
  v = 5;
  EXPECT_EQ(CountedObj::destroyed, 2);
  EXPECT_TRUE(v.is_int());
}

TEST_F(ValueTest, SelfAssignmentKeepsTheObject) {
  Value v(MakeRef<CountedObj>());
  Value& alias = v;
  v = alias;
  EXPECT_EQ(v.object()->use_count(), 1);
  v = std::move(alias);
  EXPECT_EQ(CountedObj::live, 1);
}

TEST_F(ValueTest, SwapExchangesKindsAndObjects) {
  Value a(MakeRef<CountedObj>());
  Value b(3);
  Object* obj = a.object();
  a.swap(b);
  EXPECT_TRUE(a.is_int());
  EXPECT_EQ(b.object(), obj);
  EXPECT_EQ(obj->use_count(), 1);
}

TEST_F(ValueTest, AsRefAddsAReference) {
  Value v(MakeRef<CountedObj>());
  {
    Ref<CountedObj> r = v.AsRef<CountedObj>();
    EXPECT_EQ(r->use_count(), 2);
  }
  EXPECT_EQ(v.object()->use_count(), 1);
  EXPECT_EQ(Value(1).AsRef<CountedObj>(), nullptr);
}

TEST_F(ValueTest, TuplesOwnTheirFieldsAndReleaseThem) {
  Ref<CountedObj> ref = MakeRef<CountedObj>();
  {
    Value tuple = MakeTuple({Value(ref), MakeTuple({Value(ref), Value(ref)})});
    EXPECT_EQ(ref->use_count(), 4);
    Value copy = tuple;
    EXPECT_EQ(ref->use_count(), 4) << "copying a tuple shares it";
    EXPECT_EQ(tuple.object()->use_count(), 2);
  }
  EXPECT_EQ(ref->use_count(), 1);
  ref = nullptr;
  EXPECT_EQ(CountedObj::destroyed, 1);
}

TEST_F(ValueTest, VectorsOfValuesDoNotLeak) {
  {
    std::vector<Value> values;
    for (int i = 0; i < 100; ++i) values.emplace_back(MakeRef<CountedObj>(i));
    std::vector<Value> copy = values;
    EXPECT_EQ(CountedObj::live, 100);
    EXPECT_EQ(values[5].object()->use_count(), 2);
    values.clear();
    EXPECT_EQ(copy[5].object()->use_count(), 1);
  }
  EXPECT_EQ(CountedObj::destroyed, 100);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

TEST(ValuePrintTest, FloatsPrintAsFloats) {
  EXPECT_EQ(Value(2.0).ToString(), "2.0");
  EXPECT_EQ(Value(0.5).ToString(), "0.5");
  EXPECT_EQ(Value(-3.0).ToString(), "-3.0");
  EXPECT_EQ(Value(1e300).ToString(), "1e+300");
}

}  // namespace
}  // namespace tether
