#include "actors/router/router_role.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "actors/router/demo_workload.hpp"
#include "actors/router/disagg_policy.hpp"
#include "actors/router/dispatcher.hpp"
#include "actors/router/grpc_frontend.hpp"
#include "actors/router/http_frontend.hpp"
#include "actors/router/kv_router.hpp"
#include "actors/router/model_catalog.hpp"
#include "actors/router/router_fleet.hpp"
#include "actors/router/status_page.hpp"
#include "actors/router/text_setup.hpp"
#include "actors/router/worker_watcher.hpp"
#include "cluster/discovery.hpp"
#include "cluster/discovery_from.hpp"
#include "cluster/local_cluster.hpp"
#include "cluster/nats_discovery.hpp"
#include "cluster/nats_kv_plane.hpp"
#include "cluster/tls.hpp"
#include "runtime/metrics.hpp"

namespace outrider::router {

namespace opt = runtime::opt;

std::string check_router_options(const runtime::options& opts) {
  std::string why;
  if (!opts.get(opt::router_conditional_disagg))
    return why;
  if (opts.get(opt::router_mode) != "kv")
    return "--router-conditional-disagg needs --router-mode kv (the "
           "effective ISL comes from the KV index)";
  parse_disagg_config(opts.get(opt::router_conditional_disagg_config), &why);
  return why;
}

namespace {

struct router_parts {
  std::shared_ptr<cluster::discovery> disc;
  std::unique_ptr<worker_watcher> watcher;
  std::unique_ptr<dispatcher> dispatch;
  std::unique_ptr<http_frontend> frontend;
  std::unique_ptr<grpc_frontend> grpc;
  std::optional<cluster::tls_material> tls;      // --tls-*
  std::shared_ptr<cluster::nats_kv_plane> plane; // --event-plane nats
  booking_share share;                           // --share-bookings
  runtime::slot_ptr<kv_router_actor> brain =
    std::make_shared<runtime::actor_slot<kv_router_actor>>();
  router_config config;
  std::shared_ptr<model_catalog> catalog; // what /v1/models lists
  std::atomic<bool> stopping{false};
  std::thread readiness; // --role all: waits for its own workers
};

// --role all runs its simulated engines with priority scheduling, so
// there the share has a default of its own.
double priority_overlap(const runtime::options& o) {
  if (o.get(opt::role) == "all" && o.source(opt::kv_priority_overlap) ==
                                     runtime::option_source::default_value)
    return 0.5;
  return o.get(opt::kv_priority_overlap);
}

router_config router_config_from(const runtime::options& o) {
  router_config rc;
  rc.mode =
    engine::router_mode_of(o.get(opt::router_mode))
      .value_or(engine::router_mode::kv); // the option checks its values
  rc.selector.overlap_score_weight = o.get(opt::kv_overlap_score_weight);
  rc.selector.decode_weight = o.get(opt::kv_decode_weight);
  rc.selector.queue_weight = o.get(opt::kv_queue_weight);
  rc.selector.evict_weight = o.get(opt::kv_evict_weight);
  rc.selector.temperature = o.get(opt::router_temperature);
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
  return rc;
}

std::unique_ptr<dispatcher> dispatcher_from(runtime::role_context& ctx,
                                            const router_parts& parts) {
  const auto& o = ctx.opts;
  std::optional<disagg_config> disagg;
  if (o.get(opt::router_conditional_disagg))
    disagg = parse_disagg_config(o.get(opt::router_conditional_disagg_config),
                                 nullptr);
  auto d = std::make_unique<dispatcher>(
    ctx.sys, parts.brain, static_cast<int>(o.get(opt::migration_limit)), disagg,
    parts.config.queue_threshold, o.get(opt::dispatch) == "direct");
  d->set_request_timeout(o.get(opt::request_timeout));
  return d;
}

frontend_config frontend_config_from(const runtime::options& o) {
  frontend_config f;
  auto size = [&](runtime::option_key<int64_t> k) {
    return static_cast<size_t>(o.get(k));
  };
  f.http.io_threads = size(opt::http_io_threads);
  f.http.max_connections = size(opt::http_max_connections);
  f.http.header_bytes = size(opt::http_max_header_bytes);
  f.http.max_headers = size(opt::http_max_headers);
  f.http.body_bytes = size(opt::http_max_body_bytes);
  f.http.read_timeout = o.get(opt::http_read_timeout);
  f.http.idle_timeout = o.get(opt::http_idle_timeout);
  f.http.send_timeout = o.get(opt::http_send_timeout);
  f.api.json_depth = size(opt::http_max_json_depth);
  f.api.max_prompt_tokens = size(opt::max_prompt_tokens);
  f.max_in_flight = size(opt::http_max_in_flight);
  return f;
}

// Both frontends; true when every one listens.
bool start_frontends(runtime::role_context& ctx, router_parts& parts) {
  const auto& o = ctx.opts;
  const auto& host = o.get(opt::http_host);
  auto fc = frontend_config_from(o);
  parts.catalog =
    std::make_shared<model_catalog>(parts.disc, parts.config.model);
  std::weak_ptr<model_catalog> weak = parts.catalog;
  auto models = [weak]() -> std::vector<std::string> {
    auto c = weak.lock();
    return c ? c->models() : std::vector<std::string>{};
  };
  fc.is_adapter = [weak](const std::string& name) {
    auto c = weak.lock();
    return c && c->is_adapter(name);
  };
  if (o.get(opt::http_tls)) {
    if (!parts.tls) {
      ctx.control->request_exit(2, "--http-tls needs --tls-cert and --tls-key");
      return false;
    }
    fc.tls =
      frontend_config::tls_pem{parts.tls->cert, parts.tls->key, parts.tls->ca};
  }
  if (!load_text(ctx, fc))
    return false;
  parts.frontend =
    std::make_unique<http_frontend>(*parts.dispatch, models, std::move(fc));
  if (auto err = parts.frontend->start(
        host, static_cast<uint16_t>(o.get(opt::http_port)))) {
    ctx.control->request_exit(1, "frontend: " + describe(err));
    return false;
  }
  spdlog::info("router: OpenAI-compatible frontend on {}:{} ({} mode{})", host,
               parts.frontend->port(), engine::to_string(parts.config.mode),
               o.get(opt::http_tls) ? ", TLS" : "");
  auto port = o.get(opt::grpc_port);
  if (port <= 0)
    return true;
  parts.grpc = std::make_unique<grpc_frontend>(
    *parts.dispatch, models, static_cast<size_t>(o.get(opt::grpc_max_streams)));
  if (auto gerr = parts.grpc->start(host, static_cast<uint16_t>(port),
                                    cluster::server_credentials(parts.tls));
      !gerr.empty()) {
    ctx.control->request_exit(1, "gRPC frontend: " + gerr);
    return false;
  }
  spdlog::info("router: OpenEngine Inference on {}:{}{}", host, port,
               parts.tls ? " (TLS)" : "");
  return true;
}

// Ready when the frontends listen; with `workers` > 0 (--role all, whose
// engines are its own) only once the router can place on that many.
void declare_ready(runtime::role_context& ctx, router_parts& parts,
                   size_t workers) {
  ctx.health->set_component("frontend", "serving");
  if (workers == 0)
    return ctx.health->set_ready(true);
  auto health = ctx.health;
  auto& placeable = runtime::global_metrics().get_gauge(
    "outrider_router_workers", "Workers the router can place requests on");
  health->set_component("workers", "waiting for " + std::to_string(workers));
  parts.readiness = std::thread([&parts, health, &placeable, workers] {
    while (!parts.stopping && placeable.value() < static_cast<double>(workers))
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    if (parts.stopping)
      return;
    health->set_component("workers", std::to_string(workers) + " registered");
    health->set_ready(true);
  });
}

std::shared_ptr<router_parts> start_router(runtime::role_context& ctx,
                                           const std::string& discovery_dir,
                                           size_t ready_workers = 0) {
  const auto& o = ctx.opts;
  auto parts = std::make_shared<router_parts>();
  // With NATS, a router that loses its connection keeps the last known
  // worker set and says so in /health.
  std::weak_ptr<runtime::health_state> health = ctx.health;
  parts->disc = cluster::discovery_from(o, discovery_dir, [health](bool up) {
    if (auto h = health.lock())
      h->set_component("discovery",
                       up ? "connected"
                          : "disconnected: keeping the last known workers");
  });
  if (auto err = parts->disc->open())
    ctx.control->request_exit(1, describe(err));
  else if (auto* n = dynamic_cast<cluster::nats_discovery*>(parts->disc.get()))
    ctx.health->set_component("discovery",
                              n->connected() ? "connected" : "connecting");
  parts->config = router_config_from(o);
  parts->share = booking_share_from(ctx, parts->brain);
  add_index_route(ctx, parts->brain);
  // Bad TLS settings: exit 2, and nothing listens meanwhile (never in
  // plaintext when TLS was asked for).
  auto tls = cluster::tls_from(
    {o.get(opt::tls_cert), o.get(opt::tls_key), o.get(opt::tls_ca)});
  if (!tls)
    ctx.control->request_exit(2, describe(tls.error()));
  else
    parts->tls = *tls;
  auto relay_creds = cluster::channel_credentials(parts->tls);
  parts->plane = event_plane_from(ctx);
  const auto& server_name = o.get(opt::tls_server_name);
  parts->watcher = std::make_unique<worker_watcher>(
    parts->disc, parts->brain, relay_creds, parts->plane, server_name);
  parts->dispatch = dispatcher_from(ctx, *parts);
  parts->dispatch->set_relay_credentials(relay_creds, server_name);
  add_status_page(
    ctx, parts->brain, [weak = std::weak_ptr<router_parts>(parts)] {
      auto p = weak.lock();
      if (!p || !p->dispatch)
        return nlohmann::json::object();
      return nlohmann::json{{"last_minute", p->dispatch->recent().summary()},
                            {"in_flight", p->dispatch->in_flight()}};
    });
  if (tls && start_frontends(ctx, *parts))
    declare_ready(ctx, *parts, ready_workers);
  // Shutdown: stop admitting at once, let requests in flight finish for
  // most of --shutdown-timeout, then end the rest.
  auto grace = o.get(opt::shutdown_timeout) * 3 / 4;
  ctx.pre_stop_hooks.push_back([parts, grace] {
    parts->stopping = true;
    if (parts->readiness.joinable())
      parts->readiness.join();
    parts->dispatch->begin_shutdown();
    if (parts->frontend)
      parts->frontend->stop(grace);
    parts->dispatch->cancel_all(std::chrono::seconds{1});
    if (parts->grpc)
      parts->grpc->stop();
    parts->watcher.reset();
    parts->plane.reset();
  });
  return parts;
}

// The router actor under the supervisor; every incarnation is published in
// the slot the watcher and the dispatcher use.
runtime::child_spec router_child(const std::shared_ptr<router_parts>& parts) {
  return runtime::supervised(
    "kv_router", parts->brain,
    [cfg = parts->config, share = parts->share](caf::actor_system& sys) {
      return spawn_kv_router(sys, cfg, share);
    });
}

} // namespace

std::vector<runtime::child_spec> router_children(runtime::role_context& ctx) {
  auto parts = start_router(ctx, ctx.opts.get(opt::discovery_dir));
  return {router_child(parts)};
}

// `--role all`: simulated engines and their sidecars as child processes,
// the router in this process, and optionally a demo workload.
std::vector<runtime::child_spec> all_children(runtime::role_context& ctx) {
  const auto& o = ctx.opts;
  namespace fs = std::filesystem;
  cluster::local_cluster_config lc;
  lc.engines = static_cast<int>(o.get(opt::sim_engines));
  lc.outrider_binary = cluster::self_path();
  auto here = fs::path(lc.outrider_binary).parent_path();
  lc.sim_binary = o.get(opt::sim_binary);
  if (lc.sim_binary.empty())
    lc.sim_binary = fs::exists(here / "sim/outrider-sim")
                      ? (here / "sim/outrider-sim").string()
                      : (here / "outrider-sim").string();
  lc.data_dir = fs::absolute(o.get(opt::data_dir)).lexically_normal();
  if (!lc.data_dir.empty() && lc.data_dir.back() == '/')
    lc.data_dir.pop_back();
  lc.discovery_dir =
    o.source(opt::discovery_dir) == runtime::option_source::default_value
      ? lc.data_dir + "/discovery"
      : o.get(opt::discovery_dir);
  lc.log_dir = lc.data_dir + "/logs";
  char speed[32];
  std::snprintf(speed, sizeof(speed), "%g", o.get(opt::sim_speedup));
  lc.sim_args = {"--speedup",
                 speed,
                 "--block-size",
                 "16",
                 "--num-gpu-blocks-override",
                 std::to_string(o.get(opt::sim_kv_blocks)),
                 "--scheduling-policy",
                 "priority"};
  if (const auto& mods = o.get(opt::sim_lora_modules); !mods.empty())
    lc.sim_args.insert(lc.sim_args.end(), {"--lora-modules", mods});
  // With a tokenizer the simulated engines speak its vocabulary.
  if (const auto& dir = o.get(opt::tokenizer); !dir.empty()) {
    std::string why;
    if (auto t = process_tokenizer(dir, &why))
      lc.sim_args.insert(lc.sim_args.end(),
                         {"--vocab-size", std::to_string(t->vocab_size())});
  }
  auto& restarts = runtime::global_metrics().get_counter(
    "outrider_local_child_restarts_total",
    "--role all: engines and sidecars that exited and were started again");
  lc.on_exit = [&restarts](const std::string& name, int status,
                           std::chrono::milliseconds delay) {
    restarts.inc();
    if (WIFSIGNALED(status))
      spdlog::warn("all: {} killed by signal {}; starting it again in {} ms",
                   name, WTERMSIG(status), delay.count());
    else
      spdlog::warn("all: {} exited with status {}; starting it again in {} ms",
                   name, WEXITSTATUS(status), delay.count());
  };
  auto local = std::make_shared<cluster::local_cluster>(lc);
  if (auto err = local->start()) {
    ctx.control->request_exit(1, describe(err));
    return {};
  }
  spdlog::info("all: {} simulated engine(s) with sidecars; logs in {}",
               lc.engines, lc.log_dir);
  auto parts =
    start_router(ctx, lc.discovery_dir, static_cast<size_t>(lc.engines));
  auto demo = std::make_shared<std::thread>();
  auto requests = static_cast<int>(o.get(opt::demo_requests));
  if (requests > 0) {
    auto control = ctx.control;
    *demo = std::thread([parts, control, health = ctx.health, requests,
                         engines = lc.engines, mode = o.get(opt::router_mode)] {
      // Wait (bounded) until ready: every worker can be placed on.
      for (int i = 0; i < 600 && !health->ready(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
      workload_config w;
      w.requests = requests;
      w.label = mode;
      auto summary = run_demo_workload(*parts->dispatch, w);
      std::printf("== outrider demo: %d workers, %s routing\n%s", engines,
                  mode.c_str(), summary.c_str());
      std::fflush(stdout);
      control->request_exit(0, "demo finished");
    });
  }
  ctx.pre_stop_hooks.push_back([local, demo] {
    local->stop();
    if (demo->joinable())
      demo->join();
  });
  return {router_child(parts)};
}

} // namespace outrider::router
