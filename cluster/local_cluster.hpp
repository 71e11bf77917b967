#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

#include "runtime/errors.hpp"

namespace outrider::cluster {

struct local_cluster_config {
  int engines = 2;
  std::string sim_binary;      // outrider-sim
  std::string outrider_binary; // this program, for the sidecars
  std::string discovery_dir;
  std::string data_dir;              // one sub-directory per worker
  std::string log_dir;               // engine and sidecar logs
  std::vector<std::string> sim_args; // e.g. --speedup 10
  /// More flags for every sidecar (e.g. --otlp-endpoint).
  std::vector<std::string> sidecar_args;
  /// A child that exits is started again after a back-off (doubling from
  /// `restart_backoff`, at most `max_restart_backoff`; back to the start
  /// once a child has lived a minute).
  std::chrono::milliseconds restart_backoff{500};
  std::chrono::milliseconds max_restart_backoff{10000};
  /// Told of each exit: the child's name (engine-0, sidecar-1), its wait
  /// status and the delay before it starts again. Called from the monitor
  /// thread.
  std::function<void(const std::string&, int, std::chrono::milliseconds)>
    on_exit;
};

/// `n` distinct free loopback TCP ports (empty when that many cannot be
/// had). Free when asked: another process may still take one before the
/// child that is given it binds it.
std::vector<uint16_t> free_loopback_ports(size_t n);

/// `--role all` on one host: starts simulated engines and a sidecar for
/// each as child processes on free loopback ports, all registering in one
/// discovery directory; a child that dies is started again on the same
/// ports and directories (the sidecar recovers its index from its store and
/// the engine's replay); stops them (SIGTERM, then SIGKILL) at the end.
class local_cluster {
 public:
  explicit local_cluster(local_cluster_config cfg);
  ~local_cluster();

  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  /// Starts every child; `spawn_failed` when one cannot be started.
  caf::error start();
  void stop();

  /// The children's process ids, in start order (engine, its sidecar, ...).
  std::vector<pid_t> pids() const;

 private:
  struct child {
    std::string name;
    std::vector<std::string> argv;
    std::string log;
    pid_t pid = -1;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point restart_at;
    std::chrono::milliseconds backoff{0};
  };

  pid_t spawn(const std::vector<std::string>& argv, const std::string& log);
  bool add(std::string name, std::vector<std::string> argv, std::string log);
  void monitor();
  void reap(child& c, std::chrono::steady_clock::time_point now);

  local_cluster_config cfg_;
  mutable std::mutex mu_;
  std::vector<child> children_;
  std::atomic<bool> stopping_{false};
  std::thread monitor_;
};

/// The path of the running program.
std::string self_path();

} // namespace outrider::cluster
