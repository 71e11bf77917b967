#include "app/settings.hpp"

#include <cctype>
#include <stdexcept>
#include <unistd.h>

#include "actors/router/frontend/flow_identity.hpp"
#include "cluster/discovery.hpp"
#include "runtime/option_keys.hpp"

namespace outrider::app {

namespace opt = runtime::opt;

namespace {

cluster::nats_config nats_config_from(const runtime::options& o) {
  cluster::nats_config c;
  c.urls = cluster::nats_urls(o.get(opt::nats_url));
  c.bucket = o.get(opt::nats_bucket);
  c.ttl = o.get(opt::discovery_ttl);
  c.kv_subject = o.get(opt::nats_kv_subject);
  c.booking_subject = o.get(opt::nats_booking_subject);
  c.creds_file = o.get(opt::nats_creds);
  c.token = o.get(opt::nats_token);
  c.user = o.get(opt::nats_user);
  c.password = o.get(opt::nats_password);
  return c;
}

cluster::tls_files tls_files_from(const runtime::options& o) {
  return {o.get(opt::tls_cert), o.get(opt::tls_key), o.get(opt::tls_ca),
          o.get(opt::tls_reload_interval)};
}

// --role all runs its simulated engines with priority scheduling, so
// there the share has a default of its own.
// The limits every gRPC listener of a role takes (cluster/grpc_server_limits).
cluster::grpc_server_limits grpc_limits_from(const runtime::options& o) {
  cluster::grpc_server_limits l;
  l.idle_timeout = o.get(opt::grpc_idle_timeout);
  l.memory_quota = static_cast<size_t>(o.get(opt::grpc_memory_quota));
  l.probe_interval = o.get(opt::listener_probe_interval);
  l.fd_reserve = static_cast<size_t>(o.get(opt::grpc_fd_reserve));
  return l;
}

double priority_overlap(const runtime::options& o) {
  if (o.get(opt::role) == "all" && o.source(opt::kv_priority_overlap) ==
                                     runtime::option_source::default_value)
    return 0.5;
  return o.get(opt::kv_priority_overlap);
}

router::router_config placement_from(const runtime::options& o) {
  router::router_config rc;
  rc.mode = engine::router_mode_of(o.get(opt::router_mode))
              .value_or(engine::router_mode::kv); // the option checks it
  rc.selector.overlap_score_weight = o.get(opt::kv_overlap_score_weight);
  rc.selector.decode_weight = o.get(opt::kv_decode_weight);
  rc.selector.queue_weight = o.get(opt::kv_queue_weight);
  rc.selector.evict_weight = o.get(opt::kv_evict_weight);
  rc.selector.temperature = o.get(opt::router_temperature);
  rc.exhaustive = o.get(opt::router_search) == "exhaustive";
  rc.worker_series_cap =
    static_cast<size_t>(o.get(opt::metrics_worker_series_cap));
  rc.prediction_ttl = o.get(opt::kv_prediction_ttl);
  rc.tiers.weight = {1.0, o.get(opt::kv_cpu_weight),
                     o.get(opt::kv_storage_weight)};
  rc.tiers.credit_remote = rc.tiers.credit_foreign =
    o.get(opt::kv_credit_remote);
  rc.slot_block_cap = static_cast<size_t>(o.get(opt::kv_slot_cap));
  rc.model = o.get(opt::served_model);
  if (o.get(opt::router_queue_threshold) > 0)
    rc.queue_threshold = o.get(opt::router_queue_threshold);
  rc.queue_kv_share = o.get(opt::router_queue_kv_share);
  rc.priority_overlap = priority_overlap(o);
  const auto& affinity = o.get(opt::session_affinity);
  rc.session.mode = affinity == "hard"   ? router::session_mode::hard
                    : affinity == "soft" ? router::session_mode::soft
                                         : router::session_mode::off;
  rc.session.margin = o.get(opt::session_margin);
  rc.session.ttl = o.get(opt::session_ttl);
  return rc;
}

router::frontend_config frontend_from(const runtime::options& o) {
  router::frontend_config f;
  auto size = [&](runtime::option_key<int64_t> k) {
    return static_cast<size_t>(o.get(k));
  };
  f.http.io_threads = size(opt::http_io_threads);
  f.http.max_connections = size(opt::http_max_connections);
  // The process's last 128 descriptors are not the frontend's: the status
  // server (16), the store, discovery and the gRPC listeners need them.
  f.http.fd_reserve = 128;
  f.http.header_bytes = size(opt::http_max_header_bytes);
  f.http.max_headers = size(opt::http_max_headers);
  f.http.body_bytes = size(opt::http_max_body_bytes);
  f.http.body_budget = size(opt::http_body_budget_bytes);
  f.http.read_timeout = o.get(opt::http_read_timeout);
  f.http.idle_timeout = o.get(opt::http_idle_timeout);
  f.http.send_timeout = o.get(opt::http_send_timeout);
  f.api.json_depth = size(opt::http_max_json_depth);
  f.api.max_prompt_tokens = size(opt::max_prompt_tokens);
  f.api.media_placeholder = o.get(opt::chat_media_placeholder);
  f.max_in_flight = size(opt::http_max_in_flight);
  f.tokenizer_threads = size(opt::tokenizer_threads);
  return f;
}

std::string default_worker_id(const std::string& engine_endpoint) {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  auto port = engine_endpoint.substr(engine_endpoint.rfind(':') + 1);
  std::string id = std::string{host} + "-" + port;
  for (auto& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
        c != '.')
      c = '_';
  return id;
}

// The relay's host as routers are told it: --relay-advertise-host, else
// --relay-host unless that is a wildcard (then this host's name).
std::string advertised_host(const runtime::options& o) {
  const auto& set = o.get(opt::relay_advertise_host);
  if (!set.empty())
    return set;
  const auto& host = o.get(opt::relay_host);
  if (host != "0.0.0.0" && host != "::" && host != "[::]")
    return host;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "127.0.0.1";
  return name;
}

} // namespace

runtime::options default_options() {
  return runtime::parse_options({}, {}).opts;
}

cluster::discovery_settings discovery_settings_from(const runtime::options& o) {
  cluster::discovery_settings d;
  const auto& kind = o.get(opt::discovery);
  d.backend = kind == "memory" ? cluster::discovery_settings::kind::memory
              : kind == "nats" ? cluster::discovery_settings::kind::nats
                               : cluster::discovery_settings::kind::file;
  d.dir = o.get(opt::discovery_dir);
  d.ttl = o.get(opt::discovery_ttl);
  d.nats = nats_config_from(o);
  return d;
}

std::optional<router::router_settings>
router_settings_from(const runtime::options& o, std::string* why) {
  router::router_settings s;
  s.placement = placement_from(o);
  s.frontend = frontend_from(o);
  if (auto& h = s.frontend.http;
      h.body_budget != 0 && h.body_budget < h.body_bytes) {
    *why = "--http-body-budget-bytes must be 0 (unbounded) or at least "
           "--http-max-body-bytes: a body of the largest size could never pass";
    return std::nullopt;
  }
  s.http_host = o.get(opt::http_host);
  s.http_port = static_cast<uint16_t>(o.get(opt::http_port));
  s.http_tls = o.get(opt::http_tls);
  s.grpc_port = static_cast<int>(o.get(opt::grpc_port));
  s.grpc_max_streams = static_cast<size_t>(o.get(opt::grpc_max_streams));
  s.epp_port = static_cast<int>(o.get(opt::epp_port));
  s.epp_streamed = o.get(opt::epp_body_mode) == "streamed";
  s.grpc_limits = grpc_limits_from(o);
  s.tokenizer_dir = o.get(opt::tokenizer);
  s.chat_template_file = o.get(opt::chat_template);
  s.migration_limit = static_cast<int>(o.get(opt::migration_limit));
  s.direct_dispatch = o.get(opt::dispatch) == "direct";
  s.mux_dispatch = o.get(opt::dispatch) == "mux";
  s.request_timeout = o.get(opt::request_timeout);
  s.shutdown_timeout = o.get(opt::shutdown_timeout);
  s.tls = tls_files_from(o);
  s.tls_server_name = o.get(opt::tls_server_name);
  s.discovery = discovery_settings_from(o);
  s.nats_event_plane = o.get(opt::event_plane) == "nats";
  s.share_bookings = o.get(opt::share_bookings);
  s.flow.band_cap = static_cast<size_t>(o.get(opt::flow_band_cap));
  s.flow.quantum = static_cast<uint64_t>(o.get(opt::flow_quantum));
  s.queue_timeout = o.get(opt::queue_timeout);
  auto tracing = tracing_settings_from(o, "outrider-router", why);
  if (!tracing)
    return std::nullopt;
  s.tracing = std::move(*tracing);
  auto objectives = router::parse_objectives(o.get(opt::flow_objectives), why);
  if (!objectives)
    return std::nullopt;
  s.frontend.objectives = std::move(*objectives);
  s.frontend.session_header = o.get(opt::session_header);
  for (auto& ch : s.frontend.session_header)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (o.get(opt::router_conditional_disagg)) {
    if (s.placement.mode != engine::router_mode::kv) {
      *why = "--router-conditional-disagg needs --router-mode kv (the "
             "effective ISL comes from the KV index)";
      return std::nullopt;
    }
    s.disagg = router::parse_disagg_config(
      o.get(opt::router_conditional_disagg_config), why);
    if (!s.disagg)
      return std::nullopt;
  }
  return s;
}

sidecar::sidecar_settings sidecar_settings_from(const runtime::options& o) {
  sidecar::sidecar_settings s;
  s.engine_endpoint = o.get(opt::engine_endpoint);
  s.engine_protocol = o.get(opt::engine_protocol);
  s.engine_http = o.get(opt::engine_http);
  s.engine_http_endpoint = o.get(opt::engine_http_endpoint);
  if (!s.engine_http_endpoint.empty() &&
      !cluster::valid_host_port(s.engine_http_endpoint))
    throw std::invalid_argument("--engine-http-endpoint: '" +
                                s.engine_http_endpoint + "' is not host:port");
  if (s.engine_http_endpoint.empty()) {
    // The engine's host and vLLM's HTTP port; none where that is no
    // host:port (a Unix socket).
    auto guess =
      !s.engine_http.empty()
        ? s.engine_http
        : s.engine_endpoint.substr(0, s.engine_endpoint.rfind(':')) + ":8000";
    if (cluster::valid_host_port(guess))
      s.engine_http_endpoint = guess;
  }
  s.engine_startup_deadline = o.get(opt::engine_startup_deadline);
  s.worker_id = o.get(opt::worker_id).empty()
                  ? default_worker_id(s.engine_endpoint)
                  : o.get(opt::worker_id);
  s.relay_host = o.get(opt::relay_host);
  s.relay_port = static_cast<int>(o.get(opt::relay_port));
  s.advertise_host = advertised_host(o);
  s.relay_max_streams = static_cast<size_t>(o.get(opt::relay_max_streams));
  s.relay_grace = o.get(opt::relay_grace);
  s.grpc_limits = grpc_limits_from(o);
  s.shutdown_engine_on_gap = o.get(opt::on_kv_gap) == "shutdown-engine";
  s.kv_max_message_bytes = o.get(opt::kv_max_message_bytes);
  s.kv_max_batch_events = static_cast<size_t>(o.get(opt::kv_max_batch_events));
  s.kv_tier_cap = static_cast<size_t>(o.get(opt::kv_slot_cap));
  s.data_dir = o.get(opt::data_dir);
  s.tls = tls_files_from(o);
  s.discovery = discovery_settings_from(o);
  s.nats_event_plane = o.get(opt::event_plane) == "nats";
  s.engine_metrics_url = o.get(opt::engine_metrics_url);
  s.engine_metrics_interval = o.get(opt::engine_metrics_interval);
  if (s.engine_metrics_url == "auto") {
    if (s.engine_http_endpoint.empty())
      throw std::invalid_argument(
        "--engine-metrics-url auto: the engine has no HTTP endpoint (give "
        "--engine-http-endpoint, or the URL itself)");
    s.engine_metrics_url = "http://" + s.engine_http_endpoint + "/metrics";
  }
  if (s.engine_metrics_interval.count() < 100)
    throw std::invalid_argument("--engine-metrics-interval: at least 100ms");
  std::string why;
  auto tracing = tracing_settings_from(o, "outrider-sidecar", &why);
  if (!tracing)
    throw std::invalid_argument(why); // main checked it already
  s.tracing = std::move(*tracing);
  s.tracing.resource.emplace_back("outrider.worker_id", s.worker_id);
  return s;
}

std::optional<trace::tracer_settings>
tracing_settings_from(const runtime::options& o, const std::string& service,
                      std::string* why) {
  trace::tracer_settings t;
  t.service_name = service;
  t.sample_ratio = o.get(opt::trace_sample_ratio);
  if (!(t.sample_ratio >= 0.0 && t.sample_ratio <= 1.0)) {
    *why = "--trace-sample-ratio must be between 0 and 1";
    return std::nullopt;
  }
  const auto& url = o.get(opt::otlp_endpoint);
  if (!url.empty()) {
    t.endpoint = trace::parse_otlp_endpoint(url, why);
    if (!t.endpoint) {
      *why = "--otlp-endpoint: " + *why;
      return std::nullopt;
    }
  }
  t.resource.emplace_back("service.instance.id",
                          std::to_string(static_cast<long>(::getpid())));
  return t;
}

} // namespace outrider::app
