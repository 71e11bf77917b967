// A program with its own caf::actor_system that embeds outrider's router
// through the installed public API (<outrider/...>, find_package(outrider)):
// one `router::service` (a worker from memory discovery, direct dispatch to
// the engine, the HTTP frontend on a free port), its router actor under the
// program's own supervisor, one request served.
//
//   embed_router ENGINE_HOST:PORT
#include <chrono>
#include <cstdio>
#include <memory>
#include <outrider/actors/router/dispatch/dispatcher.hpp>
#include <outrider/actors/router/router_service.hpp>
#include <outrider/app/settings.hpp>
#include <outrider/cluster/discovery.hpp>
#include <outrider/cluster/grpc_process.hpp>
#include <outrider/runtime/embedded_env.hpp>
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
  // Process-wide, so the embedder's choice (cluster/grpc_process.hpp).
  outrider::cluster::skip_abseil_deadlock_detection();
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

  // The router: one object with typed settings, outrider's defaults (kv
  // mode) but for a few.
  runtime::embedded_env host{sys, "router"};
  std::string why;
  auto rs = app::router_settings_from(app::default_options(), &why);
  if (!rs) {
    std::fprintf(stderr, "settings: %s\n", why.c_str());
    return 1;
  }
  rs->http_port = 0;          // a free port
  rs->grpc_port = 0;          // no gRPC frontend
  rs->direct_dispatch = true; // straight to the engine, no sidecar relay
  rs->migration_limit = 1;
  router::service svc{host.env(), *rs, disc};
  if (host.exit_requested() >= 0) {
    std::fprintf(stderr, "router: did not start\n");
    return 1;
  }
  auto sup = runtime::spawn_supervisor(sys, runtime::supervisor_policy{},
                                       svc.children());
  std::printf("router ready: %s, HTTP frontend on 127.0.0.1:%u\n",
              svc.ready() ? "yes" : "no", svc.http_port());

  int code = 1;
  router::generate_params p;
  for (uint32_t t = 1; t <= 40; ++t)
    p.prompt.push_back(t);
  p.max_tokens = 8;
  // The watcher announces the worker within moments: bounded retries.
  for (int i = 0; i < 100 && code != 0; ++i) {
    auto out = svc.dispatch()->generate_blocking(
      p, [](const std::vector<uint32_t>&) { return true; });
    if (!out.ok && i == 99)
      std::fprintf(stderr, "not served: %s\n", out.error.c_str());
    if (out.ok) {
      std::printf(
        "served by %s: %zu tokens (finish: %s):", out.worker_id.c_str(),
        out.tokens.size(), engine::to_string(out.finish));
      for (auto t : out.tokens)
        std::printf(" %u", t);
      std::printf("\n");
      code = out.tokens.size() == p.max_tokens ? 0 : 1;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
  }
  // Stop: drain the router, stop its actor, then what it left running.
  host.begin_stop();
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  sys.await_all_actors_done();
  host.finish();
  return code;
}
