#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/router/dispatcher.hpp"

namespace grpc {
class Server;
class Service;
} // namespace grpc

namespace outrider::router {

/// OpenEngine `Inference.Generate` for token-level clients (no HTTP): the
/// same dispatch as the HTTP frontend, streaming `prompt`, `token` and
/// `finished` (with usage) events. Client cancellation cancels the request.
class grpc_frontend {
 public:
  grpc_frontend(dispatcher& d,
                std::function<std::vector<std::string>()> models);
  ~grpc_frontend();
  /// Error text, or empty once listening on `host:port`.
  std::string start(const std::string& host, uint16_t port);
  void stop();

 private:
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

} // namespace outrider::router
