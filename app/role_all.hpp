#pragma once

// `--role all`: a whole cluster on one host, hosted by the composition root.

#include <vector>

#include "actors/router/router_settings.hpp"
#include "runtime/app.hpp"
#include "runtime/options.hpp"

namespace outrider::app {

/// Simulated engines and their sidecars as child processes (restarted when
/// they exit), the router in this process, ready once it can place on every
/// engine, and with `--demo-requests` a demo workload that ends the process.
std::vector<runtime::child_spec> all_children(runtime::role_env& env,
                                              const runtime::options& o,
                                              router::router_settings s);

} // namespace outrider::app
