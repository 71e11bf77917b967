#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/engine/vocabulary.hpp"

namespace outrider::engine {

/// The most LoRA adapters a worker advertises, and the longest name.
inline constexpr size_t max_lora_adapters = 256;
inline constexpr size_t max_lora_name_bytes = 128;

/// What the sidecar needs to know about its engine.
struct engine_info {
  std::string instance_id;
  std::string model;
  worker_role role = worker_role::aggregated;
  uint32_t kv_block_size = 0;
  uint64_t total_kv_blocks = 0;
  uint32_t data_parallel_size = 1;
  std::string protocol; // the one that answered: openengine, vllm, sglang
  /// host:port of a prefill engine's bootstrap server (SGLang
  /// disaggregation: the decode engine fetches the KV from there).
  std::string bootstrap_endpoint;
  /// The LoRA adapters it serves, by name (OpenEngine `ListLoras`, vLLM
  /// `Control.ListLoras`, SGLang's model cards with a parent; empty where
  /// the engine lists none).
  std::vector<std::string> lora_adapters;

  /// Adds an adapter's name as an engine listed it: empty, over-long and
  /// repeated names and those beyond `max_lora_adapters` are left out.
  void add_adapter(const std::string& name) {
    if (name.empty() || name.size() > max_lora_name_bytes ||
        lora_adapters.size() >= max_lora_adapters)
      return;
    for (const auto& a : lora_adapters)
      if (a == name)
        return;
    lora_adapters.push_back(name);
  }
};

/// One rank's KV event source, with connectable addresses.
struct kv_source {
  int rank = 0;
  std::string endpoint;        // tcp://host:port
  std::string replay_endpoint; // empty: no replay
  std::string topic;
};

/// Engine health as seen through `grpc.health.v1` Watch. The first four
/// values are the protocol's ServingStatus; `unreachable` means the Watch
/// stream could not be opened or dropped.
enum class engine_health : int32_t {
  unknown = 0,
  serving = 1,
  not_serving = 2,
  service_unknown = 3,
  unreachable = -1,
};

constexpr const char* to_string(engine_health h) {
  switch (h) {
  case engine_health::unknown:
    return "unknown";
  case engine_health::serving:
    return "serving";
  case engine_health::not_serving:
    return "not_serving";
  case engine_health::service_unknown:
    return "service_unknown";
  case engine_health::unreachable:
    return "unreachable";
  }
  return "invalid";
}

} // namespace outrider::engine
