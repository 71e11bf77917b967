#pragma once

// Internal to the router role: the pieces a fleet adds (router_fleet.cpp).

#include <memory>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/router_settings.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/app.hpp"

namespace outrider::router {

/// --event-plane nats: the connection every worker's batches arrive on
/// (null for grpc, or when it cannot be used: then the role exits 2).
std::shared_ptr<cluster::nats_kv_plane>
event_plane_from(runtime::role_env& ctx, const router_settings& s);

/// --share-bookings: this router's name and the NATS subject the routers
/// tell each other their bookings on; theirs go to the router actor.
booking_share
booking_share_from(runtime::role_env& ctx, const router_settings& s,
                   const runtime::slot_ptr<kv_router_actor>& brain);

} // namespace outrider::router
