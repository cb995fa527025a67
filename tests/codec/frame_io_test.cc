// Length-prefixed frames on a socket pair: round trips, pipelined and split
// frames, and every way a peer can get them wrong.
#include "proto/codec/frame_io.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/v1/tether.pb.h"

namespace tether::rpc {
namespace {

using ::testing::HasSubstr;

class FrameIoTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void CloseWriter() {
    ::close(fds_[0]);
    fds_[0] = -1;
  }
  int writer() const { return fds_[0]; }
  int reader() const { return fds_[1]; }

  int fds_[2] = {-1, -1};
};

v1::CallRequest Request(uint64_t id, const std::string& session) {
  v1::CallRequest request;
  request.set_request_id(id);
  request.set_session_id(session);
  request.mutable_invoke()->set_function("main");
  return request;
}

TEST_F(FrameIoTest, FramesRoundTripInOrderWhetherPipelinedOrSplit) {
  // The second frame is larger than the reader's first buffer and may exceed
  // the socket's: written from another thread while the reader reads.
  std::thread sender([&] {
    EXPECT_TRUE(WriteFrame(writer(), Request(1, "a")).ok());
    EXPECT_TRUE(WriteFrame(writer(), Request(2, std::string(100000, 'b'))).ok());
  });
  FrameReader frames(reader());
  v1::CallRequest got;
  ASSERT_TRUE(frames.Read(1 << 20, &got).ok());
  EXPECT_EQ(got.request_id(), 1u);
  EXPECT_EQ(got.session_id(), "a");
  ASSERT_TRUE(frames.Read(1 << 20, &got).ok());
  EXPECT_EQ(got.request_id(), 2u);
  EXPECT_EQ(got.session_id().size(), 100000u);
  sender.join();

  // One frame delivered a byte at a time.
  std::string body = Request(3, "c").SerializeAsString();
  std::string frame(4, '\0');
  frame[0] = static_cast<char>(body.size());
  frame += body;
  std::thread slow([&] {
    for (char byte : frame) ASSERT_TRUE(WriteAll(writer(), std::string(1, byte)).ok());
  });
  ASSERT_TRUE(frames.Read(1 << 20, &got).ok());
  slow.join();
  EXPECT_EQ(got.request_id(), 3u);
}

TEST_F(FrameIoTest, AnEmptyFrameIsAnEmptyMessage) {
  ASSERT_TRUE(WriteFrame(writer(), v1::CallRequest()).ok());
  FrameReader frames(reader());
  v1::CallRequest got = Request(9, "x");
  ASSERT_TRUE(frames.Read(1 << 20, &got).ok());
  EXPECT_EQ(got.op_case(), v1::CallRequest::OP_NOT_SET);
  EXPECT_EQ(got.request_id(), 0u);
}

TEST_F(FrameIoTest, AFrameOverTheLimitIsResourceExhausted) {
  ASSERT_TRUE(WriteFrame(writer(), Request(1, std::string(5000, 's'))).ok());
  FrameReader frames(reader());
  v1::CallRequest got;
  absl::Status status = frames.Read(4096, &got);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("limit of 4096"));
}

TEST_F(FrameIoTest, BytesThatDoNotParseAreInvalidArgument) {
  ASSERT_TRUE(WriteAll(writer(), std::string("\x03\x00\x00\x00\xff\xff\xff", 7)).ok());
  FrameReader frames(reader());
  v1::CallRequest got;
  absl::Status status = frames.Read(1 << 20, &got);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("tether.v1.CallRequest"));
}

TEST_F(FrameIoTest, EndOfStreamBetweenFramesIsCleanInsideOneIsNot) {
  ASSERT_TRUE(WriteFrame(writer(), Request(1, "a")).ok());
  ASSERT_TRUE(WriteAll(writer(), std::string("\x10\x00\x00\x00\x08", 5)).ok());  // 16 promised
  CloseWriter();
  FrameReader frames(reader());
  v1::CallRequest got;
  bool clean = true;
  ASSERT_TRUE(frames.Read(1 << 20, &got, &clean).ok());
  absl::Status cut = frames.Read(1 << 20, &got, &clean);
  EXPECT_EQ(cut.code(), absl::StatusCode::kUnavailable) << cut;
  EXPECT_FALSE(clean);
  EXPECT_THAT(cut.message(), HasSubstr("inside a frame"));

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ::close(pair[0]);
  FrameReader empty(pair[1]);
  absl::Status eof = empty.Read(1 << 20, &got, &clean);
  EXPECT_EQ(eof.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(clean);
  ::close(pair[1]);
}

TEST_F(FrameIoTest, WritingToAVanishedPeerIsUnavailableNotASignal) {
  ::close(fds_[1]);
  fds_[1] = -1;
  absl::Status status = WriteFrame(writer(), Request(1, "a"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

}  // namespace
}  // namespace tether::rpc
