#pragma once

// Certificates for the TLS tests, made by openssl at run time, never
// committed: a CA, a certificate it signs for 127.0.0.1 (server and client
// use), and a stranger signed by another CA.

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <grpcpp/security/credentials.h>

#include "tests/e2e/sidecar_process.hpp"

namespace outrider::test {

inline void openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  child_process p{args};
  auto code = p.wait(std::chrono::seconds{60});
  INFO(p.output());
  REQUIRE(code == 0);
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in{p};
  return {std::istreambuf_iterator<char>{in}, {}};
}

// A CA and a leaf it signs (EC P-256: fast to make).
struct pki {
  temp_dir dir;
  std::string path(const std::string& name) const {
    return (dir.path / name).string();
  }
  void make_ca(const std::string& name) {
    openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
             "/CN=" + name, "-keyout", path(name + ".key"), "-out",
             path(name + ".crt")});
  }
  void make_leaf(const std::string& name, const std::string& ca,
                 const std::string& san = "IP:127.0.0.1") {
    std::ofstream(path("ext.cnf"))
      << "subjectAltName=" << san
      << "\n"
         "extendedKeyUsage=serverAuth,clientAuth\n";
    openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-subj", "/CN=" + name, "-keyout", path(name + ".key"),
             "-out", path(name + ".csr")});
    openssl({"x509", "-req", "-in", path(name + ".csr"), "-CA",
             path(ca + ".crt"), "-CAkey", path(ca + ".key"), "-CAcreateserial",
             "-days", "1", "-extfile", path("ext.cnf"), "-out",
             path(name + ".crt")});
  }
  pki() {
    make_ca("ca");
    make_leaf("tls", "ca");
    make_ca("other-ca");
    make_leaf("stranger", "other-ca");
  }
  std::vector<std::string> flags() const {
    return {"--tls-cert",    path("tls.crt"), "--tls-key",
            path("tls.key"), "--tls-ca",      path("ca.crt")};
  }
  std::shared_ptr<grpc::ChannelCredentials> client(const std::string& leaf) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = slurp(path("ca.crt"));
    o.pem_private_key = slurp(path(leaf + ".key"));
    o.pem_cert_chain = slurp(path(leaf + ".crt"));
    return grpc::SslCredentials(o);
  }
};

} // namespace outrider::test
