#pragma once

// The option keys as typed constants: `opts.get(opt::http_port)` is an
// int64_t, and a misspelled key does not compile. One line per entry of the
// option table (runtime/options.cpp); a unit test checks that both list the
// same keys with the same types.

#include <chrono>
#include <cstdint>
#include <string>

namespace outrider::runtime {

/// A key whose value has type `T`.
template <class T>
struct option_key {
  const char* name;
};

// X(identifier, "key", option_type)
#define OUTRIDER_OPTION_KEYS(X)                                                \
  X(role, "role", string)                                                      \
  X(config, "config", string)                                                  \
  X(system_host, "system-host", string)                                        \
  X(system_port, "system-port", integer)                                       \
  X(log_level, "log-level", string)                                            \
  X(log_format, "log-format", string)                                          \
  X(scheduler_threads, "scheduler-threads", integer)                           \
  X(shutdown_timeout, "shutdown-timeout", duration)                            \
  X(supervisor_initial_backoff, "supervisor-initial-backoff", duration)        \
  X(supervisor_max_backoff, "supervisor-max-backoff", duration)                \
  X(supervisor_stable_period, "supervisor-stable-period", duration)            \
  X(supervisor_max_restarts, "supervisor-max-restarts", integer)               \
  X(supervisor_restart_window, "supervisor-restart-window", duration)          \
  X(engine_endpoint, "engine-endpoint", string)                                \
  X(engine_protocol, "engine-protocol", string)                                \
  X(engine_http, "engine-http", string)                                        \
  X(engine_http_endpoint, "engine-http-endpoint", string)                      \
  X(on_kv_gap, "on-kv-gap", string)                                            \
  X(kv_max_message_bytes, "kv-max-message-bytes", integer)                     \
  X(kv_max_batch_events, "kv-max-batch-events", integer)                       \
  X(data_dir, "data-dir", string)                                              \
  X(discovery, "discovery", string)                                            \
  X(discovery_dir, "discovery-dir", string)                                    \
  X(check_config, "check-config", boolean)                                     \
  X(event_plane, "event-plane", string)                                        \
  X(tls_server_name, "tls-server-name", string)                                \
  X(http_tls, "http-tls", boolean)                                             \
  X(nats_kv_subject, "nats-kv-subject", string)                                \
  X(share_bookings, "share-bookings", boolean)                                 \
  X(nats_booking_subject, "nats-booking-subject", string)                      \
  X(nats_url, "nats-url", string)                                              \
  X(nats_bucket, "nats-bucket", string)                                        \
  X(nats_creds, "nats-creds", string)                                          \
  X(nats_token, "nats-token", string)                                          \
  X(nats_user, "nats-user", string)                                            \
  X(nats_password, "nats-password", string)                                    \
  X(discovery_ttl, "discovery-ttl", duration)                                  \
  X(worker_id, "worker-id", string)                                            \
  X(relay_host, "relay-host", string)                                          \
  X(relay_advertise_host, "relay-advertise-host", string)                      \
  X(relay_port, "relay-port", integer)                                         \
  X(relay_max_streams, "relay-max-streams", integer)                           \
  X(relay_grace, "relay-grace", duration)                                      \
  X(tls_cert, "tls-cert", string)                                              \
  X(tls_key, "tls-key", string)                                                \
  X(tls_ca, "tls-ca", string)                                                  \
  X(tls_reload_interval, "tls-reload-interval", duration)                      \
  X(engine_metrics_url, "engine-metrics-url", string)                          \
  X(engine_metrics_interval, "engine-metrics-interval", duration)              \
  X(engine_startup_deadline, "engine-startup-deadline", duration)              \
  X(http_host, "http-host", string)                                            \
  X(http_port, "http-port", integer)                                           \
  X(http_io_threads, "http-io-threads", integer)                               \
  X(http_max_connections, "http-max-connections", integer)                     \
  X(http_max_in_flight, "http-max-in-flight", integer)                         \
  X(http_max_header_bytes, "http-max-header-bytes", integer)                   \
  X(http_max_headers, "http-max-headers", integer)                             \
  X(http_max_body_bytes, "http-max-body-bytes", integer)                       \
  X(http_body_budget_bytes, "http-body-budget-bytes", integer)                 \
  X(http_max_json_depth, "http-max-json-depth", integer)                       \
  X(max_prompt_tokens, "max-prompt-tokens", integer)                           \
  X(http_read_timeout, "http-read-timeout", duration)                          \
  X(http_idle_timeout, "http-idle-timeout", duration)                          \
  X(http_send_timeout, "http-send-timeout", duration)                          \
  X(grpc_port, "grpc-port", integer)                                           \
  X(epp_port, "epp-port", integer)                                             \
  X(epp_body_mode, "epp-body-mode", string)                                    \
  X(grpc_max_streams, "grpc-max-streams", integer)                             \
  X(grpc_idle_timeout, "grpc-idle-timeout", duration)                          \
  X(grpc_memory_quota, "grpc-memory-quota", integer)                           \
  X(grpc_fd_reserve, "grpc-fd-reserve", integer)                               \
  X(listener_probe_interval, "listener-probe-interval", duration)              \
  X(otlp_endpoint, "otlp-endpoint", string)                                    \
  X(trace_sample_ratio, "trace-sample-ratio", number)                          \
  X(request_timeout, "request-timeout", duration)                              \
  X(dispatch, "dispatch", string)                                              \
  X(router_mode, "router-mode", string)                                        \
  X(kv_overlap_score_weight, "kv-overlap-score-weight", number)                \
  X(kv_decode_weight, "kv-decode-weight", number)                              \
  X(kv_queue_weight, "kv-queue-weight", number)                                \
  X(kv_evict_weight, "kv-evict-weight", number)                                \
  X(kv_cpu_weight, "kv-cpu-weight", number)                                    \
  X(kv_storage_weight, "kv-storage-weight", number)                            \
  X(kv_credit_remote, "kv-credit-remote", boolean)                             \
  X(kv_slot_cap, "kv-slot-cap", integer)                                       \
  X(kv_priority_overlap, "kv-priority-overlap", number)                        \
  X(kv_prediction_ttl, "kv-prediction-ttl", duration)                          \
  X(router_temperature, "router-temperature", number)                          \
  X(router_search, "router-search", string)                                    \
  X(metrics_worker_series_cap, "metrics-worker-series-cap", integer)           \
  X(migration_limit, "migration-limit", integer)                               \
  X(router_conditional_disagg, "router-conditional-disagg", boolean)           \
  X(router_conditional_disagg_config, "router-conditional-disagg-config",      \
    string)                                                                    \
  X(router_queue_threshold, "router-queue-threshold", number)                  \
  X(router_queue_kv_share, "router-queue-kv-share", number)                    \
  X(queue_timeout, "queue-timeout", duration)                                  \
  X(flow_band_cap, "flow-band-cap", integer)                                   \
  X(flow_quantum, "flow-quantum", integer)                                     \
  X(flow_objectives, "flow-objectives", string)                                \
  X(session_affinity, "session-affinity", string)                              \
  X(session_header, "session-header", string)                                  \
  X(session_margin, "session-margin", number)                                  \
  X(session_ttl, "session-ttl", duration)                                      \
  X(tokenizer, "tokenizer", string)                                            \
  X(tokenizer_threads, "tokenizer-threads", integer)                           \
  X(chat_template, "chat-template", string)                                    \
  X(chat_media_placeholder, "chat-media-placeholder", string)                  \
  X(served_model, "served-model", string)                                      \
  X(sim_engines, "sim-engines", integer)                                       \
  X(sim_binary, "sim-binary", string)                                          \
  X(sim_speedup, "sim-speedup", number)                                        \
  X(sim_kv_blocks, "sim-kv-blocks", integer)                                   \
  X(sim_args, "sim-args", string)                                              \
  X(sim_lora_modules, "sim-lora-modules", string)                              \
  X(demo_requests, "demo-requests", integer)                                   \
  X(debug_hang_on_shutdown, "debug-hang-on-shutdown", boolean)                 \
  X(debug_crash_endpoint, "debug-crash-endpoint", boolean)

namespace opt {

using string = std::string;
using integer = int64_t;
using boolean = bool;
using duration = std::chrono::milliseconds;
using number = double;

#define OUTRIDER_OPTION_KEY(ident, key, type)                                  \
  inline constexpr option_key<type> ident{key};
OUTRIDER_OPTION_KEYS(OUTRIDER_OPTION_KEY)
#undef OUTRIDER_OPTION_KEY

} // namespace opt

} // namespace outrider::runtime
