#pragma once

// A gRPC server and the socket it listens on. Plaintext on an IP address,
// the accept loop is outrider's (runtime::fd_acceptor: the process's last
// descriptors kept back, accept failures backed off and survived, silent
// connections closed before the server sees them) and each connection is
// handed to the server (grpc::AddInsecureChannelFromFd). With TLS, or on a
// host name, gRPC 1.51's own listener, which offers none of that (its
// connections from a descriptor are plaintext only); the listener probe
// (runtime/listener_watch.hpp) covers it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "cluster/grpc_server_limits.hpp"
#include "runtime/fd_acceptor.hpp"

namespace outrider::cluster {

class grpc_listener {
 public:
  grpc_listener() = default;
  ~grpc_listener();
  grpc_listener(const grpc_listener&) = delete;
  grpc_listener& operator=(const grpc_listener&) = delete;

  /// Builds and starts `b`'s server (services registered) on `address`
  /// (host:port, port 0: any), `creds` null for plaintext, with `lim`
  /// (`name` labels its metrics). Empty on success, else why not.
  std::string start(grpc::ServerBuilder& b, const std::string& address,
                    const std::shared_ptr<grpc::ServerCredentials>& creds,
                    const grpc_server_limits& lim, const std::string& name);
  /// Stops accepting, then shuts the server down, cancelling calls still
  /// open at `deadline`. Idempotent.
  void shutdown(std::chrono::system_clock::time_point deadline);

  explicit operator bool() const { return server_ != nullptr; }
  uint16_t port() const { return port_; }
  /// Whether connections come through outrider's accept loop.
  bool own_accept() const { return acceptor_ != nullptr; }

 private:
  std::unique_ptr<runtime::fd_acceptor> acceptor_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
};

} // namespace outrider::cluster
