// Supervision end to end: an actor of each role is killed (as a crash
// would) while clients send requests; the supervisor restarts it, and the
// tests show what the clients saw and the state afterwards.
#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "openengine.grpc.pb.h"
#include "tests/e2e/router_cluster.hpp"
#include "tests/e2e/sidecar_process.hpp"
#include "tests/e2e/sim_process.hpp"

using namespace outrider::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace oe = openengine::v1;

namespace {

// One relayed request to its end through the sidecar; true when it
// finished normally.
bool relay_generate(oe::Inference::Stub& stub, uint32_t first, size_t n) {
  oe::GenerateRequest req;
  for (size_t i = 0; i < n; ++i)
    req.mutable_token_ids()->add_ids(first + static_cast<uint32_t>(i));
  req.mutable_stopping()->set_max_tokens(3);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  ctx.AddMetadata("openengine-target-dp-rank", "0");
  auto reader = stub.Generate(&ctx, req);
  oe::GenerateResponse resp;
  bool finished = false;
  while (reader->Read(&resp))
    finished |= resp.has_finished();
  return reader->Finish().ok() && finished;
}

bool registered(const sidecar_process& side, const std::string& instance) {
  auto recs = side.records();
  return recs.size() == 1 && recs[0]["instance_id"] == instance &&
         side.get("/ready") == 200;
}

} // namespace

TEST_CASE("supervision: the sidecar's actors killed under load restart, the "
          "record and the index stay whole") {
  sim_process sim{{.num_blocks = 4096}};
  REQUIRE(sim.wait_serving(10s));
  auto dirs = std::make_shared<sidecar_dirs>();
  sidecar_process side{sim.endpoint(), dirs, {"--debug-crash-endpoint"}};
  auto instance = sim.cache(0)["instance_id"].get<std::string>();
  REQUIRE(eventually([&] { return registered(side, instance); }, 10s));
  // Clients stream through the relay the whole time.
  auto stub = oe::Inference::NewStub(grpc::CreateChannel(
    side.relay_endpoint(), grpc::InsecureChannelCredentials()));
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread load([&] {
    for (uint32_t i = 0; i < 5000 && !stop; ++i)
      (relay_generate(*stub, 1 + 37 * (i % 300), 45) ? ok : failed)++;
  });
  REQUIRE(eventually([&] { return ok > 10; }, 10s));
  for (std::string child : {"indexer", "registrar", "lifecycle"}) {
    INFO(child);
    std::string body;
    CHECK(http_call(side.port, "POST", "/debug/crash?child=" + child, &body) ==
          200);
    auto series = "outrider_actor_failures_total{actor=\"" + child + "\"}";
    REQUIRE(eventually([&] { return side.metric(series) == 1.0; }, 5s));
    // Back: registered as the same instance, ready, serving requests.
    int before = ok;
    CHECK(eventually([&] { return registered(side, instance); }, 10s));
    CHECK(eventually([&] { return ok > before + 5; }, 10s));
  }
  stop = true;
  load.join();
  // Clients never noticed: the relay does not depend on those actors.
  CHECK(failed == 0);
  // The index is the engine's, block for block, with no history lost.
  CHECK(eventually([&] { return index_matches_engine(side, sim); }, 10s));
  CHECK(side.metric("outrider_kv_gaps_unrecoverable_total{rank=\"0\"}")
          .value_or(0) == 0);
  // The crash endpoint refuses what it does not know.
  CHECK(http_call(side.port, "POST", "/debug/crash?child=nope") == 404);
  CHECK(http_call(side.port, "GET", "/debug/crash") == 400);
}

TEST_CASE("supervision: the crash endpoint is off by default") {
  sim_process sim{{}};
  REQUIRE(sim.wait_serving(10s));
  sidecar_process side{sim.endpoint()};
  REQUIRE(eventually([&] { return side.get("/live") == 200; }, 10s));
  CHECK(http_call(side.port, "POST", "/debug/crash?child=indexer") == 404);
}

TEST_CASE("supervision: the router actor killed under load restarts and "
          "rebuilds its index from the sidecars") {
  cluster c{2, {}, {"--debug-crash-endpoint"}};
  // Two prompts, each cached on one worker by a first request.
  auto p1 = tokens(100, 64);
  auto p2 = tokens(5000, 64);
  c.complete(p1, 2);
  c.complete(p2, 2);
  uint32_t next_suffix = 30000;
  auto cached = [&](const std::vector<uint32_t>& p) {
    auto r = c.complete(concat(p, tokens(next_suffix += 10, 6)), 2);
    return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  REQUIRE(
    eventually([&] { return cached(p1) == 64 && cached(p2) == 64; }, 10s));
  // Clients keep sending new prompts while the router actor is killed.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::map<int, int> errors; // HTTP status -> count, written by `load`
  std::thread load([&] {
    for (uint32_t i = 0; i < 2000 && !stop; ++i) {
      auto [code, body] =
        http(c.http_port, "POST", "/v1/completions",
             nlohmann::json{{"prompt", tokens(20000 + 100 * i, 40)},
                            {"max_tokens", 2}}
               .dump());
      if (code == 200)
        ++ok;
      else
        ++errors[code];
    }
  });
  REQUIRE(eventually([&] { return ok > 5; }, 10s));
  std::string body;
  REQUIRE(http_call(c.router_status, "POST", "/debug/crash?child=kv_router",
                    &body) == 200);
  REQUIRE(eventually(
    [&] {
      return c.router_metric(
               "outrider_actor_failures_total{actor=\"kv_router\"}") == 1;
    },
    5s));
  int at_crash = ok;
  REQUIRE(eventually([&] { return ok > at_crash + 10; }, 20s));
  stop = true;
  load.join();
  // What clients saw: the dispatcher waited out the restart.
  INFO("non-200 answers during the restart: " << errors.size());
  CHECK(errors.empty());
  // The new router actor learned both workers and their blocks again.
  CHECK(eventually([&] { return cached(p1) == 64 && cached(p2) == 64; }, 10s));
  CHECK(c.http_port != 0);
  CHECK(http_get(c.router_status, "/ready") == 200);
}
