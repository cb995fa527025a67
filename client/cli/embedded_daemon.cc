// The embedded daemon: a private directory, a random token, a Daemon.
#include "client/cli/embedded_daemon.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "proto/codec/auth_token.h"
#include "runtime/core/error.h"

namespace tether::cli {

absl::StatusOr<std::unique_ptr<EmbeddedDaemon>> EmbeddedDaemon::Start() {
  // The daemon opens nothing another local user can use: a unix socket in a
  // directory only this user can enter, and a token that stays here.
  std::string dir = (std::filesystem::temp_directory_path() / "tether-cli-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a private directory for the embedded daemon in ",
                     std::filesystem::temp_directory_path().string()));
  }
  std::unique_ptr<EmbeddedDaemon> e(new EmbeddedDaemon());
  e->dir_ = dir;  // removed by the destructor from here on
  server::DaemonOptions d;
  d.listen = {absl::StrCat("unix:", dir, "/tetherd.sock")};
  d.store_dir = dir + "/store";
  d.auth_token = rpc::RandomToken();
  d.log_events = false;
  e->target_ = d.listen[0];
  e->auth_token_ = d.auth_token;
  TETHER_ASSIGN_OR_RETURN(e->daemon_, server::Daemon::Start(d));
  return e;
}

EmbeddedDaemon::~EmbeddedDaemon() {
  daemon_.reset();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace tether::cli
