#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/options.hpp"
#include "runtime/status.hpp"
#include "runtime/supervisor.hpp"

namespace outrider::runtime {

/// Lets any thread ask the process to exit with a code and a reason.
class process_control {
 public:
  void request_exit(int code, const std::string& reason);
  /// The first request's code, or -1 while none was made.
  int exit_code() const { return code_.load(); }
  std::string reason() const;

 private:
  std::atomic<int> code_{-1};
  mutable std::mutex mtx_;
  std::string reason_; // guarded by mtx_
};

/// The process a role runs in: its actor system, health, status server and
/// shutdown hooks. Settings are not here: `app/` hands each role its own
/// typed settings.
struct role_env {
  caf::actor_system& sys;
  std::shared_ptr<health_state> health;
  std::shared_ptr<process_control> control;
  status_server& status; // for role-specific routes
  /// Run after the actors have stopped (e.g. stopping gRPC servers).
  std::vector<std::function<void()>>& stop_hooks;
  /// Run at the start of shutdown, before the actors are stopped.
  std::vector<std::function<void()>>& pre_stop_hooks;
  /// Run on SIGHUP, on the main thread, one at a time: each re-reads what
  /// it may change live and answers empty, or why nothing changed.
  std::vector<std::function<std::string()>>& reload_hooks;
};

/// Returns the children of the root supervisor for one role.
using role_builder = std::function<std::vector<child_spec>(role_env&)>;

/// Runs the process: status server first, then the actor system and the
/// root supervisor with the role's children, until SIGTERM/SIGINT, an exit
/// request or the supervisor giving up. Returns the process exit code.
int run_process(const options& opts, const role_builder& build);

/// The supervisor policy configured by the `supervisor-*` options.
supervisor_policy policy_from(const options& opts);

} // namespace outrider::runtime
