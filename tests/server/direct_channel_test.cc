// The direct channel end to end: a real daemon on 127.0.0.1:0, RemoteVM on
// it, and raw sockets speaking the frame protocol for what a well-behaved
// client never sends (bad tickets, oversized and garbage frames, a request
// for another session, a client that vanishes mid-call).
#include "server/direct_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/direct_connection.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/codec/frame_io.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"
#include "server/daemon.h"
#include "tests/testing/session_program.h"
#include "tests/testing/test_functions.h"

namespace tether::server {
namespace {

using ::testing::HasSubstr;

// A connected TCP socket to "127.0.0.1:PORT", closed with the object.
struct RawSocket {
  explicit RawSocket(const std::string& address) : fd(Dial(address)), reader(fd) {}
  static int Dial(const std::string& address) {
    int port = std::stoi(address.substr(address.rfind(':') + 1));
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  }
  ~RawSocket() {
    if (fd >= 0) ::close(fd);
  }
  void Send(absl::string_view bytes) { ASSERT_TRUE(rpc::WriteAll(fd, bytes).ok()); }
  // The next frame from the daemon, as a CallResponse.
  absl::StatusOr<v1::CallResponse> Receive() {
    v1::CallResponse response;
    if (absl::Status s = reader.Read(uint64_t{64} << 20, &response); !s.ok()) return s;
    return response;
  }
  bool ClosedByPeer() {
    char byte;
    return ::recv(fd, &byte, 1, 0) == 0;
  }
  int fd;
  rpc::FrameReader reader;
};

std::string Hello(absl::string_view ticket) {
  return absl::StrCat(absl::string_view(rpc::kDirectMagic, rpc::kDirectMagicBytes), ticket);
}

absl::Status ErrorOf(const v1::CallResponse& response) {
  if (!response.has_error() || response.error().code() == 0) return absl::OkStatus();
  return rpc::DecodeError(response.error());
}

class DirectChannelTest : public ::testing::Test {
 protected:
  void SetUp() override { tether::testing::RegisterTestFunctions(); }

  void Start(bool direct = true) {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.log_events = false;
    options.direct_channel = direct;
    auto daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto session = client::RemoteSession::Connect(daemon_->target());
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
    auto sha = session_->UploadModule(tether::testing::SessionTestExecutable());
    ASSERT_TRUE(sha.ok()) << sha.status();
    sha_ = *sha;
  }

  std::unique_ptr<client::RemoteVM> NewVm(client::RemoteVmOptions options = {}) {
    auto vm = client::RemoteVM::Create(session_.get(), sha_, {}, "", options);
    EXPECT_TRUE(vm.ok()) << vm.status();
    return vm.ok() ? std::move(*vm) : nullptr;
  }

  // A raw connection that has presented a fresh ticket and been accepted.
  std::unique_ptr<RawSocket> AcceptedRawConnection() {
    auto offer = session_->OpenDirectChannel();
    EXPECT_TRUE(offer.ok()) << offer.status();
    if (!offer.ok()) return nullptr;
    auto raw = std::make_unique<RawSocket>(offer->address());
    raw->Send(Hello(offer->ticket()));
    auto accepted = raw->Receive();
    EXPECT_TRUE(accepted.ok()) << accepted.status();
    EXPECT_TRUE(accepted.ok() && ErrorOf(*accepted).ok());
    return raw;
  }

  v1::CallRequest Invoke(uint64_t vm_id, const std::string& function, int64_t arg,
                         uint64_t request_id) {
    v1::CallRequest request;
    request.set_session_id(session_->session_id());
    request.set_request_id(request_id);
    request.mutable_invoke()->set_vm_id(vm_id);
    request.mutable_invoke()->set_function(function);
    request.mutable_invoke()->add_args()->set_int_value(arg);
    return request;
  }

  static std::string Frame(const google::protobuf::MessageLite& message) {
    std::string body = message.SerializeAsString();
    std::string frame(4, '\0');
    for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((body.size() >> (8 * i)) & 0xff);
    return frame + body;
  }

  // Waits (bounded) until the daemon has `n` sessions.
  void AwaitSessions(size_t n) {
    absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (daemon_->num_sessions() != n && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(daemon_->num_sessions(), n);
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<client::RemoteSession> session_;
  std::string sha_;
};

TEST(IsSameHostPeerTest, LoopbackAndUnixPeersOnly) {
  EXPECT_TRUE(IsSameHostPeer("ipv4:127.0.0.1:40000"));
  EXPECT_TRUE(IsSameHostPeer("ipv4:127.1.2.3:40000"));
  EXPECT_TRUE(IsSameHostPeer("ipv6:[::1]:40000"));
  EXPECT_TRUE(IsSameHostPeer("ipv6:%5B::1%5D:40000"));
  EXPECT_TRUE(IsSameHostPeer("ipv6:[::ffff:127.0.0.1]:40000"));
  EXPECT_TRUE(IsSameHostPeer("unix:/run/tetherd.sock"));
  EXPECT_FALSE(IsSameHostPeer("ipv4:10.0.0.7:40000"));
  EXPECT_FALSE(IsSameHostPeer("ipv4:128.0.0.1:40000"));
  EXPECT_FALSE(IsSameHostPeer("ipv6:[::2]:40000"));
  EXPECT_FALSE(IsSameHostPeer("ipv6:[fe80::1]:40000"));
  EXPECT_FALSE(IsSameHostPeer(""));
}

TEST_F(DirectChannelTest, RemoteVmCallsTravelOnTheDirectChannel) {
  Start();
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  EXPECT_EQ(vm->transport(), client::TransportKind::kDirect);
  Value args[] = {Value(int64_t{2}), Value(int64_t{3})};
  auto swapped = vm->Invoke("swap", args);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(static_cast<const TupleObj*>(swapped->object())->fields[0].int_value(), 3);
  Value one[] = {Value(int64_t{7})};
  auto pair = vm->Invoke("pair", one);
  ASSERT_TRUE(pair.ok()) << pair.status();
  const auto* outer = static_cast<const TupleObj*>(pair->object());
  ASSERT_EQ(outer->fields.size(), 2u);
  EXPECT_EQ(static_cast<const TupleObj*>(outer->fields[1].object())->fields[0].int_value(), 7);
  // A VM error travels back in the reply; the connection stays.
  auto missing = vm->Invoke("no_such_function", {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(vm->transport(), client::TransportKind::kDirect);
}

TEST_F(DirectChannelTest, DeadlineStopsTheCallAndTheConnectionStaysUsable) {
  Start();
  client::RemoteVmOptions options;
  options.call_timeout = absl::Milliseconds(50);
  auto vm = NewVm(options);
  ASSERT_NE(vm, nullptr);
  Value endless[] = {Value(int64_t{1} << 40)};
  auto stopped = vm->Invoke("loop", endless);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kDeadlineExceeded) << stopped.status();
  Value five[] = {Value(int64_t{5})};
  auto done = vm->Invoke("loop", five);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->int_value(), 0);
  EXPECT_EQ(vm->transport(), client::TransportKind::kDirect);
}

TEST_F(DirectChannelTest, TicketsAreOneUseAndChecked) {
  Start();
  auto offer = session_->OpenDirectChannel();
  ASSERT_TRUE(offer.ok()) << offer.status();
  ASSERT_EQ(offer->ticket().size(), rpc::kDirectTicketBytes);
  {
    auto first = client::DirectConnection::Connect(offer->address(), offer->ticket(),
                                                   offer->max_frame_bytes(), absl::Seconds(5));
    ASSERT_TRUE(first.ok()) << first.status();
  }
  auto again = client::DirectConnection::Connect(offer->address(), offer->ticket(),
                                                 offer->max_frame_bytes(), absl::Seconds(5));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kPermissionDenied) << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr("already used"));

  auto fresh = session_->OpenDirectChannel();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  std::string forged = fresh->ticket();
  forged.back() = static_cast<char>(forged.back() ^ 1);
  auto bad = client::DirectConnection::Connect(fresh->address(), forged, fresh->max_frame_bytes(),
                                               absl::Seconds(5));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kPermissionDenied) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("invalid ticket"));

  // Not the hello at all.
  RawSocket raw(fresh->address());
  raw.Send(std::string(rpc::kDirectMagicBytes + rpc::kDirectTicketBytes, 'x'));
  auto refused = raw.Receive();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(ErrorOf(*refused).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(raw.ClosedByPeer());

  // The daemon keeps serving.
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  EXPECT_EQ(vm->transport(), client::TransportKind::kDirect);
}

TEST_F(DirectChannelTest, BadFramesCloseOnlyTheirConnection) {
  Start();
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  {
    auto raw = AcceptedRawConnection();
    ASSERT_NE(raw, nullptr);
    raw->Send(std::string("\xff\xff\xff\x7f", 4));  // a 2 GiB frame
    auto reply = raw->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(ErrorOf(*reply).code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(raw->ClosedByPeer());
  }
  {
    auto raw = AcceptedRawConnection();
    ASSERT_NE(raw, nullptr);
    raw->Send(std::string("\x03\x00\x00\x00\xff\xff\xff", 7));  // not a CallRequest
    auto reply = raw->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(ErrorOf(*reply).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ErrorOf(*reply).message(), HasSubstr("not a valid"));
    EXPECT_TRUE(raw->ClosedByPeer());
  }
  // The session and the other connection are untouched.
  Value args[] = {Value(int64_t{20}), Value(int64_t{22})};
  auto swapped = vm->Invoke("swap", args);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(static_cast<const TupleObj*>(swapped->object())->fields[0].int_value(), 22);
  EXPECT_EQ(daemon_->num_sessions(), 1u);
}

TEST_F(DirectChannelTest, ARequestForAnotherSessionIsRefusedAndTheConnectionGoesOn) {
  Start();
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  auto raw = AcceptedRawConnection();
  ASSERT_NE(raw, nullptr);
  v1::CallRequest request = Invoke(vm->vm_id(), "loop", 3, 7);
  request.set_session_id("someone-else");
  raw->Send(Frame(request));
  auto refused = raw->Receive();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->request_id(), 7u);
  EXPECT_EQ(ErrorOf(*refused).code(), absl::StatusCode::kPermissionDenied);
  // Two requests pipelined in one write get their replies in order.
  raw->Send(Frame(Invoke(vm->vm_id(), "loop", 3, 8)) + Frame(Invoke(vm->vm_id(), "pair", 9, 9)));
  auto first = raw->Receive();
  auto second = raw->Receive();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->request_id(), 8u);
  EXPECT_TRUE(ErrorOf(*first).ok()) << ErrorOf(*first);
  EXPECT_EQ(first->value().int_value(), 0);
  EXPECT_EQ(second->request_id(), 9u);
  EXPECT_EQ(second->value().tuple().fields(0).int_value(), 9);
}

// The review's L1: the hello has ten seconds in all, not ten seconds per
// byte, so a peer that dribbles it cannot hold a connection and its thread.
TEST_F(DirectChannelTest, AHelloDribbledAByteASecondIsCutOffAtItsDeadline) {
  Start();
  auto offer = session_->OpenDirectChannel();
  ASSERT_TRUE(offer.ok()) << offer.status();
  RawSocket raw(offer->address());
  const std::string hello = Hello(offer->ticket());
  size_t sent = 0;
  bool closed = false;
  // 20 bytes at one a second: twice the hello's ten seconds, half the hello.
  for (; sent < 20 && !closed; ++sent) {
    if (::send(raw.fd, hello.data() + sent, 1, MSG_NOSIGNAL) != 1) {
      closed = true;
      break;
    }
    pollfd ready{raw.fd, POLLIN, 0};
    if (::poll(&ready, 1, 1000) > 0) closed = raw.ClosedByPeer();
  }
  EXPECT_TRUE(closed) << "the daemon still waited after " << sent << " bytes in " << sent << " s";
  EXPECT_GE(sent, 8u) << "cut off before the hello's deadline";
}

TEST_F(DirectChannelTest, AGoodbyeKeepsTheSessionAndAVanishedClientClosesIt) {
  Start();
  uint64_t vm_id = 0;
  {
    auto vm = NewVm();
    ASSERT_NE(vm, nullptr);
    vm_id = vm->vm_id();
    Value args[] = {Value(int64_t{1}), Value(int64_t{2})};
    ASSERT_TRUE(vm->Invoke("swap", args).ok());
  }  // destroys the VM; the session's connection stays
  {
    auto raw = AcceptedRawConnection();
    ASSERT_NE(raw, nullptr);
    raw->Send(std::string(4, '\0'));  // the goodbye
    EXPECT_TRUE(raw->ClosedByPeer());
  }
  // The daemon closes a connection after deciding its session's fate (a
  // session it drops is closed before the socket): the count is final now.
  EXPECT_EQ(daemon_->num_sessions(), 1u);
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  EXPECT_NE(vm->vm_id(), vm_id);

  // A client that hangs up while its call runs: the watcher closes the
  // session, which interrupts the endless call.
  {
    auto raw = AcceptedRawConnection();
    ASSERT_NE(raw, nullptr);
    const int64_t before = tether::testing::SubtractOneCalls();
    raw->Send(Frame(Invoke(vm->vm_id(), "loop", int64_t{1} << 40, 1)));
    // Until the call runs (up to 30 s).
    for (absl::Time give_up = absl::Now() + absl::Seconds(30);
         tether::testing::SubtractOneCalls() == before && absl::Now() < give_up;) {
      std::this_thread::yield();
    }
    ASSERT_GT(tether::testing::SubtractOneCalls(), before) << "the call never started";
  }
  AwaitSessions(0);
  Value five[] = {Value(int64_t{5})};
  auto after = vm->Invoke("loop", five);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kNotFound) << after.status();
}

TEST_F(DirectChannelTest, AnIdleClientThatVanishesLosesItsSession) {
  Start();
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  {
    auto raw = AcceptedRawConnection();
    ASSERT_NE(raw, nullptr);
  }  // closed without a goodbye
  AwaitSessions(0);
}

TEST_F(DirectChannelTest, WithTheChannelOffCallsStayOnTheStream) {
  Start(/*direct=*/false);
  auto offer = session_->OpenDirectChannel();
  EXPECT_EQ(offer.status().code(), absl::StatusCode::kFailedPrecondition) << offer.status();
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  EXPECT_EQ(vm->transport(), client::TransportKind::kStream);
  Value args[] = {Value(int64_t{2}), Value(int64_t{3})};
  auto swapped = vm->Invoke("swap", args);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(static_cast<const TupleObj*>(swapped->object())->fields[1].int_value(), 2);
}

TEST_F(DirectChannelTest, ShutdownEndsConnectionsAndLaterCallsFailCleanly) {
  Start();
  auto vm = NewVm();
  ASSERT_NE(vm, nullptr);
  auto raw = AcceptedRawConnection();
  ASSERT_NE(raw, nullptr);
  daemon_->Shutdown(absl::Seconds(5));
  EXPECT_TRUE(raw->ClosedByPeer());
  Value args[] = {Value(int64_t{2}), Value(int64_t{3})};
  auto swapped = vm->Invoke("swap", args);
  EXPECT_EQ(swapped.status().code(), absl::StatusCode::kUnavailable) << swapped.status();
}

TEST_F(DirectChannelTest, TensorsMoveRawOnTheDirectChannelAndBadTransfersKeepItInStep) {
  Start();
  ASSERT_NE(NewVm(), nullptr);  // opens the session's direct connection
  ASSERT_TRUE(session_->transport() == client::TransportKind::kDirect);
  for (int64_t size : {int64_t{0}, int64_t{1}, (int64_t{1} << 20) + 1, int64_t{5} << 20}) {
    int64_t shape[] = {size};
    auto tensor = Tensor::Empty(shape, DataType::UInt(8), Device::Cpu());
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    auto* bytes = static_cast<uint8_t*>((*tensor)->element_data());
    for (int64_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
    auto remote = session_->UploadTensor(*tensor);
    ASSERT_TRUE(remote.ok()) << remote.status();
    auto back = session_->DownloadTensor(*remote);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ((*back)->NumBytes(), size);
    EXPECT_EQ(std::memcmp((*back)->element_data(), bytes, static_cast<size_t>(size)), 0);
  }
  EXPECT_TRUE(session_->transport() == client::TransportKind::kDirect);

  auto raw = AcceptedRawConnection();
  ASSERT_NE(raw, nullptr);
  // A payload that does not match dtype x shape is refused after being read.
  v1::CallRequest put;
  put.set_session_id(session_->session_id());
  put.set_request_id(1);
  const int64_t four[] = {4};
  rpc::EncodeTensorHeader(DataType::Float(32), four, Device::Cpu(),
                          put.mutable_put_tensor()->mutable_tensor());
  put.mutable_put_tensor()->set_size_bytes(10);
  raw->Send(Frame(put) + std::string(10, 'z'));
  auto refused = raw->Receive();
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(ErrorOf(*refused).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(*refused).message(), HasSubstr("needs 16"));
  // An unknown tensor: an error reply and no bytes after it.
  v1::CallRequest get;
  get.set_session_id(session_->session_id());
  get.set_request_id(2);
  get.mutable_get_tensor()->set_tensor_id(987654);
  raw->Send(Frame(get));
  auto missing = raw->Receive();
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->request_id(), 2u);
  EXPECT_EQ(ErrorOf(*missing).code(), absl::StatusCode::kNotFound);
  // Still in step: a good put and its get.
  put.set_request_id(3);
  put.mutable_put_tensor()->set_size_bytes(16);
  raw->Send(Frame(put) + std::string(16, 'q'));
  auto stored = raw->Receive();
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_TRUE(ErrorOf(*stored).ok()) << ErrorOf(*stored);
  get.set_request_id(4);
  get.mutable_get_tensor()->set_tensor_id(stored->tensor().id());
  raw->Send(Frame(get));
  auto header = raw->Receive();
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_TRUE(ErrorOf(*header).ok()) << ErrorOf(*header);
  std::string payload(16, '\0');
  ASSERT_TRUE(raw->reader.ReadRaw(payload.data(), payload.size()).ok());
  EXPECT_EQ(payload, std::string(16, 'q'));

  // On gRPC, the stream or a unary call, these operations are refused.
  for (client::TransportKind grpc :
       {client::TransportKind::kStream, client::TransportKind::kUnary}) {
    auto on_grpc = session_->Call(get, grpc);
    EXPECT_EQ(on_grpc.status().code(), absl::StatusCode::kFailedPrecondition) << on_grpc.status();
    EXPECT_THAT(on_grpc.status().message(), HasSubstr("only on the direct channel"));
  }
  EXPECT_EQ(session_->transport(), client::TransportKind::kDirect);
}

TEST_F(DirectChannelTest, EightConcurrentClientsOfAThousandCallsEachGetTheirOwnResults) {
  Start();
  constexpr int kClients = 8, kCalls = 1000;
  std::atomic<int> wrong{0}, errors{0}, on_direct{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto session = client::RemoteSession::Connect(daemon_->target());
      if (!session.ok()) {
        ++errors;
        return;
      }
      auto vm = client::RemoteVM::Create(session->get(), sha_);
      if (!vm.ok()) {
        ++errors;
        return;
      }
      if ((*vm)->transport() == client::TransportKind::kDirect) ++on_direct;
      for (int i = 0; i < kCalls; ++i) {
        Value args[] = {Value(int64_t{c}), Value(int64_t{i})};
        auto swapped = (*vm)->Invoke("swap", args);
        if (!swapped.ok()) {
          ++errors;
          continue;
        }
        const auto* fields = static_cast<const TupleObj*>(swapped->object());
        if (fields->fields[0].int_value() != i || fields->fields[1].int_value() != c) ++wrong;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(on_direct.load(), kClients);
}

}  // namespace
}  // namespace tether::server
