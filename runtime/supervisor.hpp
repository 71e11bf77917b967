#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/all.hpp>

namespace outrider::runtime {

using restart_atom = caf::atom_constant<caf::atom("restart")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using crash_atom = caf::atom_constant<caf::atom("crash")>;

/// How a supervisor restarts its children.
struct supervisor_policy {
  caf::timespan initial_backoff = std::chrono::milliseconds{100};
  caf::timespan max_backoff = std::chrono::seconds{10};
  /// A child that stayed up this long restarts with `initial_backoff` again.
  caf::timespan stable_period = std::chrono::seconds{30};
  /// More than this many restarts of one child within `restart_window`
  /// makes the supervisor give up and exit with the child's error.
  size_t max_restarts = 5;
  caf::timespan restart_window = std::chrono::seconds{60};
};

/// A named child and how to start it.
struct child_spec {
  std::string name;
  std::function<caf::actor(caf::actor_system&)> start;
};

/// Spawns a supervisor that starts `children` in order and keeps them alive.
///
/// Whoever needs a child reaches its current incarnation through the slot
/// its spec publishes it in (`runtime::supervised`, actor_slot.hpp). The
/// supervisor answers:
/// - `(stats_atom, name)` replies `(restarts, next_backoff, running)`.
/// - `(crash_atom, name)` kills child `name` as a crash would (fault
///   tests); replies whether it was running.
/// - An exit message stops the children in reverse order, one after the
///   other, then the supervisor itself.
caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_policy policy,
                            std::vector<child_spec> children);

} // namespace outrider::runtime
