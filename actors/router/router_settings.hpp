#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/router/core/disagg_policy.hpp"
#include "actors/router/core/placement.hpp"
#include "actors/router/frontend/http_frontend.hpp"
#include "cluster/discovery_from.hpp"
#include "cluster/grpc_server_limits.hpp"
#include "cluster/tls.hpp"
#include "cluster/trace/tracer.hpp"

namespace outrider::router {

/// Everything the router role is told, typed. `app/` fills it from the
/// options once and validates it there (exit 2 before anything listens);
/// the defaults are the option table's (`outrider --help`).
struct router_settings {
  router_config placement;  // --router-mode, --kv-*, --router-queue-*, ...
  frontend_config frontend; // --http-* limits, --tokenizer-threads, ...
  std::string http_host;
  uint16_t http_port = 0;
  bool http_tls = false;
  int grpc_port = 0; // 0: no gRPC frontend
  size_t grpc_max_streams = 0;
  int epp_port = 0;                        // 0: no endpoint picker
  bool epp_streamed = false;               // --epp-body-mode streamed
  cluster::grpc_server_limits grpc_limits; // --grpc-idle-timeout
  std::string tokenizer_dir;               // --tokenizer; empty: token ids only
  std::string chat_template_file; // --chat-template; empty: the tokenizer's
  int migration_limit = 0;
  std::optional<disagg_config> disagg; // --router-conditional-disagg
  bool direct_dispatch = false;        // --dispatch direct
  bool mux_dispatch = true;            // --dispatch mux (the default)
  std::chrono::milliseconds request_timeout{0};
  std::chrono::milliseconds shutdown_timeout{0};
  cluster::tls_files tls;
  std::string tls_server_name;
  cluster::discovery_settings discovery;
  bool nats_event_plane = false; // --event-plane nats
  bool share_bookings = false;   // --share-bookings (over NATS)
  /// Flow control of the router's queue (--flow-band-cap, --flow-quantum,
  /// --queue-timeout); the objectives' priorities are the frontend's.
  flow_config flow;
  std::chrono::milliseconds queue_timeout{std::chrono::seconds{60}};
  /// Ready only once this many workers can be placed on (`--role all`,
  /// whose engines are its own); 0: when the frontends listen.
  size_t ready_workers = 0;
  /// --otlp-endpoint, --trace-sample-ratio (service.name outrider-router).
  trace::tracer_settings tracing;
};

} // namespace outrider::router
