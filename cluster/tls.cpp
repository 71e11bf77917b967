#include "cluster/tls.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <fstream>
#include <sstream>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "cluster/channel_pool.hpp"

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
  m.files = files;
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

namespace {

namespace gx = grpc::experimental;

// gRPC re-reads the files itself at this interval (whole seconds, at
// least one).
std::shared_ptr<gx::FileWatcherCertificateProvider> watcher(const tls_files& f,
                                                            bool roots) {
  auto secs = std::max<int64_t>(
    1, std::chrono::duration_cast<std::chrono::seconds>(f.reload).count());
  return std::make_shared<gx::FileWatcherCertificateProvider>(
    f.key, f.cert, roots ? f.ca : std::string{}, static_cast<unsigned>(secs));
}

} // namespace

std::shared_ptr<grpc::ServerCredentials>
server_credentials(const std::optional<tls_material>& m, bool client_certs) {
  if (!m)
    return grpc::InsecureServerCredentials();
  bool verify = !m->ca.empty() && client_certs;
  if (m->files.reload.count() > 0) {
    gx::TlsServerCredentialsOptions o{watcher(m->files, verify)};
    o.watch_identity_key_cert_pairs();
    if (verify)
      o.watch_root_certs();
    o.set_cert_request_type(
      verify ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    return gx::TlsServerCredentials(o);
  }
  grpc::SslServerCredentialsOptions o{
    verify ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
           : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE};
  o.pem_root_certs = m->ca;
  o.pem_key_cert_pairs.push_back({m->key, m->cert});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials>
channel_credentials(const std::optional<tls_material>& m) {
  if (!m)
    return grpc::InsecureChannelCredentials();
  if (m->files.reload.count() > 0 && !m->ca.empty()) {
    // The router's client certificate and the CA it checks relays
    // against, re-read as the server's are.
    gx::TlsChannelCredentialsOptions o;
    o.set_certificate_provider(watcher(m->files, true));
    o.watch_identity_key_cert_pairs();
    o.watch_root_certs();
    o.set_verify_server_certs(true);
    return gx::TlsCredentials(o);
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = m->ca; // empty: the system's roots
  o.pem_private_key = m->key;
  o.pem_cert_chain = m->cert;
  return grpc::SslCredentials(o);
}

std::string channel_target(const std::string& endpoint) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon + 1 == endpoint.size())
    return endpoint;
  auto port = endpoint.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return endpoint;
  auto host = endpoint.substr(0, colon);
  unsigned char addr[16];
  if (inet_pton(AF_INET, host.c_str(), addr) == 1)
    return "ipv4:" + endpoint;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']' &&
      inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), addr) == 1)
    return "ipv6:" + endpoint;
  return endpoint;
}

namespace {

std::shared_ptr<grpc::Channel>
new_relay_channel(const std::string& endpoint,
                  const std::shared_ptr<grpc::ChannelCredentials>& creds,
                  const std::string& server_name) {
  grpc::ChannelArguments args;
  if (!server_name.empty())
    args.SetSslTargetNameOverride(server_name);
  // No bandwidth-delay probes: on each stream's data gRPC sends a PING to
  // size its flow-control window, and with a connection a sidecar (a
  // fleet's many small KV batches, token messages) those pings and their
  // acks were a write and a read per message. Off, at 6,000 workers with an
  // address each, the router's event lag p99 went 20-25 -> 10 ms and its
  // CPU per token at 1,024 no-sleep mux streams 12-12.5 -> 8-10 us
  // (docs/benchmarks.md). Windows stay at gRPC's 64 KB a stream: at a
  // cluster's round trips, far more than a relay's tokens or batches need.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return grpc::CreateCustomChannel(channel_target(endpoint), creds, args);
}

// The process's channels to relays.
channel_pool& relay_channels() {
  static channel_pool pool{&new_relay_channel};
  return pool;
}

} // namespace

std::shared_ptr<grpc::Channel>
relay_channel(const std::string& endpoint,
              const std::shared_ptr<grpc::ChannelCredentials>& creds,
              const std::string& server_name) {
  return relay_channels().get(endpoint, creds, server_name);
}

} // namespace outrider::cluster
