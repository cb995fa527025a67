// The --farm flags shared by `tether farm ...` and run/bench/profile
// (built with or without the farm, so the usage is the same everywhere).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/cli/commands.h"

namespace tether::cli {

const char kFarmFlagsHelp[] =
    "  --farm etcd://HOST:PORT[,...]  the device farm's etcd (etcds:// for TLS)\n"
    "  --key KEY              the farm key (pool of devices)\n"
    "  --where ATTR=VALUE     what the device must be: a label, id, triple, cpu, feature,\n"
    "                         device (cuda, cuda:0) or a device attribute (repeatable)\n"
    "  --priority N           served before waiters of lower priority (default 0)\n"
    "  --wait DURATION        the longest wait for a free device (30s, 5m; default: no limit)\n"
    "  --farm-ttl SECS        the hold's etcd lease: a client that dies loses the device\n"
    "                         this long after (default 10)\n"
    "  --farm-tls-ca PEM, --farm-tls-cert PEM, --farm-tls-key PEM  TLS to etcd\n"
    "  --farm-user NAME --farm-password-file PATH  etcd user authentication\n";

int ParseFarmFlag(const std::string& command, const std::vector<std::string>& args, size_t* i,
                  FarmFlags* flags) {
  const std::string& a = args[*i];
  std::string* text = a == "--farm"                 ? &flags->url
                      : a == "--key"                ? &flags->key
                      : a == "--farm-tls-ca"        ? &flags->tls_ca
                      : a == "--farm-tls-cert"      ? &flags->tls_cert
                      : a == "--farm-tls-key"       ? &flags->tls_key
                      : a == "--farm-user"          ? &flags->user
                      : a == "--farm-password-file" ? &flags->password_file
                                                    : nullptr;
  const bool known =
      text != nullptr || a == "--where" || a == "--priority" || a == "--wait" || a == "--farm-ttl";
  if (!known) return 0;
  if (*i + 1 >= args.size()) {
    std::fprintf(stderr, "tether %s: %s needs a value\n", command.c_str(), a.c_str());
    return -1;
  }
  const std::string& value = args[++*i];
  if (text != nullptr) {
    *text = value;
  } else if (a == "--where") {
    flags->where.push_back(value);
  } else if (a == "--priority") {
    if (!absl::SimpleAtoi(value, &flags->priority)) {
      std::fprintf(stderr, "tether %s: --priority wants an integer, got \"%s\"\n", command.c_str(),
                   value.c_str());
      return -1;
    }
  } else {
    // A duration ("30s", "1m30s") or plain seconds.
    absl::Duration d;
    double seconds = 0;
    if (absl::SimpleAtod(value, &seconds)) {
      d = absl::Seconds(seconds);
    } else if (!absl::ParseDuration(value, &d)) {
      d = absl::Seconds(-1);
    }
    if (d < absl::ZeroDuration() || (a == "--farm-ttl" && d < absl::Seconds(1))) {
      std::fprintf(stderr, "tether %s: %s wants a duration (30s, 5m, or seconds)%s, got \"%s\"\n",
                   command.c_str(), a.c_str(), a == "--farm-ttl" ? " of at least 1s" : "",
                   value.c_str());
      return -1;
    }
    if (a == "--wait") {
      flags->wait = d;
    } else {
      flags->ttl = d;
    }
  }
  return 1;
}

}  // namespace tether::cli
