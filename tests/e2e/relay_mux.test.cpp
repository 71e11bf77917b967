// `--dispatch mux`: every request a router relays through one sidecar rides
// one multiplexed stream (proto/relay_mux.proto). Many streams at once keep
// every token; a sidecar that dies takes its stream down and the requests
// on it move to another worker. Cancellation and an engine's death are
// covered beside the per-request relay (router.test.cpp,
// sglang_router.test.cpp).

#include <atomic>
#include <csignal>
#include <thread>

#include "sim/engine_core.hpp"
#include "tests/e2e/router_cluster.hpp"
#include "tests/sse_load.hpp"

using namespace outrider;
using namespace outrider::test;
using json = nlohmann::json;

namespace {

std::vector<uint32_t> prompt_of(size_t i) {
  return tokens(static_cast<uint32_t>(1 + 64 * i), 16);
}

double sidecar_metric(const cluster& c, size_t i, const std::string& series) {
  return c.sides[i]->metric(series).value_or(-1);
}

} // namespace

TEST_CASE("--dispatch mux: 96 concurrent streams through two relays ride one "
          "stream per relay, every token as the engine made it") {
  sim_process::options so;
  so.extra = {"--speedup", "20", "--max-num-seqs", "256"};
  cluster c{2, so, {"--dispatch", "mux"}};
  sse_load_config cfg;
  cfg.port = c.http_port;
  cfg.streams = 96;
  cfg.record_token_ids = true;
  cfg.body = [](size_t i) {
    return json{{"prompt", prompt_of(i)}, {"max_tokens", 24}, {"stream", true}}
      .dump();
  };
  auto results = run_sse_load(cfg);
  REQUIRE(results.size() == 96);
  size_t exact = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    INFO("stream " << i << ": " << results[i].last_line);
    CHECK(results[i].done);
    exact += results[i].token_ids == sim::continuation(prompt_of(i), 24);
  }
  CHECK(exact == 96);
  // Each relay served its share on one stream from this router, which
  // stays open for the next requests.
  double served = 0, streams = 0;
  for (size_t i = 0; i < c.sides.size(); ++i) {
    auto ok =
      sidecar_metric(c, i, "outrider_relay_requests_total{outcome=\"ok\"}");
    auto open = sidecar_metric(c, i, "outrider_relay_mux_streams");
    INFO("sidecar " << i << ": " << ok << " ok, " << open << " mux streams");
    CHECK(open == (ok > 0 ? 1.0 : 0.0));
    served += ok;
    streams += open;
  }
  CHECK(served == 96);
  CHECK(streams >= 1);
  CHECK(eventually(
    [&] { return c.router_metric("outrider_router_requests_in_flight") == 0; },
    5s));
}

TEST_CASE("--dispatch mux: a sidecar that dies mid-stream takes its stream "
          "down; the request on it migrates and stays contiguous") {
  cluster c{2,
            {.extra = {"--speedup", "2"}},
            {"--dispatch", "mux", "--migration-limit", "1"}};
  auto prefix = tokens(3000, 32);
  warm(*c.sims[0], prefix); // worker 0 serves it
  REQUIRE(eventually(
    [&] { return c.router_metric("outrider_router_index_entries") >= 8; },
    10s));
  std::atomic<bool> killed{false};
  std::thread killer{[&] {
    eventually(
      [&] {
        return c.router_metric("outrider_router_ttft_seconds_count") >= 1;
      },
      20s);
    c.sides[0]->proc->signal(SIGKILL);
    killed = true;
  }};
  auto prompt = concat(prefix, tokens(100, 3));
  auto [code, body] = http(
    c.http_port, "POST", "/v1/completions",
    json{{"prompt", prompt}, {"max_tokens", 300}, {"stream", true}}.dump());
  killer.join();
  REQUIRE(killed);
  CHECK(code == 200);
  auto [toks, done] = read_sse(body);
  CHECK(done);
  CHECK(toks == sim::continuation(prompt, 300));
  CHECK(c.router_metric("outrider_router_migrations_total") == 1);
  // The survivor carried the rest on a stream of its own.
  CHECK(sidecar_metric(c, 1, "outrider_relay_mux_streams") == 1);
}
