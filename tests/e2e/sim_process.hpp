#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/process.hpp"

namespace outrider::test {

/// An outrider-sim process on free ports, with KV events and replay.
struct sim_process {
  struct options {
    int ranks = 1;
    std::string encoding = "map";
    bool replay_topic_frame = true;
    size_t buffer_steps = 10000;
    std::string role = "aggregated";
    std::string startup_delay = "0ms";
    uint32_t block_size = 4;
    uint32_t num_blocks = 256;
    std::vector<std::string> extra;
    bool start_now = true;
    bool replay = true; // false: no replay endpoint
  };

  explicit sim_process(options o);
  /// Starts (again, after a kill) on the same ports: a new engine instance.
  void start();

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(grpc); }
  std::string pub_endpoint(int rank) const {
    return "tcp://127.0.0.1:" + std::to_string(pub + rank);
  }
  std::string replay_endpoint(int rank) const {
    return "tcp://127.0.0.1:" + std::to_string(replay + rank);
  }
  std::shared_ptr<grpc::Channel> channel() const;
  /// Waits until the health service reports SERVING.
  bool wait_serving(std::chrono::milliseconds timeout) const;
  /// The engine's true cache of `rank` from the debug endpoint.
  nlohmann::json cache(int rank) const;
  /// Requests running on `rank` now (-1 when the debug endpoint fails).
  int running(int rank = 0) const;
  /// POSTs `body` to a debug route (e.g. /debug/kv_lose); true on 2xx.
  bool post_debug(const std::string& path, const std::string& body = {}) const;

  options opts;
  uint16_t grpc = 0;
  uint16_t debug = 0;
  uint16_t pub = 0;
  uint16_t replay = 0;
  std::unique_ptr<child_process> proc;
};

} // namespace outrider::test
