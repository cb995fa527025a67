// A session on a test daemon with a VM of BuiltinsTestExecutable() (swap,
// spin), shared by the server tests that drive stock tetherd workers.
#ifndef TETHER_TESTS_SERVER_REMOTE_BUILTINS_H_
#define TETHER_TESTS_SERVER_REMOTE_BUILTINS_H_

#include <memory>
#include <string>

#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "gtest/gtest.h"
#include "tests/testing/session_program.h"

namespace tether::testing {

struct RemoteBuiltins {
  std::unique_ptr<client::RemoteSession> session;
  std::unique_ptr<client::RemoteVM> vm;
};

// Connects to `target`, uploads the builtins program and creates its VM;
// failures are test failures and leave the missing parts null.
inline RemoteBuiltins OpenRemoteBuiltins(const std::string& target,
                                         const client::ConnectOptions& options,
                                         const client::RemoteVmOptions& vm_options = {}) {
  RemoteBuiltins out;
  auto session = client::RemoteSession::Connect(target, options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return out;
  out.session = std::move(*session);
  auto sha = out.session->UploadModule(BuiltinsTestExecutable());
  EXPECT_TRUE(sha.ok()) << sha.status();
  if (!sha.ok()) return out;
  auto vm = client::RemoteVM::Create(out.session.get(), *sha, {}, "", vm_options);
  EXPECT_TRUE(vm.ok()) << vm.status();
  if (vm.ok()) out.vm = std::move(*vm);
  return out;
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_SERVER_REMOTE_BUILTINS_H_
