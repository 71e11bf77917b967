#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/router/router_settings.hpp"
#include "runtime/app.hpp"

namespace outrider::cluster {
class discovery;
}

namespace outrider::router {

class dispatcher;
struct router_parts;

/// The router role as one object: `--role router`, the router of `--role
/// all`, or a program that embeds it (`examples/embed`). The constructor
/// starts everything but the router actor: discovery, the watcher of the
/// workers' event planes, the dispatcher and both frontends (HTTP, gRPC),
/// and the status routes; `children()` is the router actor for the
/// supervisor that runs it. Errors are told to `env.control` (exit 1, or 2
/// for bad settings); the environment's pre-stop hook calls `stop`.
class service {
 public:
  /// `disc` replaces the discovery the settings name (an embedding
  /// program's memory discovery); null: the settings' own.
  service(runtime::role_env& env, const router_settings& s,
          std::shared_ptr<cluster::discovery> disc = nullptr);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  /// The router actor, supervised; every incarnation is published where
  /// the watcher and the dispatcher find it.
  std::vector<runtime::child_spec> children() const;

  /// The frontends listen and, with `ready_workers`, that many workers can
  /// be placed on (the router actor tells every change).
  bool ready() const;

  /// Stops admitting at once, lets requests in flight finish for up to
  /// `grace`, ends the rest, stops the frontends and the watcher. Once;
  /// later calls do nothing. The router actor stops with its supervisor.
  void stop(std::chrono::milliseconds grace);

  /// The dispatcher (an in-process workload: the demo of `--role all`);
  /// null once stopped.
  dispatcher* dispatch() const;

  /// The HTTP frontend's port (the one taken, with port 0); 0 when it
  /// does not listen.
  uint16_t http_port() const;

  /// Takes the settings of `next` that may change while running: the
  /// placement weights and temperature, the priority share, the queue
  /// threshold and KV share, the prediction TTL (the router actor gets
  /// them now and keeps them across its restarts). Every other setting
  /// that differs is named in the log as needing a restart and left as
  /// it is. (SIGHUP, through the environment's reload hooks.)
  void reload(const router_settings& next);

 private:
  std::shared_ptr<router_parts> parts_;
};

} // namespace outrider::router
