#include "cluster/grpc_listener.hpp"

#include <grpcpp/server_posix.h>

namespace outrider::cluster {

grpc_listener::~grpc_listener() {
  shutdown(std::chrono::system_clock::now());
}

std::string
grpc_listener::start(grpc::ServerBuilder& b, const std::string& address,
                     const std::shared_ptr<grpc::ServerCredentials>& creds,
                     const grpc_server_limits& lim, const std::string& name) {
  apply(b, lim, name);
  // gRPC listens with SO_REUSEPORT by default on Linux: a second process
  // given the same port would bind it too and the kernel would share the
  // connections between the two, silently. Off: the second one fails.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  auto colon = address.rfind(':');
  auto host = address.substr(0, colon == std::string::npos ? 0 : colon);
  auto port = colon == std::string::npos
                ? 0
                : static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1));
  if (!creds && lim.fd_reserve > 0) {
    runtime::fd_acceptor_config ac;
    ac.name = name;
    ac.fd_reserve = lim.fd_reserve;
    if (lim.handshake_timeout.count() > 0)
      ac.first_bytes_timeout = lim.handshake_timeout;
    auto acceptor = std::make_unique<runtime::fd_acceptor>(ac);
    if (auto err = acceptor->bind(host, port); !err) {
      // No listening port of gRPC's own: every connection comes from ours.
      server_ = b.BuildAndStart();
      if (!server_)
        return "cannot start the gRPC server for " + address;
      port_ = acceptor->port();
      auto* server = server_.get();
      acceptor->start(
        [server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
      acceptor_ = std::move(acceptor);
      return {};
    } else if (!(err == errc::invalid_argument)) {
      return describe(err);
    }
    // A host name: gRPC resolves and listens on it itself.
  }
  int bound = 0;
  b.AddListeningPort(address, creds ? creds : grpc::InsecureServerCredentials(),
                     &bound);
  server_ = b.BuildAndStart();
  if (!server_ || bound == 0) {
    server_.reset();
    return "cannot listen on " + address;
  }
  port_ = static_cast<uint16_t>(bound);
  return {};
}

void grpc_listener::shutdown(std::chrono::system_clock::time_point deadline) {
  // The accept loop first: nothing is handed to a server shutting down.
  if (acceptor_) {
    acceptor_->stop();
    acceptor_.reset();
  }
  if (server_) {
    server_->Shutdown(deadline);
    server_.reset();
  }
}

} // namespace outrider::cluster
