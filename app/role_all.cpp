#include "app/role_all.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <sys/wait.h>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/router/dispatch/demo_workload.hpp"
#include "actors/router/frontend/text_setup.hpp"
#include "actors/router/router_service.hpp"
#include "cluster/local_cluster.hpp"
#include "runtime/metrics.hpp"
#include "runtime/option_keys.hpp"

namespace outrider::app {

namespace opt = runtime::opt;

namespace {

cluster::local_cluster_config local_cluster_from(const runtime::options& o) {
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
  // The sidecars' spans go where the router's go.
  if (const auto& otlp = o.get(opt::otlp_endpoint); !otlp.empty())
    lc.sidecar_args = {"--otlp-endpoint", otlp};
  // More flags for every simulated engine, split on spaces (an offload
  // tier for a benchmark, say); the simulator refuses what it does not know.
  {
    std::istringstream more{o.get(opt::sim_args)};
    for (std::string w; more >> w;)
      lc.sim_args.push_back(w);
  }
  // With a tokenizer the simulated engines speak its vocabulary.
  if (const auto& dir = o.get(opt::tokenizer); !dir.empty()) {
    std::string why;
    if (auto t = router::process_tokenizer(dir, &why))
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
  return lc;
}

} // namespace

std::vector<runtime::child_spec> all_children(runtime::role_env& env,
                                              const runtime::options& o,
                                              router::router_settings s) {
  auto lc = local_cluster_from(o);
  auto local = std::make_shared<cluster::local_cluster>(lc);
  if (auto err = local->start()) {
    env.control->request_exit(1, describe(err));
    return {};
  }
  spdlog::info("all: {} simulated engine(s) with sidecars; logs in {}",
               lc.engines, lc.log_dir);
  s.discovery.dir = lc.discovery_dir;
  s.ready_workers = static_cast<size_t>(lc.engines);
  auto svc = std::make_shared<router::service>(env, s);
  auto demo = std::make_shared<std::thread>();
  auto requests = static_cast<int>(o.get(opt::demo_requests));
  if (requests > 0) {
    auto control = env.control;
    *demo = std::thread([svc, control, requests, engines = lc.engines,
                         mode = engine::to_string(s.placement.mode)] {
      // Wait (bounded) until ready: every worker can be placed on.
      for (int i = 0; i < 600 && !svc->ready(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
      auto* d = svc->dispatch();
      if (!d)
        return;
      router::workload_config w;
      w.requests = requests;
      w.label = mode;
      auto summary = router::run_demo_workload(*d, w);
      std::printf("== outrider demo: %d workers, %s routing\n%s", engines, mode,
                  summary.c_str());
      std::fflush(stdout);
      control->request_exit(0, "demo finished");
    });
  }
  env.pre_stop_hooks.push_back([local, demo] {
    local->stop();
    if (demo->joinable())
      demo->join();
  });
  return svc->children();
}

} // namespace outrider::app
