#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/registrar/registrar.hpp"
#include "actors/router/worker_selector.hpp"
#include "cluster/discovery.hpp"
#include "cluster/kv_event.hpp"

namespace outrider::router {

/// A request to place.
struct route_request {
  std::vector<uint32_t> tokens;
  std::vector<std::string> exclude; // workers that already failed it
  /// Which workers qualify: "prefill", "decode", or "" for every worker
  /// that decodes (aggregated or decode).
  std::string role;
};

/// Where it goes.
struct route_decision {
  bool ok = false;
  /// Every candidate is above the queue threshold: ask again later.
  bool busy = false;
  std::string error;
  uint64_t key = 0; // for `release`
  std::string worker_id;
  std::string endpoint;        // the worker's relay
  std::string engine_endpoint; // its engine (direct dispatch)
  std::string protocol;        // the engine's: openengine or vllm
  int rank = 0;
  uint32_t overlap_blocks = 0;
  uint32_t prompt_blocks = 0;
  uint32_t block_size = 0;
  /// The chosen rank's load before this request was booked.
  uint64_t queued_prefill_tokens = 0;
  uint64_t held_decode_blocks = 0;
};

/// A batch of a worker rank's KV events from its sidecar.
struct worker_events {
  std::string worker_id;
  int rank = 0;
  bool reset = false; // forget the rank first (a new subscription)
  std::vector<kv::kv_event> events;
};

using worker_up_atom = caf::atom_constant<caf::atom("workerup")>;
using worker_down_atom = caf::atom_constant<caf::atom("workerdn")>;
using kv_events_atom = caf::atom_constant<caf::atom("kvevents")>;
using place_atom = caf::atom_constant<caf::atom("place")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using prefilled_atom = caf::atom_constant<caf::atom("prefilled")>;

/// The router's brain: the worker set, the global KV index (router block
/// hash per worker and rank) and the load it has sent each rank.
/// - `(workerup, record)`, `(workerdn, worker_id)`: from discovery.
/// - `(kvevents, events)`: from a sidecar subscription.
/// - `(place, request)` -> decision: picks a rank (`--router-mode`) and
///   books the request's load there.
/// - `(prefilled, key)`: its prompt is computed; `(release, key)`: done.
using kv_router_actor = caf::typed_actor<
  caf::reacts_to<worker_up_atom, cluster::worker_record>,
  caf::reacts_to<worker_down_atom, std::string>,
  caf::reacts_to<kv_events_atom, std::shared_ptr<const worker_events>>,
  caf::replies_to<place_atom,
                  std::shared_ptr<const route_request>>::with<route_decision>,
  caf::reacts_to<prefilled_atom, uint64_t>,
  caf::reacts_to<release_atom, uint64_t>>;

struct router_config {
  std::string mode = "kv"; // kv, round-robin, random
  selector_config selector;
  std::string model; // empty: any; else workers must serve this model
  /// Queued prefill tokens above which a rank counts as busy; when every
  /// rank is, requests wait instead of piling on.
  std::optional<double> queue_threshold;
};

kv_router_actor spawn_kv_router(caf::actor_system& sys, router_config cfg);

} // namespace outrider::router

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(outrider::router::route_decision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::router::route_request>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::router::worker_events>)
