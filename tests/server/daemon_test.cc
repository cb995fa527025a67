// End-to-end tests of tetherd: an in-process Daemon on 127.0.0.1:0 driven
// through the generated stub over a real channel, plus the tetherd binary.
#include "server/daemon.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/codec/sha256.h"
#include "proto/codec/value_codec.h"
#include "tests/server/daemon_fixture.h"
#include "tests/testing/session_program.h"
#include "tests/testing/test_functions.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {
namespace {

using ::testing::HasSubstr;

TEST_F(DaemonTest, HandshakeReportsDevicesAndLimits) {
  grpc::ClientContext ctx;
  v1::HandshakeRequest req;
  req.mutable_client_protocol()->set_major(rpc::kProtocolMajor);
  v1::HandshakeResponse resp;
  ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.protocol().major(), rpc::kProtocolMajor);
  ASSERT_GE(resp.devices_size(), 1);
  EXPECT_EQ(resp.devices(0).name(), "cpu:0");
  EXPECT_TRUE(resp.devices(0).attributes().contains("exist"));
  EXPECT_GE(resp.limits().max_message_bytes(), resp.limits().chunk_bytes());
  EXPECT_GT(resp.dtypes_size(), 5);
}

TEST_F(DaemonTest, HandshakeRefusesAnotherMajor) {
  grpc::ClientContext ctx;
  v1::HandshakeRequest req;
  req.mutable_client_protocol()->set_major(rpc::kProtocolMajor + 1);
  v1::HandshakeResponse resp;
  grpc::Status s = stub_->Handshake(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat(rpc::kProtocolMajor + 1, ".0")));
}

TEST_F(DaemonTest, OpenCloseAndUnknownSession) {
  std::string id = Open();
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(daemon_->num_sessions(), 1u);
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(id);
  v1::CloseSessionResponse resp;
  EXPECT_TRUE(stub_->CloseSession(&ctx, req, &resp).ok());
  EXPECT_EQ(daemon_->num_sessions(), 0u);
  v1::CallRequest call;
  call.set_session_id(id);
  call.mutable_free_objects();
  v1::CallResponse out;
  EXPECT_EQ(Call(call, &out).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, ModuleUploadVerifiesHashAndSize) {
  std::string bytes(5000, 'x');
  std::string sha = rpc::Sha256Hex(bytes);
  EXPECT_EQ(Upload(bytes, rpc::Sha256Hex("other"), bytes.size()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Upload(bytes, sha, bytes.size() + 1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Upload(bytes, sha, bytes.size() - 1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(Upload(bytes, sha, bytes.size(), 1000, /*cancel_midway=*/true).error_code(),
            grpc::StatusCode::OK);
  EXPECT_EQ(Upload(bytes, "../../etc/passwd", bytes.size()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Nothing visible, no temp files left (the cancelled stream's reactor may
  // still be finishing: wait for its temp file to go, bounded).
  absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!StoreFiles().empty() && absl::Now() < give_up) std::this_thread::yield();
  EXPECT_TRUE(StoreFiles().empty());
  grpc::ClientContext ctx;
  v1::HasModuleRequest has;
  has.set_sha256(sha);
  v1::HasModuleResponse present;
  ASSERT_TRUE(stub_->HasModule(&ctx, has, &present).ok());
  EXPECT_FALSE(present.present());

  ASSERT_TRUE(Upload(bytes, sha, bytes.size()).ok());
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->HasModule(&ctx2, has, &present).ok());
  EXPECT_TRUE(present.present());
  EXPECT_EQ(present.size_bytes(), bytes.size());
  grpc::ClientContext ctx3;
  has.set_sha256("../x");
  EXPECT_EQ(stub_->HasModule(&ctx3, has, &present).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DaemonTest, CorruptExecutableIsInvalidArgument) {
  std::string bytes = "not an executable at all";
  std::string sha = rpc::Sha256Hex(bytes);
  ASSERT_TRUE(Upload(bytes, sha, bytes.size()).ok());
  std::string session = Open();
  v1::CallRequest req;
  req.set_session_id(session);
  req.mutable_create_vm()->set_module_sha256(sha);
  v1::CallResponse resp;
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.mutable_create_vm()->set_module_sha256(rpc::Sha256Hex("missing"));
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, CreateVmTakesAThreadCountAndRefusesANegativeOne) {
  std::string sha = UploadExec();
  std::string session = Open();
  v1::CallRequest req;
  req.set_session_id(session);
  req.mutable_create_vm()->set_module_sha256(sha);
  req.mutable_create_vm()->set_num_threads(-2);
  v1::CallResponse resp;
  grpc::Status s = Call(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("num_threads must be >= 0, got -2"));
  req.mutable_create_vm()->set_num_threads(1);
  ASSERT_TRUE(Call(req, &resp).ok());
  EXPECT_NE(resp.create_vm().vm_id(), 0u);
}

TEST_F(DaemonTest, InvokeThroughCallAndNestedTuples) {
  std::string sha = UploadExec();
  std::string session = Open();
  uint64_t vm = CreateVm(session, sha);
  v1::CallRequest req;
  req.set_session_id(session);
  auto* inv = req.mutable_invoke();
  inv->set_vm_id(vm);
  inv->set_function("main");
  *inv->add_args() = FloatTensorValue({2}, {1, 2});
  *inv->add_args() = FloatTensorValue({2}, {10, 20});
  v1::CallResponse resp;
  ASSERT_TRUE(Call(req, &resp).ok());
  EXPECT_EQ(Floats(resp.value()), (std::vector<float>{11, 22}));

  inv->set_function("pair");
  inv->clear_args();
  inv->add_args()->set_int_value(7);
  ASSERT_TRUE(Call(req, &resp).ok());
  ASSERT_EQ(resp.value().tuple().fields_size(), 2);
  EXPECT_EQ(resp.value().tuple().fields(0).int_value(), 7);
  EXPECT_EQ(resp.value().tuple().fields(1).tuple().fields(1).int_value(), 7);

  inv->set_function("nope");
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  inv->set_vm_id(vm + 100);
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, CallStreamRepliesPerRequestAndKeepsGoingAfterErrors) {
  std::string sha = UploadExec();
  std::string session = Open();
  uint64_t vm = CreateVm(session, sha);
  grpc::ClientContext ctx;
  auto stream = stub_->CallStream(&ctx);
  for (int i = 0; i < 3; ++i) {
    v1::CallRequest req;
    req.set_session_id(i == 1 ? "bogus" : session);
    req.set_request_id(100 + i);
    req.mutable_invoke()->set_vm_id(vm);
    req.mutable_invoke()->set_function("pair");
    req.mutable_invoke()->add_args()->set_int_value(i);
    ASSERT_TRUE(stream->Write(req));
    v1::CallResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.request_id(), 100u + i);
    if (i == 1) {
      EXPECT_EQ(resp.error().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
    } else {
      EXPECT_FALSE(resp.has_error());
      EXPECT_EQ(resp.value().tuple().fields(1).tuple().fields(0).int_value(), i);
    }
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(DaemonTest, DeadlineInterruptsALongCallAndTheSessionStaysUsable) {
  std::string sha = UploadExec();
  std::string session = Open();
  uint64_t vm = CreateVm(session, sha);
  v1::CallRequest req;
  req.set_session_id(session);
  req.mutable_invoke()->set_vm_id(vm);
  req.mutable_invoke()->set_function("loop");
  req.mutable_invoke()->add_args()->set_int_value(int64_t{1} << 40);
  v1::CallResponse resp;
  EXPECT_EQ(Call(req, &resp, absl::Milliseconds(50)).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // The stream's per-call deadline_ms gives the same.
  grpc::ClientContext ctx;
  auto stream = stub_->CallStream(&ctx);
  req.set_deadline_ms(50);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.error().code(), static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED));
  req.set_deadline_ms(0);
  req.mutable_invoke()->mutable_args(0)->set_int_value(5);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_FALSE(resp.has_error()) << resp.error().message();
  EXPECT_EQ(resp.value().int_value(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// A long call, for cancellation tests: loop(2^40) never ends by itself.
v1::CallRequest EndlessLoop(const std::string& session, uint64_t vm) {
  v1::CallRequest req;
  req.set_session_id(session);
  req.mutable_invoke()->set_vm_id(vm);
  req.mutable_invoke()->set_function("loop");
  req.mutable_invoke()->add_args()->set_int_value(int64_t{1} << 40);
  return req;
}

// A client that cancels a unary call (or whose call is abandoned) frees its
// session: the VM stops at the next instruction, or the queued call never
// runs, and the next call on the session completes.
TEST_F(DaemonTest, CancellingAUnaryCallInterruptsTheVm) {
  std::string sha = UploadExec();
  std::string session = Open();
  uint64_t vm = CreateVm(session, sha);
  v1::CallRequest req = EndlessLoop(session, vm);
  v1::CallResponse resp;
  grpc::ClientContext ctx;
  absl::Notification done;
  grpc::Status status;
  stub_->async()->Call(&ctx, &req, &resp, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ctx.TryCancel();
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  req.mutable_invoke()->mutable_args(0)->set_int_value(5);
  grpc::Status next = Call(req, &resp, absl::Seconds(60));
  EXPECT_TRUE(next.ok()) << next.error_message();
  EXPECT_EQ(daemon_->num_sessions(), 1u);
}

// A CallStream that breaks (the client's process exits, its connection
// drops) closes every session it carried and interrupts their calls.
TEST_F(DaemonTest, ABrokenCallStreamClosesItsSessions) {
  std::string sha = UploadExec();
  std::string session = Open();
  uint64_t vm = CreateVm(session, sha);
  std::string bystander = Open();
  {
    grpc::ClientContext ctx;
    auto stream = stub_->CallStream(&ctx);
    // One full round trip first, so the daemon has seen the stream use the session.
    v1::CallRequest quick = EndlessLoop(session, vm);
    quick.mutable_invoke()->mutable_args(0)->set_int_value(5);
    v1::CallResponse reply;
    ASSERT_TRUE(stream->Write(quick));
    ASSERT_TRUE(stream->Read(&reply));
    ASSERT_FALSE(reply.has_error()) << reply.error().message();
    ASSERT_TRUE(stream->Write(EndlessLoop(session, vm)));
    ctx.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (daemon_->num_sessions() > 1 && absl::Now() < give_up) std::this_thread::yield();
  EXPECT_EQ(daemon_->num_sessions(), 1u);
  // The vanished client's session is gone; the other one still serves.
  v1::CallRequest req = EndlessLoop(session, vm);
  req.mutable_invoke()->mutable_args(0)->set_int_value(5);
  v1::CallResponse resp;
  EXPECT_EQ(Call(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  uint64_t other_vm = CreateVm(bystander, sha);
  req.set_session_id(bystander);
  req.mutable_invoke()->set_vm_id(other_vm);
  grpc::Status s = Call(req, &resp, absl::Seconds(60));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

grpc::Status UploadTensor(v1::Tether::Stub* stub, const std::string& session,
                          std::vector<int64_t> shape, const std::string& bytes,
                          v1::UploadTensorResponse* resp, size_t chunk = 1 << 20) {
  grpc::ClientContext ctx;
  auto writer = stub->UploadTensor(&ctx, resp);
  v1::UploadTensorRequest req;
  req.mutable_header()->set_session_id(session);
  rpc::EncodeTensorHeader(DataType::UInt(8), shape, Device::Cpu(),
                          req.mutable_header()->mutable_tensor());
  writer->Write(req);
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    v1::UploadTensorRequest data;
    data.set_data(bytes.substr(off, chunk));
    if (!writer->Write(data)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

TEST_F(DaemonTest, TensorsRoundTripExactlyInChunks) {
  std::string session = Open();
  for (size_t size : {size_t{0}, size_t{1}, size_t{3} << 20}) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 7 + 3);
    v1::UploadTensorResponse up;
    ASSERT_TRUE(UploadTensor(stub_.get(), session, {static_cast<int64_t>(size)}, bytes, &up).ok());
    grpc::ClientContext ctx;
    v1::DownloadTensorRequest req;
    req.set_session_id(session);
    req.set_tensor_id(up.tensor().id());
    auto reader = stub_->DownloadTensor(&ctx, req);
    v1::DownloadTensorResponse chunk;
    std::string got;
    int messages = 0;
    while (reader->Read(&chunk)) {
      got += chunk.data();
      ++messages;
    }
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_TRUE(got == bytes) << "size " << size;
    if (size > (1 << 20)) {
      EXPECT_GE(messages, 3);
    }
  }
}

TEST_F(DaemonTest, BadTensorUploadsAreInvalidArgument) {
  std::string session = Open();
  v1::UploadTensorResponse up;
  EXPECT_EQ(UploadTensor(stub_.get(), session, {4}, "abc", &up).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(UploadTensor(stub_.get(), session, {4}, "abcdefgh", &up, 2).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(UploadTensor(stub_.get(), session, {-1}, "", &up).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(UploadTensor(stub_.get(), session, {int64_t{1} << 40, int64_t{1} << 40}, "", &up)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext ctx;
  v1::DownloadTensorRequest req;
  req.set_session_id(session);
  req.set_tensor_id(12345);
  auto reader = stub_->DownloadTensor(&ctx, req);
  v1::DownloadTensorResponse chunk;
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, IdleSessionsExpire) {
  Open(/*idle_ms=*/20);
  absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (daemon_->num_sessions() > 0 && absl::Now() < give_up) std::this_thread::yield();
  EXPECT_EQ(daemon_->num_sessions(), 0u);
}

TEST_F(DaemonTest, RestartKeepsTheModuleStore) {
  std::string sha = UploadExec();
  daemon_.reset();
  StartDaemon();
  std::string session = Open();
  EXPECT_GT(CreateVm(session, sha), 0u);
}

TEST_F(DaemonTest, ConcurrentClientsGetTheirOwnResults) {
  std::string sha = UploadExec();
  constexpr int kClients = 8;
  constexpr int kCalls = 1000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::string session = Open();
      uint64_t vm = CreateVm(session, sha);
      grpc::ClientContext ctx;
      auto stream = stub_->CallStream(&ctx);
      for (int i = 0; i < kCalls; ++i) {
        v1::CallRequest req;
        req.set_session_id(session);
        req.set_request_id(i);
        req.mutable_invoke()->set_vm_id(vm);
        req.mutable_invoke()->set_function("pair");
        req.mutable_invoke()->add_args()->set_int_value(c * 1000 + i);
        v1::CallResponse resp;
        if (!stream->Write(req) || !stream->Read(&resp) || resp.has_error() ||
            resp.value().tuple().fields(0).int_value() != c * 1000 + i) {
          ++failures;
        }
      }
      stream->WritesDone();
      if (!stream->Finish().ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

#ifdef TETHERD_PATH
int RunTetherd(std::vector<std::string> args, bool terminate, std::string* stderr_text,
               const std::string& dir) {
  TetherdProcess tetherd(std::move(args), dir);
  if (terminate) {
    EXPECT_GT(tetherd.WaitForPort(), 0);
    tetherd.Signal(SIGTERM);
  }
  std::optional<int> code = tetherd.Wait(absl::Seconds(60));
  *stderr_text = tetherd.Stderr();
  return code.value_or(-2);
}

TEST(TetherdBinaryTest, WritesThePortAndExitsCleanlyOnSigterm) {
  std::string dir = TempDir();
  std::string err;
  EXPECT_EQ(RunTetherd({"--listen", "127.0.0.1:0", "--store-dir", dir + "/store"}, true, &err, dir),
            0)
      << err;
  fs::remove_all(dir);
}

TEST(TetherdBinaryTest, RefusesNonLoopbackWithoutClientAuthentication) {
  std::string dir = TempDir();
  std::string err;
  EXPECT_EQ(RunTetherd({"--listen", "0.0.0.0:0"}, false, &err, dir), 2);
  EXPECT_THAT(err, HasSubstr("refusing to serve 0.0.0.0:0 without client authentication"));
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace tether::server
