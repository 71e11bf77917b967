// The outrider binary: parses options and runs one role.
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <unistd.h>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "actors/indexer/indexer_actor.hpp"
#include "actors/registrar/registrar.hpp"
#include "actors/router/demo_workload.hpp"
#include "actors/router/disagg_policy.hpp"
#include "actors/router/dispatcher.hpp"
#include "actors/router/grpc_frontend.hpp"
#include "actors/router/http_frontend.hpp"
#include "actors/router/kv_router.hpp"
#include "actors/router/worker_watcher.hpp"
#include "actors/sidecar/event_hub.hpp"
#include "actors/sidecar/lifecycle.hpp"
#include "actors/sidecar/relay.hpp"
#include "cluster/discovery.hpp"
#include "cluster/local_cluster.hpp"
#include "runtime/app.hpp"
#include "runtime/logging.hpp"

namespace {

using namespace outrider;

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

std::vector<runtime::child_spec> sidecar_children(runtime::role_context& ctx) {
  const auto& o = ctx.opts;
  std::shared_ptr<cluster::discovery> disc;
  if (o.get_string("discovery") == "memory")
    disc = std::make_shared<cluster::memory_discovery>();
  else
    disc = std::make_shared<cluster::file_discovery>(
      o.get_string("discovery-dir"), o.get_duration("discovery-ttl"));
  auto zmq_ctx = std::make_shared<zmq::context_t>(1);
  auto hub = std::make_shared<sidecar::event_hub>();
  indexer::indexer_config icfg;
  icfg.data_dir = o.get_string("data-dir");
  icfg.listener = hub;
  sidecar::lifecycle_config cfg;
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
  auto control = ctx.control;
  cfg.request_exit = [control](int code, const std::string& why) {
    control->request_exit(code, why);
  };
  auto ttl = o.get_duration("discovery-ttl");
  auto* sys = &ctx.sys;
  sidecar::relay_config rcfg;
  rcfg.listen = cfg.relay_endpoint;
  rcfg.engine_endpoint = cfg.engine_endpoint;
  rcfg.engine_protocol = cfg.engine_protocol;
  rcfg.hub = hub;
  rcfg.health = ctx.health;
  rcfg.sys = sys;
  auto relay = std::make_shared<sidecar::relay>(rcfg);
  if (auto err = relay->start(); !err.empty())
    ctx.control->request_exit(1, err);
  ctx.stop_hooks.push_back([relay] { relay->stop(); });
  ctx.status.add_route("/debug/index", [sys](const runtime::http_request&) {
    runtime::http_response r;
    r.content_type = "application/json";
    auto idx = indexer::current_indexer(*sys);
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
    {"indexer",
     [icfg](caf::actor_system& sys) {
       return caf::actor_cast<caf::actor>(indexer::spawn_indexer(sys, icfg));
     }},
    {"registrar",
     [disc, ttl, id = cfg.worker_id](caf::actor_system& sys) {
       return caf::actor_cast<caf::actor>(
         registrar::spawn_registrar(sys, disc, ttl, id));
     }},
    {"lifecycle",
     [cfg](caf::actor_system& sys) {
       return caf::actor_cast<caf::actor>(sidecar::spawn_lifecycle(sys, cfg));
     }},
  };
}

// The router's parts outside the actors, stopped in order at shutdown.
struct router_parts {
  std::shared_ptr<cluster::discovery> disc;
  std::unique_ptr<router::worker_watcher> watcher;
  std::unique_ptr<router::dispatcher> dispatch;
  std::unique_ptr<router::http_frontend> frontend;
  std::unique_ptr<router::grpc_frontend> grpc;
  router::kv_router_actor brain;
  std::mutex models_mtx;
  std::vector<std::string> models;
  std::chrono::steady_clock::time_point models_at{};
};

std::shared_ptr<router_parts> start_router(runtime::role_context& ctx,
                                           const std::string& discovery_dir) {
  const auto& o = ctx.opts;
  auto parts = std::make_shared<router_parts>();
  if (o.get_string("discovery") == "memory")
    parts->disc = std::make_shared<cluster::memory_discovery>();
  else
    parts->disc = std::make_shared<cluster::file_discovery>(
      discovery_dir, o.get_duration("discovery-ttl"));
  router::router_config rc;
  rc.mode = o.get_string("router-mode");
  rc.selector.overlap_score_weight = o.get_number("kv-overlap-score-weight");
  rc.selector.temperature = o.get_number("router-temperature");
  rc.model = o.get_string("served-model");
  if (o.get_number("router-queue-threshold") > 0)
    rc.queue_threshold = o.get_number("router-queue-threshold");
  parts->brain = router::spawn_kv_router(ctx.sys, rc);
  parts->watcher =
    std::make_unique<router::worker_watcher>(parts->disc, parts->brain);
  std::optional<router::disagg_config> disagg;
  if (o.get_bool("router-conditional-disagg"))
    disagg = router::parse_disagg_config(
      o.get_string("router-conditional-disagg-config"), nullptr);
  std::optional<double> queue_threshold;
  if (o.get_number("router-queue-threshold") > 0)
    queue_threshold = o.get_number("router-queue-threshold");
  parts->dispatch = std::make_unique<router::dispatcher>(
    ctx.sys, parts->brain, static_cast<int>(o.get_int("migration-limit")),
    disagg, queue_threshold, o.get_string("dispatch") == "direct");
  auto served = rc.model;
  std::weak_ptr<router_parts> weak = parts;
  // The models to list and accept: the configured one, else the workers'
  // (read from discovery at most once a second).
  auto models = [weak, served]() -> std::vector<std::string> {
    if (!served.empty())
      return {served};
    auto p = weak.lock();
    if (!p)
      return {};
    std::lock_guard<std::mutex> guard{p->models_mtx};
    auto now = std::chrono::steady_clock::now();
    if (now - p->models_at > std::chrono::seconds{1}) {
      p->models_at = now;
      std::set<std::string> names;
      for (const auto& r : p->disc->list())
        names.insert(r.model);
      p->models.assign(names.begin(), names.end());
    }
    return p->models;
  };
  parts->frontend =
    std::make_unique<router::http_frontend>(*parts->dispatch, models);
  auto err = parts->frontend->start(
    o.get_string("http-host"), static_cast<uint16_t>(o.get_int("http-port")));
  if (!err.empty())
    ctx.control->request_exit(1, "frontend: " + err);
  else
    spdlog::info("router: OpenAI-compatible frontend on {}:{} ({} mode)",
                 o.get_string("http-host"), parts->frontend->port(), rc.mode);
  if (auto port = o.get_int("grpc-port"); port > 0) {
    parts->grpc =
      std::make_unique<router::grpc_frontend>(*parts->dispatch, models);
    if (auto gerr = parts->grpc->start(o.get_string("http-host"),
                                       static_cast<uint16_t>(port));
        !gerr.empty()) {
      err = gerr;
      ctx.control->request_exit(1, "gRPC frontend: " + gerr);
    } else {
      spdlog::info("router: OpenEngine Inference on {}:{}",
                   o.get_string("http-host"), port);
    }
  }
  // Ready once every frontend listens.
  if (err.empty()) {
    ctx.health->set_component("frontend", "serving");
    ctx.health->set_ready(true);
  }
  ctx.pre_stop_hooks.push_back([parts] {
    parts->frontend->stop();
    if (parts->grpc)
      parts->grpc->stop();
    parts->watcher.reset();
    caf::anon_send_exit(parts->brain, caf::exit_reason::user_shutdown);
  });
  return parts;
}

std::vector<runtime::child_spec> router_children(runtime::role_context& ctx) {
  start_router(ctx, ctx.opts.get_string("discovery-dir"));
  return {};
}

// `--role all`: simulated engines and their sidecars as child processes,
// the router in this process, and optionally a demo workload.
std::vector<runtime::child_spec> all_children(runtime::role_context& ctx) {
  const auto& o = ctx.opts;
  namespace fs = std::filesystem;
  cluster::local_cluster_config lc;
  lc.engines = static_cast<int>(o.get_int("sim-engines"));
  lc.outrider_binary = cluster::self_path();
  auto here = fs::path(lc.outrider_binary).parent_path();
  lc.sim_binary = o.get_string("sim-binary");
  if (lc.sim_binary.empty())
    lc.sim_binary = fs::exists(here / "sim/outrider-sim")
                      ? (here / "sim/outrider-sim").string()
                      : (here / "outrider-sim").string();
  lc.data_dir = fs::absolute(o.get_string("data-dir")).lexically_normal();
  if (!lc.data_dir.empty() && lc.data_dir.back() == '/')
    lc.data_dir.pop_back();
  lc.discovery_dir =
    o.source("discovery-dir") == runtime::option_source::default_value
      ? lc.data_dir + "/discovery"
      : o.get_string("discovery-dir");
  lc.log_dir = lc.data_dir + "/logs";
  char speed[32];
  std::snprintf(speed, sizeof(speed), "%g", o.get_number("sim-speedup"));
  lc.sim_args = {"--speedup",
                 speed,
                 "--block-size",
                 "16",
                 "--num-gpu-blocks-override",
                 std::to_string(o.get_int("sim-kv-blocks"))};
  auto local = std::make_shared<cluster::local_cluster>(lc);
  if (auto err = local->start(); !err.empty()) {
    ctx.control->request_exit(1, err);
    return {};
  }
  spdlog::info("all: {} simulated engine(s) with sidecars; logs in {}",
               lc.engines, lc.log_dir);
  auto parts = start_router(ctx, lc.discovery_dir);
  auto demo = std::make_shared<std::thread>();
  auto requests = static_cast<int>(o.get_int("demo-requests"));
  if (requests > 0) {
    auto control = ctx.control;
    *demo = std::thread([parts, control, requests, engines = lc.engines,
                         mode = o.get_string("router-mode")] {
      // Wait (bounded) until every worker is registered.
      for (int i = 0;
           i < 600 && parts->disc->list().size() < static_cast<size_t>(engines);
           ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
      router::workload_config w;
      w.requests = requests;
      auto summary = router::run_demo_workload(*parts->dispatch, w);
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
  return {};
}

} // namespace

int run_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = runtime::parse_options(args, runtime::process_environment());
  switch (parsed.what) {
  case runtime::parse_outcome::help:
    std::fputs(parsed.message.c_str(), stdout);
    return 0;
  case runtime::parse_outcome::version:
    std::puts("outrider 0.1.0");
    return 0;
  case runtime::parse_outcome::error:
    std::fprintf(stderr, "outrider: error: %s\n", parsed.message.c_str());
    return 2;
  case runtime::parse_outcome::ok:
    break;
  }
  const auto& opts = parsed.opts;
  const auto& role = opts.get_string("role");
  if (role != "sidecar" && opts.get_bool("router-conditional-disagg")) {
    // Bad combinations are refused before anything starts.
    std::string why;
    if (opts.get_string("router-mode") != "kv")
      why = "--router-conditional-disagg needs --router-mode kv (the "
            "effective ISL comes from the KV index)";
    else
      router::parse_disagg_config(
        opts.get_string("router-conditional-disagg-config"), &why);
    if (!why.empty()) {
      std::fprintf(stderr, "outrider: error: %s\n", why.c_str());
      return 2;
    }
  }
  runtime::setup_logging(opts.get_string("log-level"),
                         opts.get_string("log-format"));
  return runtime::run_process(opts, role == "router" ? router_children
                                    : role == "all"  ? all_children
                                                     : sidecar_children);
}

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "outrider: fatal: %s\n", e.what());
    return 1;
  }
}
