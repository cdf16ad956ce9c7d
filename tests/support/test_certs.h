// test_certs: a throwaway PKI for TLS tests, made by the openssl command (Debian's `openssl`):
// a CA, a server certificate for 127.0.0.1 and localhost signed by it, one for another name
// (elsewhere.example) signed by it, a client certificate signed by it, and a second CA that
// signed none of them.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace postal::test_support {

class TestCerts {
 public:
  // Everything under `dir` (created); ok() is false when openssl failed (its output is in
  // dir/openssl.log).
  explicit TestCerts(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    std::ofstream(dir_ / "elsewhere.ext") << "subjectAltName=DNS:elsewhere.example\n";
    ok_ = ca("ca") && ca("other-ca") && leaf("server", "127.0.0.1", "server.ext") &&
          leaf("elsewhere", "elsewhere.example", "elsewhere.ext") &&
          leaf("client", "postal-test-client", "");
  }
  bool ok() const { return ok_; }
  std::filesystem::path log() const { return dir_ / "openssl.log"; }
  std::string path(std::string_view name) const { return (dir_ / name).string(); }
  std::string ca_file() const { return path("ca.pem"); }
  std::string other_ca_file() const { return path("other-ca.pem"); }
  std::string server_cert() const { return path("server.pem"); }
  std::string server_key() const { return path("server.key"); }
  std::string elsewhere_cert() const { return path("elsewhere.pem"); }
  std::string elsewhere_key() const { return path("elsewhere.key"); }
  std::string client_cert() const { return path("client.pem"); }
  std::string client_key() const { return path("client.key"); }

 private:
  bool run(const std::string& args) const {
    const std::string cmd =
        absl::StrCat("cd '", dir_.string(), "' && openssl ", args, " >> openssl.log 2>&1");
    return std::system(cmd.c_str()) == 0;
  }
  bool ca(const std::string& name) const {
    return run(absl::StrCat("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ",
                            "-keyout ", name, ".key -out ", name, ".pem -days 2 -subj /CN=", name));
  }
  bool leaf(const std::string& name, const std::string& cn, const std::string& ext) const {
    return run(absl::StrCat("req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ",
                            name, ".key -out ", name, ".csr -subj /CN=", cn)) &&
           run(absl::StrCat("x509 -req -in ", name, ".csr -CA ca.pem -CAkey ca.key ",
                            "-CAcreateserial -days 2 -out ", name, ".pem",
                            ext.empty() ? "" : " -extfile " + ext));
  }

  std::filesystem::path dir_;
  bool ok_ = false;
};

}  // namespace postal::test_support
