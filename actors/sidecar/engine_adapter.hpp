#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace outrider::sidecar {

/// What the sidecar needs to know about its engine.
struct engine_info {
  std::string instance_id;
  std::string model;
  std::string role = "aggregated";
  uint32_t kv_block_size = 0;
  uint64_t total_kv_blocks = 0;
  uint32_t data_parallel_size = 1;
  std::string protocol; // the one that answered: openengine or vllm
};

/// One rank's KV event source, with connectable addresses.
struct kv_source {
  int rank = 0;
  std::string endpoint;        // tcp://host:port
  std::string replay_endpoint; // empty: no replay
  std::string topic;
};

/// The engine as the sidecar sees it, whichever protocol it speaks. Calls
/// block (with a deadline) and are safe from any one thread at a time.
class engine_adapter {
 public:
  virtual ~engine_adapter() = default;
  /// Error text, or empty and `out` filled.
  virtual std::string server_info(engine_info& out) = 0;
  virtual std::string kv_sources(std::vector<kv_source>& out) = 0;
  virtual std::string abort(const std::string& request_id) = 0;
  /// Asks the engine process to stop (vLLM's Control.Shutdown).
  virtual std::string shutdown() = 0;
};

/// `protocol`: openengine, vllm or auto (OpenEngine first, then vLLM).
std::unique_ptr<engine_adapter>
make_engine_adapter(const std::string& protocol, const std::string& endpoint);

/// A KV endpoint as advertised, made connectable: a bind wildcard (`*`,
/// `0.0.0.0`) becomes the engine's host.
std::string connectable(const std::string& endpoint,
                        const std::string& engine_host);

} // namespace outrider::sidecar
