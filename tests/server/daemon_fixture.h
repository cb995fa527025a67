// DaemonTest: an in-process Daemon on 127.0.0.1:0 with a fresh store,
// driven through the generated stub over a real channel; shared by the
// daemon's end-to-end and hostile-request tests.
#ifndef TETHER_TESTS_SERVER_DAEMON_FIXTURE_H_
#define TETHER_TESTS_SERVER_DAEMON_FIXTURE_H_

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/codec/sha256.h"
#include "proto/codec/value_codec.h"
#include "server/daemon.h"
#include "tests/testing/session_program.h"
#include "tests/testing/test_functions.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {

namespace fs = std::filesystem;

inline std::string TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "tether-srv-test-XXXXXX").string();
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tether::testing::RegisterTestFunctions();
    store_dir_ = TempDir();
    StartDaemon();
  }
  void TearDown() override {
    daemon_.reset();
    fs::remove_all(store_dir_);
  }
  // Starts the daemon; `configure` may change its options first.
  void StartDaemon(absl::Duration idle = absl::Minutes(10),
                   const std::function<void(DaemonOptions&)>& configure = nullptr) {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.store_dir = store_dir_;
    options.session_idle_timeout = idle;
    if (configure) configure(options);
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ =
        grpc::CreateCustomChannel(daemon_->target(), grpc::InsecureChannelCredentials(), args);
    stub_ = v1::Tether::NewStub(channel_);
  }

  std::string Open(uint64_t idle_ms = 0) {
    grpc::ClientContext ctx;
    v1::OpenSessionRequest req;
    req.set_client_name("daemon_test");
    req.set_idle_timeout_ms(idle_ms);
    v1::OpenSessionResponse resp;
    grpc::Status s = stub_->OpenSession(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.session_id();
  }

  grpc::Status Upload(const std::string& bytes, const std::string& sha, uint64_t size,
                      size_t chunk = 1000, bool cancel_midway = false) {
    grpc::ClientContext ctx;
    v1::UploadModuleResponse resp;
    auto writer = stub_->UploadModule(&ctx, &resp);
    v1::UploadModuleRequest req;
    req.mutable_header()->set_sha256(sha);
    req.mutable_header()->set_size_bytes(size);
    writer->Write(req);
    for (size_t off = 0; off < bytes.size(); off += chunk) {
      if (cancel_midway && off >= bytes.size() / 2) {
        ctx.TryCancel();
        break;
      }
      v1::UploadModuleRequest data;
      data.set_data(bytes.substr(off, chunk));
      if (!writer->Write(data)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  uint64_t CreateVm(const std::string& session, const std::string& sha) {
    v1::CallRequest req;
    req.set_session_id(session);
    req.mutable_create_vm()->set_module_sha256(sha);
    v1::CallResponse resp;
    grpc::Status s = Call(req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.create_vm().vm_id();
  }

  grpc::Status Call(const v1::CallRequest& req, v1::CallResponse* resp,
                    absl::Duration deadline = absl::InfiniteDuration()) {
    grpc::ClientContext ctx;
    if (deadline != absl::InfiniteDuration()) {
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    }
    return stub_->Call(&ctx, req, resp);
  }

  // Uploads the test executable, returns its hash.
  std::string UploadExec() {
    std::string bytes = tether::testing::SessionTestExecutable();
    std::string sha = rpc::Sha256Hex(bytes);
    grpc::Status s = Upload(bytes, sha, bytes.size());
    EXPECT_TRUE(s.ok()) << s.error_message();
    return sha;
  }

  std::vector<std::string> StoreFiles() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(store_dir_)) {
      std::string name = e.path().filename().string();
      if (name != "timing.lock") names.push_back(name);  // the timing gate, not a module
    }
    return names;
  }

  std::string store_dir_;
  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tether::Stub> stub_;
};

inline v1::Value FloatTensorValue(std::vector<int64_t> shape, std::vector<float> values) {
  v1::Value v;
  EXPECT_TRUE(
      rpc::EncodeInlineTensor(tether::testing::MakeFloatTensor(shape, values), v.mutable_tensor())
          .ok());
  return v;
}

inline std::vector<float> Floats(const v1::Value& v) {
  auto t = rpc::DecodeInlineTensor(v.tensor());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? tether::testing::ReadFloats(*t) : std::vector<float>();
}

#ifdef TETHERD_PATH
// The tetherd binary, started with `args` plus --port-file DIR/port, its
// stderr in DIR/stderr and its user's default token in DIR/token (never in
// $HOME). Killed when destroyed if still running.
class TetherdProcess {
 public:
  // `env`: "NAME=value" entries added to the daemon's environment.
  TetherdProcess(std::vector<std::string> args, const std::string& dir,
                 std::vector<std::string> env = {})
      : port_file_(dir + "/port"), err_file_(dir + "/stderr") {
    const std::string token_file = dir + "/token";
    std::error_code ec;
    fs::remove(port_file_, ec);  // an earlier daemon's port is not this one's
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(err_file_.c_str(), "w", stderr);
      (void)f;
      ::setenv("TETHER_TOKEN_FILE", token_file.c_str(), 1);
      for (std::string& entry : env) ::putenv(entry.data());
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(TETHERD_PATH));
      args.push_back("--port-file");
      args.push_back(port_file_);
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(TETHERD_PATH, argv.data());
      ::_exit(127);
    }
  }
  ~TetherdProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  TetherdProcess(const TetherdProcess&) = delete;
  TetherdProcess& operator=(const TetherdProcess&) = delete;

  // The bound port once the daemon wrote it (up to 30 s); 0 when it exited
  // first or never did.
  int WaitForPort() {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!fs::exists(port_file_) && absl::Now() < give_up) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      ::usleep(2000);
    }
    std::ifstream in(port_file_);
    int port = 0;
    in >> port;
    return port;
  }
  void Signal(int signal_number) {
    if (pid_ > 0) ::kill(pid_, signal_number);
  }
  // Waits up to `limit` for the daemon to exit: its exit code, -1 when a
  // signal ended it, nullopt when it is still running.
  std::optional<int> Wait(absl::Duration limit) {
    const absl::Time give_up = absl::Now() + limit;
    while (pid_ > 0) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      if (absl::Now() >= give_up) return std::nullopt;
      ::usleep(5000);
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  std::string Stderr() const {
    std::ifstream err(err_file_);
    return std::string(std::istreambuf_iterator<char>(err), {});
  }

 private:
  std::string port_file_;
  std::string err_file_;
  pid_t pid_ = -1;
  int status_ = 0;
};
#endif  // TETHERD_PATH

}  // namespace tether::server

#endif  // TETHER_TESTS_SERVER_DAEMON_FIXTURE_H_
