#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "actors/sidecar/sidecar_settings.hpp"
#include "runtime/app.hpp"

namespace outrider::sidecar {

struct sidecar_parts;

/// The sidecar role as one object (`--role sidecar`, or a program that
/// embeds it): the constructor opens discovery and starts the relay (and
/// the NATS publisher, with `--event-plane nats`) and adds `/debug/index`
/// to the status server; `children()` are the indexer, the registrar and
/// the lifecycle for the supervisor that runs them. Errors are told to
/// `env.control` (exit 1, or 2 for bad settings). The environment's hooks
/// keep the parts: the pre-stop hook calls `stop`, the relay stops after
/// the actors.
class service {
 public:
  service(runtime::role_env& env, const sidecar_settings& s);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  /// The indexer, the registrar and the lifecycle, supervised; each
  /// incarnation is published where the others find it.
  std::vector<runtime::child_spec> children() const;

  /// The worker is registered and serving (as `/ready` says).
  bool ready() const;

  /// Withdraws the worker's record before anything stops (the lifecycle
  /// deregisters; routers stop placing on it) and gives the relay's
  /// streams up to `grace` to end when it stops, after the actors. Once.
  void stop(std::chrono::milliseconds grace);

 private:
  std::shared_ptr<sidecar_parts> parts_;
};

} // namespace outrider::sidecar
