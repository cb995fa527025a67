// Function: a type-erased callable taking Values, the PackedFunc of the
// reference. Typed C++ callables are wrapped with argument conversion and
// checked arity, so a wrong argument is a TypeError naming the function, the
// argument index and both types instead of a crash.
#ifndef TETHER_RUNTIME_CORE_FUNCTION_H_
#define TETHER_RUNTIME_CORE_FUNCTION_H_

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/core/error.h"
#include "runtime/core/object.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"

namespace tether {

// Thread contract: calling is as thread-safe as the wrapped callable; the
// registry's built-ins are all thread-safe.
class FunctionObj : public Object {
 public:
  absl::string_view type_key() const override { return "Function"; }
  virtual absl::StatusOr<Value> Call(ArgSpan args) const = 0;
  const std::string& name() const { return name_; }

 protected:
  explicit FunctionObj(std::string name) : Object(TypeIndex::kFunction), name_(std::move(name)) {}

 private:
  std::string name_;
};

// --- Value <-> C++ conversion -------------------------------------------------

// ValueTraits<T>::From(v, &out) converts or returns false; TypeName() names T
// in messages; To(T) builds a Value.
template <typename T, typename = void>
struct ValueTraits;

template <>
struct ValueTraits<Value> {
  static bool From(const Value& v, Value* out) {
    *out = v;
    return true;
  }
  static const char* TypeName() { return "any"; }
  static Value To(Value v) { return v; }
};
template <typename T>
struct ValueTraits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  // An int that does not fit T is refused (a TypeError), never truncated.
  static bool From(const Value& v, T* out) {
    if (v.is_int()) {
      if (!std::in_range<T>(v.int_value())) return false;
      *out = static_cast<T>(v.int_value());
      return true;
    }
    if (v.is_bool()) {
      *out = static_cast<T>(v.bool_value());
      return true;
    }
    return false;
  }
  static const char* TypeName() {
    if constexpr (sizeof(T) == 8 && std::is_signed_v<T>)
      return "int";
    else if constexpr (sizeof(T) == 8)
      return "int (in uint64 range)";
    else if constexpr (sizeof(T) == 4)
      return std::is_signed_v<T> ? "int (in int32 range)" : "int (in uint32 range)";
    else if constexpr (sizeof(T) == 2)
      return std::is_signed_v<T> ? "int (in int16 range)" : "int (in uint16 range)";
    else
      return std::is_signed_v<T> ? "int (in int8 range)" : "int (in uint8 range)";
  }
  static Value To(T v) { return Value(static_cast<int64_t>(v)); }
};
template <>
struct ValueTraits<bool> {
  static bool From(const Value& v, bool* out) {
    if (v.is_bool()) {
      *out = v.bool_value();
      return true;
    }
    if (v.is_int()) {
      *out = v.int_value() != 0;
      return true;
    }
    return false;
  }
  static const char* TypeName() { return "bool"; }
  static Value To(bool v) { return Value(v); }
};
template <>
struct ValueTraits<double> {
  static bool From(const Value& v, double* out) {
    if (v.is_float()) {
      *out = v.float_value();
      return true;
    }
    if (v.is_int()) {
      *out = static_cast<double>(v.int_value());
      return true;
    }
    return false;
  }
  static const char* TypeName() { return "float"; }
  static Value To(double v) { return Value(v); }
};
template <>
struct ValueTraits<std::string> {
  static bool From(const Value& v, std::string* out) {
    if (!v.is_string()) return false;
    *out = v.string_value();
    return true;
  }
  static const char* TypeName() { return "str"; }
  static Value To(std::string v) { return Value(std::move(v)); }
};
template <>
struct ValueTraits<DataType> {
  static bool From(const Value& v, DataType* out) {
    if (v.is_dtype()) {
      *out = v.dtype_value();
      return true;
    }
    if (v.is_string()) {
      auto t = DataType::Parse(v.string_value());
      if (!t.ok()) return false;
      *out = *t;
      return true;
    }
    return false;
  }
  static const char* TypeName() { return "DataType"; }
  static Value To(DataType v) { return Value(v); }
};
template <>
struct ValueTraits<Device> {
  static bool From(const Value& v, Device* out) {
    if (!v.is_device()) return false;
    *out = v.device_value();
    return true;
  }
  static const char* TypeName() { return "Device"; }
  static Value To(Device v) { return Value(v); }
};
template <>
struct ValueTraits<void*> {
  static bool From(const Value& v, void** out) {
    if (v.is_opaque_ptr()) {
      *out = v.opaque_ptr();
      return true;
    }
    if (v.is_none()) {
      *out = nullptr;
      return true;
    }
    return false;
  }
  static const char* TypeName() { return "pointer"; }
  static Value To(void* v) { return Value::OpaquePtr(v); }
};
template <>
struct ValueTraits<Tensor> {
  static bool From(const Value& v, Tensor* out) {
    if (!v.is_tensor()) return false;
    *out = Tensor(v.AsRef<TensorObj>());
    return true;
  }
  static const char* TypeName() { return "Tensor"; }
  static Value To(Tensor v) { return Value(v.ref()); }
};
template <typename T>
struct ValueTraits<Ref<T>, std::enable_if_t<std::is_base_of_v<Object, T>>> {
  static bool From(const Value& v, Ref<T>* out) {
    Object* obj = v.object();
    if (obj == nullptr) return false;
    T* typed = dynamic_cast<T*>(obj);
    if (typed == nullptr) return false;
    *out = Ref<T>(typed);
    return true;
  }
  static const char* TypeName() { return "object"; }
  static Value To(Ref<T> v) { return Value(std::move(v)); }
};

namespace internal {

template <typename R>
struct ReturnTraits {
  static absl::StatusOr<Value> Wrap(R r) { return ValueTraits<std::decay_t<R>>::To(std::move(r)); }
};
template <typename R>
struct ReturnTraits<absl::StatusOr<R>> {
  static absl::StatusOr<Value> Wrap(absl::StatusOr<R> r) {
    if (!r.ok()) return std::move(r).status();
    return ValueTraits<std::decay_t<R>>::To(std::move(r).value());
  }
};
template <>
struct ReturnTraits<absl::Status> {
  static absl::StatusOr<Value> Wrap(absl::Status s) {
    if (!s.ok()) return s;
    return Value();
  }
};

template <typename F>
struct CallableTraits : CallableTraits<decltype(&F::operator())> {};
template <typename C, typename R, typename... A>
struct CallableTraits<R (C::*)(A...) const> {
  using Return = R;
  using Args = std::tuple<std::decay_t<A>...>;
};
template <typename C, typename R, typename... A>
struct CallableTraits<R (C::*)(A...)> : CallableTraits<R (C::*)(A...) const> {};
template <typename R, typename... A>
struct CallableTraits<R (*)(A...)> {
  using Return = R;
  using Args = std::tuple<std::decay_t<A>...>;
};

absl::Status ArgTypeError(absl::string_view func, size_t index, const char* expected,
                          const Value& got);
absl::Status ArityError(absl::string_view func, size_t expected, size_t got);

template <typename F>
class PackedFunctionObj final : public FunctionObj {
 public:
  PackedFunctionObj(std::string name, F f) : FunctionObj(std::move(name)), f_(std::move(f)) {}
  absl::StatusOr<Value> Call(ArgSpan args) const override { return f_(args); }

 private:
  F f_;
};

template <typename F>
class TypedFunctionObj final : public FunctionObj {
  using Traits = CallableTraits<F>;
  using Args = typename Traits::Args;
  static constexpr size_t kArity = std::tuple_size_v<Args>;

 public:
  TypedFunctionObj(std::string name, F f) : FunctionObj(std::move(name)), f_(std::move(f)) {}

  absl::StatusOr<Value> Call(ArgSpan args) const override {
    if (args.size() != kArity) return ArityError(name(), kArity, args.size());
    Args converted;
    absl::Status status = Convert(args, converted, std::make_index_sequence<kArity>());
    if (!status.ok()) return status;
    return Invoke(converted, std::make_index_sequence<kArity>());
  }

 private:
  template <size_t... I>
  absl::Status Convert([[maybe_unused]] ArgSpan args, [[maybe_unused]] Args& out,
                       std::index_sequence<I...>) const {
    absl::Status status;
    (void)((ConvertOne<I>(args, out, status)) && ...);
    return status;
  }
  template <size_t I>
  bool ConvertOne(ArgSpan args, Args& out, absl::Status& status) const {
    using T = std::tuple_element_t<I, Args>;
    if (ValueTraits<T>::From(args[I], &std::get<I>(out))) return true;
    status = ArgTypeError(name(), I, ValueTraits<T>::TypeName(), args[I]);
    return false;
  }
  template <size_t... I>
  absl::StatusOr<Value> Invoke([[maybe_unused]] Args& args, std::index_sequence<I...>) const {
    using R = typename Traits::Return;
    if constexpr (std::is_void_v<R>) {
      f_(std::move(std::get<I>(args))...);
      return Value();
    } else {
      return ReturnTraits<R>::Wrap(f_(std::move(std::get<I>(args))...));
    }
  }

  F f_;
};

}  // namespace internal

// A nullable handle to a FunctionObj.
class Function {
 public:
  Function() = default;
  explicit Function(Ref<FunctionObj> obj) : obj_(std::move(obj)) {}

  // Wraps f(ArgSpan) -> absl::StatusOr<Value>.
  template <typename F>
  static Function FromPacked(std::string name, F f) {
    return Function(MakeRef<internal::PackedFunctionObj<F>>(std::move(name), std::move(f)));
  }
  // Wraps a callable with typed parameters (int64_t, double, bool, std::string,
  // DataType, Device, Tensor, Value, void*, Ref<T>) and a return of void,
  // absl::Status, a convertible type, or absl::StatusOr of one.
  template <typename F>
  static Function FromTyped(std::string name, F f) {
    return Function(MakeRef<internal::TypedFunctionObj<F>>(std::move(name), std::move(f)));
  }

  absl::StatusOr<Value> operator()(ArgSpan args) const { return obj_->Call(args); }
  template <typename... A>
  absl::StatusOr<Value> Call(A&&... args) const {
    Value packed[] = {Value(std::forward<A>(args))..., Value()};
    return obj_->Call(ArgSpan(packed, sizeof...(A)));
  }

  const std::string& name() const { return obj_->name(); }
  FunctionObj* get() const { return obj_.get(); }
  explicit operator bool() const { return static_cast<bool>(obj_); }
  const Ref<FunctionObj>& ref() const { return obj_; }
  operator Value() const { return Value(obj_); }  // NOLINT(google-explicit-constructor)

 private:
  Ref<FunctionObj> obj_;
};

template <>
struct ValueTraits<Function> {
  static bool From(const Value& v, Function* out) {
    if (!v.is_function()) return false;
    *out = Function(v.AsRef<FunctionObj>());
    return true;
  }
  static const char* TypeName() { return "Function"; }
  static Value To(Function v) { return Value(v.ref()); }
};

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_FUNCTION_H_
