// The session's choice of transport (client/transport.h) against daemons
// that refuse or lose the CallStream. A tetherd of today has every transport,
// so these are small gRPC servers on 127.0.0.1:0 that speak the protocol as
// a protocol-1.0 daemon (no direct channel, no CallStream) or as a daemon
// that dies with a call on the stream would: a request the stream never took
// goes to unary calls, one it lost is never sent twice.
#include "client/transport.h"

#include <atomic>
#include <memory>
#include <string>

#include "client/remote_session.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::client {
namespace {

using ::testing::HasSubstr;

// The session part of the protocol, and unary Calls that answer with the
// integer 42. CallStream is left to `stream` (UNIMPLEMENTED by default, as
// on a protocol-1.0 daemon), as is OpenDirectChannel.
class OldDaemon final : public v1::Tether::Service {
 public:
  enum class Stream { kRefused, kDiesMidCall };
  explicit OldDaemon(Stream stream) : stream_(stream) {}

  grpc::Status Handshake(grpc::ServerContext*, const v1::HandshakeRequest*,
                         v1::HandshakeResponse* response) override {
    response->mutable_protocol()->set_major(1);
    response->mutable_protocol()->set_minor(0);
    response->mutable_limits()->set_chunk_bytes(1 << 16);
    response->mutable_limits()->set_max_inline_tensor_bytes(1 << 16);
    return grpc::Status::OK;
  }
  grpc::Status OpenSession(grpc::ServerContext*, const v1::OpenSessionRequest*,
                           v1::OpenSessionResponse* response) override {
    response->set_session_id("0123456789abcdef");
    return grpc::Status::OK;
  }
  grpc::Status KeepAlive(grpc::ServerContext*, const v1::KeepAliveRequest*,
                         v1::KeepAliveResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status CloseSession(grpc::ServerContext*, const v1::CloseSessionRequest*,
                            v1::CloseSessionResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Call(grpc::ServerContext*, const v1::CallRequest* request,
                    v1::CallResponse* response) override {
    ++unary_calls;
    response->set_request_id(request->request_id());
    response->mutable_value()->set_int_value(42);
    return grpc::Status::OK;
  }
  grpc::Status CallStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CallResponse, v1::CallRequest>* stream) override {
    if (stream_ == Stream::kRefused) {
      return v1::Tether::Service::CallStream(context, stream);
    }
    v1::CallRequest request;
    if (stream->Read(&request)) ++stream_calls;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the daemon died during the call");
  }

  std::atomic<int> unary_calls{0};
  std::atomic<int> stream_calls{0};

 private:
  Stream stream_;
};

class TransportFallbackTest : public ::testing::Test {
 protected:
  void Serve(OldDaemon::Stream stream, ConnectOptions options = {}) {
    daemon_ = std::make_unique<OldDaemon>(stream);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(daemon_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto session = RemoteSession::Connect("127.0.0.1:" + std::to_string(port), options);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
  }
  void TearDown() override {
    session_.reset();
    if (server_) server_->Shutdown();
  }
  absl::StatusOr<v1::CallResponse> Invoke() {
    v1::CallRequest request;
    request.mutable_invoke()->set_vm_id(1);
    request.mutable_invoke()->set_function("main");
    return session_->Call(request);
  }

  std::unique_ptr<OldDaemon> daemon_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RemoteSession> session_;
};

TEST_F(TransportFallbackTest, ADaemonWithoutTheStreamGetsUnaryCallsEachRunOnce) {
  Serve(OldDaemon::Stream::kRefused);
  // No direct channel (UNIMPLEMENTED before protocol 1.1): the stream next.
  EXPECT_EQ(session_->transport(), TransportKind::kStream);
  auto first = Invoke();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->value().int_value(), 42);
  EXPECT_EQ(daemon_->unary_calls.load(), 1);
  EXPECT_EQ(session_->transport(), TransportKind::kUnary);
  auto second = Invoke();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(daemon_->unary_calls.load(), 2);
}

TEST_F(TransportFallbackTest, ACallTheStreamLostIsNotSentAgain) {
  Serve(OldDaemon::Stream::kDiesMidCall);
  auto lost = Invoke();
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_THAT(lost.status().message(), HasSubstr("died during the call"));
  EXPECT_EQ(daemon_->stream_calls.load(), 1);
  EXPECT_EQ(daemon_->unary_calls.load(), 0);
  // The stream is not opened again: later calls are unary.
  EXPECT_EQ(session_->transport(), TransportKind::kUnary);
  auto next = Invoke();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(daemon_->stream_calls.load(), 1);
  EXPECT_EQ(daemon_->unary_calls.load(), 1);
}

TEST_F(TransportFallbackTest, AUnaryOnlySessionNeverOpensTheStream) {
  ConnectOptions options;
  options.transport = TransportKind::kUnary;
  Serve(OldDaemon::Stream::kDiesMidCall, options);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Invoke().ok());
  EXPECT_EQ(daemon_->unary_calls.load(), 3);
  EXPECT_EQ(daemon_->stream_calls.load(), 0);
}

}  // namespace
}  // namespace tether::client
