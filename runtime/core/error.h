// Error construction for the whole runtime. Every failure is an absl::Status
// whose canonical code says what the caller did wrong (see STYLE.md) and whose
// payload carries the reference system's error kind (ValueError, TypeError, ...),
// so a remote client can tell a type mismatch from a bad index after the error
// has crossed the wire.
#ifndef TETHER_RUNTIME_CORE_ERROR_H_
#define TETHER_RUNTIME_CORE_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tether {

// The kind of an error, as the reference system's Python exception types.
enum class ErrorKind : int {
  kUnspecified = 0,
  kValue = 1,        // ValueError: a value is wrong for this call
  kType = 2,         // TypeError: a value has the wrong type
  kIndex = 3,        // IndexError: an index is out of range
  kRuntime = 4,      // RuntimeError: something failed while running
  kOutOfMemory = 5,  // out of device or host memory, or over a quota
  kNotFound = 6,     // an unknown function, module or handle
  kInternal = 7,     // a bug in Tether
  kCancelled = 8,    // the call was stopped (deadline, cancellation)
};

// The type URL under which the kind is stored in a Status payload.
inline constexpr absl::string_view kErrorKindPayloadUrl = "type.tether.dev/tether.ErrorKind";

absl::string_view ErrorKindName(ErrorKind kind);

// Returns `status` with `kind` attached as a payload.
absl::Status WithErrorKind(absl::Status status, ErrorKind kind);

// The kind attached to `status`, or one derived from its code when none is.
ErrorKind GetErrorKind(const absl::Status& status);

// `status` with its message prefixed by the concatenated `context` (for
// example Annotate(s, "param ", name, ": ")), keeping its code and every
// payload, the ErrorKind included. OK stays OK. The one way to add context
// to an error on its way up.
absl::Status AnnotateImpl(const absl::Status& status, absl::string_view prefix);
template <typename... Args>
absl::Status Annotate(const absl::Status& status, const Args&... context) {
  if (status.ok()) return status;
  return AnnotateImpl(status, absl::StrCat(context...));
}

// Convenience constructors: the code follows STYLE.md, the kind follows the
// reference. Arguments are concatenated with absl::StrCat.
template <typename... Args>
absl::Status ValueError(const Args&... args) {
  return WithErrorKind(absl::InvalidArgumentError(absl::StrCat(args...)), ErrorKind::kValue);
}
template <typename... Args>
absl::Status TypeError(const Args&... args) {
  return WithErrorKind(absl::InvalidArgumentError(absl::StrCat(args...)), ErrorKind::kType);
}
template <typename... Args>
absl::Status IndexError(const Args&... args) {
  return WithErrorKind(absl::OutOfRangeError(absl::StrCat(args...)), ErrorKind::kIndex);
}
template <typename... Args>
absl::Status RuntimeError(const Args&... args) {
  return WithErrorKind(absl::InternalError(absl::StrCat(args...)), ErrorKind::kRuntime);
}
template <typename... Args>
absl::Status NotFoundError(const Args&... args) {
  return WithErrorKind(absl::NotFoundError(absl::StrCat(args...)), ErrorKind::kNotFound);
}
template <typename... Args>
absl::Status PreconditionError(const Args&... args) {
  return WithErrorKind(absl::FailedPreconditionError(absl::StrCat(args...)), ErrorKind::kValue);
}
template <typename... Args>
absl::Status OutOfMemoryError(const Args&... args) {
  return WithErrorKind(absl::ResourceExhaustedError(absl::StrCat(args...)),
                       ErrorKind::kOutOfMemory);
}
template <typename... Args>
absl::Status UnavailableError(const Args&... args) {
  return WithErrorKind(absl::UnavailableError(absl::StrCat(args...)), ErrorKind::kRuntime);
}

}  // namespace tether

#define TETHER_STATUS_CONCAT_INNER_(a, b) a##b
#define TETHER_STATUS_CONCAT_(a, b) TETHER_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define TETHER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status tether_status_ = (expr);          \
    if (!tether_status_.ok()) return tether_status_; \
  } while (0)

// TETHER_ASSIGN_OR_RETURN(auto x, Foo()): assigns the value of a StatusOr or
// returns its status.
#define TETHER_ASSIGN_OR_RETURN(lhs, expr) \
  TETHER_ASSIGN_OR_RETURN_IMPL_(TETHER_STATUS_CONCAT_(tether_statusor_, __LINE__), lhs, expr)
#define TETHER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#endif  // TETHER_RUNTIME_CORE_ERROR_H_
