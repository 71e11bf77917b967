#pragma once

#include <string>
#include <sys/types.h>
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
};

/// `--role all` on one host: starts simulated engines and a sidecar for
/// each as child processes on free loopback ports, all registering in one
/// discovery directory; stops them (SIGTERM, then SIGKILL) at the end.
class local_cluster {
 public:
  explicit local_cluster(local_cluster_config cfg);
  ~local_cluster();

  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  /// Starts every child; `spawn_failed` when one cannot be started.
  caf::error start();
  void stop();

 private:
  pid_t spawn(const std::vector<std::string>& argv, const std::string& log);

  local_cluster_config cfg_;
  std::vector<pid_t> children_;
};

/// The path of the running program.
std::string self_path();

} // namespace outrider::cluster
