// Error kinds as Status payloads.
#include "runtime/core/error.h"

#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace tether {

absl::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUnspecified:
      return "Error";
    case ErrorKind::kValue:
      return "ValueError";
    case ErrorKind::kType:
      return "TypeError";
    case ErrorKind::kIndex:
      return "IndexError";
    case ErrorKind::kRuntime:
      return "RuntimeError";
    case ErrorKind::kOutOfMemory:
      return "OutOfMemoryError";
    case ErrorKind::kNotFound:
      return "NotFoundError";
    case ErrorKind::kInternal:
      return "InternalError";
    case ErrorKind::kCancelled:
      return "CancelledError";
  }
  return "Error";
}

absl::Status WithErrorKind(absl::Status status, ErrorKind kind) {
  if (!status.ok()) {
    status.SetPayload(kErrorKindPayloadUrl, absl::Cord(std::to_string(static_cast<int>(kind))));
  }
  return status;
}

absl::Status AnnotateImpl(const absl::Status& status, absl::string_view prefix) {
  absl::Status out(status.code(), absl::StrCat(prefix, status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

ErrorKind GetErrorKind(const absl::Status& status) {
  if (status.ok()) return ErrorKind::kUnspecified;
  auto payload = status.GetPayload(kErrorKindPayloadUrl);
  int value = 0;
  if (payload && absl::SimpleAtoi(std::string(*payload), &value) && value >= 0 &&
      value <= static_cast<int>(ErrorKind::kCancelled)) {
    return static_cast<ErrorKind>(value);
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return ErrorKind::kValue;
    case absl::StatusCode::kOutOfRange:
      return ErrorKind::kIndex;
    case absl::StatusCode::kNotFound:
      return ErrorKind::kNotFound;
    case absl::StatusCode::kResourceExhausted:
      return ErrorKind::kOutOfMemory;
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return ErrorKind::kCancelled;
    case absl::StatusCode::kInternal:
      return ErrorKind::kInternal;
    default:
      return ErrorKind::kRuntime;
  }
}

}  // namespace tether
