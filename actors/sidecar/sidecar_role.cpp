#include "actors/sidecar/sidecar_role.hpp"

#include <unistd.h>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "actors/indexer/indexer_actor.hpp"
#include "actors/registrar/registrar.hpp"
#include "actors/sidecar/event_hub.hpp"
#include "actors/sidecar/lifecycle.hpp"
#include "actors/sidecar/relay.hpp"
#include "cluster/discovery.hpp"

namespace outrider::sidecar {

namespace {

std::string default_worker_id(const runtime::options& opts) {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  const auto& ep = opts.get_string("engine-endpoint");
  auto port = ep.substr(ep.rfind(':') + 1);
  std::string id = std::string{host} + "-" + port;
  for (auto& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
        c != '.')
      c = '_';
  return id;
}

} // namespace

std::vector<runtime::child_spec> sidecar_children(runtime::role_context& ctx) {
  const auto& o = ctx.opts;
  std::shared_ptr<cluster::discovery> disc;
  if (o.get_string("discovery") == "memory")
    disc = std::make_shared<cluster::memory_discovery>();
  else
    disc = std::make_shared<cluster::file_discovery>(
      o.get_string("discovery-dir"), o.get_duration("discovery-ttl"));
  auto zmq_ctx = std::make_shared<zmq::context_t>(1);
  // Handles to the current incarnation of each child, filled by the
  // supervisor on every (re)start.
  auto indexer =
    std::make_shared<runtime::actor_slot<indexer::indexer_actor>>();
  auto registrar =
    std::make_shared<runtime::actor_slot<registrar::registrar_actor>>();
  auto lifecycle = std::make_shared<runtime::actor_slot<lifecycle_actor>>();
  auto hub = std::make_shared<event_hub>();
  indexer::indexer_config icfg;
  icfg.data_dir = o.get_string("data-dir");
  icfg.listener = hub;
  lifecycle_config cfg;
  cfg.engine_endpoint = o.get_string("engine-endpoint");
  cfg.engine_protocol = o.get_string("engine-protocol");
  cfg.startup_deadline = o.get_duration("engine-startup-deadline");
  cfg.worker_id = o.get_string("worker-id").empty() ? default_worker_id(o)
                                                    : o.get_string("worker-id");
  cfg.relay_endpoint =
    o.get_string("relay-host") + ":" + std::to_string(o.get_int("relay-port"));
  cfg.shutdown_engine_on_gap = o.get_string("on-kv-gap") == "shutdown-engine";
  cfg.health = ctx.health;
  cfg.zmq = zmq_ctx;
  cfg.indexer = indexer;
  cfg.registrar = registrar;
  auto control = ctx.control;
  cfg.request_exit = [control](int code, const std::string& why) {
    control->request_exit(code, why);
  };
  auto ttl = o.get_duration("discovery-ttl");
  auto* sys = &ctx.sys;
  relay_config rcfg;
  rcfg.listen = cfg.relay_endpoint;
  rcfg.engine_endpoint = cfg.engine_endpoint;
  rcfg.engine_protocol = cfg.engine_protocol;
  rcfg.hub = hub;
  rcfg.health = ctx.health;
  rcfg.sys = sys;
  rcfg.indexer = indexer;
  auto server = std::make_shared<relay>(rcfg);
  if (auto err = server->start())
    ctx.control->request_exit(1, describe(err));
  ctx.stop_hooks.push_back([server] { server->stop(); });
  // SIGTERM: the lifecycle withdraws the record before anything stops.
  ctx.pre_stop_hooks.push_back([lifecycle] {
    if (auto l = lifecycle->get())
      caf::anon_send(l, stopping_atom::value);
  });
  ctx.status.add_route(
    "/debug/index", [sys, indexer](const runtime::http_request&) {
      runtime::http_response r;
      r.content_type = "application/json";
      auto idx = indexer->get();
      if (!idx) {
        r.status = 503;
        r.body = "{\"error\":\"the indexer is restarting\"}\n";
        return r;
      }
      caf::scoped_actor self{*sys};
      r.status = 504;
      r.body = "{\"error\":\"the indexer did not answer\"}\n";
      self->request(idx, std::chrono::seconds{1}, indexer::snapshot_atom::value)
        .receive(
          [&](const std::string& json) {
            r.status = 200;
            r.body = json + "\n";
          },
          [&](caf::error&) {});
      return r;
    });
  return {
    runtime::supervised("indexer", indexer,
                        [icfg](caf::actor_system& sys) {
                          return indexer::spawn_indexer(sys, icfg);
                        }),
    runtime::supervised(
      "registrar", registrar,
      [disc, ttl, id = cfg.worker_id](caf::actor_system& sys) {
        return registrar::spawn_registrar(sys, disc, ttl, id);
      }),
    runtime::supervised(
      "lifecycle", lifecycle,
      [cfg](caf::actor_system& sys) { return spawn_lifecycle(sys, cfg); }),
  };
}

// The router's parts outside the actors, stopped in order at shutdown.
} // namespace outrider::sidecar
