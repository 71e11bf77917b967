#include "cluster/tls.hpp"

#include <fstream>
#include <sstream>

#include <grpcpp/security/credentials.h>

namespace outrider::cluster {

namespace {

// The whole of a small PEM file; an error says which option named it.
caf::expected<std::string> read_pem(const std::string& option,
                                    const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_argument,
                      "--" + option + ": cannot read '" + path + "'");
  std::ostringstream os;
  os << in.rdbuf();
  auto text = os.str();
  if (text.size() > 1024 * 1024)
    return make_error(errc::invalid_argument,
                      "--" + option + ": '" + path + "' is over 1 MiB");
  if (text.find("-----BEGIN ") == std::string::npos)
    return make_error(errc::invalid_argument,
                      "--" + option + ": '" + path + "' is not PEM");
  return text;
}

} // namespace

caf::expected<tls_material> load_tls(const tls_files& files) {
  if (files.cert.empty() != files.key.empty())
    return make_error(errc::invalid_argument,
                      "--tls-cert and --tls-key go together");
  if (files.cert.empty())
    return make_error(errc::invalid_argument,
                      "--tls-ca needs --tls-cert and --tls-key (every "
                      "outrider process with TLS serves too)");
  tls_material m;
  auto cert = read_pem("tls-cert", files.cert);
  if (!cert)
    return cert.error();
  auto key = read_pem("tls-key", files.key);
  if (!key)
    return key.error();
  m.cert = std::move(*cert);
  m.key = std::move(*key);
  if (!files.ca.empty()) {
    auto ca = read_pem("tls-ca", files.ca);
    if (!ca)
      return ca.error();
    m.ca = std::move(*ca);
  }
  return m;
}

caf::expected<std::optional<tls_material>> tls_from(const tls_files& files) {
  if (!files.enabled())
    return std::optional<tls_material>{};
  auto m = load_tls(files);
  if (!m)
    return m.error();
  return std::optional<tls_material>{std::move(*m)};
}

std::shared_ptr<grpc::ServerCredentials>
server_credentials(const std::optional<tls_material>& m, bool client_certs) {
  if (!m)
    return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o{
    m->ca.empty() || !client_certs
      ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
      : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY};
  o.pem_root_certs = m->ca;
  o.pem_key_cert_pairs.push_back({m->key, m->cert});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials>
channel_credentials(const std::optional<tls_material>& m) {
  if (!m)
    return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = m->ca; // empty: the system's roots
  o.pem_private_key = m->key;
  o.pem_cert_chain = m->cert;
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::Channel>
relay_channel(const std::string& endpoint,
              const std::shared_ptr<grpc::ChannelCredentials>& creds,
              const std::string& server_name) {
  grpc::ChannelArguments args;
  if (!server_name.empty())
    args.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(endpoint, creds, args);
}

} // namespace outrider::cluster
