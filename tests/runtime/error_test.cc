// Tests of error kinds carried as absl::Status payloads.
#include "runtime/core/error.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

TEST(ErrorTest, ConstructorsSetCodeKindAndMessage) {
  struct Case {
    absl::Status status;
    absl::StatusCode code;
    ErrorKind kind;
  };
  const Case cases[] = {
      {ValueError("bad ", 1), absl::StatusCode::kInvalidArgument, ErrorKind::kValue},
      {TypeError("bad ", 1), absl::StatusCode::kInvalidArgument, ErrorKind::kType},
      {IndexError("bad ", 1), absl::StatusCode::kOutOfRange, ErrorKind::kIndex},
      {RuntimeError("bad ", 1), absl::StatusCode::kInternal, ErrorKind::kRuntime},
      {NotFoundError("bad ", 1), absl::StatusCode::kNotFound, ErrorKind::kNotFound},
      {PreconditionError("bad ", 1), absl::StatusCode::kFailedPrecondition, ErrorKind::kValue},
      {OutOfMemoryError("bad ", 1), absl::StatusCode::kResourceExhausted, ErrorKind::kOutOfMemory},
      {UnavailableError("bad ", 1), absl::StatusCode::kUnavailable, ErrorKind::kRuntime},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.status.ToString());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "bad 1");
    EXPECT_EQ(GetErrorKind(c.status), c.kind);
  }
}

TEST(ErrorTest, KindSurvivesCopiesMovesAndStatusOr) {
  absl::Status original = TypeError("wrong type");
  absl::Status copy = original;
  EXPECT_EQ(GetErrorKind(copy), ErrorKind::kType);
  absl::Status assigned;
  assigned = copy;
  EXPECT_EQ(GetErrorKind(assigned), ErrorKind::kType);
  absl::Status moved = std::move(copy);
  EXPECT_EQ(GetErrorKind(moved), ErrorKind::kType);
  absl::StatusOr<int> wrapped = moved;
  EXPECT_EQ(GetErrorKind(wrapped.status()), ErrorKind::kType);
  absl::StatusOr<std::string> rewrapped = wrapped.status();
  EXPECT_EQ(GetErrorKind(rewrapped.status()), ErrorKind::kType);
  EXPECT_EQ(original, assigned) << "the payload takes part in equality";
}

TEST(ErrorTest, KindPayloadOverridesTheCode) {
  // The kind travels independently of the code, e.g. a TypeError whose code
  // was chosen by the transport.
  absl::Status s = WithErrorKind(absl::InternalError("x"), ErrorKind::kType);
  EXPECT_EQ(GetErrorKind(s), ErrorKind::kType);
  s = WithErrorKind(s, ErrorKind::kIndex);
  EXPECT_EQ(GetErrorKind(s), ErrorKind::kIndex) << "a later kind replaces the earlier";
}

TEST(ErrorTest, FallsBackByCodeWithoutAPayload) {
  EXPECT_EQ(GetErrorKind(absl::InvalidArgumentError("x")), ErrorKind::kValue);
  EXPECT_EQ(GetErrorKind(absl::OutOfRangeError("x")), ErrorKind::kIndex);
  EXPECT_EQ(GetErrorKind(absl::NotFoundError("x")), ErrorKind::kNotFound);
  EXPECT_EQ(GetErrorKind(absl::ResourceExhaustedError("x")), ErrorKind::kOutOfMemory);
  EXPECT_EQ(GetErrorKind(absl::DeadlineExceededError("x")), ErrorKind::kCancelled);
  EXPECT_EQ(GetErrorKind(absl::CancelledError("x")), ErrorKind::kCancelled);
  EXPECT_EQ(GetErrorKind(absl::InternalError("x")), ErrorKind::kInternal);
  EXPECT_EQ(GetErrorKind(absl::UnavailableError("x")), ErrorKind::kRuntime);
  EXPECT_EQ(GetErrorKind(absl::FailedPreconditionError("x")), ErrorKind::kRuntime);
  EXPECT_EQ(GetErrorKind(absl::UnknownError("x")), ErrorKind::kRuntime);
}

TEST(ErrorTest, FallsBackByCodeOnAMalformedPayload) {
  for (const char* payload : {"", "abc", "99", "-1", "2x"}) {
    SCOPED_TRACE(payload);
    absl::Status s = absl::OutOfRangeError("x");
    s.SetPayload(kErrorKindPayloadUrl, absl::Cord(payload));
    EXPECT_EQ(GetErrorKind(s), ErrorKind::kIndex);
  }
}

TEST(ErrorTest, OkHasNoKind) {
  EXPECT_EQ(GetErrorKind(absl::OkStatus()), ErrorKind::kUnspecified);
  absl::Status ok = WithErrorKind(absl::OkStatus(), ErrorKind::kType);
  EXPECT_TRUE(ok.ok());
  EXPECT_FALSE(ok.GetPayload(kErrorKindPayloadUrl).has_value());
}

TEST(ErrorTest, KindNamesFollowTheReference) {
  EXPECT_EQ(ErrorKindName(ErrorKind::kUnspecified), "Error");
  EXPECT_EQ(ErrorKindName(ErrorKind::kValue), "ValueError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kType), "TypeError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kIndex), "IndexError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kRuntime), "RuntimeError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kOutOfMemory), "OutOfMemoryError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kNotFound), "NotFoundError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kInternal), "InternalError");
  EXPECT_EQ(ErrorKindName(ErrorKind::kCancelled), "CancelledError");
  EXPECT_EQ(ErrorKindName(static_cast<ErrorKind>(42)), "Error");
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return ValueError("odd ", x);
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  TETHER_ASSIGN_OR_RETURN(int h, Half(x));
  TETHER_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  TETHER_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(ErrorTest, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  absl::StatusOr<int> r = Quarter(6);
  EXPECT_EQ(r.status().message(), "odd 3");
  EXPECT_EQ(GetErrorKind(r.status()), ErrorKind::kValue);
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_EQ(CheckEven(3).message(), "odd 3");
}

}  // namespace
}  // namespace tether
