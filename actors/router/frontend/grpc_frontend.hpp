#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/server_credentials.h>

#include "actors/router/dispatch/dispatcher.hpp"
#include "cluster/grpc_listener.hpp"
#include "cluster/grpc_server_limits.hpp"

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
/// away cancels the request on the engine, and so does one that reads
/// nothing: a write that makes no progress for `send_timeout`, or more than
/// `max_queued_bytes` of tokens waiting behind it, ends the stream
/// (DEADLINE_EXCEEDED), as the HTTP frontend's send deadline does.
class grpc_frontend {
 public:
  struct limits {
    size_t max_streams = 10000;
    std::chrono::milliseconds send_timeout{30000};
    size_t max_queued_bytes = 4 << 20;
    /// Flow control: priorities of x-gateway-inference-objective names.
    std::map<std::string, int> objectives;
    std::string session_header = "x-session-id";
    cluster::grpc_server_limits server; // idle and handshake timeouts
    /// Each call's span (under its `traceparent` metadata); never null.
    std::shared_ptr<trace::tracer> tracer = trace::tracer::make({});
  };
  grpc_frontend(dispatcher& d, std::function<std::vector<std::string>()> models,
                limits lim);
  ~grpc_frontend();
  /// Error text, or empty once listening on `host:port`.
  std::string start(const std::string& host, uint16_t port,
                    std::shared_ptr<grpc::ServerCredentials> creds =
                      grpc::InsecureServerCredentials());
  void stop();
  /// The port it listens on (0 before `start`).
  uint16_t port() const { return port_; }
  /// Rebuilds the server on the same port (its listener stopped
  /// accepting: runtime/listener_watch.hpp); streams in flight get up to
  /// `grace` to end. False when it cannot listen yet.
  bool restart(std::chrono::milliseconds grace);

  struct state; // what every call shares

 private:
  std::string listen(); // under mtx_; error text or empty

  std::unique_ptr<state> state_;
  std::mutex mtx_; // the server, the service: start, restart, stop
  std::unique_ptr<grpc::Service> service_;
  cluster::grpc_listener server_;
  std::string host_;
  std::shared_ptr<grpc::ServerCredentials> creds_;
  std::atomic<uint16_t> port_{0};
  bool stopped_ = false;
};

} // namespace outrider::router
