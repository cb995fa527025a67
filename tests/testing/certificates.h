// Test certificates made at test time by the openssl CLI: a CA, a server
// certificate for localhost / 127.0.0.1 and a client certificate (for mutual
// TLS), all signed by the CA, in a fresh temporary directory removed with
// the object. Used by the daemon's TLS tests and the farm's secured-etcd test.
#ifndef TETHER_TESTS_TESTING_CERTIFICATES_H_
#define TETHER_TESTS_TESTING_CERTIFICATES_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tether::testing {

class Certificates {
 public:
  Certificates() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tether-tls-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~Certificates() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;

  // Empty on success, otherwise what failed. The files: ca.pem, ca.key,
  // server.pem, server.key (CN localhost, SAN localhost and 127.0.0.1,
  // serverAuth), client.pem, client.key (CN tether-client, clientAuth).
  std::string Generate() {
    if (dir_.empty()) return "cannot create a temporary directory";
    if (std::system("openssl version >/dev/null 2>&1") != 0) {
      return "the openssl command is missing (deploy/install-deps.sh installs it)";
    }
    std::ofstream(path("server.ext"))
        << "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
    std::ofstream(path("client.ext")) << "extendedKeyUsage=clientAuth\n";
    const std::string d = dir_ + "/";
    const std::string steps[] = {
        absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tether-test-ca",
                     " -keyout ", d, "ca.key -out ", d, "ca.pem"),
        absl::StrCat("openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout ", d,
                     "server.key -out ", d, "server.csr"),
        absl::StrCat("openssl x509 -req -in ", d, "server.csr -CA ", d, "ca.pem -CAkey ", d,
                     "ca.key -CAcreateserial -days 2 -extfile ", d, "server.ext -out ", d,
                     "server.pem"),
        absl::StrCat("openssl req -newkey rsa:2048 -nodes -subj /CN=tether-client -keyout ", d,
                     "client.key -out ", d, "client.csr"),
        absl::StrCat("openssl x509 -req -in ", d, "client.csr -CA ", d, "ca.pem -CAkey ", d,
                     "ca.key -CAcreateserial -days 2 -extfile ", d, "client.ext -out ", d,
                     "client.pem"),
    };
    for (const std::string& step : steps) {
      if (std::system((step + " >/dev/null 2>&1").c_str()) != 0) return "failed: " + step;
    }
    return "";
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

}  // namespace tether::testing

#endif  // TETHER_TESTS_TESTING_CERTIFICATES_H_
