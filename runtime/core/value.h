// Value: the small tagged union that everything the VM moves is made of.
//
// A Value is 16 bytes: a kind tag and either an inline scalar (int64, double,
// bool, DataType, Device, raw pointer) or a strong reference to an Object
// (String, Shape, Tensor, Tuple, Function, Closure, or any other object).
// The object kinds are told apart by the object's TypeIndex.
#ifndef TETHER_RUNTIME_CORE_VALUE_H_
#define TETHER_RUNTIME_CORE_VALUE_H_

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/device.h"
#include "runtime/core/object.h"

namespace tether {

// Thread contract: thread-compatible (like std::string); the objects it
// references carry their own contracts.
class Value {
 public:
  enum class Kind : uint8_t {
    kNone = 0,
    kInt = 1,
    kFloat = 2,
    kBool = 3,
    kDataType = 4,
    kDevice = 5,
    kOpaquePtr = 6,  // a raw pointer (the VM context); never crosses the wire
    kObject = 7,
  };

  Value() : kind_(Kind::kNone) { u_.i = 0; }
  template <typename T,
            typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  Value(T v) : kind_(Kind::kInt) {  // NOLINT(google-explicit-constructor)
    u_.i = static_cast<int64_t>(v);
  }
  Value(double v) : kind_(Kind::kFloat) { u_.f = v; }  // NOLINT(google-explicit-constructor)
  Value(bool v) : kind_(Kind::kBool) {
    u_.i = 0;
    u_.b = v;
  }  // NOLINT(google-explicit-constructor)
  Value(DataType v) : kind_(Kind::kDataType) {
    u_.i = 0;
    u_.dtype = v.dl();
  }                                                               // NOLINT
  Value(Device v) : kind_(Kind::kDevice) { u_.device = v.dl(); }  // NOLINT
  Value(std::string v);                                           // NOLINT: a String object
  Value(absl::string_view v) : Value(std::string(v)) {}           // NOLINT
  Value(const char* v) : Value(std::string(v)) {}                 // NOLINT
  template <typename T, typename = std::enable_if_t<std::is_base_of_v<Object, T>>>
  Value(Ref<T> ref) {  // NOLINT(google-explicit-constructor)
    T* p = ref.release();
    if (p) {
      kind_ = Kind::kObject;
      u_.obj = p;
    } else {
      kind_ = Kind::kNone;
      u_.i = 0;
    }
  }
  static Value OpaquePtr(void* p) {
    Value v;
    v.kind_ = Kind::kOpaquePtr;
    v.u_.ptr = p;
    return v;
  }

  Value(const Value& other) : kind_(other.kind_), u_(other.u_) {
    if (kind_ == Kind::kObject) u_.obj->IncRef();
  }
  Value(Value&& other) noexcept : kind_(other.kind_), u_(other.u_) { other.kind_ = Kind::kNone; }
  Value& operator=(const Value& other) {
    Value(other).swap(*this);
    return *this;
  }
  Value& operator=(Value&& other) noexcept {
    if (this != &other) {
      Kind old_kind = kind_;
      Object* old_obj = u_.obj;
      kind_ = other.kind_;
      u_ = other.u_;
      other.kind_ = Kind::kNone;
      if (old_kind == Kind::kObject) old_obj->DecRef();
    }
    return *this;
  }
  ~Value() {
    if (kind_ == Kind::kObject) u_.obj->DecRef();
  }
  void swap(Value& other) noexcept {
    std::swap(kind_, other.kind_);
    std::swap(u_, other.u_);
  }

  // Raw, suitably aligned storage for one Value (for placement construction).
  struct alignas(8) Storage {
    unsigned char bytes[16];
  };

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_dtype() const { return kind_ == Kind::kDataType; }
  bool is_device() const { return kind_ == Kind::kDevice; }
  bool is_opaque_ptr() const { return kind_ == Kind::kOpaquePtr; }
  bool is_object() const { return kind_ == Kind::kObject; }
  TypeIndex object_type() const {
    return kind_ == Kind::kObject ? u_.obj->type_index() : TypeIndex::kOther;
  }
  bool is_string() const { return IsObjectOf(TypeIndex::kString); }
  bool is_shape() const { return IsObjectOf(TypeIndex::kShape); }
  bool is_tensor() const { return IsObjectOf(TypeIndex::kTensor); }
  bool is_tuple() const { return IsObjectOf(TypeIndex::kTuple); }
  bool is_function() const { return IsObjectOf(TypeIndex::kFunction); }
  bool is_closure() const { return IsObjectOf(TypeIndex::kClosure); }

  // Accessors; each requires the matching kind (checked by the caller).
  int64_t int_value() const { return u_.i; }
  double float_value() const { return u_.f; }
  bool bool_value() const { return u_.b; }
  DataType dtype_value() const { return DataType(u_.dtype); }
  Device device_value() const { return Device::FromDL(u_.device); }
  void* opaque_ptr() const { return u_.ptr; }
  Object* object() const { return kind_ == Kind::kObject ? u_.obj : nullptr; }
  template <typename T>
  Ref<T> AsRef() const {
    return Ref<T>(static_cast<T*>(object()));
  }
  // The string of a String object; requires is_string().
  const std::string& string_value() const;

  // A short type name for messages: "None", "int", "Tensor", "Tuple", ...
  std::string TypeName() const;
  // A human-readable rendering, e.g. for the demo and error messages.
  std::string ToString() const;

 private:
  bool IsObjectOf(TypeIndex t) const { return kind_ == Kind::kObject && u_.obj->type_index() == t; }

  Kind kind_;
  union Payload {
    int64_t i;
    double f;
    bool b;
    DLDataType dtype;
    DLDevice device;
    void* ptr;
    Object* obj;
  } u_;
};

static_assert(sizeof(Value) == sizeof(Value::Storage) && alignof(Value) <= alignof(Value::Storage));

using ArgSpan = std::span<const Value>;

// An immutable string object.
class StringObj final : public Object {
 public:
  explicit StringObj(std::string s) : Object(TypeIndex::kString), data(std::move(s)) {}
  absl::string_view type_key() const override { return "String"; }
  const std::string data;
};

// An immutable shape (list of int64 dimensions), the ShapeTuple of the reference.
class ShapeObj final : public Object {
 public:
  using Dims = absl::InlinedVector<int64_t, 6>;
  explicit ShapeObj(Dims d) : Object(TypeIndex::kShape), dims(std::move(d)) {}
  absl::string_view type_key() const override { return "Shape"; }
  const Dims dims;
};

// An immutable tuple of values; fields may be tuples themselves.
class TupleObj final : public Object {
 public:
  explicit TupleObj(std::vector<Value> f) : Object(TypeIndex::kTuple), fields(std::move(f)) {}
  absl::string_view type_key() const override { return "Tuple"; }
  const std::vector<Value> fields;
};

Value MakeShape(ShapeObj::Dims dims);
Value MakeTuple(std::vector<Value> fields);

// "[1, 2, 3]".
std::string ShapeToString(std::span<const int64_t> dims);

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_VALUE_H_
