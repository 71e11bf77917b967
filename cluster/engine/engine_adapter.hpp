#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/engine/engine_info.hpp"
#include "runtime/errors.hpp"

namespace outrider::engine {

/// The engine as the sidecar sees it, whichever protocol it speaks. Calls
/// block (with a deadline) and are safe from any one thread at a time.
class engine_adapter {
 public:
  virtual ~engine_adapter() = default;
  /// Fills `out`, or says why not: `engine_unreachable` (retry later),
  /// `engine_refused` (the engine said no), `engine_malformed` (its answer
  /// is unusable).
  virtual caf::error server_info(engine_info& out) = 0;
  virtual caf::error kv_sources(std::vector<kv_source>& out) = 0;
  virtual caf::error abort(const std::string& request_id) = 0;
  /// Asks the engine process to stop (vLLM's Control.Shutdown).
  virtual caf::error shutdown() = 0;
};

/// `protocol`: openengine, vllm, sglang or auto (by the services the engine
/// offers: OpenEngine's, else vLLM's, else SGLang's; detected once).
std::unique_ptr<engine_adapter>
make_engine_adapter(const std::string& protocol, const std::string& endpoint);

/// A KV endpoint as advertised, made connectable: a bind wildcard (`*`,
/// `0.0.0.0`) becomes the engine's host.
std::string connectable(const std::string& endpoint,
                        const std::string& engine_host);

} // namespace outrider::engine
