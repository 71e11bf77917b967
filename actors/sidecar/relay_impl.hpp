#pragma once

// Internal to the relay: what its services share.

#include <atomic>
#include <mutex>
#include <optional>
#include <string_view>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "actors/sidecar/relay.hpp"
#include "cluster/engine/engine_adapter.hpp"
#include "cluster/engine/engine_call.hpp"
#include "cluster/engine/vocabulary.hpp"
#include "cluster/grpc_listener.hpp"
#include "openengine.grpc.pb.h"
#include "runtime/metrics.hpp"
#include "runtime/worker_pool.hpp"

namespace outrider::sidecar {

struct relay_metrics {
  runtime::counter& ok;
  runtime::counter& cancelled;
  runtime::counter& failed;
  runtime::counter& broken;
  runtime::counter& refused;
  runtime::gauge& inflight;
  runtime::counter& tokens;
  runtime::histogram& token_latency;
  runtime::counter& misaddressed;
  runtime::gauge& mux_streams;

  static relay_metrics make() {
    auto& m = runtime::global_metrics();
    auto outcome = [&](const char* o) -> runtime::counter& {
      return m.get_counter("outrider_relay_requests_total",
                           "Requests relayed to the engine, by outcome",
                           {{"outcome", o}});
    };
    return relay_metrics{
      outcome("ok"),
      outcome("cancelled"),
      outcome("error"),
      outcome("engine_broke"),
      outcome("refused"),
      m.get_gauge("outrider_relay_inflight", "Streams being relayed now"),
      m.get_counter("outrider_relay_tokens_total", "Tokens relayed"),
      m.get_histogram("outrider_relay_token_latency_seconds",
                      "Time the relay adds to each streamed token",
                      {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
                       0.001, 0.0025, 0.005, 0.01, 0.05}),
      m.get_counter("outrider_relay_misaddressed_total",
                    "Router calls refused because they name another worker "
                    "(a stale or crossed discovery record)"),
      m.get_gauge("outrider_relay_mux_streams",
                  "Multiplexed streams from routers open now (RelayMux; "
                  "each carries many requests)")};
  }
};

/// The engine side of one relayed request as both relay services begin it
/// (`Inference.Generate`, one stream a request; `RelayMux`, many a stream).
struct relay_leg_start {
  std::string id;                // the engine's request id
  trace::span span;              // relay.generate
  engine::call_target to_engine; // with this relay's trace context
};

struct relay::impl {
  relay_config cfg;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<openengine::v1::Control::Stub> oe_control;
  std::mutex adapter_mtx;
  std::unique_ptr<engine::engine_adapter> adapter; // guarded by adapter_mtx
  std::atomic<engine::dialect> engine_dialect{engine::dialect::unknown};
  std::atomic<uint64_t> next_id{0};
  std::atomic<bool> stopping{false};
  relay_metrics m = relay_metrics::make();
  // Aborts are blocking unary calls: never on a gRPC callback thread.
  runtime::worker_pool aborts{2, 4096};
  std::unique_ptr<grpc::Service> inference_service;
  std::unique_ptr<grpc::Service> control_service;
  std::unique_ptr<grpc::Service> mux_service;
  // Set when the server the mux service serves shuts down (stop, restart):
  // its streams refuse new requests and say they drain (relay_mux.cpp). A
  // restarted server's service gets a fresh one.
  std::shared_ptr<std::atomic<bool>> mux_draining =
    std::make_shared<std::atomic<bool>>(false);
  std::mutex server_mtx; // server and services: start, restart, stop
  cluster::grpc_listener server;
  std::atomic<uint16_t> port{0};

  caf::error server_info(engine::engine_info& out) {
    std::lock_guard<std::mutex> guard{adapter_mtx};
    auto err = adapter->server_info(out);
    if (!err)
      engine_dialect = engine::dialect_of(out.protocol);
    return err;
  }

  /// The engine's protocol: the fixed one, or what the lifecycle detected
  /// (`unknown` until then). Never asks the engine: this runs on gRPC's
  /// callback threads.
  engine::dialect resolve() const {
    if (auto fixed = engine::dialect_of(cfg.engine_protocol);
        fixed != engine::dialect::unknown)
      return fixed;
    return engine_dialect;
  }

  /// A router's call that names another worker than this sidecar's
  /// (`x-outrider-worker`): the status to refuse it with (counted), else
  /// nullopt. A call naming no worker (an older router, a tool) passes.
  std::optional<grpc::Status>
  misaddressed(const std::multimap<grpc::string_ref, grpc::string_ref>& md) {
    auto it = md.find(engine::worker_key);
    if (it == md.end() || cfg.worker_id.empty() ||
        std::string_view(it->second.data(), it->second.size()) == cfg.worker_id)
      return std::nullopt;
    m.misaddressed.inc();
    // Whatever the caller sent, at most 64 bytes of it go into the answer.
    std::string named(it->second.data(),
                      std::min<size_t>(it->second.size(), 64));
    return grpc::Status{grpc::StatusCode::FAILED_PRECONDITION,
                        "this relay serves worker '" + cfg.worker_id +
                          "', not '" + named +
                          "': the record that led here is stale or crossed"};
  }

  /// Counts the request in flight and starts its span (relay_leg.cpp).
  relay_leg_start begin_leg(const openengine::v1::GenerateRequest& in,
                            engine::dialect d,
                            const engine::call_target& target);
  /// How a relayed request ends, from how its engine call ended and whether
  /// the router left: counted, aborted on the engine where it may still run
  /// (relay_leg.cpp). Does not count it out of flight (`end_leg`).
  grpc::Status verdict(bool client_gone, const grpc::Status& engine_status,
                       const std::string& id, uint32_t tokens);
  void end_leg(trace::span& span, const grpc::Status& st, uint32_t tokens);
  /// Too many streams relayed already: the status to refuse one with.
  std::optional<grpc::Status> over_limit();

  void abort_on_engine(const std::string& id) {
    aborts.try_run([this, id] { abort_now(id); });
  }

  void abort_now(const std::string& id) {
    std::lock_guard<std::mutex> guard{adapter_mtx};
    if (auto err = adapter->abort(id))
      spdlog::debug("relay: abort of {}: {}", id, describe(err));
  }
};

/// The relay's `Inference.Generate` on gRPC's callback API.
std::unique_ptr<grpc::Service> make_generate_service(relay::impl& r);
/// The relay's `RelayMux.Relay`: many requests on one stream (relay_mux.cpp).
std::unique_ptr<grpc::Service> make_mux_service(relay::impl& r);

/// The relay's SubscribeKvEvents stream (relay_subscribe.cpp).
grpc::ServerWriteReactor<openengine::v1::SubscribeKvEventsResponse>*
subscribe_kv_events(relay::impl& r, grpc::CallbackServerContext* ctx,
                    const openengine::v1::SubscribeKvEventsRequest& in);

} // namespace outrider::sidecar
