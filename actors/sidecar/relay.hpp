#pragma once

#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <grpcpp/security/server_credentials.h>

#include "actors/indexer/indexer_actor.hpp"
#include "actors/sidecar/event_hub.hpp"
#include "cluster/engine/vocabulary.hpp"
#include "cluster/grpc_server_limits.hpp"
#include "cluster/trace/tracer.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/status.hpp"

namespace grpc {
class Server;
}

namespace outrider::sidecar {

struct relay_config {
  std::string listen; // host:port for routers
  /// The worker this sidecar registers: a router's call naming another
  /// (`x-outrider-worker`, a stale or crossed record) is refused.
  std::string worker_id;
  std::string engine_endpoint;
  std::string engine_protocol; // auto, openengine, vllm
  std::shared_ptr<event_hub> hub;
  std::shared_ptr<runtime::health_state> health;
  caf::actor_system* sys = nullptr;
  runtime::slot_ptr<indexer::indexer_actor> indexer; // for snapshots
  size_t max_streams =
    10000; // Generate streams at once; then RESOURCE_EXHAUSTED
  /// How routers' calls are secured (--tls-*; null: plaintext).
  std::shared_ptr<grpc::ServerCredentials> credentials;
  cluster::grpc_server_limits limits; // idle and handshake timeouts
  /// Each relayed call's span (`relay.generate`, under the router's);
  /// never null.
  std::shared_ptr<trace::tracer> tracer = trace::tracer::make({});
};

/// The sidecar's OpenEngine server for routers: `Inference.Generate`
/// relayed to the engine (OpenEngine passed through, vLLM translated) with
/// tokens streamed back; the read-only Control calls; and
/// `Control.SubscribeKvEvents` from the sidecar's own index (snapshot, then
/// live; resume by sequence number while the history lasts).
///
/// `Generate` runs on gRPC's callback API (no thread per stream) and merges
/// tokens that arrive while a write is in flight into the next message.
/// Client cancellation aborts the request on the engine. An engine stream
/// that breaks mid-generation ends with UNAVAILABLE ("engine stream broke"):
/// a router may migrate the request.
class relay {
 public:
  explicit relay(relay_config cfg);
  ~relay();
  /// Listens; `bind_failed` when the address cannot be had.
  caf::error start();
  /// Stops listening; streams in flight get up to `grace` to end.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds{1});
  /// The port it listens on (the one chosen, after binding port 0).
  uint16_t port() const;
  /// Rebuilds the server on the same port (its listener stopped
  /// accepting: runtime/listener_watch.hpp); streams in flight get up to
  /// `grace` to end. False when it cannot listen yet (descriptors still
  /// short, say), or once stopping.
  bool restart(std::chrono::milliseconds grace);
  /// With `--engine-protocol auto`: the protocol the lifecycle found the
  /// engine to speak. Until told, `Generate` is UNAVAILABLE (the worker is
  /// not registered yet either).
  void set_dialect(engine::dialect d);

  struct impl; // public for the services in relay.cpp

 private:
  std::unique_ptr<impl> impl_;
};

} // namespace outrider::sidecar
