#include "actors/router/router_service.hpp"

#include <algorithm>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/router/brain/kv_router.hpp"
#include "actors/router/core/disagg_policy.hpp"
#include "actors/router/dispatch/dispatcher.hpp"
#include "actors/router/frontend/epp_server.hpp"
#include "actors/router/frontend/grpc_frontend.hpp"
#include "actors/router/frontend/http_frontend.hpp"
#include "actors/router/frontend/status_page.hpp"
#include "actors/router/frontend/text_setup.hpp"
#include "actors/router/router_fleet.hpp"
#include "actors/router/router_parts.hpp"
#include "actors/router/watch/model_catalog.hpp"
#include "actors/router/watch/worker_watcher.hpp"
#include "cluster/discovery.hpp"
#include "cluster/discovery_from.hpp"
#include "cluster/nats_discovery.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "cluster/tls.hpp"
#include "runtime/listener_watch.hpp"
#include "runtime/metrics.hpp"
#include "runtime/tls_watch.hpp"

namespace outrider::router {

namespace {

std::unique_ptr<dispatcher>
dispatcher_from(runtime::role_env& ctx, const router_settings& s,
                const router_parts& parts,
                std::shared_ptr<grpc::ChannelCredentials> relay_creds) {
  dispatch_config cfg;
  cfg.migration_limit = s.migration_limit;
  cfg.disagg = parts.disagg;
  cfg.queue_threshold = parts.config.queue_threshold;
  cfg.direct = s.direct_dispatch;
  cfg.relay_mux = s.mux_dispatch;
  cfg.request_timeout = s.request_timeout;
  cfg.relay_credentials = std::move(relay_creds);
  cfg.relay_server_name = s.tls_server_name;
  cfg.flow = s.flow;
  cfg.queue_timeout = s.queue_timeout;
  cfg.tracer = parts.tracer;
  return std::make_unique<dispatcher>(ctx.sys, parts.brain, std::move(cfg));
}

// The endpoint picker (--epp-port), reading requests as the HTTP frontend
// `fc` does; true when it listens or is off.
bool start_epp(runtime::role_env& ctx, const router_settings& s,
               router_parts& parts,
               std::function<std::vector<std::string>()> models,
               const frontend_config& fc) {
  if (s.epp_port <= 0)
    return true;
  epp_config ec;
  ec.prompts = prompt_tools{fc.tokenizer, fc.chat_template, fc.api,
                            fc.chat_template_error, fc.is_adapter};
  ec.objectives = fc.objectives;
  ec.session_header = fc.session_header;
  ec.disagg = parts.disagg;
  ec.queue_threshold = parts.config.queue_threshold;
  ec.body_mode =
    s.epp_streamed ? epp_body_mode::streamed : epp_body_mode::buffered;
  ec.max_body_bytes = fc.http.body_bytes;
  ec.max_streams = s.grpc_max_streams;
  ec.tokenizer_threads = fc.tokenizer_threads;
  ec.server = s.grpc_limits;
  ec.ready = [&parts] { return parts.ready.load(); };
  parts.epp = std::make_unique<epp_server>(parts.dispatch->queue(),
                                           std::move(models), ec);
  // TLS with the router's certificate, no client certificate asked:
  // inference gateways verify the picker, but present none by default.
  auto err = parts.epp->start(
    s.http_host, static_cast<uint16_t>(s.epp_port),
    parts.tls ? cluster::server_credentials(parts.tls, /*client_certs=*/false)
              : nullptr); // plaintext (cluster/grpc_listener.hpp)
  if (!err.empty()) {
    ctx.control->request_exit(1, err);
    return false;
  }
  return true;
}

// The frontends; true when every one listens.
bool start_frontends(runtime::role_env& ctx, const router_settings& s,
                     router_parts& parts) {
  const auto& host = s.http_host;
  auto fc = s.frontend;
  fc.tracer = parts.tracer;
  std::weak_ptr<model_catalog> weak = parts.catalog;
  auto models = [weak]() -> std::vector<std::string> {
    auto c = weak.lock();
    return c ? c->models() : std::vector<std::string>{};
  };
  fc.is_adapter = [weak](const std::string& name) {
    auto c = weak.lock();
    return c && c->is_adapter(name);
  };
  if (s.http_tls) {
    if (!parts.tls) {
      ctx.control->request_exit(2, "--http-tls needs --tls-cert and --tls-key");
      return false;
    }
    fc.tls =
      frontend_config::tls_pem{parts.tls->cert, parts.tls->key, parts.tls->ca};
  }
  if (!load_text(ctx, s, fc))
    return false;
  if (!start_epp(ctx, s, parts, models, fc))
    return false;
  parts.frontend =
    std::make_unique<http_frontend>(*parts.dispatch, models, std::move(fc));
  if (auto err = parts.frontend->start(host, s.http_port)) {
    ctx.control->request_exit(1, "frontend: " + describe(err));
    return false;
  }
  spdlog::info("router: OpenAI-compatible frontend on {}:{} ({} mode{})", host,
               parts.frontend->port(), engine::to_string(parts.config.mode),
               s.http_tls ? ", TLS" : "");
  auto port = s.grpc_port;
  if (port <= 0)
    return true;
  // The HTTP frontend's send deadline and queue bound hold here too.
  grpc_frontend::limits lim{s.grpc_max_streams,
                            s.frontend.http.send_timeout,
                            s.frontend.http.max_queued_bytes,
                            s.frontend.objectives,
                            s.frontend.session_header,
                            s.grpc_limits,
                            parts.tracer};
  parts.grpc = std::make_unique<grpc_frontend>(*parts.dispatch, models, lim);
  if (auto gerr = parts.grpc->start(
        host, static_cast<uint16_t>(port),
        parts.tls ? cluster::server_credentials(parts.tls) : nullptr);
      !gerr.empty()) {
    ctx.control->request_exit(1, "gRPC frontend: " + gerr);
    return false;
  }
  spdlog::info("router: OpenEngine Inference on {}:{}{}", host, port,
               parts.tls ? " (TLS)" : "");
  return true;
}

// The gRPC listeners (--grpc-port, --epp-port) probed from outside
// (--listener-probe-interval): one that stops accepting makes /ready 503
// and is rebuilt on its port.
void watch_listeners(runtime::role_env& ctx, const router_settings& s,
                     router_parts& parts) {
  const auto& lim = s.grpc_limits;
  if (lim.probe_interval.count() <= 0 || (!parts.grpc && !parts.epp))
    return;
  runtime::listener_watch::config wc;
  wc.interval = lim.probe_interval;
  wc.timeout = std::min(lim.probe_interval, std::chrono::milliseconds{3000});
  parts.listeners = std::make_unique<runtime::listener_watch>(wc);
  std::weak_ptr<runtime::health_state> weak = ctx.health;
  auto add = [&](const std::string& name, auto* server) {
    runtime::listener_watch::listener l;
    l.name = name;
    l.host = runtime::probe_host(s.http_host);
    if (parts.tls)
      l.tls = {true, parts.tls->cert, parts.tls->key};
    l.port = [server] { return server->port(); };
    l.on_change = [weak, name](bool ok, const std::string& why) {
      if (auto h = weak.lock()) {
        h->set_component(name + "_listener", ok ? "accepting" : "not_accepting",
                         why);
        h->set_impaired(name + "_listener", !ok);
      }
    };
    l.restart = [server] { return server->restart(std::chrono::seconds{5}); };
    parts.listeners->add(std::move(l));
  };
  if (parts.grpc)
    add("grpc", parts.grpc.get());
  if (parts.epp)
    add("epp", parts.epp.get());
  parts.listeners->start();
}

// Ready when the frontends listen; with `workers` > 0 (--role all, whose
// engines are its own) only once the router actor says it can place on that
// many (it tells every change: no polling).
void declare_ready(runtime::role_env& ctx, router_parts& parts,
                   size_t workers) {
  ctx.health->set_component("frontend", "serving");
  if (workers == 0) {
    parts.ready = true;
    return ctx.health->set_ready(true);
  }
  ctx.health->set_component("workers",
                            "waiting for " + std::to_string(workers));
  std::lock_guard<std::mutex> guard{parts.ready_mtx};
  parts.ready_health = ctx.health;
  parts.ready_at = workers;
  parts.check_ready(); // the count may have been told before
}

// --tls-reload-interval: the gRPC servers and channels re-read the files
// themselves (cluster/tls.hpp); this watcher checks each change, hands it
// to the HTTP frontend (--http-tls), counts and logs it.
void watch_certificates(const router_settings& s, router_parts& parts) {
  if (!parts.tls || parts.tls->files.reload.count() <= 0)
    return;
  const auto& f = parts.tls->files;
  std::function<void(const runtime::pem_set&)> apply;
  if (s.http_tls && parts.frontend)
    apply = [front = parts.frontend.get()](const runtime::pem_set& pem) {
      if (auto err = front->reload_tls(pem.cert, pem.key, pem.ca))
        spdlog::error("router: HTTPS certificate not reloaded: {}",
                      describe(err));
    };
  parts.tls_watch = std::make_unique<runtime::tls_watch>(
    runtime::pem_set{f.cert, f.key, f.ca},
    runtime::pem_set{parts.tls->cert, parts.tls->key, parts.tls->ca}, f.reload,
    std::move(apply));
}

// The watcher dials every worker's relay at once, so it starts after the
// frontends hold their ports: in front of thousands of relays, its outgoing
// connections take thousands of local ports from the kernel's ephemeral
// range, and one of them could be a fixed --http-port there. The router's
// own addresses, which no worker's record may name, are the ports bound
// (--http-port 0 binds a free one).
void start_watcher(const router_settings& s, router_parts& parts,
                   const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  auto http = parts.frontend ? parts.frontend->port() : s.http_port;
  std::vector<std::string> own{s.http_host + ":" + std::to_string(http)};
  if (s.grpc_port > 0)
    own.push_back(s.http_host + ":" + std::to_string(s.grpc_port));
  parts.watcher = std::make_unique<worker_watcher>(
    parts.disc, parts.brain, creds, parts.plane, s.tls_server_name, own,
    parts.tracer, parts.catalog);
}

std::shared_ptr<router_parts>
start_router(runtime::role_env& ctx, const router_settings& s,
             std::shared_ptr<cluster::discovery> disc) {
  auto parts = std::make_shared<router_parts>();
  parts->tracer = trace::tracer::make(s.tracing);
  if (parts->tracer->enabled())
    spdlog::info("router: spans to http://{}:{}{} (sampling {} of new "
                 "traces)",
                 s.tracing.endpoint->host, s.tracing.endpoint->port,
                 s.tracing.endpoint->target, s.tracing.sample_ratio);
  // With NATS, a router that loses its connection keeps the last known
  // worker set and says so in /health.
  std::weak_ptr<runtime::health_state> health = ctx.health;
  parts->disc =
    disc ? std::move(disc)
         : cluster::discovery_from(s.discovery, [health](bool up) {
             if (auto h = health.lock())
               h->set_component("discovery",
                                up ? "connected"
                                   : "disconnected: keeping the last known "
                                     "workers");
           });
  if (auto err = parts->disc->open())
    ctx.control->request_exit(1, describe(err));
  else if (auto* n = dynamic_cast<cluster::nats_discovery*>(parts->disc.get()))
    ctx.health->set_component("discovery",
                              n->connected() ? "connected" : "connecting");
  parts->config = s.placement;
  parts->settings = s;
  if (s.disagg)
    parts->disagg =
      std::make_shared<runtime::live_value<disagg_config>>(*s.disagg);
  parts->share = booking_share_from(ctx, s, parts->brain);
  add_index_route(ctx, parts->brain);
  // Bad TLS settings: exit 2, and nothing listens meanwhile (never in
  // plaintext when TLS was asked for).
  auto tls = cluster::tls_from(s.tls);
  if (!tls)
    ctx.control->request_exit(2, describe(tls.error()));
  else
    parts->tls = *tls;
  auto relay_creds = cluster::channel_credentials(parts->tls);
  parts->plane = event_plane_from(ctx, s);
  // What the frontends list and accept, told by the watcher.
  parts->catalog = std::make_shared<model_catalog>(parts->config.model);
  parts->dispatch = dispatcher_from(ctx, s, *parts, relay_creds);
  add_status_page(
    ctx, parts->brain, [weak = std::weak_ptr<router_parts>(parts)] {
      auto p = weak.lock();
      if (!p || !p->dispatch)
        return nlohmann::json::object();
      auto flow = p->dispatch->queue().flow();
      return nlohmann::json{
        {"last_minute", p->dispatch->recent().summary()},
        {"in_flight", p->dispatch->in_flight()},
        // What a reload may have changed, as in effect now.
        {"flow",
         {{"band_cap", flow.band_cap},
          {"quantum", flow.quantum},
          {"queue_timeout_ms", p->dispatch->queue().queue_timeout().count()}}},
        {"disagg", p->disagg
                     ? nlohmann::json::parse(disagg_json(*p->disagg->get()))
                     : nlohmann::json()}};
    });
  const bool listening = tls && start_frontends(ctx, s, *parts);
  start_watcher(s, *parts, relay_creds);
  if (listening) {
    watch_listeners(ctx, s, *parts);
    watch_certificates(s, *parts);
    declare_ready(ctx, *parts, s.ready_workers);
  }
  // Shutdown: stop admitting at once, let requests in flight finish for
  // most of --shutdown-timeout, then end the rest.
  auto grace = s.shutdown_timeout * 3 / 4;
  ctx.pre_stop_hooks.push_back([parts, grace] { parts->stop(grace); });
  return parts;
}

// The router actor under the supervisor; every incarnation is published in
// the slot the watcher and the dispatcher use.
runtime::child_spec router_child(const std::shared_ptr<router_parts>& parts) {
  std::weak_ptr<router_parts> weak = parts;
  return runtime::supervised(
    "kv_router", parts->brain,
    [cfg = parts->config, share = parts->share, weak](caf::actor_system& sys) {
      // A restarted router actor takes what a reload changed since.
      auto now = cfg;
      if (auto p = weak.lock()) {
        std::lock_guard<std::mutex> guard{p->config_mtx};
        now = p->config;
      }
      return spawn_kv_router(sys, now, share, [weak](size_t n) {
        if (auto p = weak.lock())
          p->workers_placeable(n);
      });
    });
}

} // namespace

service::service(runtime::role_env& env, const router_settings& s,
                 std::shared_ptr<cluster::discovery> disc)
  : parts_(start_router(env, s, std::move(disc))) {}

service::~service() = default;

std::vector<runtime::child_spec> service::children() const {
  return {router_child(parts_)};
}

bool service::ready() const {
  return parts_->ready;
}

void service::stop(std::chrono::milliseconds grace) {
  parts_->stop(grace);
}

dispatcher* service::dispatch() const {
  return parts_->stopping ? nullptr : parts_->dispatch.get();
}

uint16_t service::http_port() const {
  return parts_->frontend ? parts_->frontend->port() : 0;
}

} // namespace outrider::router
