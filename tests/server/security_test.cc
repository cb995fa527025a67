// Transport security and authentication of tetherd: TLS, mutual TLS and the
// bearer token, with a real Daemon on 127.0.0.1:0 and certificates made at
// test time by the openssl CLI.
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "tests/testing/certificates.h"
#include "tests/testing/session_program.h"
#include "tests/testing/test_functions.h"

namespace tether::server {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using ::tether::testing::Certificates;

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tether::testing::RegisterTestFunctions();
    certs_ = new Certificates();
    generate_error_ = new std::string(certs_->Generate());
  }
  static void TearDownTestSuite() {
    delete certs_;
    delete generate_error_;
  }
  void SetUp() override { ASSERT_EQ(*generate_error_, "") << "cannot make test certificates"; }

  void StartDaemon(DaemonOptions options) {
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    auto daemon = Daemon::Start(std::move(options));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  // Daemon options serving TLS with the generated server certificate.
  DaemonOptions TlsOptions() const {
    DaemonOptions options;
    options.tls_cert_file = certs_->path("server.pem");
    options.tls_key_file = certs_->path("server.key");
    return options;
  }

  client::ConnectOptions Quick() const {
    client::ConnectOptions options;
    options.deadline = absl::Seconds(3);
    options.max_attempts = 1;
    return options;
  }

  // Uploads a module, runs swap(2, 3) on a RemoteVM (the call stream) and
  // round-trips a tensor.
  static void ExerciseSession(client::RemoteSession* session) {
    auto sha = session->UploadModule(tether::testing::SessionTestExecutable());
    ASSERT_TRUE(sha.ok()) << sha.status();
    auto vm = client::RemoteVM::Create(session, *sha);
    ASSERT_TRUE(vm.ok()) << vm.status();
    Value args[] = {Value(int64_t{2}), Value(int64_t{3})};
    auto swapped = (*vm)->Invoke("swap", args);
    ASSERT_TRUE(swapped.ok()) << swapped.status();
    ASSERT_TRUE(swapped->is_tuple());
    const auto* tuple = static_cast<const TupleObj*>(swapped->object());
    ASSERT_EQ(tuple->fields.size(), 2u);
    EXPECT_EQ(tuple->fields[0].int_value(), 3);
    EXPECT_EQ(tuple->fields[1].int_value(), 2);
    EXPECT_EQ((*vm)->transport(), client::TransportKind::kDirect);
    const int64_t shape[] = {4};
    auto tensor = Tensor::Empty(shape, DataType::Float(32), Device::Cpu());
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    auto remote = session->UploadTensor(*tensor);
    ASSERT_TRUE(remote.ok()) << remote.status();
    auto back = session->DownloadTensor(*remote);
    ASSERT_TRUE(back.ok()) << back.status();
  }

  static Certificates* certs_;
  static std::string* generate_error_;
  std::unique_ptr<Daemon> daemon_;
};
Certificates* SecurityTest::certs_ = nullptr;
std::string* SecurityTest::generate_error_ = nullptr;

TEST_F(SecurityTest, TlsClientWithTheCaConnectsAndCalls) {
  DaemonOptions options = TlsOptions();
  StartDaemon(options);
  client::ConnectOptions connect = Quick();
  connect.tls_ca_file = certs_->path("ca.pem");
  connect.tls_server_name = "localhost";
  auto session = client::RemoteSession::Connect(daemon_->target(), connect);
  ASSERT_TRUE(session.ok()) << session.status();
  ExerciseSession(session->get());
}

TEST_F(SecurityTest, TlsMatchesTheIpAddressWithoutAnOverride) {
  DaemonOptions options = TlsOptions();
  StartDaemon(options);
  client::ConnectOptions connect = Quick();
  connect.tls_ca_file = certs_->path("ca.pem");
  auto session = client::RemoteSession::Connect(daemon_->target(), connect);
  EXPECT_TRUE(session.ok()) << session.status();
}

TEST_F(SecurityTest, PlaintextClientOfATlsDaemonIsUnavailable) {
  DaemonOptions options = TlsOptions();
  StartDaemon(options);
  auto session = client::RemoteSession::Connect(daemon_->target(), Quick());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnavailable) << session.status();
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificate) {
  DaemonOptions options = TlsOptions();
  options.tls_client_ca_file = certs_->path("ca.pem");
  StartDaemon(options);
  client::ConnectOptions connect = Quick();
  connect.tls_ca_file = certs_->path("ca.pem");
  connect.tls_server_name = "localhost";
  auto anonymous = client::RemoteSession::Connect(daemon_->target(), connect);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnavailable) << anonymous.status();

  connect.tls_cert_file = certs_->path("client.pem");
  connect.tls_key_file = certs_->path("client.key");
  auto session = client::RemoteSession::Connect(daemon_->target(), connect);
  ASSERT_TRUE(session.ok()) << session.status();
  ExerciseSession(session->get());
}

TEST_F(SecurityTest, BadPemFilesFailStartNamingTheFile) {
  std::ofstream(certs_->path("garbage.pem")) << "not a certificate\n";
  DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.log_events = false;
  options.tls_cert_file = certs_->path("garbage.pem");
  options.tls_key_file = certs_->path("server.key");
  auto bad = Daemon::Start(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("garbage.pem"));

  options.tls_cert_file = certs_->path("server.pem");
  options.tls_key_file = certs_->path("missing.key");
  auto missing = Daemon::Start(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.key"));
}

TEST_F(SecurityTest, TokenIsRequiredAndChecked) {
  DaemonOptions options;
  options.auth_token = "s3cret-token";
  StartDaemon(options);

  auto none = client::RemoteSession::Connect(daemon_->target(), Quick());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("missing or invalid bearer token"));

  for (const char* wrong : {"s3cret-tokeX", "s3cret", "s3cret-token-and-more", "x"}) {
    client::ConnectOptions connect = Quick();
    connect.auth_token = wrong;
    auto session = client::RemoteSession::Connect(daemon_->target(), connect);
    ASSERT_FALSE(session.ok()) << wrong;
    EXPECT_EQ(session.status().code(), absl::StatusCode::kUnauthenticated) << session.status();
  }

  client::ConnectOptions connect = Quick();
  connect.auth_token = "s3cret-token";
  auto session = client::RemoteSession::Connect(daemon_->target(), connect);
  ASSERT_TRUE(session.ok()) << session.status();
  ExerciseSession(session->get());
}

TEST_F(SecurityTest, StreamsWithoutTheTokenAreRefused) {
  DaemonOptions options;
  options.auth_token = "s3cret-token";
  StartDaemon(options);
  auto channel = grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Tether::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->CallStream(&ctx);
  v1::CallRequest request;
  stream->Write(request);
  v1::CallResponse response;
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  grpc::ClientContext upload_ctx;
  v1::UploadTensorResponse uploaded;
  auto writer = stub->UploadTensor(&upload_ctx, &uploaded);
  writer->Write(v1::UploadTensorRequest());
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(SecurityTest, HealthServiceAnswersWithoutTheToken) {
  DaemonOptions options;
  options.auth_token = "s3cret-token";
  StartDaemon(options);
  auto channel = grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials());
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest (service
  // "", the server as a whole) through the generic stub: the health protos'
  // generated headers are not installed on Debian.
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  // HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace tether::server
