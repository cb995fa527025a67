// VM conformance through a real daemon: the suite of vm_conformance_test.cc
// instantiated with a backend that uploads each executable to an in-process
// tetherd on 127.0.0.1:0 and drives it with a RemoteVM. The daemon resolves the
// test functions and instruments registered in this process.
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "server/daemon.h"
#include "tests/vm/vm_conformance.h"

namespace tether::vm {
namespace {

// One daemon and one session per test binary, started on first use and shut
// down after the last test.
class RemoteBackendEnvironment : public ::testing::Environment {
 public:
  static RemoteBackendEnvironment* Get() {
    static RemoteBackendEnvironment* env = [] {
      auto* e = new RemoteBackendEnvironment();
      ::testing::AddGlobalTestEnvironment(e);  // gtest owns it
      return e;
    }();
    return env;
  }

  absl::StatusOr<client::RemoteSession*> Session() {
    if (session_) return session_.get();
    server::DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    TETHER_ASSIGN_OR_RETURN(daemon_, server::Daemon::Start(options));
    TETHER_ASSIGN_OR_RETURN(session_, client::RemoteSession::Connect(daemon_->target()));
    return session_.get();
  }

  void TearDown() override {
    session_.reset();
    if (daemon_) daemon_->Shutdown();
    daemon_.reset();
  }

 private:
  std::unique_ptr<server::Daemon> daemon_;
  std::unique_ptr<client::RemoteSession> session_;
};

// Registered before main runs, so TearDown happens before static destruction.
[[maybe_unused]] RemoteBackendEnvironment* const kEnvironment = RemoteBackendEnvironment::Get();

// A remote VM whose calls travel on `transport`: the direct channel (what a
// same-host client gets), one gRPC CallStream, or unary gRPC Calls (what a
// remote device's client uses when a stream is refused).
absl::StatusOr<std::unique_ptr<VirtualMachine>> MakeRemote(Ref<Executable> exec,
                                                           client::TransportKind transport) {
  TETHER_ASSIGN_OR_RETURN(client::RemoteSession * session,
                          RemoteBackendEnvironment::Get()->Session());
  TETHER_ASSIGN_OR_RETURN(std::string sha, session->UploadModule(exec->SaveToBytes()));
  client::RemoteVmOptions options;
  options.transport = transport;
  TETHER_ASSIGN_OR_RETURN(auto vm,
                          client::RemoteVM::Create(session, sha, {Device::Cpu()}, "", options));
  // Create opened the direct channel, if it was to be used.
  if (vm->transport() != transport) {
    return absl::InternalError("the remote VM did not take the transport it was given");
  }
  return std::unique_ptr<VirtualMachine>(std::move(vm));
}

INSTANTIATE_TEST_SUITE_P(
    Remote, VmConformanceTest,
    ::testing::Values(Backend{"direct",
                              [](Ref<Executable> exec) {
                                return MakeRemote(exec, client::TransportKind::kDirect);
                              }},
                      Backend{"stream",
                              [](Ref<Executable> exec) {
                                return MakeRemote(exec, client::TransportKind::kStream);
                              }},
                      Backend{"unary",
                              [](Ref<Executable> exec) {
                                return MakeRemote(exec, client::TransportKind::kUnary);
                              }}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace tether::vm
