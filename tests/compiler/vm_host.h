// The VMs of a test that runs one suite on both paths: the local VM, or a
// real tetherd on 127.0.0.1 (started on first use, stopped with the host)
// through a RemoteSession. Header-only; for the compiler's tests.
#ifndef TETHER_TESTS_COMPILER_VM_HOST_H_
#define TETHER_TESTS_COMPILER_VM_HOST_H_

#include <memory>
#include <vector>

#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gtest/gtest.h"
#include "runtime/vm/local_vm.h"
#include "server/daemon.h"

namespace tether::testing {

// Thread contract: thread-hostile (a test's fixture).
class VmHost {
 public:
  explicit VmHost(bool remote) : remote_(remote) {}
  VmHost(const VmHost&) = delete;
  VmHost& operator=(const VmHost&) = delete;
  ~VmHost() {
    vms_.clear();
    session_.reset();
    if (daemon_) daemon_->Shutdown();
  }

  // A VM of `exec` on the CPU (uploaded first when remote); nullptr, with
  // the failure recorded, when that fails. Owned by the host.
  vm::VirtualMachine* Load(Ref<vm::Executable> exec) {
    if (!remote_) {
      auto vm = vm::LocalVirtualMachine::Create(exec, {Device::Cpu()});
      EXPECT_TRUE(vm.ok()) << vm.status();
      if (!vm.ok()) return nullptr;
      vms_.push_back(std::move(*vm));
      return vms_.back().get();
    }
    if (!daemon_) {
      server::DaemonOptions options;
      options.listen = {"127.0.0.1:0"};
      auto daemon = server::Daemon::Start(options);
      EXPECT_TRUE(daemon.ok()) << daemon.status();
      if (!daemon.ok()) return nullptr;
      daemon_ = std::move(*daemon);
      auto session = client::RemoteSession::Connect(daemon_->target());
      EXPECT_TRUE(session.ok()) << session.status();
      if (!session.ok()) return nullptr;
      session_ = std::move(*session);
    }
    auto sha = session_->UploadModule(exec->SaveToBytes());
    EXPECT_TRUE(sha.ok()) << sha.status();
    if (!sha.ok()) return nullptr;
    auto vm = client::RemoteVM::Create(session_.get(), *sha, {Device::Cpu()});
    EXPECT_TRUE(vm.ok()) << vm.status();
    if (!vm.ok()) return nullptr;
    vms_.push_back(std::move(*vm));
    return vms_.back().get();
  }

 private:
  bool remote_;
  std::unique_ptr<server::Daemon> daemon_;
  std::unique_ptr<client::RemoteSession> session_;
  std::vector<std::unique_ptr<vm::VirtualMachine>> vms_;  // go before the session
};

}  // namespace tether::testing

#endif  // TETHER_TESTS_COMPILER_VM_HOST_H_
