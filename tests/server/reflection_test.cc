// Server reflection is served only when DaemonOptions::enable_reflection is
// set (tetherd --reflection), and only by that daemon. The request and
// response are encoded by hand: Debian ships the reflection service but not
// its generated client classes.
#include <memory>
#include <string>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/daemon.h"

namespace tether::server {
namespace {

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// One ServerReflectionRequest{list_services: ""} on a bidi stream; the raw
// response bytes, or the call's failure status.
grpc::Status ListServices(const std::string& target, std::string* response) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto call = stub.PrepareCall(&ctx, kMethod, &cq);
  void* tag;
  bool ok;
  auto next = [&] { return cq.Next(&tag, &ok); };

  call->StartCall(reinterpret_cast<void*>(1));
  next();
  const char request[] = {0x3a, 0x00};  // field 7 (list_services), empty string
  grpc::Slice slice(request, sizeof(request));
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  next();
  call->WritesDone(reinterpret_cast<void*>(3));
  next();
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(4));
  next();
  if (ok) {
    std::vector<grpc::Slice> slices;
    (void)in.Dump(&slices);
    for (const grpc::Slice& s : slices)
      response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  while (next() && tag != reinterpret_cast<void*>(5)) {
  }
  cq.Shutdown();
  while (next()) {
  }
  return status;
}

std::unique_ptr<Daemon> StartDaemon(bool reflection) {
  DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.log_events = false;
  options.enable_reflection = reflection;
  auto daemon = Daemon::Start(options);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? std::move(*daemon) : nullptr;
}

TEST(ServerReflectionTest, ListsTheTetherServiceWhenEnabled) {
  auto daemon = StartDaemon(/*reflection=*/true);
  ASSERT_NE(daemon, nullptr);
  std::string response;
  grpc::Status s = ListServices(daemon->target(), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(response.find("tether.v1.Tether"), std::string::npos);
  EXPECT_NE(response.find("grpc.health.v1.Health"), std::string::npos);
}

TEST(ServerReflectionTest, IsOffByDefaultAndPerDaemon) {
  // A daemon with reflection in the same process must not turn it on here.
  auto with = StartDaemon(/*reflection=*/true);
  auto without = StartDaemon(/*reflection=*/false);
  ASSERT_NE(without, nullptr);
  std::string response;
  grpc::Status s = ListServices(without->target(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_TRUE(response.empty());
}

}  // namespace
}  // namespace tether::server
