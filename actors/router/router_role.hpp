#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "actors/router/router_settings.hpp"
#include "runtime/app.hpp"

namespace outrider::router {

class dispatcher;

/// The router role, started: the children for the root supervisor (the
/// router actor), and its dispatcher for an in-process workload (the
/// demo of `--role all`).
struct router_role {
  std::vector<runtime::child_spec> children;
  /// The dispatcher while the role runs; null once it has stopped.
  std::function<dispatcher*()> dispatch;
  std::shared_ptr<void> keep_alive; // the role's parts
};

/// `--role router` (and the router of `--role all`): discovery, the router
/// actor, the watcher of the workers' event planes, the dispatcher and both
/// frontends (HTTP, gRPC). Shuts down through the environment's hooks.
router_role start_router_role(runtime::role_env& env, const router_settings& s);

} // namespace outrider::router
