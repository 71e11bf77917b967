#include "actors/sidecar/sidecar_role.hpp"

#include <unistd.h>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "actors/indexer/indexer_actor.hpp"
#include "actors/registrar/registrar.hpp"
#include "actors/sidecar/event_hub.hpp"
#include "actors/sidecar/kv_publisher.hpp"
#include "actors/sidecar/lifecycle.hpp"
#include "actors/sidecar/relay.hpp"
#include "cluster/discovery.hpp"
#include "cluster/discovery_from.hpp"
#include "cluster/tls.hpp"
#include "runtime/ask.hpp"

namespace outrider::sidecar {

namespace opt = runtime::opt;

namespace {

std::string default_worker_id(const runtime::options& opts) {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  const auto& ep = opts.get(opt::engine_endpoint);
  auto port = ep.substr(ep.rfind(':') + 1);
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

// The sidecar keeps serving its engine while NATS is away (and says so in
// /health); the registrar puts the record again once it is back.
std::shared_ptr<cluster::discovery>
discovery_from(const runtime::options& o,
               const std::shared_ptr<runtime::health_state>& health) {
  std::weak_ptr<runtime::health_state> weak = health;
  return cluster::discovery_from(o, o.get(opt::discovery_dir), [weak](bool up) {
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

lifecycle_config lifecycle_config_from(runtime::role_context& ctx,
                                       const sidecar_slots& slots) {
  const auto& o = ctx.opts;
  lifecycle_config cfg;
  cfg.engine_endpoint = o.get(opt::engine_endpoint);
  cfg.engine_protocol = o.get(opt::engine_protocol);
  cfg.startup_deadline = o.get(opt::engine_startup_deadline);
  cfg.worker_id = o.get(opt::worker_id).empty() ? default_worker_id(o)
                                                : o.get(opt::worker_id);
  cfg.relay_endpoint =
    advertised_host(o) + ":" + std::to_string(o.get(opt::relay_port));
  cfg.shutdown_engine_on_gap = o.get(opt::on_kv_gap) == "shutdown-engine";
  cfg.kv_max_message_bytes = o.get(opt::kv_max_message_bytes);
  cfg.kv_max_batch_events =
    static_cast<size_t>(o.get(opt::kv_max_batch_events));
  cfg.health = ctx.health;
  cfg.zmq = std::make_shared<zmq::context_t>(1);
  cfg.indexer = slots.indexer;
  cfg.registrar = slots.registrar;
  auto control = ctx.control;
  cfg.request_exit = [control](int code, const std::string& why) {
    control->request_exit(code, why);
  };
  return cfg;
}

// The relay is no actor: it starts now and stops after the actors.
// With --relay-port 0 the relay takes a free port, and that one is advertised.
void start_relay(runtime::role_context& ctx, lifecycle_config& cfg,
                 std::shared_ptr<event_hub> hub, const sidecar_slots& slots) {
  relay_config rcfg;
  rcfg.listen = ctx.opts.get(opt::relay_host) + ":" +
                std::to_string(ctx.opts.get(opt::relay_port));
  rcfg.engine_endpoint = cfg.engine_endpoint;
  rcfg.engine_protocol = cfg.engine_protocol;
  rcfg.hub = std::move(hub);
  rcfg.health = ctx.health;
  rcfg.sys = &ctx.sys;
  rcfg.indexer = slots.indexer;
  rcfg.max_streams = static_cast<size_t>(ctx.opts.get(opt::relay_max_streams));
  auto tls =
    cluster::tls_from({ctx.opts.get(opt::tls_cert), ctx.opts.get(opt::tls_key),
                       ctx.opts.get(opt::tls_ca)});
  if (!tls) {
    ctx.control->request_exit(2, describe(tls.error()));
    return;
  }
  rcfg.credentials = cluster::server_credentials(*tls);
  auto server = std::make_shared<relay>(rcfg);
  if (auto err = server->start())
    ctx.control->request_exit(1, describe(err));
  else if (ctx.opts.get(opt::relay_port) == 0)
    cfg.relay_endpoint =
      advertised_host(ctx.opts) + ":" + std::to_string(server->port());
  ctx.stop_hooks.push_back([server] { server->stop(); });
}

// --event-plane nats: every batch the hub hands out is published too.
void start_kv_publisher(runtime::role_context& ctx,
                        std::shared_ptr<event_hub> hub,
                        const std::string& worker_id) {
  if (ctx.opts.get(opt::event_plane) != "nats")
    return;
  std::weak_ptr<runtime::health_state> weak = ctx.health;
  auto plane = std::make_shared<cluster::nats_kv_plane>(
    cluster::nats_config_from(ctx.opts, [weak](bool up) {
      if (auto h = weak.lock())
        h->set_component("event_plane",
                         up ? "connected" : "disconnected: reconnecting");
    }));
  if (auto err = plane->open()) {
    ctx.control->request_exit(2, "--event-plane nats: " + describe(err));
    return;
  }
  ctx.health->set_component("event_plane",
                            plane->connected() ? "connected" : "connecting");
  auto publisher =
    std::make_shared<kv_publisher>(std::move(hub), plane, worker_id);
  ctx.stop_hooks.push_back([publisher, plane]() mutable {
    publisher.reset();
    plane.reset();
  });
}

// GET /debug/index: the index as JSON (tests compare it with the engine's),
// asked of the indexer without waiting.
void add_index_route(runtime::role_context& ctx,
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

std::vector<runtime::child_spec> sidecar_children(runtime::role_context& ctx) {
  const auto& o = ctx.opts;
  auto disc = discovery_from(o, ctx.health);
  if (auto err = disc->open()) {
    ctx.control->request_exit(1, describe(err));
    return {};
  }
  sidecar_slots slots;
  auto hub = std::make_shared<event_hub>();
  indexer::indexer_config icfg;
  icfg.data_dir = o.get(opt::data_dir);
  icfg.listener = hub;
  auto cfg = lifecycle_config_from(ctx, slots);
  start_relay(ctx, cfg, hub, slots);
  start_kv_publisher(ctx, hub, cfg.worker_id);
  // SIGTERM: the lifecycle withdraws the record before anything stops.
  ctx.pre_stop_hooks.push_back([lifecycle = slots.lifecycle] {
    if (auto l = lifecycle->get())
      caf::anon_send(l, stopping_atom::value);
  });
  add_index_route(ctx, slots.indexer);
  auto ttl = o.get(opt::discovery_ttl);
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

} // namespace outrider::sidecar
