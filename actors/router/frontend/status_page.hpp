#pragma once

// Internal to the router role: the live status page (status_page.cpp).

#include <functional>

#include <nlohmann/json.hpp>

#include "actors/router/brain/kv_router.hpp"
#include "runtime/actor_slot.hpp"
#include "runtime/app.hpp"

namespace outrider::router {

/// On the status server: GET / is a page (plain HTML and a little
/// JavaScript, no external assets) that shows GET /debug/status live:
/// workers with role, ranks, KV blocks held, active prefill tokens and
/// decode blocks, requests placed; hit rate, TTFT and ITL over the last
/// minute, overall and per worker; the last routing decisions.
/// `requests` adds the dispatcher's view ("last_minute", "in_flight").
void add_status_page(runtime::role_env& ctx,
                     runtime::slot_ptr<kv_router_actor> brain,
                     std::function<nlohmann::json()> requests);

/// GET /debug/index on the status server: the router's index per worker
/// and rank (tests compare routers with each other and with the engines).
void add_index_route(runtime::role_env& ctx,
                     runtime::slot_ptr<kv_router_actor> brain);

/// The page itself (a constant).
const char* status_page_html();

} // namespace outrider::router
