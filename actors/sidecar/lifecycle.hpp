#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "runtime/status.hpp"

namespace outrider::sidecar {

using engine_status_atom = caf::atom_constant<caf::atom("engstatus")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;

/// The sidecar's lifecycle: watches the engine's health and decides when the
/// sidecar is ready. (Registration, identity and KV forwarding join here.)
using lifecycle_actor =
  caf::typed_actor<caf::reacts_to<engine_status_atom, int32_t, std::string>,
                   caf::reacts_to<deadline_atom>>;

struct lifecycle_config {
  std::string engine_endpoint;
  std::chrono::milliseconds startup_deadline{600000};
  std::shared_ptr<runtime::health_state> health;
  /// Asks the process to exit with a code and reason (fatal conditions that
  /// restarting the actor cannot cure, such as a missed startup deadline).
  std::function<void(int, const std::string&)> request_exit;
};

lifecycle_actor spawn_lifecycle(caf::actor_system& sys, lifecycle_config cfg);

} // namespace outrider::sidecar
