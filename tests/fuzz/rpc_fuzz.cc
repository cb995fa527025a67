// Fuzz target: a hostile client against a live daemon. One tetherd (the
// server library, in this process) serves 127.0.0.1 for the whole run; each
// input is a sequence of requests — every RPC of proto/tether/v1 and raw
// bytes on the direct channel — whose messages are the fuzzer's bytes parsed
// as the request protos. The daemon must answer every one with a status
// (never UNKNOWN: an exception or a crash in a handler) and still answer a
// handshake after the input; sanitizers catch the rest.
//
// Input: records of [op: 1 byte][length: 2 bytes, little endian][payload].
// A request naming no session (or a short id) gets the input's own session;
// create_vm naming no module gets a small uploaded one (swap, pair).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/codec/frame_io.h"
#include "proto/codec/sha256.h"
#include "proto/codec/value_codec.h"
#include "runtime/vm/exec_builder.h"
#include "server/daemon.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether {
namespace {

constexpr absl::Duration kRpcDeadline = absl::Seconds(5);
constexpr uint64_t kCallDeadlineMs = 2000;

struct Target {
  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<v1::Tether::Stub> stub;
  std::string module_sha;
};

// Like tests/testing's builtins program, without its endless `spin` (every
// call the fuzzer found to it would cost a whole deadline).
std::string SmallProgram() {
  vm::ExecBuilder b;
  b.EmitFunction("swap", 2, {"a", "b"});
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(1), vm::Arg::Register(0)}, 2);
  b.EmitRet(2);
  b.EndFunction("swap");
  b.EmitFunction("pair", 1, {"a"});
  b.EmitCall("vm.builtin.make_tuple", {vm::Arg::Register(0), vm::Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("pair");
  auto exec = b.Get();
  if (!exec.ok()) std::abort();
  return (*exec)->SaveToBytes();
}

void Deadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kRpcDeadline));
}

// A daemon answers with a status; UNKNOWN is what gRPC reports for an
// exception in a handler, never a refusal of ours.
void CheckStatus(const grpc::Status& status, const char* method) {
  // TETHER_RPC_FUZZ_LOG=1 prints every refusal, to review codes and messages.
  static const bool log = std::getenv("TETHER_RPC_FUZZ_LOG") != nullptr;
  if (log && !status.ok()) {
    std::fprintf(stderr, "rpc_fuzz: %s -> %d %s\n", method, status.error_code(),
                 status.error_message().substr(0, 200).c_str());
  }
  if (status.error_code() == grpc::StatusCode::UNKNOWN) {
    std::fprintf(stderr, "rpc_fuzz: %s answered UNKNOWN: %s\n", method,
                 status.error_message().c_str());
    std::abort();
  }
}

Target& GetTarget() {
  static Target* const target = [] {
    auto* t = new Target();
    std::string store = (std::filesystem::temp_directory_path() / "rpc-fuzz-XXXXXX").string();
    if (::mkdtemp(store.data()) == nullptr) std::abort();
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.store_dir = store;
    options.store_quota_bytes = uint64_t{256} << 20;
    options.max_sessions = 16;
    options.log_events = false;
    options.executor_threads = 2;
    options.max_exclusive_hold = absl::Seconds(2);
    options.stream_idle_timeout = absl::Seconds(2);
    options.max_session_bytes = uint64_t{256} << 20;
    auto daemon = server::Daemon::Start(options);
    if (!daemon.ok()) {
      std::fprintf(stderr, "rpc_fuzz: %s\n", daemon.status().ToString().c_str());
      std::abort();
    }
    t->daemon = std::move(*daemon);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    t->stub = v1::Tether::NewStub(
        grpc::CreateCustomChannel(t->daemon->target(), grpc::InsecureChannelCredentials(), args));
    const std::string program = SmallProgram();
    t->module_sha = rpc::Sha256Hex(program);
    grpc::ClientContext ctx;
    v1::UploadModuleResponse resp;
    auto writer = t->stub->UploadModule(&ctx, &resp);
    v1::UploadModuleRequest req;
    req.mutable_header()->set_sha256(t->module_sha);
    req.mutable_header()->set_size_bytes(program.size());
    writer->Write(req);
    req.Clear();
    req.set_data(program);
    writer->Write(req);
    writer->WritesDone();
    if (!writer->Finish().ok()) std::abort();
    return t;
  }();
  return *target;
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  // The next record; false at the end.
  bool Next(uint8_t* op, std::string* payload) {
    if (size_ - offset_ < 3) return false;
    *op = data_[offset_];
    size_t length = data_[offset_ + 1] | (size_t{data_[offset_ + 2]} << 8);
    offset_ += 3;
    length = std::min(length, size_ - offset_);
    payload->assign(reinterpret_cast<const char*>(data_ + offset_), length);
    offset_ += length;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

// The payload's first byte is the message's length; raw data follows it.
void Split(const std::string& payload, std::string* message, std::string* data) {
  if (payload.empty()) {
    message->clear();
    data->clear();
    return;
  }
  size_t cut = std::min<size_t>(payload.size() - 1, static_cast<uint8_t>(payload[0]));
  *message = payload.substr(1, cut);
  *data = payload.substr(1 + cut);
}

class Client {
 public:
  explicit Client(Target& target) : t_(target) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::OpenSessionRequest req;
    req.set_idle_timeout_ms(10000);
    v1::OpenSessionResponse resp;
    grpc::Status s = t_.stub->OpenSession(&ctx, req, &resp);
    CheckStatus(s, "OpenSession");
    if (s.ok()) sessions_.push_back(resp.session_id());
  }
  ~Client() {
    for (const std::string& id : sessions_) {
      grpc::ClientContext ctx;
      Deadline(ctx);
      v1::CloseSessionRequest req;
      req.set_session_id(id);
      v1::CloseSessionResponse resp;
      (void)t_.stub->CloseSession(&ctx, req, &resp);
    }
  }

  void Run(uint8_t op, const std::string& payload) {
    switch (op % 10) {
      case 0:
        return Call(payload);
      case 1:
        return UploadTensor(payload);
      case 2:
        return DownloadTensor(payload);
      case 3:
        return UploadModule(payload);
      case 4:
        return OpenSession(payload);
      case 5:
        return KeepAliveOrClose(payload, op & 0x10);
      case 6:
        return HasModule(payload);
      case 7:
        return Handshake(payload);
      case 8:
        return CallStream(payload);
      case 9:
        return Direct(payload);
    }
  }

 private:
  std::string Session(const std::string& named) const {
    if (named.size() >= 8 || sessions_.empty()) return named;
    return sessions_[named.empty() ? 0 : static_cast<uint8_t>(named[0]) % sessions_.size()];
  }
  void Fix(v1::CallRequest& req) const {
    req.set_session_id(Session(req.session_id()));
    if (req.deadline_ms() == 0 || req.deadline_ms() > kCallDeadlineMs) {
      req.set_deadline_ms(kCallDeadlineMs);
    }
    if (req.has_create_vm() && req.create_vm().module_sha256().size() < 8) {
      req.mutable_create_vm()->set_module_sha256(t_.module_sha);
    }
  }

  void Call(const std::string& payload) {
    v1::CallRequest req;
    if (!req.ParseFromString(payload)) return;
    Fix(req);
    grpc::ClientContext ctx;
    ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(kCallDeadlineMs) + kRpcDeadline));
    v1::CallResponse resp;
    CheckStatus(t_.stub->Call(&ctx, req, &resp), "Call");
  }
  void CallStream(const std::string& payload) {
    v1::CallRequest req;
    if (!req.ParseFromString(payload)) return;
    Fix(req);
    grpc::ClientContext ctx;
    ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(3 * kCallDeadlineMs) + kRpcDeadline));
    auto stream = t_.stub->CallStream(&ctx);
    for (int i = 0; i < 3; ++i) {
      req.set_request_id(i + 1);
      if (!stream->Write(req)) break;
    }
    stream->WritesDone();
    v1::CallResponse resp;
    while (stream->Read(&resp)) {
    }
    CheckStatus(stream->Finish(), "CallStream");
  }
  void UploadTensor(const std::string& payload) {
    std::string message, data;
    Split(payload, &message, &data);
    v1::UploadTensorRequest header;
    if (!header.ParseFromString(message)) return;
    if (header.has_header()) {
      header.mutable_header()->set_session_id(Session(header.header().session_id()));
    }
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::UploadTensorResponse resp;
    auto writer = t_.stub->UploadTensor(&ctx, &resp);
    if (writer->Write(header) && !data.empty()) {
      v1::UploadTensorRequest chunk;
      chunk.set_data(data);
      writer->Write(chunk);
    }
    writer->WritesDone();
    CheckStatus(writer->Finish(), "UploadTensor");
  }
  void DownloadTensor(const std::string& payload) {
    v1::DownloadTensorRequest req;
    if (!req.ParseFromString(payload)) return;
    req.set_session_id(Session(req.session_id()));
    grpc::ClientContext ctx;
    Deadline(ctx);
    auto reader = t_.stub->DownloadTensor(&ctx, req);
    v1::DownloadTensorResponse resp;
    while (reader->Read(&resp)) {
    }
    CheckStatus(reader->Finish(), "DownloadTensor");
  }
  void UploadModule(const std::string& payload) {
    std::string message, data;
    Split(payload, &message, &data);
    v1::UploadModuleRequest header;
    if (!header.ParseFromString(message)) return;
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::UploadModuleResponse resp;
    auto writer = t_.stub->UploadModule(&ctx, &resp);
    if (writer->Write(header) && !data.empty()) {
      v1::UploadModuleRequest chunk;
      chunk.set_data(data);
      writer->Write(chunk);
    }
    writer->WritesDone();
    CheckStatus(writer->Finish(), "UploadModule");
  }
  void OpenSession(const std::string& payload) {
    v1::OpenSessionRequest req;
    if (!req.ParseFromString(payload)) return;
    req.set_isolate(false);  // no worker program here
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::OpenSessionResponse resp;
    grpc::Status s = t_.stub->OpenSession(&ctx, req, &resp);
    CheckStatus(s, "OpenSession");
    if (s.ok()) sessions_.push_back(resp.session_id());
  }
  void KeepAliveOrClose(const std::string& payload, bool close) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    if (close) {
      v1::CloseSessionRequest req;
      if (!req.ParseFromString(payload)) return;
      req.set_session_id(Session(req.session_id()));
      v1::CloseSessionResponse resp;
      CheckStatus(t_.stub->CloseSession(&ctx, req, &resp), "CloseSession");
    } else {
      v1::KeepAliveRequest req;
      if (!req.ParseFromString(payload)) return;
      req.set_session_id(Session(req.session_id()));
      v1::KeepAliveResponse resp;
      CheckStatus(t_.stub->KeepAlive(&ctx, req, &resp), "KeepAlive");
    }
  }
  void HasModule(const std::string& payload) {
    v1::HasModuleRequest req;
    if (!req.ParseFromString(payload)) return;
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::HasModuleResponse resp;
    CheckStatus(t_.stub->HasModule(&ctx, req, &resp), "HasModule");
  }
  void Handshake(const std::string& payload) {
    v1::HandshakeRequest req;
    if (!req.ParseFromString(payload)) return;
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::HandshakeResponse resp;
    CheckStatus(t_.stub->Handshake(&ctx, req, &resp), "Handshake");
  }
  // Raw bytes (after the first) on the session's direct channel, after a
  // good hello when the first byte is odd: a hostile peer's frames.
  void Direct(const std::string& payload) {
    if (sessions_.empty()) return;
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::OpenDirectChannelRequest req;
    req.set_session_id(sessions_[0]);
    v1::OpenDirectChannelResponse offer;
    grpc::Status s = t_.stub->OpenDirectChannel(&ctx, req, &offer);
    CheckStatus(s, "OpenDirectChannel");
    if (!s.ok()) return;
    const std::string& address = offer.address();
    int port = std::atoi(address.substr(address.rfind(':') + 1).c_str());
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      std::string bytes;
      if (!payload.empty() && (payload[0] & 1)) {
        bytes = absl::StrCat(absl::string_view(rpc::kDirectMagic, rpc::kDirectMagicBytes),
                             offer.ticket());
      }
      if (!payload.empty()) bytes.append(payload, 1);
      (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
      // Reads what the daemon answers until it closes (bounded).
      char buffer[4096];
      const absl::Time give_up = absl::Now() + kRpcDeadline;
      while (absl::Now() < give_up) {
        pollfd ready{fd, POLLIN, 0};
        if (::poll(&ready, 1, 100) <= 0) continue;
        if (::recv(fd, buffer, sizeof(buffer), 0) <= 0) break;
      }
    }
    ::close(fd);
    // The direct channel closes the session of a peer that goes away
    // mid-call; it is this input's to lose.
  }

  Target& t_;
  std::vector<std::string> sessions_;
};

}  // namespace
}  // namespace tether

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tether::Target& target = tether::GetTarget();
  {
    tether::Client client(target);
    tether::Input input(data, size);
    uint8_t op = 0;
    std::string payload;
    for (int n = 0; n < 16 && input.Next(&op, &payload); ++n) client.Run(op, payload);
  }
  // Still serving.
  grpc::ClientContext ctx;
  tether::Deadline(ctx);
  tether::v1::HandshakeRequest req;
  req.mutable_client_protocol()->set_major(tether::rpc::kProtocolMajor);
  tether::v1::HandshakeResponse resp;
  grpc::Status s = target.stub->Handshake(&ctx, req, &resp);
  if (!s.ok()) {
    std::fprintf(stderr, "rpc_fuzz: the daemon stopped answering: %s\n", s.error_message().c_str());
    std::abort();
  }
  return 0;
}
