#pragma once

#include <string>
#include <vector>

#include "runtime/app.hpp"

namespace outrider::router {

/// Refuses bad combinations of router options before anything starts:
/// the reason, or empty when they are fine.
std::string check_router_options(const runtime::options& opts);

/// `--role router`: the router actor, the discovery and event-plane watcher,
/// the dispatcher and both frontends (HTTP, gRPC).
std::vector<runtime::child_spec> router_children(runtime::role_context& ctx);

/// `--role all`: simulated engines and their sidecars as child processes,
/// the router in this process, and optionally a demo workload.
std::vector<runtime::child_spec> all_children(runtime::role_context& ctx);

} // namespace outrider::router
