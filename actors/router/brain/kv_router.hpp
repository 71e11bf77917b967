#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/router/core/placement.hpp"
#include "cluster/kv/kv_event.hpp"
#include "cluster/messages.hpp"
#include "cluster/nats_bookings.hpp"

namespace outrider::router {

using worker_up_atom = caf::atom_constant<caf::atom("workerup")>;
using worker_down_atom = caf::atom_constant<caf::atom("workerdn")>;
using kv_events_atom = caf::atom_constant<caf::atom("kvevents")>;
using place_atom = caf::atom_constant<caf::atom("place")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using prefilled_atom = caf::atom_constant<caf::atom("prefilled")>;
using index_atom = caf::atom_constant<caf::atom("index")>;
using booking_atom = caf::atom_constant<caf::atom("booking")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using engine_load_atom = caf::atom_constant<caf::atom("engload")>;
using retune_atom = caf::atom_constant<caf::atom("retune")>;

/// The router's brain: the worker set, the global KV index (router block
/// hash per worker and rank) and the load it has sent each rank.
/// - `(workerup, record)`, `(workerdn, worker_id)`: from discovery.
/// - `(kvevents, events)`: from a sidecar subscription.
/// - `(place, request)` -> decision: picks a rank (`--router-mode`) and
///   books the request's load there.
/// - `(prefilled, key)`: its prompt is computed; `(release, key)`: done.
/// - `(index)` -> JSON: the blocks held per worker and rank (debugging).
/// - `(engload, load)`: what a worker's engine reports of its KV cache
///   (load_poller).
/// - `(status)` -> JSON: mode, workers with their ranks' load and blocks
///   held, the last decisions (the status page).
/// - `(booking, note)`: another router's booking (--share-bookings); with
///   a `share` connection the router tells the others its own, and once a
///   second (`tick`) that it is alive and forgets silent routers' books.
using kv_router_actor = caf::typed_actor<
  caf::reacts_to<worker_up_atom, cluster::worker_record>,
  caf::reacts_to<worker_down_atom, std::string>,
  caf::reacts_to<kv_events_atom, std::shared_ptr<const worker_events>>,
  caf::replies_to<place_atom,
                  std::shared_ptr<const route_request>>::with<route_decision>,
  caf::reacts_to<prefilled_atom, uint64_t>,
  caf::reacts_to<release_atom, uint64_t>,
  caf::replies_to<index_atom>::with<std::string>,
  caf::replies_to<status_atom>::with<std::string>,
  caf::reacts_to<booking_atom, std::shared_ptr<const cluster::booking_note>>,
  caf::reacts_to<tick_atom>,
  caf::reacts_to<engine_load_atom, std::shared_ptr<const engine_load>>,
  caf::reacts_to<retune_atom, std::shared_ptr<const router_config>>>;

/// Where a router tells the others its bookings, and its name there.
struct booking_share {
  std::shared_ptr<cluster::nats_bookings> bus;
  std::string router_id;
};

/// Told, on the actor's thread, how many workers the router can place on
/// whenever that changes.
using workers_fn = std::function<void(size_t)>;

kv_router_actor spawn_kv_router(caf::actor_system& sys, router_config cfg,
                                booking_share share = {},
                                workers_fn on_workers = {});

} // namespace outrider::router

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(outrider::router::route_decision)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::router::route_request>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::router::worker_events>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::cluster::booking_note>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::router::engine_load>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(
  std::shared_ptr<const outrider::router::router_config>)
