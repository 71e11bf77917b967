// A program with its own caf::actor_system that embeds outrider's router
// through the installed public API (<outrider/...>, find_package(outrider)):
// a supervised router actor, a worker from memory discovery, direct
// dispatch to the engine, one request served.
//
//   embed_router ENGINE_HOST:PORT
#include <chrono>
#include <cstdio>
#include <memory>
#include <outrider/actors/router/brain/kv_router.hpp>
#include <outrider/actors/router/dispatch/dispatcher.hpp>
#include <outrider/actors/router/watch/worker_watcher.hpp>
#include <outrider/cluster/discovery.hpp>
#include <outrider/runtime/actor_slot.hpp>
#include <outrider/runtime/errors.hpp>
#include <outrider/runtime/supervisor.hpp>
#include <thread>

#include <caf/all.hpp>

using namespace outrider;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ENGINE_HOST:PORT\n", argv[0]);
    return 2;
  }
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system sys{cfg};

  // One worker: the engine itself (no sidecar), found in memory discovery.
  auto disc = std::make_shared<cluster::memory_discovery>();
  cluster::worker_record worker;
  worker.worker_id = "engine-0";
  worker.instance_id = "embedded";
  worker.model = "sim-model";
  worker.engine_endpoint = argv[1];
  worker.relay_endpoint = argv[1];
  worker.protocol = "openengine";
  worker.kv_block_size = 16;
  if (auto err = disc->put(worker)) {
    std::fprintf(stderr, "discovery: %s\n", describe(err).c_str());
    return 1;
  }

  // The router actor under our supervisor; the slot always holds the
  // current incarnation.
  auto brain = std::make_shared<runtime::actor_slot<router::kv_router_actor>>();
  router::router_config rc; // kv mode
  auto sup = runtime::spawn_supervisor(
    sys, runtime::supervisor_policy{},
    {runtime::supervised("kv_router", brain, [rc](caf::actor_system& s) {
      return router::spawn_kv_router(s, rc);
    })});

  int code = 1;
  {
    router::worker_watcher watcher{disc, brain};
    router::dispatch_config dc;
    dc.migration_limit = 1;
    dc.direct = true; // straight to the engine, no sidecar relay
    router::dispatcher dispatch{sys, brain, std::move(dc)};
    router::generate_params p;
    for (uint32_t t = 1; t <= 40; ++t)
      p.prompt.push_back(t);
    p.max_tokens = 8;
    // The watcher announces the worker within moments: bounded retries.
    for (int i = 0; i < 100 && code != 0; ++i) {
      auto out = dispatch.generate_blocking(
        p, [](const std::vector<uint32_t>&) { return true; });
      if (out.ok) {
        std::printf(
          "served by %s: %zu tokens (finish: %s):", out.worker_id.c_str(),
          out.tokens.size(), out.finish_reason.c_str());
        for (auto t : out.tokens)
          std::printf(" %u", t);
        std::printf("\n");
        code = out.tokens.size() == p.max_tokens ? 0 : 1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }
  }
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  return code;
}
