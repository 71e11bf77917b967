#pragma once

// A worker's record, as discovery carries it: a value type, no I/O behind
// it; its JSON form and validation in worker_record.cpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/engine/engine_info.hpp"
#include "cluster/engine/vocabulary.hpp"

namespace outrider::cluster {

/// What a worker publishes about itself.
struct worker_record {
  std::string worker_id;
  std::string instance_id; // the engine's, changes on every engine start
  std::string model;
  engine::worker_role role = engine::worker_role::aggregated;
  std::string relay_endpoint; // the sidecar's OpenEngine server
  std::string engine_endpoint;
  std::string protocol; // openengine, vllm or sglang
  /// A prefill engine's bootstrap server, host:port (SGLang), else empty.
  std::string bootstrap_endpoint;
  /// The engine's OpenAI HTTP server as a gateway reaches it, host:port of
  /// rank 0 (rank r listens on port + r, as an InferencePool's targetPorts
  /// list them), else empty (--engine-http-endpoint).
  std::string http_endpoint;
  uint32_t kv_block_size = 0;
  uint64_t total_kv_blocks = 0;
  uint32_t data_parallel_size = 1;
  std::string version;
  /// The LoRA adapters the engine serves (OpenEngine `ListLoras`), by name.
  std::vector<std::string> lora_adapters;

  bool operator==(const worker_record&) const = default;
};

/// Records advertising more ranks are refused (each rank costs the router
/// a slot); so are record files over `max_record_bytes`.
inline constexpr uint32_t max_data_parallel_size = 1024;
inline constexpr size_t max_record_bytes = 64 * 1024;
/// Records naming more adapters, or longer names, are refused.
using engine::max_lora_adapters;
using engine::max_lora_name_bytes;

/// The record as discovery stores it (JSON).
std::string to_json(const worker_record& r);
/// Parses and validates a record; nullopt (with `why`) when malformed.
std::optional<worker_record> record_from_json(const std::string& text,
                                              std::string* why);
/// host:port with a port in 1..65535 and a host of at most 253 characters.
bool valid_host_port(const std::string& s);
/// A worker id safe to use as a file name (letters, digits, `-_.:`).
bool valid_worker_id(const std::string& id);

} // namespace outrider::cluster
