#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/server_credentials.h>

#include "actors/router/core/disagg_policy.hpp"
#include "actors/router/dispatch/dispatch_queue.hpp"
#include "actors/router/frontend/prompt_render.hpp"
#include "cluster/grpc_listener.hpp"
#include "cluster/grpc_server_limits.hpp"
#include "runtime/live_value.hpp"

namespace grpc {
class Server;
class Service;
} // namespace grpc

namespace outrider::router {

/// How the gateway sends the request body (its ext_proc filter's
/// `request_body_mode`): `buffered` — the picker answers the headers at
/// once (Envoy waits for that before sending the body) and puts the
/// endpoint on the answer to the whole body; `streamed` — chunks come
/// without waiting for the headers' answer (Envoy's STREAMED with
/// send_body_without_waiting_for_header_response): that answer waits for
/// the last chunk and carries the endpoint, then each chunk is answered, in
/// order. FULL_DUPLEX_STREAMED, where the answers must carry the body back
/// (`streamed_response`), is not in the pinned revision (docs/wire.md).
enum class epp_body_mode { buffered, streamed };

struct epp_config {
  prompt_tools prompts; // tokenizer, chat template, adapters
  /// Flow control and session affinity, as the HTTP frontend reads them.
  std::map<std::string, int> objectives;
  std::string session_header = "x-session-id";
  epp_body_mode body_mode = epp_body_mode::buffered;
  /// Conditional disaggregation: requests go to decode workers and, where
  /// the policy says, name a prefill worker in `x-prefiller-host-port`
  /// (llm-d's decode sidecar prefills there first). Null: aggregated.
  /// Shared with the dispatcher; a reload replaces its thresholds.
  runtime::live_ptr<disagg_config> disagg;
  std::optional<double> queue_threshold; // the prefill-load policy's default
  size_t max_body_bytes = 1 << 20;       // --http-max-body-bytes
  size_t max_streams = 10000;            // beyond: RESOURCE_EXHAUSTED
  size_t tokenizer_threads = 2;
  cluster::grpc_server_limits server;
  /// `readiness` (and the ExternalProcessor's health): discovery synced.
  std::function<bool()> ready;
};

/// The router as an endpoint picker for Kubernetes inference gateways
/// (Gateway API Inference Extension, protocol v1.0.0; docs/wire.md, "The
/// endpoint picker"): Envoy's `ext_proc` service on gRPC's callback API. It
/// reads the OpenAI request the gateway holds, places it as the HTTP
/// frontend would (KV overlap, load, flow control, session affinity; the
/// subset hint honoured) and names the chosen rank's HTTP endpoint in the
/// `x-gateway-destination-endpoint` header and the `envoy.lb` dynamic
/// metadata. The booking is held until the response ends (prefilled at
/// its headers) or the stream breaks. No endpoint: an immediate 503;
/// shed: 429 with Retry-After and x-outrider-dropped-reason; a bad body:
/// 400 (413 past the body limit). Reserved headers a client sent
/// (x-gateway-destination-endpoint, x-gateway-inference-*) are removed from
/// what goes upstream. Serves grpc.health.v1 for `liveness`, `readiness`
/// and `envoy.service.ext_proc.v3.ExternalProcessor`.
class epp_server {
 public:
  epp_server(dispatch_queue& queue,
             std::function<std::vector<std::string>()> models, epp_config cfg);
  ~epp_server();
  /// Error text, or empty once listening on `host:port` (0: a free port).
  std::string start(const std::string& host, uint16_t port,
                    std::shared_ptr<grpc::ServerCredentials> creds =
                      grpc::InsecureServerCredentials());
  uint16_t port() const { return port_; }
  void stop();
  /// Rebuilds the server on the same port (its listener stopped
  /// accepting: runtime/listener_watch.hpp); streams in flight get up to
  /// `grace` to end. False when it cannot listen yet.
  bool restart(std::chrono::milliseconds grace);

  struct state; // what every stream shares

 private:
  std::string listen(); // under mtx_; error text or empty

  std::shared_ptr<state> state_;
  std::mutex mtx_; // the server and services: start, restart, stop
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Service> health_;
  cluster::grpc_listener server_;
  std::string host_;
  std::shared_ptr<grpc::ServerCredentials> creds_;
  std::atomic<uint16_t> port_{0};
  bool stopped_ = false;
};

} // namespace outrider::router
