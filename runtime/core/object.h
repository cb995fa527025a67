// The intrusive reference-counted object base and its handle, Ref<T>.
//
// Every heap value the VM moves (strings, shapes, tensors, tuples, functions,
// closures, storage, modules) is an Object. A small integer type index, fixed at
// construction, makes kind checks a compare instead of a dynamic_cast.
#ifndef TETHER_RUNTIME_CORE_OBJECT_H_
#define TETHER_RUNTIME_CORE_OBJECT_H_

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/strings/string_view.h"

namespace tether {

// Built-in object type indices. Types defined elsewhere (modules, storage, the
// VM's own objects) use kOther unless they need a fast check.
enum class TypeIndex : uint32_t {
  kOther = 0,
  kString = 1,
  kShape = 2,
  kTensor = 3,
  kTuple = 4,
  kFunction = 5,
  kClosure = 6,
  kStorage = 7,
  kModule = 8,
};

// Thread contract: the reference count is atomic, so Ref<T> copies may be made
// and dropped on any thread; the object's own state has its own contract.
class Object {
 public:
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  virtual ~Object() = default;

  TypeIndex type_index() const { return type_index_; }
  // A stable name for messages, e.g. "Tensor", "vm.Closure".
  virtual absl::string_view type_key() const { return "Object"; }

  void IncRef() const { ref_count_.fetch_add(1, std::memory_order_relaxed); }
  void DecRef() const {
    if (ref_count_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  int64_t use_count() const { return ref_count_.load(std::memory_order_relaxed); }

 protected:
  explicit Object(TypeIndex index = TypeIndex::kOther) : type_index_(index) {}

 private:
  mutable std::atomic<int64_t> ref_count_{0};
  TypeIndex type_index_;
};

// A strong, nullable reference to an Object subclass.
template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  explicit Ref(T* ptr) : ptr_(ptr) {
    if (ptr_) ptr_->IncRef();
  }
  Ref(const Ref& other) : Ref(other.ptr_) {}
  Ref(Ref&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  Ref(const Ref<U>& other) : Ref(other.get()) {}  // NOLINT(google-explicit-constructor)
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  Ref(Ref<U>&& other) noexcept : ptr_(other.release()) {}  // NOLINT(google-explicit-constructor)
  ~Ref() {
    if (ptr_) ptr_->DecRef();
  }

  Ref& operator=(Ref other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }

  T* get() const { return ptr_; }
  T* operator->() const { return ptr_; }
  T& operator*() const { return *ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  bool operator==(const Ref& other) const { return ptr_ == other.ptr_; }
  bool operator==(std::nullptr_t) const { return ptr_ == nullptr; }

  // Gives up ownership without decrementing; the caller must DecRef later.
  T* release() { return std::exchange(ptr_, nullptr); }

 private:
  T* ptr_ = nullptr;
};

template <typename T, typename... Args>
Ref<T> MakeRef(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

// static_cast between Ref types; the caller has checked the type.
template <typename T, typename U>
Ref<T> StaticRefCast(const Ref<U>& ref) {
  return Ref<T>(static_cast<T*>(ref.get()));
}

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_OBJECT_H_
