#pragma once

// Transport security for outrider's own gRPC edges: the sidecar's relay
// (server) and the routers that call it (clients), and the router's
// OpenEngine frontend. Certificates come from PEM files (--tls-cert,
// --tls-key, --tls-ca); with a CA, servers require and verify client
// certificates (mutual TLS) and clients verify servers against it. Engines
// are spoken to in plaintext (they listen in the same pod).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/expected.hpp>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "runtime/errors.hpp"

namespace outrider::cluster {

struct tls_files {
  std::string cert; // this process's certificate chain (PEM)
  std::string key;  // its private key (PEM)
  std::string ca;   // the CA that signs peers' certificates (PEM)
  /// --tls-reload-interval: how often the files are read again (new
  /// connections get what changed); 0: once, at start.
  std::chrono::milliseconds reload{0};
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// The files' contents as read at start, and the files (reloaded from
/// there when `files.reload` is set).
struct tls_material {
  std::string cert, key, ca;
  tls_files files;
};

/// Reads and checks the files: cert and key together, each readable,
/// non-empty and PEM; an error names the option and the file. Never logs
/// the contents.
caf::expected<tls_material> load_tls(const tls_files& files);

/// nullopt when no TLS option is set; else `load_tls`.
caf::expected<std::optional<tls_material>> tls_from(const tls_files& files);

/// TLS (mutual with a CA, unless `client_certs` is false) when `m` is set,
/// plaintext otherwise. With `m->files.reload`, gRPC's own file watcher
/// (`FileWatcherCertificateProvider`) reads the files again at that
/// interval: new connections and handshakes use the new certificate, CA
/// and key; connections open keep theirs; files that cannot be read keep
/// the last good ones (gRPC logs why).
std::shared_ptr<grpc::ServerCredentials>
server_credentials(const std::optional<tls_material>& m,
                   bool client_certs = true);
std::shared_ptr<grpc::ChannelCredentials>
channel_credentials(const std::optional<tls_material>& m);

/// The gRPC target for `endpoint`: an IPv4 literal ("10.0.0.7:50051") as
/// "ipv4:10.0.0.7:50051", an IPv6 one ("[fd00::7]:50051") as "ipv6:...",
/// anything else (a host name) unchanged: an address needs no resolver
/// (gRPC's DNS resolver would run getaddrinfo for it on its own thread).
/// The channel's authority, and so TLS's name check, is the same
/// "host:port".
std::string channel_target(const std::string& endpoint);

/// The channel to a relay: the one every part of the process shares while
/// any holds it (channel_pool.hpp), else a new one. With a `server_name`
/// (--tls-server-name) TLS checks the relay's certificate against that name
/// instead of the address dialled: one certificate for every sidecar of a
/// fleet, whose relays are reached at pod IPs no certificate names.
std::shared_ptr<grpc::Channel>
relay_channel(const std::string& endpoint,
              const std::shared_ptr<grpc::ChannelCredentials>& creds,
              const std::string& server_name);

} // namespace outrider::cluster
