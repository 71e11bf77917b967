#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/indexer/indexer_actor.hpp"
#include "actors/registrar/registrar.hpp"
#include "actors/sidecar/kv_forwarder.hpp"
#include "cluster/engine/engine_adapter.hpp"
#include "cluster/trace/tracer.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/status.hpp"

namespace zmq {
class context_t;
}

namespace outrider::sidecar {

using engine_status_atom = caf::atom_constant<caf::atom("engstatus")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using identify_atom = caf::atom_constant<caf::atom("identify")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using stopping_atom = caf::atom_constant<caf::atom("stopping")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using detect_atom = caf::atom_constant<caf::atom("detect")>;
/// From the indexer: its store writes (true) or fails (false, why).
using store_atom = caf::atom_constant<caf::atom("store")>;
/// From the listener watch: the relay accepts (true) or not (false, why).
using listener_atom = caf::atom_constant<caf::atom("listener")>;

/// What the engine said about itself, or why it could not.
struct identity_result {
  caf::error error; // engine_unreachable, engine_refused, engine_malformed
  engine::engine_info info;
  std::vector<engine::kv_source> sources;
};

/// The sidecar's lifecycle (DESIGN.md): follows the engine's health, reads
/// its identity, keeps or resets the index, runs one KV forwarder per rank,
/// and registers the worker only while the engine serves and the index has
/// caught up. The transitions live in `lifecycle_machine`; this actor does
/// their I/O. `stopping` (at SIGTERM) withdraws the record. With
/// `--engine-protocol auto` the engine's protocol is detected first (by
/// the services it offers), and its health is then followed the way that
/// protocol tells it (SGLang: WatchEngineState).
using lifecycle_actor = caf::typed_actor<
  caf::reacts_to<engine_status_atom, int32_t, std::string>,
  caf::reacts_to<deadline_atom>, caf::reacts_to<retry_atom, uint64_t>,
  caf::reacts_to<caught_up_atom, int32_t>, caf::reacts_to<kv_gap_atom, int32_t>,
  caf::reacts_to<identity_result, uint64_t>, caf::reacts_to<stopping_atom>,
  caf::reacts_to<tick_atom>, caf::reacts_to<detect_atom>,
  caf::reacts_to<detect_atom, std::string, std::string>,
  caf::reacts_to<store_atom, bool, std::string>,
  caf::reacts_to<listener_atom, bool, std::string>>;

struct lifecycle_config {
  std::string engine_endpoint;
  std::string engine_protocol = "auto";
  /// The engine's HTTP host:port: KV event sources from its
  /// `GET /kv_event_sources` where gRPC lists none ("": gRPC only).
  std::string engine_http;
  std::string http_endpoint; // advertised for gateways (record)
  std::chrono::milliseconds startup_deadline{600000};
  std::string worker_id;
  std::string relay_endpoint;
  bool shutdown_engine_on_gap = false; // --on-kv-gap shutdown-engine
  int64_t kv_max_message_bytes = 16 << 20;
  size_t kv_max_batch_events = 65536;
  std::shared_ptr<runtime::health_state> health;
  runtime::slot_ptr<indexer::indexer_actor> indexer;
  runtime::slot_ptr<registrar::registrar_actor> registrar;
  std::shared_ptr<zmq::context_t> zmq;
  /// Asks the process to exit (a missed startup deadline).
  std::function<void(int, const std::string&)> request_exit;
  /// With `--engine-protocol auto`: told the protocol the engine was found
  /// to speak (the relay takes it from here instead of asking the engine on
  /// a request's thread).
  std::function<void(engine::dialect)> on_dialect;
  /// Registrations, withdrawals, engine health changes and KV resets as
  /// spans of their own (--otlp-endpoint); never null.
  std::shared_ptr<trace::tracer> tracer = trace::tracer::make({});
};

lifecycle_actor spawn_lifecycle(caf::actor_system& sys, lifecycle_config cfg);

} // namespace outrider::sidecar

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(outrider::sidecar::identity_result)
