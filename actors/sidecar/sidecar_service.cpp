#include "actors/sidecar/sidecar_service.hpp"

#include <algorithm>
#include <atomic>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "actors/indexer/indexer_actor.hpp"
#include "actors/registrar/registrar.hpp"
#include "actors/sidecar/engine_load.hpp"
#include "actors/sidecar/event_hub.hpp"
#include "actors/sidecar/kv_publisher.hpp"
#include "actors/sidecar/lifecycle.hpp"
#include "actors/sidecar/relay.hpp"
#include "cluster/discovery.hpp"
#include "cluster/discovery_from.hpp"
#include "cluster/engine/engine_metrics.hpp"
#include "cluster/tls.hpp"
#include "runtime/ask.hpp"
#include "runtime/listener_watch.hpp"
#include "runtime/tls_watch.hpp"

namespace outrider::sidecar {

namespace {

// The sidecar keeps serving its engine while NATS is away (and says so in
// /health); the registrar puts the record again once it is back.
std::shared_ptr<cluster::discovery>
discovery_from(const sidecar_settings& s,
               const std::shared_ptr<runtime::health_state>& health) {
  std::weak_ptr<runtime::health_state> weak = health;
  return cluster::discovery_from(s.discovery, [weak](bool up) {
    if (auto h = weak.lock())
      h->set_component("discovery",
                       up ? "connected" : "disconnected: reconnecting");
  });
}

// Handles to the current incarnation of each child, filled by the
// supervisor on every (re)start.
struct sidecar_slots {
  runtime::slot_ptr<indexer::indexer_actor> indexer =
    std::make_shared<runtime::actor_slot<indexer::indexer_actor>>();
  runtime::slot_ptr<registrar::registrar_actor> registrar =
    std::make_shared<runtime::actor_slot<registrar::registrar_actor>>();
  runtime::slot_ptr<lifecycle_actor> lifecycle =
    std::make_shared<runtime::actor_slot<lifecycle_actor>>();
};

lifecycle_config lifecycle_config_from(runtime::role_env& ctx,
                                       const sidecar_settings& s,
                                       const sidecar_slots& slots) {
  lifecycle_config cfg;
  cfg.engine_endpoint = s.engine_endpoint;
  cfg.engine_protocol = s.engine_protocol;
  cfg.engine_http = s.engine_http;
  cfg.http_endpoint = s.engine_http_endpoint;
  cfg.startup_deadline = s.engine_startup_deadline;
  cfg.worker_id = s.worker_id;
  cfg.relay_endpoint = s.advertise_host + ":" + std::to_string(s.relay_port);
  cfg.shutdown_engine_on_gap = s.shutdown_engine_on_gap;
  cfg.kv_max_message_bytes = s.kv_max_message_bytes;
  cfg.kv_max_batch_events = s.kv_max_batch_events;
  cfg.health = ctx.health;
  cfg.zmq = std::make_shared<zmq::context_t>(1);
  cfg.indexer = slots.indexer;
  cfg.registrar = slots.registrar;
  cfg.tracer = trace::tracer::make(s.tracing);
  auto control = ctx.control;
  cfg.request_exit = [control](int code, const std::string& why) {
    control->request_exit(code, why);
  };
  return cfg;
}

// The relay's listener probed from outside (--listener-probe-interval):
// one that stops accepting withdraws the worker, and is rebuilt.
std::shared_ptr<runtime::listener_watch>
watch_relay(const sidecar_settings& s, const std::shared_ptr<relay>& server,
            const sidecar_slots& slots, runtime::probe_tls tls) {
  const auto& lim = s.grpc_limits;
  if (lim.probe_interval.count() <= 0)
    return nullptr;
  runtime::listener_watch::config wc;
  wc.interval = lim.probe_interval;
  wc.timeout = std::min(lim.probe_interval, std::chrono::milliseconds{3000});
  auto watch = std::make_shared<runtime::listener_watch>(wc);
  std::weak_ptr<relay> weak = server;
  runtime::listener_watch::listener l;
  l.name = "relay";
  l.host = runtime::probe_host(s.relay_host);
  l.tls = std::move(tls);
  l.port = [weak]() -> uint16_t {
    auto r = weak.lock();
    return r ? r->port() : 0;
  };
  l.on_change = [lifecycle = slots.lifecycle](bool ok, const std::string& why) {
    if (auto a = lifecycle->get())
      caf::anon_send(a, listener_atom::value, ok, why);
  };
  // Withdrawn since the first failures: routers have stopped placing here.
  l.restart = [weak] {
    auto r = weak.lock();
    return r && r->restart(std::chrono::seconds{5});
  };
  watch->add(std::move(l));
  watch->start();
  return watch;
}

// --engine-metrics-url: the engine's own series on the sidecar's /metrics,
// with the worker's label, scraped off the status server's thread.
void start_engine_metrics(runtime::role_env& ctx, const sidecar_settings& s) {
  // The engine's load under outrider's names, from any engine that
  // reports it (OpenEngine's GetLoad).
  auto load = std::make_shared<engine_load_gauges>(s.engine_endpoint,
                                                   s.engine_metrics_interval);
  ctx.stop_hooks.push_back([load] { load->stop(); });
  if (s.engine_metrics_url.empty())
    return;
  std::string why;
  std::shared_ptr<engine::metrics_scraper> scraper =
    engine::metrics_scraper::make(s.engine_metrics_url,
                                  {{"outrider_worker", s.worker_id}},
                                  s.engine_metrics_interval, &why);
  if (!scraper) {
    ctx.control->request_exit(2, "--engine-metrics-url: " + why);
    return;
  }
  ctx.stop_hooks.push_back([scraper] { scraper->stop(); });
}

// The relay is no actor: it starts now and stops after the actors.
// With --relay-port 0 the relay takes a free port, and that one is advertised.
void start_relay(runtime::role_env& ctx, const sidecar_settings& s,
                 lifecycle_config& cfg, std::shared_ptr<event_hub> hub,
                 const sidecar_slots& slots,
                 std::shared_ptr<std::atomic<int64_t>> grace_ms) {
  relay_config rcfg;
  rcfg.listen = s.relay_host + ":" + std::to_string(s.relay_port);
  rcfg.worker_id = s.worker_id;
  rcfg.engine_endpoint = cfg.engine_endpoint;
  rcfg.engine_protocol = cfg.engine_protocol;
  rcfg.hub = std::move(hub);
  rcfg.health = ctx.health;
  rcfg.sys = &ctx.sys;
  rcfg.indexer = slots.indexer;
  rcfg.max_streams = s.relay_max_streams;
  rcfg.limits = s.grpc_limits;
  rcfg.tracer = cfg.tracer; // one exporter for the sidecar's spans
  auto tls = cluster::tls_from(s.tls);
  if (!tls) {
    ctx.control->request_exit(2, describe(tls.error()));
    return;
  }
  // null: plaintext, accepted on outrider's own loop (grpc_listener.hpp).
  rcfg.credentials = *tls ? cluster::server_credentials(*tls) : nullptr;
  auto server = std::make_shared<relay>(rcfg);
  // --engine-protocol auto: the lifecycle tells the relay what it found.
  cfg.on_dialect = [weak = std::weak_ptr<relay>(server)](engine::dialect d) {
    if (auto r = weak.lock())
      r->set_dialect(d);
  };
  if (auto err = server->start())
    ctx.control->request_exit(1, describe(err));
  else if (s.relay_port == 0)
    cfg.relay_endpoint =
      s.advertise_host + ":" + std::to_string(server->port());
  runtime::probe_tls probe;
  if (auto& m = *tls)
    probe = {true, m->cert, m->key};
  auto watch = watch_relay(s, server, slots, std::move(probe));
  // --tls-reload-interval: the relay re-reads the files itself (gRPC's file
  // watcher, cluster/tls.hpp); this one checks, counts and logs changes.
  std::shared_ptr<runtime::tls_watch> certs;
  if (auto& m = *tls; m && m->files.reload.count() > 0)
    certs = std::make_shared<runtime::tls_watch>(
      runtime::pem_set{m->files.cert, m->files.key, m->files.ca},
      runtime::pem_set{m->cert, m->key, m->ca}, m->files.reload, nullptr);
  ctx.stop_hooks.push_back(
    [server, grace_ms, watch, certs, tracer = rcfg.tracer] {
      if (certs)
        certs->stop();
      if (watch)
        watch->stop();
      server->stop(std::chrono::milliseconds{grace_ms->load()});
      tracer->stop(); // the last spans go out (within its export timeout)
    });
}

// --event-plane nats: every batch the hub hands out is published too.
void start_kv_publisher(runtime::role_env& ctx, const sidecar_settings& s,
                        std::shared_ptr<event_hub> hub,
                        const std::string& worker_id,
                        std::shared_ptr<trace::tracer> tracer) {
  if (!s.nats_event_plane)
    return;
  std::weak_ptr<runtime::health_state> weak = ctx.health;
  auto nats = s.discovery.nats;
  nats.on_connection = [weak](bool up) {
    if (auto h = weak.lock())
      h->set_component("event_plane",
                       up ? "connected" : "disconnected: reconnecting");
  };
  auto plane = std::make_shared<cluster::nats_kv_plane>(std::move(nats));
  if (auto err = plane->open()) {
    ctx.control->request_exit(2, "--event-plane nats: " + describe(err));
    return;
  }
  ctx.health->set_component("event_plane",
                            plane->connected() ? "connected" : "connecting");
  auto publisher =
    std::make_shared<kv_publisher>(std::move(hub), plane, worker_id, tracer);
  ctx.stop_hooks.push_back([publisher, plane]() mutable {
    publisher.reset();
    plane.reset();
  });
}

// GET /debug/index: the index as JSON (tests compare it with the engine's),
// asked of the indexer without waiting.
void add_index_route(runtime::role_env& ctx,
                     runtime::slot_ptr<indexer::indexer_actor> indexer) {
  auto* sys = &ctx.sys;
  ctx.status.add_async_route(
    "/debug/index",
    [sys, indexer](const runtime::http_request&,
                   std::function<void(runtime::http_response)> respond) {
      runtime::http_response r;
      r.content_type = "application/json";
      auto idx = indexer->get();
      if (!idx) {
        r.status = 503;
        r.body = "{\"error\":\"the indexer is restarting\"}\n";
        respond(std::move(r));
        return;
      }
      runtime::ask_async<std::string>(
        *sys, idx, std::chrono::seconds{1},
        [respond, r](const std::string& json) {
          auto ok = r;
          ok.body = json + "\n";
          respond(std::move(ok));
        },
        [respond, r](const caf::error&) {
          auto late = r;
          late.status = 504;
          late.body = "{\"error\":\"the indexer did not answer\"}\n";
          respond(std::move(late));
        },
        indexer::snapshot_atom::value);
    });
}

} // namespace

// What the service started, held by the environment's hooks too.
struct sidecar_parts {
  sidecar_slots slots;
  std::vector<runtime::child_spec> children;
  std::shared_ptr<runtime::health_state> health;
  // How long the relay's streams may take to end when it stops.
  std::shared_ptr<std::atomic<int64_t>> relay_grace_ms =
    std::make_shared<std::atomic<int64_t>>(1000);
  std::atomic<bool> stop_called{false};
  void stop(std::chrono::milliseconds grace) {
    if (stop_called.exchange(true))
      return;
    relay_grace_ms->store(grace.count());
    if (auto l = slots.lifecycle->get())
      caf::anon_send(l, stopping_atom::value);
  }
};

namespace {

std::vector<runtime::child_spec> start_sidecar(runtime::role_env& ctx,
                                               const sidecar_settings& s,
                                               sidecar_parts& parts) {
  auto disc = discovery_from(s, ctx.health);
  if (auto err = disc->open()) {
    ctx.control->request_exit(1, describe(err));
    return {};
  }
  const auto& slots = parts.slots;
  auto hub = std::make_shared<event_hub>();
  indexer::indexer_config icfg;
  icfg.data_dir = s.data_dir;
  icfg.tier_cap = s.kv_tier_cap;
  icfg.on_store = [lifecycle = slots.lifecycle](bool ok, std::string why) {
    if (auto l = lifecycle->get())
      caf::anon_send(l, store_atom::value, ok, std::move(why));
  };
  icfg.listener = hub;
  auto cfg = lifecycle_config_from(ctx, s, slots);
  start_relay(ctx, s, cfg, hub, slots, parts.relay_grace_ms);
  start_engine_metrics(ctx, s);
  start_kv_publisher(ctx, s, hub, cfg.worker_id, cfg.tracer);
  add_index_route(ctx, slots.indexer);
  auto ttl = s.discovery.ttl;
  return {
    runtime::supervised("indexer", slots.indexer,
                        [icfg](caf::actor_system& sys) {
                          return indexer::spawn_indexer(sys, icfg);
                        }),
    runtime::supervised(
      "registrar", slots.registrar,
      [disc, ttl, id = cfg.worker_id](caf::actor_system& sys) {
        return registrar::spawn_registrar(sys, disc, ttl, id);
      }),
    runtime::supervised(
      "lifecycle", slots.lifecycle,
      [cfg](caf::actor_system& sys) { return spawn_lifecycle(sys, cfg); }),
  };
}

} // namespace

service::service(runtime::role_env& env, const sidecar_settings& s)
  : parts_(std::make_shared<sidecar_parts>()) {
  parts_->health = env.health;
  parts_->children = start_sidecar(env, s, *parts_);
  // SIGTERM: the lifecycle withdraws the record before anything stops; the
  // relay's streams get --relay-grace once the actors have stopped.
  env.pre_stop_hooks.push_back(
    [parts = parts_, grace = s.relay_grace] { parts->stop(grace); });
}

service::~service() = default;

std::vector<runtime::child_spec> service::children() const {
  return parts_->children;
}

bool service::ready() const {
  return parts_->health->ready();
}

void service::stop(std::chrono::milliseconds grace) {
  parts_->stop(grace);
}

} // namespace outrider::sidecar
