#pragma once

// Internal to the router role: the pieces a fleet adds (router_fleet.cpp).

#include <memory>

#include "actors/router/kv_router.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/app.hpp"

namespace outrider::router {

/// --event-plane nats: the connection every worker's batches arrive on
/// (null for grpc, or when it cannot be used: then the role exits 2).
std::shared_ptr<cluster::nats_kv_plane>
event_plane_from(runtime::role_context& ctx);

/// --share-bookings: this router's name and the NATS subject the routers
/// tell each other their bookings on; theirs go to the router actor.
booking_share
booking_share_from(runtime::role_context& ctx,
                   const runtime::slot_ptr<kv_router_actor>& brain);

} // namespace outrider::router
