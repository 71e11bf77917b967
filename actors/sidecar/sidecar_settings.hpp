#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cluster/discovery_from.hpp"
#include "cluster/grpc_server_limits.hpp"
#include "cluster/tls.hpp"
#include "cluster/trace/tracer.hpp"

namespace outrider::sidecar {

/// Everything the sidecar role is told, typed. `app/` fills it from the
/// options once; the defaults are the option table's (`outrider --help`).
struct sidecar_settings {
  std::string engine_endpoint;
  std::string engine_protocol; // auto, openengine, vllm, sglang
  std::string engine_http;     // host:port of GET /kv_event_sources, or ""
  /// The engine's OpenAI HTTP as gateways reach it (rank 0; rank r at
  /// port + r): advertised in the record for the endpoint picker.
  std::string engine_http_endpoint;
  std::chrono::milliseconds engine_startup_deadline{0};
  std::string worker_id;      // as registered (app/ derives a default)
  std::string relay_host;     // where the relay listens
  int relay_port = 0;         // 0: a free port, advertised
  std::string advertise_host; // the relay's host as routers are told it
  size_t relay_max_streams = 0;
  /// After SIGTERM: how long relayed streams may run on (--relay-grace).
  std::chrono::milliseconds relay_grace{1000};
  cluster::grpc_server_limits grpc_limits; // --grpc-idle-timeout
  bool shutdown_engine_on_gap = false;     // --on-kv-gap shutdown-engine
  int64_t kv_max_message_bytes = 0;
  size_t kv_max_batch_events = 0;
  size_t kv_tier_cap = 0; // --kv-slot-cap: blocks per rank and offload tier
  std::string data_dir;   // the KV index's RocksDB
  cluster::tls_files tls;
  cluster::discovery_settings discovery;
  bool nats_event_plane = false; // --event-plane nats
  /// --engine-metrics-url ("auto" resolved; empty: off) and its interval.
  std::string engine_metrics_url;
  std::chrono::milliseconds engine_metrics_interval{5000};
  /// --otlp-endpoint (service.name outrider-sidecar); the router's
  /// sampling decision arrives with each call.
  trace::tracer_settings tracing;
};

} // namespace outrider::sidecar
