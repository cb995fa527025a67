// Tests of Function (packed and typed wrappers: arity, argument conversion,
// return conversion) and of the global Registry.
#include "runtime/core/function.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/registry.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

class MarkerObj final : public Object {
 public:
  absl::string_view type_key() const override { return "test.Marker"; }
};

// --- Packed functions ---------------------------------------------------------

TEST(FunctionTest, PackedFunctionSeesAllArguments) {
  Function f = Function::FromPacked(
      "test.fn.count", [](ArgSpan args) -> absl::StatusOr<Value> { return Value(args.size()); });
  EXPECT_EQ(f.name(), "test.fn.count");
  EXPECT_EQ(f.Call()->int_value(), 0);
  EXPECT_EQ(f.Call(1, "a", 2.0)->int_value(), 3);
  std::vector<Value> args = {Value(1), Value(2)};
  EXPECT_EQ(f(args)->int_value(), 2);
}

TEST(FunctionTest, PackedFunctionErrorsPassThrough) {
  Function f = Function::FromPacked("test.fn.fail", [](ArgSpan) -> absl::StatusOr<Value> {
    return IndexError("index 9 out of range");
  });
  absl::StatusOr<Value> r = f.Call();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(GetErrorKind(r.status()), ErrorKind::kIndex);
}

// --- Typed functions: arity ---------------------------------------------------

TEST(FunctionTest, TypedFunctionConvertsArguments) {
  Function add = Function::FromTyped("test.fn.add", [](int64_t a, int64_t b) { return a + b; });
  absl::StatusOr<Value> r = add.Call(2, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->is_int());
  EXPECT_EQ(r->int_value(), 5);
}

TEST(FunctionTest, RejectsTooManyArguments) {
  Function add = Function::FromTyped("test.fn.add", [](int64_t a, int64_t b) { return a + b; });
  absl::StatusOr<Value> r = add.Call(1, 2, 3);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetErrorKind(r.status()), ErrorKind::kValue);
  EXPECT_THAT(r.status().message(), HasSubstr("test.fn.add expects 2 arguments, got 3"));
}

TEST(FunctionTest, RejectsTooFewArguments) {
  Function one = Function::FromTyped("test.fn.one", [](int64_t a) { return a; });
  absl::StatusOr<Value> r = one.Call();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("test.fn.one expects 1 argument, got 0"));
  Function none = Function::FromTyped("test.fn.none", []() { return 1.5; });
  EXPECT_THAT(none.Call(1).status().message(), HasSubstr("expects 0 arguments, got 1"));
}

// --- Typed functions: argument types ------------------------------------------

TEST(FunctionTest, TypeErrorNamesIndexAndBothTypes) {
  Function add = Function::FromTyped("test.fn.add", [](int64_t a, int64_t b) { return a + b; });
  absl::StatusOr<Value> r = add.Call(1, "two");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetErrorKind(r.status()), ErrorKind::kType);
  EXPECT_THAT(r.status().message(), HasSubstr("argument 1 of test.fn.add"));
  EXPECT_THAT(r.status().message(), HasSubstr("expected int"));
  EXPECT_THAT(r.status().message(), HasSubstr("got String"));
}

TEST(FunctionTest, ReportsTheFirstBadArgument) {
  bool called = false;
  Function f =
      Function::FromTyped("test.fn.three", [&](std::string, double, Device) { called = true; });
  absl::StatusOr<Value> r = f.Call(Value(), Value(), 3);
  EXPECT_THAT(r.status().message(),
              HasSubstr("argument 0 of test.fn.three: expected str, got None"));
  r = f.Call("s", true, Device::Cpu());
  EXPECT_THAT(r.status().message(),
              HasSubstr("argument 1 of test.fn.three: expected float, got bool"));
  r = f.Call("s", 1.0, 3);
  EXPECT_THAT(r.status().message(),
              HasSubstr("argument 2 of test.fn.three: expected Device, got int"));
  EXPECT_FALSE(called);
  EXPECT_TRUE(f.Call("s", 1.0, Device::Cpu()).ok());
  EXPECT_TRUE(called);
}

TEST(FunctionTest, FloatIsNotAcceptedAsInt) {
  Function f = Function::FromTyped("test.fn.int", [](int64_t a) { return a; });
  absl::StatusOr<Value> r = f.Call(1.5);
  EXPECT_EQ(GetErrorKind(r.status()), ErrorKind::kType);
  EXPECT_THAT(r.status().message(), HasSubstr("expected int, got float"));
}

TEST(FunctionTest, IntConvertsToDouble) {
  Function half = Function::FromTyped("test.fn.half", [](double x) { return x / 2; });
  absl::StatusOr<Value> r = half.Call(3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->is_float());
  EXPECT_EQ(r->float_value(), 1.5);
  EXPECT_EQ(half.Call(5.0)->float_value(), 2.5);
}

TEST(FunctionTest, BoolAndIntConvertBothWays) {
  Function as_int = Function::FromTyped("test.fn.as_int", [](int64_t x) { return x; });
  EXPECT_EQ(as_int.Call(true)->int_value(), 1);
  EXPECT_EQ(as_int.Call(false)->int_value(), 0);
  EXPECT_TRUE(as_int.Call(true)->is_int());

  Function as_bool = Function::FromTyped("test.fn.as_bool", [](bool b) { return b; });
  EXPECT_TRUE(as_bool.Call(7)->bool_value());
  EXPECT_FALSE(as_bool.Call(0)->bool_value());
  EXPECT_TRUE(as_bool.Call(-1)->bool_value());
  EXPECT_TRUE(as_bool.Call(true)->is_bool());
  EXPECT_THAT(as_bool.Call(1.0).status().message(), HasSubstr("expected bool, got float"));
}

TEST(FunctionTest, NarrowIntegerParametersAccept) {
  Function f = Function::FromTyped("test.fn.narrow", [](int32_t a, uint8_t b, size_t c) {
    return static_cast<int64_t>(a) + b + static_cast<int64_t>(c);
  });
  EXPECT_EQ(f.Call(-5, 200, size_t{10})->int_value(), 205);
}

TEST(FunctionTest, DataTypeFromStringOrDataType) {
  Function bits = Function::FromTyped("test.fn.bits",
                                      [](DataType t) { return static_cast<int64_t>(t.bits()); });
  EXPECT_EQ(bits.Call("float16")->int_value(), 16);
  EXPECT_EQ(bits.Call(DataType::Int(64))->int_value(), 64);
  absl::StatusOr<Value> bad = bits.Call("float7");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("argument 0 of test.fn.bits: expected DataType"));
  EXPECT_THAT(bits.Call(32).status().message(), HasSubstr("expected DataType, got int"));
}

TEST(FunctionTest, StringAndConstRefParameters) {
  Function greet = Function::FromTyped(
      "test.fn.greet", [](const std::string& name) { return std::string("hi ") + name; });
  absl::StatusOr<Value> r = greet.Call("bob");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->string_value(), "hi bob");
}

TEST(FunctionTest, ValueParameterAcceptsAnything) {
  Function type_of =
      Function::FromTyped("test.fn.type_of", [](const Value& v) { return v.TypeName(); });
  EXPECT_EQ(type_of.Call(Value())->string_value(), "None");
  EXPECT_EQ(type_of.Call(MakeShape({1}))->string_value(), "Shape");
}

TEST(FunctionTest, PointerParameterAcceptsPointerOrNone) {
  int x = 0;
  Function f = Function::FromTyped("test.fn.ptr", [](void* p) { return p != nullptr; });
  EXPECT_TRUE(f.Call(Value::OpaquePtr(&x))->bool_value());
  EXPECT_FALSE(f.Call(Value())->bool_value());
  EXPECT_THAT(f.Call(1).status().message(), HasSubstr("expected pointer, got int"));
}

TEST(FunctionTest, TensorParameter) {
  Function ndim =
      Function::FromTyped("test.fn.ndim", [](Tensor t) { return static_cast<int64_t>(t->ndim()); });
  absl::StatusOr<Tensor> t =
      Tensor::Empty(std::vector<int64_t>{2, 3, 4}, DataType::Float(32), Device::Cpu());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(ndim.Call(*t)->int_value(), 3);
  EXPECT_THAT(ndim.Call(MakeShape({1})).status().message(),
              HasSubstr("expected Tensor, got Shape"));
}

TEST(FunctionTest, RefParameterChecksTheObjectType) {
  const MarkerObj* seen = nullptr;
  Function f = Function::FromTyped("test.fn.marker", [&seen](Ref<MarkerObj> m) { seen = m.get(); });
  Ref<MarkerObj> marker = MakeRef<MarkerObj>();
  absl::StatusOr<Value> r = f.Call(marker);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(seen, marker.get());
  EXPECT_EQ(marker->use_count(), 1) << "the call released its references";
  EXPECT_THAT(f.Call("x").status().message(), HasSubstr("expected object, got String"));
  EXPECT_THAT(f.Call(1).status().message(), HasSubstr("expected object, got int"));
}

TEST(FunctionTest, FunctionParameterCanBeCalled) {
  Function apply =
      Function::FromTyped("test.fn.apply", [](Function g, int64_t x) { return g.Call(x); });
  Function twice = Function::FromTyped("test.fn.twice", [](int64_t x) { return 2 * x; });
  EXPECT_EQ(apply.Call(twice, 21)->int_value(), 42);
  EXPECT_THAT(apply.Call(1, 2).status().message(), HasSubstr("expected Function, got int"));
}

// --- Typed functions: returns -------------------------------------------------

TEST(FunctionTest, VoidReturnsNone) {
  int calls = 0;
  Function f = Function::FromTyped("test.fn.void", [&calls]() { ++calls; });
  absl::StatusOr<Value> r = f.Call();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->is_none());
  EXPECT_EQ(calls, 1);
}

TEST(FunctionTest, StatusReturnsNoneOrTheError) {
  Function f = Function::FromTyped("test.fn.status", [](bool fail) -> absl::Status {
    if (fail) return NotFoundError("no such thing");
    return absl::OkStatus();
  });
  absl::StatusOr<Value> ok = f.Call(false);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->is_none());
  absl::StatusOr<Value> err = f.Call(true);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(err.status().message(), "no such thing");
  EXPECT_EQ(GetErrorKind(err.status()), ErrorKind::kNotFound);
}

TEST(FunctionTest, StatusOrReturnsTheValueOrTheError) {
  Function f = Function::FromTyped("test.fn.statusor", [](int64_t x) -> absl::StatusOr<double> {
    if (x < 0) return ValueError("negative ", x);
    return x * 0.5;
  });
  absl::StatusOr<Value> ok = f.Call(3);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->float_value(), 1.5);
  absl::StatusOr<Value> err = f.Call(-4);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(err.status().message(), "negative -4");
}

TEST(FunctionTest, ReturnsEveryConvertibleType) {
  EXPECT_TRUE(Function::FromTyped("b", []() { return true; }).Call()->is_bool());
  EXPECT_TRUE(Function::FromTyped("i", []() { return 3; }).Call()->is_int());
  EXPECT_TRUE(Function::FromTyped("u", []() { return size_t{3}; }).Call()->is_int());
  EXPECT_TRUE(Function::FromTyped("d", []() { return 3.0; }).Call()->is_float());
  EXPECT_EQ(Function::FromTyped("s", []() { return std::string("x"); }).Call()->string_value(),
            "x");
  EXPECT_EQ(Function::FromTyped("t", []() { return DataType::Int(8); }).Call()->dtype_value(),
            DataType::Int(8));
  EXPECT_EQ(Function::FromTyped("v", []() { return Device::Cuda(1); }).Call()->device_value(),
            Device::Cuda(1));
  EXPECT_TRUE(Function::FromTyped("x", []() { return MakeShape({1}); }).Call()->is_shape());
  EXPECT_TRUE(Function::FromTyped("r", []() { return MakeRef<MarkerObj>(); }).Call()->is_object());
}

TEST(FunctionTest, PlainFunctionPointersWrap) {
  Function f = Function::FromTyped(
      "test.fn.ptr_add", +[](int64_t a, int64_t b) { return a - b; });
  EXPECT_EQ(f.Call(5, 3)->int_value(), 2);
}

TEST(FunctionTest, HandleConvertsToValue) {
  Function f = Function::FromTyped("test.fn.handle", []() {});
  Value v = f;
  EXPECT_TRUE(v.is_function());
  EXPECT_EQ(v.object(), f.get());
  EXPECT_FALSE(static_cast<bool>(Function()));
  EXPECT_TRUE(static_cast<bool>(f));
}

// --- Registry -----------------------------------------------------------------

class RegistryTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& name : Registry::ListNames()) {
      if (name.rfind("test.registry.", 0) == 0) Registry::Remove(name);
    }
  }
};

TEST_F(RegistryTest, RegistersAndFinds) {
  ASSERT_TRUE(Registry::RegisterTyped("test.registry.add", [](int64_t a, int64_t b) {
                return a + b;
              }).ok());
  Function f = Registry::Get("test.registry.add");
  ASSERT_TRUE(f);
  EXPECT_EQ(f.name(), "test.registry.add");
  EXPECT_EQ(f.Call(1, 2)->int_value(), 3);
}

TEST_F(RegistryTest, RegistersPacked) {
  ASSERT_TRUE(Registry::RegisterPacked("test.registry.packed", [](ArgSpan a) {
                return absl::StatusOr<Value>(Value(a.size()));
              }).ok());
  EXPECT_EQ(Registry::Get("test.registry.packed").Call(1, 2, 3)->int_value(), 3);
}

TEST_F(RegistryTest, DuplicateIsAlreadyExists) {
  ASSERT_TRUE(Registry::RegisterTyped("test.registry.dup", []() { return 1; }).ok());
  absl::Status s = Registry::RegisterTyped("test.registry.dup", []() { return 2; });
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("test.registry.dup"));
  EXPECT_EQ(Registry::Get("test.registry.dup").Call()->int_value(), 1) << "the first one stays";
}

TEST_F(RegistryTest, OverrideReplaces) {
  ASSERT_TRUE(Registry::RegisterTyped("test.registry.over", []() { return 1; }).ok());
  ASSERT_TRUE(Registry::RegisterTyped(
                  "test.registry.over", []() { return 2; }, true)
                  .ok());
  EXPECT_EQ(Registry::Get("test.registry.over").Call()->int_value(), 2);
  EXPECT_TRUE(Registry::RegisterTyped(
                  "test.registry.fresh", []() { return 3; }, true)
                  .ok())
      << "override of a new name just registers it";
}

TEST_F(RegistryTest, UnknownNameIsNull) {
  EXPECT_FALSE(Registry::Get("test.registry.no_such_function"));
  EXPECT_FALSE(Registry::Get(""));
}

TEST_F(RegistryTest, RejectsNullFunction) {
  EXPECT_EQ(Registry::Register(Function()).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, RemoveForgetsTheName) {
  ASSERT_TRUE(Registry::RegisterTyped("test.registry.gone", []() {}).ok());
  Function held = Registry::Get("test.registry.gone");
  EXPECT_TRUE(Registry::Remove("test.registry.gone"));
  EXPECT_FALSE(Registry::Get("test.registry.gone"));
  EXPECT_FALSE(Registry::Remove("test.registry.gone"));
  EXPECT_TRUE(held.Call().ok()) << "a handle outlives its registration";
  EXPECT_TRUE(Registry::RegisterTyped("test.registry.gone", []() {}).ok())
      << "a removed name can be registered again";
}

TEST_F(RegistryTest, ListNamesIsSortedAndComplete) {
  for (const char* name : {"test.registry.b", "test.registry.c", "test.registry.a"}) {
    ASSERT_TRUE(Registry::RegisterTyped(name, []() {}).ok());
  }
  std::vector<std::string> names = Registry::ListNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  std::vector<std::string> ours;
  for (const std::string& n : names) {
    if (n.rfind("test.registry.", 0) == 0) ours.push_back(n);
  }
  EXPECT_THAT(ours,
              ::testing::ElementsAre("test.registry.a", "test.registry.b", "test.registry.c"));
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

TEST(FunctionTest, NarrowIntegerParametersRefuseValuesOutOfRange) {
  Function f = Function::FromTyped("narrow", [](int32_t x, uint8_t y) { return int64_t{x} + y; });
  auto ok = f.Call(int64_t{-5}, int64_t{255});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->int_value(), 250);
  auto too_big = f.Call(int64_t{1} << 40, int64_t{1});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetErrorKind(too_big.status()), ErrorKind::kType);
  EXPECT_THAT(std::string(too_big.status().message()), ::testing::HasSubstr("int32 range"));
  auto negative = f.Call(int64_t{1}, int64_t{-1});
  EXPECT_THAT(std::string(negative.status().message()),
              ::testing::HasSubstr("argument 1 of narrow"));
  EXPECT_THAT(std::string(negative.status().message()), ::testing::HasSubstr("uint8 range"));
}

TEST(RegistryNameTest, RefusesAnEmptyName) {
  absl::Status s = Registry::RegisterTyped("", [] { return int64_t{1}; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("empty name"));
}

}  // namespace
}  // namespace tether
