#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/app.hpp"

namespace outrider::runtime {

/// A role's environment for a program that runs a role (`router::service`,
/// `sidecar::service`) in an actor system of its own (`examples/embed`):
/// health, an exit request the program may read, a status server that
/// listens only when the program starts it, and the hooks the role leaves.
class embedded_env {
 public:
  explicit embedded_env(caf::actor_system& sys,
                        const std::string& role = "embedded");
  ~embedded_env();
  embedded_env(const embedded_env&) = delete;
  embedded_env& operator=(const embedded_env&) = delete;

  role_env& env() { return env_; }
  status_server& status() { return status_; }
  /// Whether the role asked for the process to exit (a port it could not
  /// have, bad settings): the code, or -1.
  int exit_requested() const { return control_->exit_code(); }

  /// The first half of stopping: the roles' pre-stop hooks (a router stops
  /// admitting and drains, a sidecar withdraws its record). The program
  /// then stops its actors and calls `finish`.
  void begin_stop();
  /// The second half, once the roles' actors are gone: their stop hooks
  /// (gRPC servers), then the status server's added routes. Once.
  void finish();

 private:
  std::shared_ptr<health_state> health_;
  std::shared_ptr<process_control> control_;
  status_server status_;
  std::vector<std::function<void()>> stop_hooks_;
  std::vector<std::function<void()>> pre_stop_hooks_;
  std::vector<std::function<std::string()>> reload_hooks_; // the program's
  role_env env_;
  bool begun_ = false;
  bool finished_ = false;
};

} // namespace outrider::runtime
