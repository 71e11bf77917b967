#pragma once

// The fleet's one gRPC server: OpenEngine's Inference.Generate and the
// Control calls a router makes of a relay (GetServerInfo, GetLoad,
// SubscribeKvEvents), for every worker at once. Each call names its
// worker in `x-outrider-worker` (docs/wire.md), as routers do.

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>

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
};

/// A server stream refused at once with `st` (what the services share).
template <class Message>
class refusal final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit refusal(grpc::Status st) { this->Finish(std::move(st)); }
  void OnDone() override { delete this; }
};

/// The fleet's Inference.Generate (fleet_generate.cpp).
std::unique_ptr<grpc::Service> make_fleet_inference(fleet_state& fleet);

/// Builds and starts the server on cfg.host:cfg.grpc_port; null (and
/// `*why`) when it cannot listen.
std::unique_ptr<grpc::Server>
start_fleet_server(fleet_state& fleet,
                   std::vector<std::unique_ptr<grpc::Service>>& services,
                   std::string* why);

} // namespace outrider::sim
