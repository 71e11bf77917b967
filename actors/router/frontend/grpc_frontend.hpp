#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/server_credentials.h>

#include "actors/router/dispatch/dispatcher.hpp"

namespace grpc {
class Server;
class Service;
} // namespace grpc

namespace outrider::router {

/// OpenEngine `Inference.Generate` for token-level clients (no HTTP) on
/// gRPC's callback API (no thread per stream): the same dispatch as the
/// HTTP frontend, streaming `prompt`, `token` and `finished` (with usage)
/// events; tokens that arrive while a write is in flight are merged into
/// the next message. At most `max_streams` at once (RESOURCE_EXHAUSTED
/// beyond), UNAVAILABLE once shutdown began; a client that cancels or goes
/// away cancels the request on the engine.
class grpc_frontend {
 public:
  grpc_frontend(dispatcher& d, std::function<std::vector<std::string>()> models,
                size_t max_streams = 10000);
  ~grpc_frontend();
  /// Error text, or empty once listening on `host:port`.
  std::string start(const std::string& host, uint16_t port,
                    std::shared_ptr<grpc::ServerCredentials> creds =
                      grpc::InsecureServerCredentials());
  void stop();

  struct state; // what every call shares

 private:
  std::unique_ptr<state> state_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

} // namespace outrider::router
