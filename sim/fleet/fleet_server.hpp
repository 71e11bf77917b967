#pragma once

// The fleet's one gRPC server: OpenEngine's Inference.Generate, the
// Control calls a router makes of a relay (GetServerInfo, GetLoad,
// SubscribeKvEvents) and the relay's RelayMux, for every worker at once. Each
// call names its worker in `x-outrider-worker` (docs/wire.md), as routers do.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>

#include "openengine.pb.h"
#include "sim/fleet/fleet_config.hpp"
#include "sim/fleet/fleet_timer.hpp"
#include "sim/fleet/fleet_worker.hpp"

namespace outrider::sim {

/// The workers and what the services share.
struct fleet_state {
  explicit fleet_state(const fleet_config& cfg);

  /// The worker a call names, or null (and `*why` says so).
  fleet_worker* worker_of(const grpc::ServerContextBase& ctx, std::string* why);

  fleet_config cfg;
  std::vector<std::unique_ptr<fleet_worker>> workers;
  std::unordered_map<std::string, size_t> by_id;
  /// Requests each worker is generating now (GetLoad).
  std::unique_ptr<std::atomic<uint32_t>[]> running;
  std::atomic<uint64_t> requests{0}, tokens{0}, cached_blocks{0},
    prompt_blocks{0};
  fleet_timer timer;
  /// The ports listened on (cfg.ports of them; filled by the server).
  std::vector<int> ports;
  /// Worker i's relay and engine endpoint.
  std::string endpoint_of(size_t i) const {
    return cfg.host + ":" + std::to_string(ports[i % ports.size()]);
  }
};

/// A server stream refused at once with `st` (what the services share).
template <class Message>
class refusal final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit refusal(grpc::Status st) { this->Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

/// One request on the shared engine core, as `Generate` and `RelayMux`
/// both serve it (fleet_generate.cpp): the prompt's size, the first token
/// after the uncached blocks' prefill time, then one token per `token_ms`,
/// then the finish with usage.
class fleet_generation {
 public:
  /// `in` admitted on worker `w` (counted in the fleet's totals), or
  /// nullopt and `*refuse` when it cannot be served.
  static std::optional<fleet_generation>
  admit(fleet_state& f, fleet_worker& w,
        const openengine::v1::GenerateRequest& in, grpc::Status* refuse);

  /// Messages are left to send.
  bool more() const { return step_ < max_tokens_ + 2; }
  /// How long the engine takes before the next message, in ms (0: at once).
  double wait_ms(const fleet_config& c) const;
  /// The next message (counts its token in `f.tokens`).
  openengine::v1::GenerateResponse next(fleet_state& f);
  size_t worker() const { return worker_; }

 private:
  fleet_generation() = default;
  size_t worker_ = 0;
  std::string id_;
  uint32_t prompt_ = 0, cached_ = 0;
  size_t prefill_blocks_ = 0;
  uint32_t max_tokens_ = 0;
  uint32_t step_ = 0; // messages made: the prompt, the tokens, the finish
};

/// The fleet's Inference.Generate (fleet_generate.cpp).
std::unique_ptr<grpc::Service> make_fleet_inference(fleet_state& fleet);
/// The fleet's RelayMux.Relay: many requests of one worker on a stream, as
/// a sidecar's relay serves it (fleet_mux.cpp).
std::unique_ptr<grpc::Service> make_fleet_mux(fleet_state& fleet);

/// Builds and starts the server on cfg.host:cfg.grpc_port; null (and
/// `*why`) when it cannot listen.
std::unique_ptr<grpc::Server>
start_fleet_server(fleet_state& fleet,
                   std::vector<std::unique_ptr<grpc::Service>>& services,
                   std::string* why);

} // namespace outrider::sim
