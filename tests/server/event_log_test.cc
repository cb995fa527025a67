// Tests of server/event_log.h: the one line format of daemon events.
#include "server/event_log.h"

#include <string>

#include "gtest/gtest.h"

namespace tether::server {
namespace {

TEST(EventLineTest, WritesOneLineOfFieldsInOrder) {
  ::testing::internal::CaptureStderr();
  EventLine().Add("session", "ab12cd34").Add("event", "close").Add("objects", 3).Write();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "tetherd: session=ab12cd34 event=close objects=3\n");
}

TEST(EventLineTest, QuotedValuesAreEscapedSoALineStaysOneLine) {
  ::testing::internal::CaptureStderr();
  EventLine().Add("event", "open").Quote("client", "evil\"\nname").Write();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "tetherd: event=open client=\"evil\\\"\\nname\"\n");
}

}  // namespace
}  // namespace tether::server
