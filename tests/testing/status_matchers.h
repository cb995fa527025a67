// Status matchers: a failure assertion checks the code and a message fragment,
// not only that a call failed.
//
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uint1x8")));
//   EXPECT_THAT(status_or, StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(grpc_status, GrpcStatusIs(grpc::StatusCode::UNAUTHENTICATED, HasSubstr("token")));
#ifndef TETHER_TESTS_TESTING_STATUS_MATCHERS_H_
#define TETHER_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"

namespace tether::testing {

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches an absl::Status or absl::StatusOr<T> with code `code` whose message
// matches `message` (anything by default).
MATCHER_P2(StatusIsImpl, code, message,
           absl::StrCat("has code ", absl::StatusCodeToString(code), " and a message that ",
                        ::testing::DescribeMatcher<std::string>(message))) {
  const absl::Status& status = ::tether::testing::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code && ::testing::Matches(message)(std::string(status.message()));
}

template <typename M>
auto StatusIs(absl::StatusCode code, M message) {
  return StatusIsImpl(code, ::testing::SafeMatcherCast<std::string>(message));
}
inline auto StatusIs(absl::StatusCode code) { return StatusIs(code, ::testing::_); }

// The same for a grpc::Status (any type with error_code() and
// error_message()), so that the test needs no gRPC headers here.
MATCHER_P2(GrpcStatusIsImpl, code, message,
           absl::StrCat("has gRPC code ", static_cast<int>(code), " and a message that ",
                        ::testing::DescribeMatcher<std::string>(message))) {
  *result_listener << "whose status is " << static_cast<int>(arg.error_code()) << ": "
                   << arg.error_message();
  return arg.error_code() == code && ::testing::Matches(message)(arg.error_message());
}

template <typename Code, typename M>
auto GrpcStatusIs(Code code, M message) {
  return GrpcStatusIsImpl(code, ::testing::SafeMatcherCast<std::string>(message));
}
template <typename Code>
auto GrpcStatusIs(Code code) {
  return GrpcStatusIs(code, ::testing::_);
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_STATUS_MATCHERS_H_
